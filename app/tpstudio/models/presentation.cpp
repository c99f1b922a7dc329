#include "presentation.h"

namespace tp {

QString countOf(int n, const char* singular, const char* plural)
{
    return QStringLiteral("%1 %2").arg(n).arg(QLatin1String(n == 1 ? singular : plural));
}

QString shardingClassName(ShardClass c)
{
    const std::string_view name = shardClassName(c);
    return QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
}

QColor shardingColor(ShardClass c)
{
    const std::string_view color = shardClassColor(c);
    return QColor(QString::fromLatin1(color.data(), static_cast<qsizetype>(color.size())));
}

QString collectiveAbbrev(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce:
        return QStringLiteral("AR");
    case CollectiveKind::AllGather:
        return QStringLiteral("AG");
    case CollectiveKind::ReduceScatter:
        return QStringLiteral("RS");
    case CollectiveKind::AllToAll:
        return QStringLiteral("A2A");
    }
    return {};
}

QColor collectiveColor(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce:
        return QColor(0xd6, 0x45, 0x45);
    case CollectiveKind::AllGather:
        return QColor(0x2a, 0x8c, 0x8c);
    case CollectiveKind::ReduceScatter:
        return QColor(0xc2, 0x7c, 0x0e);
    case CollectiveKind::AllToAll:
        return QColor(0x7a, 0x4f, 0xb5);
    }
    return Qt::black;
}

QColor stepPartColor(StepPart part)
{
    switch (part) {
    case StepPart::Forward:
        return QColor(0x59, 0xa1, 0x4f);
    case StepPart::Backward:
        return QColor(0x3b, 0x75, 0x34);
    case StepPart::Optimizer:
        return QColor(0x9c, 0x75, 0x5f);
    case StepPart::Idle:
        return QColor(0xb0, 0xb0, 0xb0);
    }
    return Qt::gray;
}

QColor operandRoleColor(const std::string& role)
{
    if (role == "weight") return QColor(0xd9, 0x7a, 0x1f);
    if (role == "output") return QColor(0x2e, 0x9d, 0x4f);
    if (role == "gradient") return QColor(0x8e, 0x44, 0xad);
    return QColor(0x2e, 0x6f, 0xd0); // input
}

QColor limitColor() { return QColor(0xc0, 0x20, 0x20); }

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
        if (slash != std::string::npos)
            prefix.resize(slash);
        else if (!(first.size() > prefix.size() && first[prefix.size()] == '/'))
            prefix.clear();
    }
    return QString::fromStdString(prefix.empty() ? first : prefix);
}

QString shortOpName(const std::string& name)
{
    const auto slash = name.rfind('/');
    return QString::fromStdString(slash == std::string::npos ? name : name.substr(slash + 1));
}

} // namespace tp
