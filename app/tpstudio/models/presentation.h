#pragma once
// How plan facts look on screen: units, the sharding class of an op strategy and its colour,
// collective abbreviations. Shared by every view so that they agree.
#include <QColor>
#include <QString>

#include "cost/cost_model.h"
#include "fold/fold.h"
#include "graph/opkinds.h"

namespace tp {

QString formatSeconds(double seconds); ///< "9.84 s", "3.1 ms", "42 µs"
QString formatBytes(double bytes);     ///< "71.2 GiB"
QString formatCount(double count);     ///< "175B", "12.3M"
/// "1 lock", "2 locks" (the GUI ships no translations, so tr()'s %n plural forms do not apply).
QString countOf(int n, const char* singular, const char* plural);

/// What a strategy does to an op, in Megatron's words: which of its loops are split.
enum class ShardingClass {
    Replicated,     ///< no split
    ColumnParallel, ///< a weight's output features (or a model dim carried from one) split
    RowParallel,    ///< a contracted or gathered dim split: the output is partial
    BatchSplit,     ///< only the batch split (data parallel)
    Mixed,          ///< batch and model dims split together, or column and row
};
ShardingClass classifyStrategy(const CostModel& model, OpId op, int strategy);
QString shardingClassName(ShardingClass c);
QColor shardingColor(ShardingClass c);

QString collectiveAbbrev(CollectiveKind kind); ///< AR, AG, RS, A2A
QColor collectiveColor(CollectiveKind kind);

/// "layers.3" for an instance: the scope its ops share, or the first op's name.
QString instanceLabel(const Graph& graph, const BlockInstance& instance);
/// The Document::expandedClasses entry that unfolds the runs of a block class into one graph
/// card per instance ("instances:layers.*"); the class label alone shows the class's ops.
QString instancesViewKey(const QString& classLabel);
/// The last path component of an op name ("fc1" of "layers.0/mlp/fc1").
QString shortOpName(const std::string& name);

} // namespace tp
