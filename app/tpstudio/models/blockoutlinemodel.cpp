#include "blockoutlinemodel.h"

#include <QFont>

namespace tp {

OutlineSnapshot outlineSnapshot(const PlanWorkspace& ws, const SearchResult& r)
{
    const Graph& g = ws.model.graph;
    const FoldedGraph& f = ws.folded;
    const CostModel& model = *ws.costModel;
    OutlineSnapshot s;
    for (const auto& bc : f.classes) {
        OutlineClass c;
        c.label = QString::fromStdString(bc.label);
        c.opsPerInstance = bc.opsPerInstance();
        for (const auto& inst : bc.instances) {
            OutlineInstance oi;
            oi.label = instanceLabel(g, inst);
            const QString scope = oi.label + QLatin1Char('/');
            for (OpId op : inst.ops) {
                const int strategy = r.strategyOfOp[static_cast<size_t>(op)];
                const auto& ob = r.breakdown.ops[static_cast<size_t>(op)];
                OutlineOp o;
                o.id = op;
                o.fullName = QString::fromStdString(g.op(op).name);
                o.name =
                    o.fullName.startsWith(scope) && o.fullName.size() > scope.size() ? o.fullName.mid(scope.size()) : o.fullName;
                o.kind = QString::fromLatin1(opKindName(g.op(op).kind).data());
                o.strategy = QString::fromStdString(
                    strategyToString(model.strategies(op)[static_cast<size_t>(strategy)], model.signature(op), model.mesh()));
                o.locked = r.lockedOp[static_cast<size_t>(op)];
                // What the op adds to the step: communication hidden behind other work is not
                // counted again, so the classes add up to the step (OpBreakdown::stepSeconds).
                o.seconds = ob.stepSeconds;
                o.sharding = classifyOp(model, op, strategy).kind;
                oi.seconds += o.seconds;
                oi.ops.push_back(std::move(o));
            }
            c.seconds += oi.seconds;
            c.instances.push_back(std::move(oi));
        }
        s.classes.push_back(std::move(c));
    }
    return s;
}

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

bool BlockOutlineModel::sameShape(const OutlineSnapshot& other) const
{
    if (other.classes.size() != shown_.classes.size()) return false;
    for (size_t c = 0; c < other.classes.size(); ++c) {
        const auto& a = other.classes[c].instances;
        const auto& b = shown_.classes[c].instances;
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i].ops.size() != b[i].ops.size()) return false;
    }
    return true;
}

void BlockOutlineModel::setSnapshot(OutlineSnapshot snapshot)
{
    const bool reset = !sameShape(snapshot);
    if (reset) beginResetModel();
    shown_ = std::move(snapshot);
    locationOfOp_.clear();
    for (size_t c = 0; c < shown_.classes.size(); ++c)
        for (size_t i = 0; i < shown_.classes[c].instances.size(); ++i) {
            const auto& ops = shown_.classes[c].instances[i].ops;
            for (size_t k = 0; k < ops.size(); ++k) {
                const auto id = static_cast<size_t>(ops[k].id);
                if (id >= locationOfOp_.size()) locationOfOp_.resize(id + 1);
                locationOfOp_[id] = {static_cast<int>(c), static_cast<int>(i), static_cast<int>(k)};
            }
        }
    if (reset)
        endResetModel();
    else
        emitAllDataChanged();
}

void BlockOutlineModel::emitAllDataChanged()
{
    const int classes = rowCount();
    if (classes == 0) return;
    emit dataChanged(index(0, NameColumn), index(classes - 1, TimeColumn));
    for (int c = 0; c < classes; ++c) {
        const QModelIndex cls = index(c, 0);
        const int instances = rowCount(cls);
        if (instances == 0) continue;
        emit dataChanged(index(0, NameColumn, cls), index(instances - 1, TimeColumn, cls));
        for (int i = 0; i < instances; ++i) {
            const QModelIndex inst = index(i, 0, cls);
            const int ops = rowCount(inst);
            if (ops > 0) emit dataChanged(index(0, NameColumn, inst), index(ops - 1, TimeColumn, inst));
        }
    }
}

void BlockOutlineModel::setExpandedKeys(const QStringList& keys)
{
    if (keys == expandedKeys_) return;
    expandedKeys_ = keys;
    const int classes = rowCount();
    if (classes > 0) emit dataChanged(index(0, NameColumn), index(classes - 1, NameColumn), {Qt::CheckStateRole});
}

Qt::ItemFlags BlockOutlineModel::flags(const QModelIndex& index) const
{
    Qt::ItemFlags flags = QAbstractItemModel::flags(index);
    if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid)) return flags;
    const Node n = unpack(index.internalId());
    if (n.level == 0 && index.column() == NameColumn && shown_.classes[static_cast<size_t>(n.cls)].instances.size() > 1)
        flags |= Qt::ItemIsUserCheckable;
    return flags;
}

bool BlockOutlineModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (role != Qt::CheckStateRole || !(flags(index) & Qt::ItemIsUserCheckable)) return false;
    const Node n = unpack(index.internalId());
    const QString key = instancesViewKey(shown_.classes[static_cast<size_t>(n.cls)].label);
    const bool show = value.toInt() == Qt::Checked;
    QStringList expanded = expandedKeys_;
    if (show == expanded.contains(key)) return true;
    if (show)
        expanded << key;
    else
        expanded.removeAll(key);
    emit expandedKeysEdited(expanded); // the feeder applies it and calls setExpandedKeys
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
        if (n.level == 1)
            n.instance = row;
        else
            n.op = row;
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
    if (!parent.isValid()) return static_cast<int>(shown_.classes.size());
    if (parent.column() != 0) return 0;
    const Node n = unpack(parent.internalId());
    const auto& c = shown_.classes[static_cast<size_t>(n.cls)];
    if (n.level == 0) return static_cast<int>(c.instances.size());
    if (n.level == 1) return static_cast<int>(c.instances[static_cast<size_t>(n.instance)].ops.size());
    return 0;
}

int BlockOutlineModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant BlockOutlineModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case NameColumn:
        return tr("Block / op");
    case CountColumn:
        return tr("Count");
    case StrategyColumn:
        return tr("Strategy");
    case TimeColumn:
        return tr("Time");
    }
    return {};
}

QVariant BlockOutlineModel::classData(const OutlineClass& c, int column, int role) const
{
    const int instances = static_cast<int>(c.instances.size());
    switch (role) {
    case Qt::DisplayRole:
        if (column == NameColumn) return instances > 1 ? QStringLiteral("%1  ×%2").arg(c.label).arg(instances) : c.label;
        if (column == CountColumn) return countOf(c.opsPerInstance, "op", "ops");
        if (column == TimeColumn) return QString::fromStdString(formatSeconds(c.seconds));
        return {};
    case Qt::FontRole: {
        QFont font;
        font.setBold(true);
        return font;
    }
    case Qt::ToolTipRole:
        return tr("Block class %1: %2 instance(s) of %3 op(s); time is over all instances%4")
            .arg(c.label)
            .arg(instances)
            .arg(c.opsPerInstance)
            .arg(instances > 1 ? tr("\nCheck to show each instance as its own card in the graph") : QString());
    case Qt::CheckStateRole:
        if (column != NameColumn || instances <= 1) return {};
        return expandedKeys_.contains(instancesViewKey(c.label)) ? Qt::Checked : Qt::Unchecked;
    case OpIdRole:
        return -1;
    }
    return {};
}

QVariant BlockOutlineModel::instanceData(const OutlineInstance& inst, int column, int role) const
{
    switch (role) {
    case Qt::DisplayRole:
        if (column == NameColumn) return inst.label;
        if (column == CountColumn) return countOf(static_cast<int>(inst.ops.size()), "op", "ops");
        if (column == TimeColumn) return QString::fromStdString(formatSeconds(inst.seconds));
        return {};
    case OpIdRole:
        return -1;
    }
    return {};
}

QVariant BlockOutlineModel::opData(const OutlineOp& op, int column, int role) const
{
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return op.name;
        case CountColumn:
            return op.kind;
        case StrategyColumn:
            return op.strategy + (op.locked ? tr("  (locked)") : QString());
        case TimeColumn:
            return QString::fromStdString(formatSeconds(op.seconds));
        }
        return {};
    case Qt::DecorationRole:
        if (column == NameColumn) return shardingColor(op.sharding);
        return {};
    case Qt::ToolTipRole:
        return tr("%1 (%2)").arg(op.fullName, shardingClassName(op.sharding));
    case OpIdRole:
        return op.id;
    }
    return {};
}

QVariant BlockOutlineModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Node n = unpack(index.internalId());
    const OutlineClass& c = shown_.classes[static_cast<size_t>(n.cls)];
    if (n.level == 0) return classData(c, index.column(), role);
    const OutlineInstance& inst = c.instances[static_cast<size_t>(n.instance)];
    if (n.level == 1) return instanceData(inst, index.column(), role);
    return opData(inst.ops[static_cast<size_t>(n.op)], index.column(), role);
}

QModelIndex BlockOutlineModel::indexOfOp(OpId op) const
{
    if (op < 0 || static_cast<size_t>(op) >= locationOfOp_.size() || locationOfOp_[static_cast<size_t>(op)].cls < 0) return {};
    const Location& at = locationOfOp_[static_cast<size_t>(op)];
    return index(at.position, 0, index(at.instance, 0, index(at.cls, 0)));
}

} // namespace tp
