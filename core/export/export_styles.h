#pragma once
// How a plan shards each op, in the terms the exports speak: data parallel, column-parallel,
// row-parallel, sequence-parallel. Every class comes from core/sharding/classify.h (the one
// classifier the GUI uses too), read from the op's strategy and the einsum roles of its loops.
#include <string>
#include <string_view>
#include <vector>

#include "../plan/planner.h"
#include "../sharding/classify.h"

namespace tp {

/// The class of candidate `strategy` of an op of the cost model: classifyStrategy on its
/// signature, its weight inputs, the model's batch-leading tensors (CostModel::batchLeading)
/// and the mesh. The GUI's colours and every export call this.
StrategyClass classifyOp(const CostModel& model, OpId op, int strategy);

/// The axes of a plan by what they do across all ops: the tensor-parallel axis (the one most
/// weighted ops split column- or row-wise; -1 without one) and the data-parallel axes (used,
/// and only ever on Data loops).
struct PlanAxes {
    int tensorAxis = -1;
    std::vector<int> dataAxes;
    std::vector<int> otherAxes; ///< used on weights or activations besides the tensor axis
    /// Axes that split the experts (expert parallelism); one that splits nothing else but the
    /// batch is a data axis as well (the dense layers' data parallelism, as Megatron-Core's and
    /// torchtitan's expert-parallel groups are carved out of the data-parallel ranks).
    std::vector<int> expertAxes;
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
    std::string pattern;    ///< module path pattern, "layers.*.attn.q"
    std::string blockLabel; ///< its block class, "layers.*"
    int blockInstances = 1;
    std::string strategy; ///< the plan's strategy text
    /// Expert: an expert module's stacked weights split on their expert dim over an expert
    /// axis, its tokens brought by an all-to-all (PlanAxes::expertAxes).
    enum class Style : std::uint8_t { None, Colwise, Rowwise, Sequence, Expert } style = Style::None;
    std::string inputLayout; ///< on the tensor axis: "Replicate()", "Shard(1)", "Shard(-1)"
    std::string outputLayout;
    int sequenceDim = 1;         ///< for Sequence
    std::string expertMesh;      ///< for Expert: the mesh dims the experts are split over, "x" or "x x y"
    std::string implies;         ///< the collectives the style implies, in words
    std::string planCollectives; ///< the plan's collectives after this op, in words
    std::string inexpressible;   ///< why no style expresses the op's strategy; empty when one does
};

/// Every representative op that holds a weight (a module's parameters), plus weightless ops
/// whose plan needs a redistribution the styles never insert, in block-class order.
std::vector<ModuleStyle> moduleStyles(const PlanWorkspace& workspace, const SearchResult& result, const PlanAxes& axes);

} // namespace tp
