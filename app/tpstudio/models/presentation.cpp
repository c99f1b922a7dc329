#include "presentation.h"

#include <cmath>

namespace tp {

QString formatSeconds(double s)
{
    const double a = std::abs(s);
    if (a == 0) return QStringLiteral("0 s");
    if (a >= 100) return QStringLiteral("%1 s").arg(s, 0, 'f', 1);
    if (a >= 1) return QStringLiteral("%1 s").arg(s, 0, 'f', 2);
    if (a >= 1e-3) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', a >= 0.1 ? 0 : 1);
    return QStringLiteral("%1 µs").arg(s * 1e6, 0, 'f', a >= 1e-4 ? 0 : 1);
}

QString formatBytes(double b)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (std::abs(b) >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    return QStringLiteral("%1 %2").arg(b, 0, 'f', u == 0 ? 0 : 1).arg(QLatin1String(units[u]));
}

QString formatCount(double n)
{
    if (n >= 1e9) return QStringLiteral("%1B").arg(n / 1e9, 0, 'f', n >= 1e11 ? 0 : 1);
    if (n >= 1e6) return QStringLiteral("%1M").arg(n / 1e6, 0, 'f', 1);
    if (n >= 1e3) return QStringLiteral("%1K").arg(n / 1e3, 0, 'f', 1);
    return QString::number(n);
}

QString countOf(int n, const char* singular, const char* plural)
{
    return QStringLiteral("%1 %2").arg(n).arg(QLatin1String(n == 1 ? singular : plural));
}

ShardingClass classifyStrategy(const CostModel& model, OpId op, int strategy)
{
    const Graph& g = model.graph();
    const Op& o = g.op(op);
    const Signature& sig = model.signature(op);
    const OpStrategy& st = model.strategies(op)[static_cast<size_t>(strategy)];
    bool batch = false, column = false, row = false;
    for (size_t loop = 0; loop < st.loopAxes.size(); ++loop) {
        if (st.loopAxes[loop].empty()) continue;
        const DimRole role = sig.loops[loop].role;
        if (role == DimRole::Contracted || role == DimRole::Gather) {
            row = true;
            continue;
        }
        // The batch: the loop indexes dim 0 of an operand that carries the graph's batch.
        bool isBatch = false;
        auto indexesBatch = [&](const std::vector<OperandIndexing>& operands, const std::vector<TensorId>& tensors) {
            for (size_t k = 0; k < operands.size() && k < tensors.size(); ++k) {
                const auto& dims = operands[k].dims;
                if (!dims.empty() && !dims[0].empty() && dims[0][0] == static_cast<int>(loop) && model.batchLeading(tensors[k]))
                    isBatch = true;
            }
        };
        indexesBatch(sig.inputs, o.inputs);
        indexesBatch(sig.outputs, o.outputs);
        if (isBatch) batch = true;
        else column = true; // a model dim: features, heads, or a sequence dim
    }
    const int kinds = int(batch) + int(column) + int(row);
    if (kinds == 0) return ShardingClass::Replicated;
    if (kinds > 1) return ShardingClass::Mixed;
    if (batch) return ShardingClass::BatchSplit;
    return column ? ShardingClass::ColumnParallel : ShardingClass::RowParallel;
}

QString shardingClassName(ShardingClass c)
{
    switch (c) {
    case ShardingClass::Replicated: return QStringLiteral("replicated");
    case ShardingClass::ColumnParallel: return QStringLiteral("column-parallel");
    case ShardingClass::RowParallel: return QStringLiteral("row-parallel");
    case ShardingClass::BatchSplit: return QStringLiteral("batch-split");
    case ShardingClass::Mixed: return QStringLiteral("mixed");
    }
    return {};
}

QColor shardingColor(ShardingClass c)
{
    switch (c) {
    case ShardingClass::Replicated: return QColor(0xb8, 0xbc, 0xc2);
    case ShardingClass::ColumnParallel: return QColor(0x5b, 0x9b, 0xe6);
    case ShardingClass::RowParallel: return QColor(0xf0, 0x9a, 0x3e);
    case ShardingClass::BatchSplit: return QColor(0x5c, 0xb8, 0x6a);
    case ShardingClass::Mixed: return QColor(0xa0, 0x78, 0xd0);
    }
    return Qt::gray;
}

QString collectiveAbbrev(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce: return QStringLiteral("AR");
    case CollectiveKind::AllGather: return QStringLiteral("AG");
    case CollectiveKind::ReduceScatter: return QStringLiteral("RS");
    case CollectiveKind::AllToAll: return QStringLiteral("A2A");
    }
    return {};
}

QColor collectiveColor(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce: return QColor(0xd6, 0x45, 0x45);
    case CollectiveKind::AllGather: return QColor(0x2a, 0x8c, 0x8c);
    case CollectiveKind::ReduceScatter: return QColor(0xc2, 0x7c, 0x0e);
    case CollectiveKind::AllToAll: return QColor(0x7a, 0x4f, 0xb5);
    }
    return Qt::black;
}

QString instancesViewKey(const QString& classLabel) { return QStringLiteral("instances:") + classLabel; }

QString instanceLabel(const Graph& graph, const BlockInstance& instance)
{
    if (instance.ops.empty()) return {};
    std::string prefix = graph.op(instance.ops.front()).name;
    for (OpId op : instance.ops) {
        const std::string& name = graph.op(op).name;
        size_t n = 0;
        while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
        prefix.resize(n);
    }
    // Cut at a scope boundary so "layers.1" is not shortened to "layers.".
    const auto slash = prefix.rfind('/');
    const std::string& first = graph.op(instance.ops.front()).name;
    if (instance.ops.size() > 1) {
        if (slash != std::string::npos) prefix.resize(slash);
        else if (!(first.size() > prefix.size() && first[prefix.size()] == '/')) prefix.clear();
    }
    return QString::fromStdString(prefix.empty() ? first : prefix);
}

QString shortOpName(const std::string& name)
{
    const auto slash = name.rfind('/');
    return QString::fromStdString(slash == std::string::npos ? name : name.substr(slash + 1));
}

} // namespace tp
