#include "candidatemodel.h"

#include <QBrush>
#include <QFont>

#include "explain/explain.h"

namespace tp {

namespace {

QString describe(const CollectiveCall& c, const Mesh& mesh)
{
    static const char* phases[] = {"fwd", "bwd", "grad"};
    return QStringLiteral("%1 %2 %3 %4")
        .arg(collectiveAbbrev(c.kind), QString::fromStdString(mesh.axes[static_cast<size_t>(c.axis)].name),
             QString::fromStdString(formatBytes(c.bytes)), QLatin1String(phases[static_cast<int>(c.phase)]));
}

} // namespace

CandidateSnapshot candidateHeader(const PlanWorkspace& ws, const SearchResult& plan, OpId op)
{
    CandidateSnapshot s;
    if (op < 0 || static_cast<size_t>(op) >= ws.model.graph.ops.size() || static_cast<size_t>(op) >= plan.strategyOfOp.size())
        return s;
    s.op = op;
    s.chosen = plan.strategyOfOp[static_cast<size_t>(op)];
    s.locked = plan.lockedOp[static_cast<size_t>(op)];
    s.lambda = plan.lambda;
    return s;
}

CandidateSnapshot costCandidates(const PlanWorkspace& ws, const SearchResult& plan, OpId op)
{
    CandidateSnapshot s = candidateHeader(ws, plan, op);
    if (s.op < 0) return s;
    const CostModel& model = *ws.costModel;
    for (const explain::CandidateCost& cost : explain::costCandidates(model, plan, op, &ws.folded)) {
        CandidateCost c;
        c.strategy = cost.strategyIndex;
        c.text = QString::fromStdString(cost.strategy);
        c.sharding = classifyOp(model, op, cost.strategyIndex).kind;
        c.computeSeconds = cost.local.computeSeconds;
        // What the step pays: compute plus the communication overlap does not hide.
        c.commSeconds = cost.local.stepSeconds - cost.local.computeSeconds;
        c.memoryBytes = cost.local.memoryBytes;
        QStringList collectives;
        for (const auto& call : cost.collectives) collectives << describe(call, model.mesh());
        c.collectives = collectives.join(QStringLiteral("; "));
        c.objective = cost.objective;
        s.rows.push_back(std::move(c));
    }
    return s;
}

CandidateModel::CandidateModel(QObject* parent) : QAbstractTableModel(parent) {}

void CandidateModel::setSnapshot(CandidateSnapshot snapshot)
{
    beginResetModel();
    shown_ = std::move(snapshot);
    endResetModel();
}

int CandidateModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(shown_.rows.size());
}
int CandidateModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CandidateModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole && section == ObjectiveColumn)
        return tr("What the search minimises: time + memory price × memory. The price (λ = %1 per GiB) is the search's "
                  "Lagrange multiplier for the memory limit, 0 when memory does not bind; a candidate faster than the chosen "
                  "one but with a higher objective was rejected for its memory.")
            .arg(QString::fromStdString(formatSeconds(shown_.lambda * 1024.0 * 1024 * 1024)));
    if (role != Qt::DisplayRole) return {};
    switch (section) {
    case StrategyColumn:
        return tr("Strategy");
    case ObjectiveColumn:
        return tr("Objective");
    case TimeColumn:
        return tr("Time");
    case ComputeColumn:
        return tr("Compute");
    case CommColumn:
        return tr("Comm");
    case MemoryColumn:
        return tr("Memory");
    case CollectivesColumn:
        return tr("Collectives");
    }
    return {};
}

QVariant CandidateModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const CandidateCost& c = shown_.rows[static_cast<size_t>(index.row())];
    const bool chosen = c.strategy == shown_.chosen;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case StrategyColumn:
            return chosen ? QStringLiteral("✔ %1%2").arg(c.text, shown_.locked ? tr(" (locked)") : QString()) : c.text;
        case ObjectiveColumn:
            return QString::fromStdString(formatSeconds(c.objective));
        case TimeColumn:
            return QString::fromStdString(formatSeconds(c.seconds()));
        case ComputeColumn:
            return QString::fromStdString(formatSeconds(c.computeSeconds));
        case CommColumn:
            return QString::fromStdString(formatSeconds(c.commSeconds));
        case MemoryColumn:
            return QString::fromStdString(formatBytes(c.memoryBytes));
        case CollectivesColumn:
            return c.collectives.isEmpty() ? QStringLiteral("—") : c.collectives;
        }
        return {};
    case SortRole:
        switch (index.column()) {
        case StrategyColumn:
            return c.strategy;
        case ObjectiveColumn:
            return c.objective;
        case TimeColumn:
            return c.seconds();
        case ComputeColumn:
            return c.computeSeconds;
        case CommColumn:
            return c.commSeconds;
        case MemoryColumn:
            return c.memoryBytes;
        case CollectivesColumn:
            return c.collectives;
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
            return tr("%1 + %2 per GiB × %3 = %4")
                .arg(QString::fromStdString(formatSeconds(c.seconds())),
                     QString::fromStdString(formatSeconds(shown_.lambda * 1024.0 * 1024 * 1024)),
                     QString::fromStdString(formatBytes(c.memoryBytes)), QString::fromStdString(formatSeconds(c.objective)));
        return tr("%1: %2; double-click to lock").arg(c.text, shardingClassName(c.sharding));
    case StrategyIndexRole:
        return c.strategy;
    }
    return {};
}

} // namespace tp
