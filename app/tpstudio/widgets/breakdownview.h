#pragma once
// The Breakdown dock (Qt Charts): memory per device stacked by kind against the capacity line,
// step time by compute and collective kind, for the plan and its comparisons (search without the
// locks, Megatron, data parallel), and the plan's time per block class.
#include <QPointer>
#include <QWidget>

#include "document.h"

class QChart;
class QChartView;

namespace tp {

class BreakdownView : public QWidget {
    Q_OBJECT
public:
    explicit BreakdownView(QWidget* parent = nullptr);
    void setDocument(Document* document);
    /// The plans compared, in chart order ("Searched", "Megatron", ...).
    QStringList comparedPlans() const { return plans_; }

private:
    void refresh();
    void showMemory(const std::vector<const SearchResult*>& results);
    void showStepTime(const std::vector<const SearchResult*>& results);
    void showBlockTimes(const PlanOutcome* plan);

    QPointer<Document> document_;
    QChartView* memory_;
    QChartView* time_;
    QChartView* blocks_;
    QStringList plans_;
    QStringList settings_; ///< per plan: "<br>ZeRO 3, micro-batch 1", its bar label's second line
};

} // namespace tp
