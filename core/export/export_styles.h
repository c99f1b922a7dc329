#pragma once
// How a plan shards each op, in the terms the exports speak: data parallel, column-parallel,
// row-parallel, split activations. Read from the op's strategy and the einsum roles of its loop
// dims only (never from op names or kinds): a split loop that indexes the output and a weight
// but no activation input is column-parallel; a split contracted (or gathered) loop is
// row-parallel; a split loop that leads a batch-carrying tensor is data parallel.
#include <string>
#include <string_view>
#include <vector>

#include "../plan/planner.h"

namespace tp {

/// What one mesh axis does to one op.
enum class AxisRole : std::uint8_t { Unused, Batch, Column, Row, Other };
std::string_view axisRoleName(AxisRole role);

/// The op as a whole, for colouring and summaries.
enum class ShardKind : std::uint8_t { Replicated, DataParallel, Column, Row, SplitActivation, Mixed };
std::string_view shardKindName(ShardKind kind); ///< "replicated", "data parallel", "column", ...

struct OpSharding {
    ShardKind kind = ShardKind::Replicated;
    bool hasWeight = false;
    int weightRank = 0;           ///< rank of the first weight operand (0 without one)
    std::vector<AxisRole> axisRole; ///< per mesh axis
    std::vector<int> axisLoop;      ///< per mesh axis: the loop it splits, -1 when unused
};

OpSharding classifyOp(const CostModel& model, OpId op, int strategy);

/// The axes of a plan by what they do across all ops: the tensor-parallel axis (the one most
/// weighted ops split column- or row-wise; -1 without one) and the data-parallel axes (used,
/// and only ever on batch loops).
struct PlanAxes {
    int tensorAxis = -1;
    std::vector<int> dataAxes;
    std::vector<int> otherAxes; ///< used on weights or activations besides the tensor axis
};
PlanAxes planAxes(const CostModel& model, const SearchResult& result);

/// A module path pattern for an op: its name with '/' as '.', and the parts that differ between
/// the instances of its block class as '*' ("layers.3/attn/q" -> "layers.*.attn.q").
std::string modulePattern(const Graph& graph, const FoldedGraph& folded, OpId op);

/// The representative ops of every block class, class by class in order of first appearance.
std::vector<OpId> representativeOps(const FoldedGraph& folded);

} // namespace tp

namespace tp {

/// How one representative op maps onto the DTensor parallel styles on the tensor-parallel axis.
struct ModuleStyle {
    OpId op = -1;
    std::string pattern;      ///< module path pattern, "layers.*.attn.q"
    std::string blockLabel;   ///< its block class, "layers.*"
    int blockInstances = 1;
    std::string strategy;     ///< the plan's strategy text
    enum class Style : std::uint8_t { None, Colwise, Rowwise, Sequence } style = Style::None;
    std::string inputLayout;  ///< on the tensor axis: "Replicate()", "Shard(1)", "Shard(-1)"
    std::string outputLayout;
    int sequenceDim = 1;      ///< for Sequence
    std::string implies;      ///< the collectives the style implies, in words
    std::string planCollectives; ///< the plan's collectives after this op, in words
    std::string inexpressible;   ///< why no style expresses the op's strategy; empty when one does
};

/// Every representative op that holds a weight (a module's parameters), plus weightless ops
/// whose plan needs a redistribution the styles never insert, in block-class order.
std::vector<ModuleStyle> moduleStyles(const PlanWorkspace& workspace, const SearchResult& result, const PlanAxes& axes);

} // namespace tp
