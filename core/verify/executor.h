#pragma once
// Runs one op of a graph over a box of its iteration space: each loop dim restricted to a range.
// The reference executor gives every loop its full range; a simulated device gives the ranges
// of its slice. Everything is driven by the op's einsum signature and its kind's row in the
// semantics table; nothing here is specific to an op kind.
#include <cstdint>
#include <vector>

#include "../graph/signature.h"
#include "../sharding/spec.h"
#include "semantics.h"

namespace tp::verify {

struct Range {
    std::int64_t lo = 0, hi = 0; ///< [lo, hi)
    std::int64_t size() const { return hi - lo; }
    auto operator<=>(const Range&) const = default;
};

/// A dense box of a tensor held by one device: global start and extent per dim, row-major data.
/// `partial` marks the mesh axes over which the values are partial sums (the true value is the
/// sum over the devices of that axis group).
struct Block {
    std::vector<std::int64_t> start, size;
    std::vector<float> data;
    AxisMask partial = 0;

    static Block zeros(const std::vector<Range>& ranges);
    std::int64_t numel() const;
    std::vector<std::int64_t> strides() const;
    bool covers(const std::vector<Range>& ranges) const;
    /// Element at a global index (which must lie inside the box).
    float at(const std::vector<std::int64_t>& index) const;
    /// The sub-box of the given ranges (which must lie inside this one).
    Block slice(const std::vector<Range>& ranges) const;
};

/// The tensor-dim ranges an operand needs when the loops take the given ranges. A merged dim
/// "(nd)" spans the merged range; a dim indexed by a spatial loop or a size-1 dim is whole.
std::vector<Range> operandRanges(const OperandIndexing& operand, const Signature& sig, const std::vector<Range>& loops,
                                 const std::vector<std::int64_t>& shape);

/// Evaluates the op over the loop ranges from input blocks that cover operandRanges() of every
/// input. Returns one block per output, covering its operandRanges(); outputs are partial over
/// `partialAxes` as the caller says (the executor does not know the mesh).
std::vector<Block> evaluateOp(const Op& op, const Signature& sig, const OpSemantics& semantics, const Graph& graph,
                              const std::vector<Range>& loops, const std::vector<const Block*>& inputs);

/// The backward of evaluateOp over the same loop ranges. From the op's input blocks (as the
/// forward read them) and one gradient block per output (covering its operandRanges()), returns
/// the gradient of each input over its operandRanges(), summed over this box of loops only: a
/// device holds partial sums over the loops of gradientSummedLoops() that it has a slice of.
/// Integer inputs (ids, labels) get a zero block. Throws InputError when the kind's row has no
/// derivative.
std::vector<Block> backwardOp(const Op& op, const Signature& sig, const OpSemantics& semantics, const Graph& graph,
                              const std::vector<Range>& loops, const std::vector<const Block*>& inputs,
                              const std::vector<const Block*>& outputGrads);

/// The loops backwardOp sums over when it computes input `input`'s gradient (true per loop):
/// the loops that do not index the input; for an input added once per output element (a bias),
/// only the output loops that do not index it (every device adds the bias gradient of its own
/// output box once, as the forward's bias is added once).
std::vector<bool> gradientSummedLoops(const Signature& sig, const OpSemantics& semantics, const Op& op, size_t input);

} // namespace tp::verify
