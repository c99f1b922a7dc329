#pragma once
// How plan facts look on screen: the colour of a sharding class, collective abbreviations,
// labels. Numbers are formatted by core/util/format.h and sharding classes come from
// classifyOp (core/export/export_styles.h, on core/sharding/classify.h), the same calls the CLI
// and the exports make, so every view agrees with them.
#include <QColor>
#include <QString>
#include <string>

#include "cost/cost_model.h"
#include "export/export_styles.h"
#include "fold/fold.h"
#include "graph/opkinds.h"
#include "util/format.h"

namespace tp {

/// "1 lock", "2 locks" (the GUI ships no translations, so tr()'s %n plural forms do not apply).
QString countOf(int n, const char* singular, const char* plural);

QString shardingClassName(ShardClass c); ///< shardClassName as a QString
QColor shardingColor(ShardClass c);      ///< shardClassColor as a QColor

QString collectiveAbbrev(CollectiveKind kind); ///< AR, AG, RS, A2A
QColor collectiveColor(CollectiveKind kind);

/// The parts of a training step as every view colours them (the timeline's segments and its
/// legend, the breakdown's compute bar).
enum class StepPart { Forward, Backward, Optimizer, Idle };
QColor stepPartColor(StepPart part);
/// The colour of an operand's slices by its role ("input", "weight", "output", "gradient"),
/// shared by the explain panel's pictures and the devices view's tiles.
QColor operandRoleColor(const std::string& role);
/// The red of a limit: the memory capacity line and its label, a cut bar's value.
QColor limitColor();

/// "layers.3" for an instance: the scope its ops share, or the first op's name.
QString instanceLabel(const Graph& graph, const BlockInstance& instance);
/// The Document::expandedClasses entry that unfolds the runs of a block class into one graph
/// card per instance ("instances:layers.*"); the class label alone shows the class's ops.
QString instancesViewKey(const QString& classLabel);
/// The last path component of an op name ("fc1" of "layers.0/mlp/fc1").
QString shortOpName(const std::string& name);

} // namespace tp
