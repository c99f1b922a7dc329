#pragma once
// Every candidate strategy of one op with its cost next to the current neighbours, as
// core/explain's costCandidates gives it (the op's node cost, the resharding into it from its
// producers' chosen specs and out of it into its consumers' chosen specs). The model shows a
// plain CandidateSnapshot; the costing runs on a worker (the inspector's LatestJob), since a
// wide op on a large mesh has hundreds of candidates. The chosen row is marked.
#include <QAbstractTableModel>

#include "plan/planner.h"
#include "presentation.h"

namespace tp {

struct CandidateCost {
    int strategy = 0;
    QString text;
    double computeSeconds = 0;
    double commSeconds = 0; ///< exposed: the op's own collectives + its edges in and out
    double memoryBytes = 0;
    QString collectives; ///< "AG y 72 GiB fwd; RS y ..."
    ShardClass sharding = ShardClass::Replicated;
    /// The search's objective for this candidate: time + lambda x memory, lambda being the plan's
    /// memory price (SearchResult::lambda, 0 when memory did not bind). What the search minimises,
    /// so a slower but smaller candidate can be the chosen one.
    double objective = 0;
    double seconds() const { return computeSeconds + commSeconds; }
};

/// What the candidate table shows of one op: plain values.
struct CandidateSnapshot {
    OpId op = -1;    ///< -1: no op
    int chosen = -1; ///< the plan's strategy of the op
    bool locked = false;
    double lambda = 0;               ///< the plan's memory price
    std::vector<CandidateCost> rows; ///< empty while the costs are still coming
};

/// The snapshot of `op` without its rows (cheap: for the GUI thread, until the costs arrive);
/// an op out of range gives the empty snapshot.
CandidateSnapshot candidateHeader(const PlanWorkspace& workspace, const SearchResult& plan, OpId op);
/// The snapshot with every candidate costed (explain::costCandidates): for a worker.
CandidateSnapshot costCandidates(const PlanWorkspace& workspace, const SearchResult& plan, OpId op);

class CandidateModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        StrategyColumn,
        ObjectiveColumn,
        TimeColumn,
        ComputeColumn,
        CommColumn,
        MemoryColumn,
        CollectivesColumn,
        ColumnCount
    };
    enum Role { StrategyIndexRole = Qt::UserRole + 1, SortRole };

    explicit CandidateModel(QObject* parent = nullptr);
    void setSnapshot(CandidateSnapshot snapshot);
    const CandidateSnapshot& snapshot() const { return shown_; }
    OpId op() const { return shown_.op; }
    int chosenStrategy() const { return shown_.chosen; }
    const std::vector<CandidateCost>& candidates() const { return shown_.rows; }
    double lambda() const { return shown_.lambda; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    CandidateSnapshot shown_;
};

} // namespace tp
