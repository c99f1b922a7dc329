#pragma once
// Internal to core/fold: adjacency of a graph in flat arrays, and the canonical description of a
// set of ops as a block, shared by the folder and by checkFold so both agree on "identical".
#include <cstdint>
#include <span>
#include <vector>

#include "../graph/graph.h"

namespace tp::fold_detail {

/// Producers and consumers of every tensor, in flat arrays (consumer edges per tensor in op-id
/// and slot order). Throws InputError naming the op that references a missing tensor.
struct GraphIndex {
    std::vector<OpId> producer;     ///< per tensor; -1 for graph inputs and weights
    std::vector<int> producerSlot;  ///< per tensor: output slot of its producer
    std::vector<int> consumerStart; ///< per tensor, size tensors + 1
    std::vector<OpId> consumerOp;   ///< one entry per (op, input slot) reading the tensor
    std::vector<int> consumerSlot;  ///< the input slot of that entry

    explicit GraphIndex(const Graph& graph);
    int consumerCount(TensorId t) const { return consumerStart[t + 1] - consumerStart[t]; }
};

/// A block's edges in canonical form. Per op, per input slot: an internal producer as
/// local index * 256 + output slot, an external activation as -(1 + 2k) with k its index among
/// the block's inputs, a weight as -(2 + 2w) with w its index among the block's distinct weights;
/// then per output slot 1 when the tensor leaves the block. Two blocks with equal codes and
/// pairwise sameOp ops are identical, and ops[i] <-> ops[i] is the bijection.
struct BlockDescription {
    std::vector<std::int64_t> codes;
    std::vector<TensorId> inputs;  ///< first-appearance order (op, then slot)
    std::vector<TensorId> outputs; ///< (op, slot) order
};

/// Scratch arrays sized to the graph, all -1 between calls (describeBlock restores them).
struct Scratch {
    std::vector<int> localOfOp;
    std::vector<int> indexOfTensor;
    explicit Scratch(const Graph& graph) : localOfOp(graph.ops.size(), -1), indexOfTensor(graph.tensors.size(), -1) {}
};

BlockDescription describeBlock(const Graph& graph, const GraphIndex& index, std::span<const OpId> ops, Scratch& scratch);

/// Same kind, equation, attrs, operand shapes and dtypes, and weight pattern. Names are ignored.
bool sameOp(const Graph& graph, const Op& a, const Op& b);

} // namespace tp::fold_detail
