#pragma once
// What each op kind computes, for the verifier's executors: one row per OpKind, in one table
// (semantics.cpp). The row says which evaluation rule runs the op's einsum and supplies the
// scalar functions; the einsum says over which loops and how operands are indexed.
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "../graph/graph.h"

namespace tp::verify {

enum class EvalRule : std::uint8_t {
    Map,       ///< every point of the iteration space: out = pointwise(inputs at the point)
    Contract,  ///< out = scale * sum over non-output loops of the product of the first inputs
    Gather,    ///< out = sum over the gather loop of [index == loop position] * table
    Normalize, ///< per row of the reduced-nonlinear loop: out row = rowFunction(input rows)
    Join,      ///< outputs/inputs concatenated along attr "axis" (Concat)
    Part,      ///< the input cut along attr "axis" (Split)
    Window,    ///< spatial windows (conv, pools): out[h] from in[h*stride + k - padding]
};

/// Context of one row of a Normalize op.
struct RowContext {
    std::int64_t queryIndex = -1; ///< position of the loop before the reduced one (causal masks)
    bool causal = false;          ///< attr "causal": positions after queryIndex are masked out
    double rowsTotal = 1;         ///< number of rows of the whole (unsharded) op (for means)
};

/// Inputs along the row: a row of the reduced loop's extent for inputs indexed by it, else one
/// value. The output row has the reduced loop's extent, or one value (a loss summed over rows).
using RowFunction = std::function<void(const std::vector<std::vector<float>>& in, std::vector<float>& out,
                                       const RowContext& context)>;

struct OpSemantics {
    OpKind kind;
    EvalRule rule;
    std::function<float(std::span<const float>)> pointwise; ///< Map
    int multiplicands = 2;        ///< Contract: the first inputs multiplied; the rest added once
    RowFunction row;              ///< Normalize
    bool windowMax = false;       ///< Window without a weight: max (true) or mean (false)
};

/// The row of a kind, or nullopt when the verifier cannot execute it (Dispatch, Combine,
/// Pointwise, Opaque).
std::optional<OpSemantics> opSemantics(OpKind kind);

} // namespace tp::verify
