#include "blockoutlinemodel.h"

#include <QFont>

#include "presentation.h"

namespace tp {

// internalId layout: level (2 bits) | class (20 bits) | instance (21 bits) | op (21 bits).
quintptr BlockOutlineModel::pack(const Node& n)
{
    return (quintptr(n.level) << 62) | (quintptr(n.cls) << 42) | (quintptr(n.instance) << 21) | quintptr(n.op);
}

BlockOutlineModel::Node BlockOutlineModel::unpack(quintptr id)
{
    Node n;
    n.level = int(id >> 62);
    n.cls = int((id >> 42) & 0xFFFFF);
    n.instance = int((id >> 21) & 0x1FFFFF);
    n.op = int(id & 0x1FFFFF);
    return n;
}

BlockOutlineModel::BlockOutlineModel(QObject* parent) : QAbstractItemModel(parent) {}

void BlockOutlineModel::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::modelChanged, this, &BlockOutlineModel::reset);
        connect(document_, &Document::planChanged, this, &BlockOutlineModel::refreshPlanColumns);
        connect(document_, &Document::expandedClassesChanged, this, &BlockOutlineModel::refreshCheckStates);
    }
    reset();
}

void BlockOutlineModel::reset()
{
    beginResetModel();
    plan_ = document_ ? document_->plan() : nullptr;
    classSeconds_.clear();
    endResetModel();
    refreshPlanColumns();
}

void BlockOutlineModel::refreshPlanColumns()
{
    if (!document_ || !document_->plan()) return;
    const auto next = document_->plan();
    if (!plan_ || plan_->workspace->model.graph.ops.size() != next->workspace->model.graph.ops.size()) {
        reset(); // a different graph: the rows change
        return;
    }
    plan_ = next;
    const FoldedGraph& f = plan_->workspace->folded;
    classSeconds_.assign(f.classes.size(), 0);
    for (const auto& ob : plan_->result.breakdown.ops)
        classSeconds_[static_cast<size_t>(f.classOfOp[static_cast<size_t>(ob.op)])] += ob.computeSeconds + ob.commSeconds;
    const int classes = rowCount();
    if (classes == 0) return;
    emit dataChanged(index(0, CountColumn), index(classes - 1, TimeColumn));
    for (int c = 0; c < classes; ++c) {
        const QModelIndex cls = index(c, 0);
        const int instances = rowCount(cls);
        if (instances == 0) continue;
        emit dataChanged(index(0, CountColumn, cls), index(instances - 1, TimeColumn, cls));
        for (int i = 0; i < instances; ++i) {
            const QModelIndex inst = index(i, 0, cls);
            const int ops = rowCount(inst);
            if (ops > 0) emit dataChanged(index(0, CountColumn, inst), index(ops - 1, TimeColumn, inst));
        }
    }
}

void BlockOutlineModel::refreshCheckStates()
{
    const int classes = rowCount();
    if (classes > 0) emit dataChanged(index(0, NameColumn), index(classes - 1, NameColumn), {Qt::CheckStateRole});
}

Qt::ItemFlags BlockOutlineModel::flags(const QModelIndex& index) const
{
    Qt::ItemFlags flags = QAbstractItemModel::flags(index);
    if (!index.isValid() || !plan_ || !checkIndex(index, CheckIndexOption::IndexIsValid)) return flags;
    const Node n = unpack(index.internalId());
    if (n.level == 0 && index.column() == NameColumn && plan_->workspace->folded.classes[static_cast<size_t>(n.cls)].instances.size() > 1)
        flags |= Qt::ItemIsUserCheckable;
    return flags;
}

bool BlockOutlineModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (role != Qt::CheckStateRole || !document_ || !(flags(index) & Qt::ItemIsUserCheckable)) return false;
    const Node n = unpack(index.internalId());
    const QString key = instancesViewKey(QString::fromStdString(plan_->workspace->folded.classes[static_cast<size_t>(n.cls)].label));
    const bool show = value.toInt() == Qt::Checked;
    QStringList expanded = document_->expandedClasses();
    if (show == expanded.contains(key)) return true;
    if (show) expanded << key;
    else expanded.removeAll(key);
    document_->setExpandedClasses(expanded); // refreshCheckStates reports the change
    return true;
}

QModelIndex BlockOutlineModel::index(int row, int column, const QModelIndex& parent) const
{
    if (!hasIndex(row, column, parent)) return {};
    Node n;
    if (!parent.isValid()) {
        n.level = 0;
        n.cls = row;
    } else {
        const Node p = unpack(parent.internalId());
        n = p;
        n.level = p.level + 1;
        if (n.level == 1) n.instance = row;
        else n.op = row;
    }
    return createIndex(row, column, pack(n));
}

QModelIndex BlockOutlineModel::parent(const QModelIndex& child) const
{
    if (!child.isValid()) return {};
    const Node n = unpack(child.internalId());
    if (n.level == 0) return {};
    Node p = n;
    p.level = n.level - 1;
    p.op = 0;
    if (p.level == 0) p.instance = 0;
    return createIndex(p.level == 0 ? p.cls : p.instance, 0, pack(p));
}

int BlockOutlineModel::rowCount(const QModelIndex& parent) const
{
    if (!plan_) return 0;
    const FoldedGraph& f = plan_->workspace->folded;
    if (!parent.isValid()) return static_cast<int>(f.classes.size());
    if (parent.column() != 0) return 0;
    const Node n = unpack(parent.internalId());
    const auto& bc = f.classes[static_cast<size_t>(n.cls)];
    if (n.level == 0) return static_cast<int>(bc.instances.size());
    if (n.level == 1) return static_cast<int>(bc.instances[static_cast<size_t>(n.instance)].ops.size());
    return 0;
}

int BlockOutlineModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant BlockOutlineModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case NameColumn: return tr("Block / op");
    case CountColumn: return tr("Count");
    case StrategyColumn: return tr("Strategy");
    case TimeColumn: return tr("Time");
    }
    return {};
}

QVariant BlockOutlineModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid) || !plan_) return {};
    const PlanWorkspace& ws = *plan_->workspace;
    const Graph& g = ws.model.graph;
    const FoldedGraph& f = ws.folded;
    const CostModel& model = *ws.costModel;
    const Node n = unpack(index.internalId());
    const auto& bc = f.classes[static_cast<size_t>(n.cls)];
    const SearchResult& r = plan_->result;
    // The cost model may be for another mesh than the plan's strategies only if the plan is
    // missing; plan_ always pairs them.
    if (n.level == 0) {
        switch (role) {
        case Qt::DisplayRole:
            if (index.column() == NameColumn)
                return bc.instances.size() > 1 ? QStringLiteral("%1  ×%2").arg(QString::fromStdString(bc.label)).arg(bc.instances.size())
                                               : QString::fromStdString(bc.label);
            if (index.column() == CountColumn) return countOf(bc.opsPerInstance(), "op", "ops");
            if (index.column() == TimeColumn && static_cast<size_t>(n.cls) < classSeconds_.size())
                return formatSeconds(classSeconds_[static_cast<size_t>(n.cls)]);
            return {};
        case Qt::FontRole: {
            QFont font;
            font.setBold(true);
            return font;
        }
        case Qt::ToolTipRole:
            return tr("Block class %1: %2 instance(s) of %3 op(s); time is over all instances%4")
                .arg(QString::fromStdString(bc.label))
                .arg(bc.instances.size())
                .arg(bc.opsPerInstance())
                .arg(bc.instances.size() > 1 ? tr("\nCheck to show each instance as its own card in the graph") : QString());
        case Qt::CheckStateRole:
            if (index.column() != NameColumn || bc.instances.size() <= 1 || !document_) return {};
            return document_->expandedClasses().contains(instancesViewKey(QString::fromStdString(bc.label))) ? Qt::Checked : Qt::Unchecked;
        case OpIdRole: return -1;
        }
        return {};
    }
    const auto& inst = bc.instances[static_cast<size_t>(n.instance)];
    if (n.level == 1) {
        switch (role) {
        case Qt::DisplayRole:
            if (index.column() == NameColumn) return instanceLabel(g, inst);
            if (index.column() == CountColumn) return countOf(static_cast<int>(inst.ops.size()), "op", "ops");
            if (index.column() == TimeColumn) {
                double s = 0;
                for (OpId op : inst.ops) {
                    const auto& ob = r.breakdown.ops[static_cast<size_t>(op)];
                    s += ob.computeSeconds + ob.commSeconds;
                }
                return formatSeconds(s);
            }
            return {};
        case OpIdRole: return -1;
        }
        return {};
    }
    const OpId op = inst.ops[static_cast<size_t>(n.op)];
    const int s = r.strategyOfOp[static_cast<size_t>(op)];
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case NameColumn: {
            // Relative to the instance row above it ("mlp/fc1" under "layers.3").
            const QString name = QString::fromStdString(g.op(op).name);
            const QString scope = instanceLabel(g, inst) + QLatin1Char('/');
            return name.startsWith(scope) && name.size() > scope.size() ? name.mid(scope.size()) : name;
        }
        case CountColumn: return QString::fromLatin1(opKindName(g.op(op).kind).data());
        case StrategyColumn:
            return QString::fromStdString(strategyToString(model.strategies(op)[static_cast<size_t>(s)], model.signature(op), model.mesh())) +
                   (r.lockedOp[static_cast<size_t>(op)] ? tr("  (locked)") : QString());
        case TimeColumn: {
            const auto& ob = r.breakdown.ops[static_cast<size_t>(op)];
            return formatSeconds(ob.computeSeconds + ob.commSeconds);
        }
        }
        return {};
    case Qt::DecorationRole:
        if (index.column() == NameColumn) return shardingColor(classifyStrategy(model, op, s));
        return {};
    case Qt::ToolTipRole:
        return tr("%1 (%2)").arg(QString::fromStdString(g.op(op).name), shardingClassName(classifyStrategy(model, op, s)));
    case OpIdRole: return op;
    }
    return {};
}

QModelIndex BlockOutlineModel::indexOfOp(OpId op) const
{
    if (!plan_ || op < 0 || static_cast<size_t>(op) >= plan_->workspace->folded.classOfOp.size()) return {};
    const FoldedGraph& f = plan_->workspace->folded;
    const int cls = f.classOfOp[static_cast<size_t>(op)];
    const int instance = f.instanceOfOp[static_cast<size_t>(op)];
    const auto& ops = f.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(instance)].ops;
    const int position = static_cast<int>(std::find(ops.begin(), ops.end(), op) - ops.begin());
    return index(position, 0, index(instance, 0, index(cls, 0)));
}

} // namespace tp
