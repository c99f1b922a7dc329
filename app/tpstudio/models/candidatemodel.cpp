#include "candidatemodel.h"

#include <QBrush>
#include <QFont>

namespace tp {

namespace {

QString describe(const CollectiveCall& c, const Mesh& mesh)
{
    static const char* phases[] = {"fwd", "bwd", "grad"};
    return QStringLiteral("%1 %2 %3 %4")
        .arg(collectiveAbbrev(c.kind), QString::fromStdString(mesh.axes[static_cast<size_t>(c.axis)].name), formatBytes(c.bytes),
             QLatin1String(phases[static_cast<int>(c.phase)]));
}

} // namespace

std::vector<CandidateCost> costCandidates(const PlanOutcome& plan, OpId op)
{
    const PlanWorkspace& ws = *plan.workspace;
    const CostModel& model = *ws.costModel;
    const Graph& g = ws.model.graph;
    const SearchResult& r = plan.result;
    const auto producers = g.producers();
    const auto consumers = g.consumers();
    const Op& o = g.op(op);
    const Recompute recompute = r.recomputeOfOp.empty() ? Recompute::None : r.recomputeOfOp[static_cast<size_t>(op)];
    auto slotOf = [](const std::vector<TensorId>& list, TensorId t) {
        return static_cast<int>(std::find(list.begin(), list.end(), t) - list.begin());
    };
    std::vector<CandidateCost> out;
    const auto& strategies = model.strategies(op);
    for (int s = 0; s < static_cast<int>(strategies.size()); ++s) {
        CandidateCost c;
        c.strategy = s;
        c.text = QString::fromStdString(strategyToString(strategies[static_cast<size_t>(s)], model.signature(op), model.mesh()));
        c.sharding = classifyStrategy(model, op, s);
        const OpCost& node = model.opCost(op, s, recompute);
        c.computeSeconds = node.computeSeconds;
        c.commSeconds = node.commSeconds;
        c.memoryBytes = node.memoryBytes();
        QStringList collectives;
        for (const auto& call : node.collectives) collectives << describe(call, model.mesh());
        // Into the op: from each producer's chosen layout.
        for (size_t i = 0; i < o.inputs.size(); ++i) {
            const OpId p = producers[static_cast<size_t>(o.inputs[i])];
            const TensorSpec* produced = nullptr;
            if (p >= 0) {
                const Op& po = g.op(p);
                produced = &model.outputSpec(p, r.strategyOfOp[static_cast<size_t>(p)], slotOf(po.outputs, o.inputs[i]));
            }
            const EdgeCost e = model.edgeCost(produced, op, static_cast<int>(i), s);
            c.commSeconds += e.exposedSeconds;
            for (const auto& call : e.collectives) collectives << describe(call, model.mesh());
        }
        // Out of the op: into each consumer's chosen layout.
        for (size_t k = 0; k < o.outputs.size(); ++k) {
            const TensorSpec& produced = model.outputSpec(op, s, static_cast<int>(k));
            for (OpId consumer : consumers[static_cast<size_t>(o.outputs[k])]) {
                const Op& co = g.op(consumer);
                for (size_t j = 0; j < co.inputs.size(); ++j) {
                    if (co.inputs[j] != o.outputs[k]) continue;
                    const EdgeCost e = model.edgeCost(&produced, consumer, static_cast<int>(j), r.strategyOfOp[static_cast<size_t>(consumer)]);
                    c.commSeconds += e.exposedSeconds;
                    for (const auto& call : e.collectives) collectives << describe(call, model.mesh());
                }
            }
        }
        c.collectives = collectives.join(QStringLiteral("; "));
        // The search's node-plus-edge objective (core/search: time + lambda x memory).
        c.objective = c.seconds() + r.lambda * c.memoryBytes;
        out.push_back(std::move(c));
    }
    return out;
}

CandidateModel::CandidateModel(QObject* parent) : QAbstractTableModel(parent) {}

void CandidateModel::setOp(std::shared_ptr<const PlanOutcome> plan, OpId op)
{
    beginResetModel();
    plan_ = std::move(plan);
    op_ = plan_ && op >= 0 && static_cast<size_t>(op) < plan_->workspace->model.graph.ops.size() ? op : -1;
    rows_.clear();
    chosen_ = -1;
    locked_ = false;
    lambda_ = 0;
    if (op_ >= 0) {
        rows_ = costCandidates(*plan_, op_);
        chosen_ = plan_->result.strategyOfOp[static_cast<size_t>(op_)];
        locked_ = plan_->result.lockedOp[static_cast<size_t>(op_)];
        lambda_ = plan_->result.lambda;
    }
    endResetModel();
}

int CandidateModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int CandidateModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CandidateModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole && section == ObjectiveColumn)
        return tr("What the search minimises: time + memory price × memory. The price (λ = %1 per GiB) is the search's "
                  "Lagrange multiplier for the memory limit, 0 when memory does not bind; a candidate faster than the chosen "
                  "one but with a higher objective was rejected for its memory.")
            .arg(formatSeconds(lambda_ * 1024.0 * 1024 * 1024));
    if (role != Qt::DisplayRole) return {};
    switch (section) {
    case StrategyColumn: return tr("Strategy");
    case ObjectiveColumn: return tr("Objective");
    case TimeColumn: return tr("Time");
    case ComputeColumn: return tr("Compute");
    case CommColumn: return tr("Comm");
    case MemoryColumn: return tr("Memory");
    case CollectivesColumn: return tr("Collectives");
    }
    return {};
}

QVariant CandidateModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const CandidateCost& c = rows_[static_cast<size_t>(index.row())];
    const bool chosen = c.strategy == chosen_;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case StrategyColumn:
            return chosen ? QStringLiteral("✔ %1%2").arg(c.text, locked_ ? tr(" (locked)") : QString()) : c.text;
        case ObjectiveColumn: return formatSeconds(c.objective);
        case TimeColumn: return formatSeconds(c.seconds());
        case ComputeColumn: return formatSeconds(c.computeSeconds);
        case CommColumn: return formatSeconds(c.commSeconds);
        case MemoryColumn: return formatBytes(c.memoryBytes);
        case CollectivesColumn: return c.collectives.isEmpty() ? QStringLiteral("—") : c.collectives;
        }
        return {};
    case SortRole:
        switch (index.column()) {
        case StrategyColumn: return c.strategy;
        case ObjectiveColumn: return c.objective;
        case TimeColumn: return c.seconds();
        case ComputeColumn: return c.computeSeconds;
        case CommColumn: return c.commSeconds;
        case MemoryColumn: return c.memoryBytes;
        case CollectivesColumn: return c.collectives;
        }
        return {};
    case Qt::FontRole:
        if (chosen) {
            QFont font;
            font.setBold(true);
            return font;
        }
        return {};
    case Qt::BackgroundRole:
        if (chosen) return QBrush(QColor(0xfff3c4));
        return {};
    case Qt::DecorationRole:
        if (index.column() == StrategyColumn) return shardingColor(c.sharding);
        return {};
    case Qt::ToolTipRole:
        if (index.column() == ObjectiveColumn)
            return tr("%1 + %2 per GiB × %3 = %4").arg(formatSeconds(c.seconds()), formatSeconds(lambda_ * 1024.0 * 1024 * 1024),
                                                     formatBytes(c.memoryBytes), formatSeconds(c.objective));
        return tr("%1: %2; double-click to lock").arg(c.text, shardingClassName(c.sharding));
    case StrategyIndexRole: return c.strategy;
    }
    return {};
}

} // namespace tp
