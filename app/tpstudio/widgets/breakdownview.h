#pragma once
// The Breakdown dock (Qt Charts): memory per device stacked by kind against the capacity line,
// step time by compute and collective kind, for the plan and its comparisons (search without the
// locks, Megatron, data parallel), and the plan's time per block class.
#include <QPointer>
#include <QWidget>

#include "document.h"

class QAbstractBarSeries;
class QChart;
class QCheckBox;
class QChartView;

namespace tp {

class BreakdownView : public QWidget {
    Q_OBJECT
public:
    explicit BreakdownView(QWidget* parent = nullptr);
    void setDocument(Document* document);
    /// The plans compared, in chart order ("Searched", "Megatron", ...).
    QStringList comparedPlans() const { return plans_; }
    /// Memory and step time on a logarithmic axis (every bar whole), else linear from 0 with
    /// bars far past the reference cut (the main window remembers it).
    void setLogScale(bool on);
    bool logScale() const;
    /// The totals written on bars the axis cuts (memory past 2.5x the limit, step time past
    /// 2.5x the plan's), in chart order: empty when every bar is whole.
    QStringList memoryCutBars() const { return memoryCut_; }
    QStringList timeCutBars() const { return timeCut_; }
    /// The capacity line's label ("Limit 80.00 GiB"), drawn on the line.
    QString capacityLabel() const { return capacityLabel_; }

signals:
    void logScaleChanged(bool on);

private:
    void refresh();
    void showMemory(const std::vector<const SearchResult*>& results);
    void showStepTime(const std::vector<const SearchResult*>& results);
    void showBlockTimes(const PlanOutcome* plan);
    void connectTooltips(QAbstractBarSeries* series, const QStringList& figures);

    QPointer<Document> document_;
    QChartView* memory_;
    QChartView* time_;
    QChartView* blocks_;
    QStringList plans_;
    QStringList settings_;     ///< per plan: "<br>ZeRO 3", its bar label's last line
    QStringList settingsText_; ///< per plan: its whole settings (settingsText), for the tooltip
    QCheckBox* logScale_ = nullptr;
    QStringList memoryCut_, timeCut_;
    QString capacityLabel_;
};

} // namespace tp
