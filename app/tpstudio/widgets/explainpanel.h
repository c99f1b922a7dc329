#pragma once
// The Explain dock: why the plan runs the selected op the way it does, for teaching and for
// trust. Everything shown comes from core/explain (explainOp, comparePlans), computed on a worker
// thread under a job id; a result for an older selection or plan is dropped, so the dock never
// shows an op other than the selected one and the GUI never waits.
#include <memory>
#include <optional>

#include <QPointer>
#include <QWidget>

#include "document.h"
#include "plan/plan_file.h"
#include "explain/explain.h"
#include "latestjob.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QSplitter;
class QTabWidget;
class QTableWidget;

namespace tp {

/// Paints the mesh as a grid of devices once per operand, and in each device the slice of the
/// operand it holds (the operand drawn as a rectangle over two of its dims, the held part filled).
class MeshSliceWidget : public QWidget {
    Q_OBJECT
public:
    explicit MeshSliceWidget(QWidget* parent = nullptr);
    void setExplanation(std::vector<explain::OperandLayout> operands, std::vector<int> meshShape);
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::vector<explain::OperandLayout> operands_;
    std::vector<int> meshShape_;
};

/// Which plan the selected plan is compared with.
enum class CompareWith { Megatron, DataParallel, Unlocked, SavedPlan };

class ExplainPanel : public QWidget {
    Q_OBJECT
public:
    explicit ExplainPanel(QWidget* parent = nullptr);
    ~ExplainPanel() override;
    void setDocument(Document* document);

    /// The explanation on show (null while none or while it is being computed).
    const explain::OpExplanation* explanation() const { return shown_ ? &*shown_ : nullptr; }
    const explain::PlanDiff* comparison() const { return comparison_ ? &*comparison_ : nullptr; }
    void setCompareWith(CompareWith with);
    /// Brings the "Compare plans" tab forward (its differences are then marked on the graph).
    void showCompareTab();
    /// Compares the plan with a saved plan (a plan file read back) from now on, named `name` in
    /// the list. Returns why it cannot be compared ("" when it can): plans compare op by op,
    /// so the saved one must be of the same graph (ops and their candidates) and mesh.
    QString compareWithSaved(std::shared_ptr<const LoadedPlan> saved, const QString& name);
    /// Why `saved` cannot be compared with `plan` ("" when it can).
    static QString incompatibility(const PlanOutcome& plan, const LoadedPlan& saved);

    // The parts, for tests and screenshots.
    QLabel* summaryLabel() const { return summary_; }
    QTableWidget* collectivesTable() const { return collectives_; }
    QTableWidget* whyNotTable() const { return whyNot_; }
    QTableWidget* comparisonTable() const { return compare_; }
    QTableWidget* differingOpsTable() const { return compareOps_; }
    /// The ops whose strategy differs in the comparison shown, when they are to be marked on
    /// the graph (the compare tab in view and its check box on): representative ops' names.
    std::vector<std::string> markedOps() const;
    MeshSliceWidget* slicePicture() const { return picture_; }

    enum WhyNotColumn { WhyStrategy, WhyObjective, WhyStep, WhyCompute, WhyMemory, WhyFirstCollective };

signals:
    /// A new explanation of this op is on screen.
    void explanationShown(tp::OpId op);
    void comparisonShown();
    /// The ops the graph should mark as differing from the compared plan (empty: none).
    void differencesToMark(const std::vector<std::string>& ops);
    /// A worker's result arrived after a newer request and was not shown.
    void resultDropped(quint64 jobId);

protected:
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    void requestExplanation();
    void requestComparison();
    void showExplanation(const explain::OpExplanation& x, std::shared_ptr<const PlanOutcome> plan, OpId op);
    void showComparison(const explain::PlanDiff& d);
    void clearExplanation(const QString& message);

    QPointer<Document> document_;
    std::optional<explain::OpExplanation> shown_;
    std::optional<explain::PlanDiff> comparison_;
    /// explainOp's result with the plan and op it explains (the plan keeps the workspace alive).
    struct Explained {
        explain::OpExplanation explanation;
        std::shared_ptr<const PlanOutcome> plan;
        OpId op = -1;
    };
    LatestJob<Explained> explainJob_;         ///< the newest explain request wins
    LatestJob<explain::PlanDiff> compareJob_; ///< the newest comparison wins
    QLabel* summary_;
    MeshSliceWidget* picture_;
    QTableWidget* collectives_;
    QTableWidget* whyNot_;
    QComboBox* compareWith_;
    QLabel* compareTotals_;
    QTableWidget* compare_;
    QTableWidget* compareOps_;
    QCheckBox* markOnGraph_;
    QTabWidget* tabs_ = nullptr;
    QSplitter* split_ = nullptr;
    QWidget* compareBox_ = nullptr;
    std::shared_ptr<const LoadedPlan> saved_; ///< CompareWith::SavedPlan's
};

} // namespace tp
