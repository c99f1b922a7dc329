#pragma once
// Every candidate strategy of one op with its cost next to the current neighbours: the op's node
// cost (CostModel::opCost) plus the resharding into it from its producers' chosen specs and out
// of it into its consumers' chosen specs (CostModel::edgeCost). The chosen row is marked.
#include <QAbstractTableModel>

#include "plannerservice.h"
#include "presentation.h"

namespace tp {

struct CandidateCost {
    int strategy = 0;
    QString text;
    double computeSeconds = 0;
    double commSeconds = 0;  ///< the op's own collectives (weight gradients) + its edges in and out
    double memoryBytes = 0;
    QString collectives;     ///< "AG y 72 GiB fwd; RS y ..."
    ShardingClass sharding = ShardingClass::Replicated;
    /// The search's objective for this candidate: time + lambda x memory, lambda being the plan's
    /// memory price (SearchResult::lambda, 0 when memory did not bind). What the search minimises,
    /// so a slower but smaller candidate can be the chosen one.
    double objective = 0;
    double seconds() const { return computeSeconds + commSeconds; }
};

/// Costs every candidate of `op` given the plan's strategies for all other ops.
std::vector<CandidateCost> costCandidates(const PlanOutcome& plan, OpId op);

class CandidateModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { StrategyColumn, ObjectiveColumn, TimeColumn, ComputeColumn, CommColumn, MemoryColumn, CollectivesColumn, ColumnCount };
    enum Role { StrategyIndexRole = Qt::UserRole + 1, SortRole };

    explicit CandidateModel(QObject* parent = nullptr);
    void setOp(std::shared_ptr<const PlanOutcome> plan, OpId op);
    OpId op() const { return op_; }
    int chosenStrategy() const { return chosen_; }
    const std::vector<CandidateCost>& candidates() const { return rows_; }
    double lambda() const { return lambda_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const PlanOutcome> plan_;
    OpId op_ = -1;
    int chosen_ = -1;
    bool locked_ = false;
    double lambda_ = 0;
    std::vector<CandidateCost> rows_;
};

} // namespace tp
