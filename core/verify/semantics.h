#pragma once
// What each op kind computes, for the verifier's executors: one row per OpKind, in one table
// (semantics.cpp). The row says which evaluation rule runs the op's einsum and supplies the
// scalar functions and their derivatives; the einsum says over which loops and how operands are
// indexed. The backward of every rule is generic (executor.cpp): Contract, Gather, Join, Part
// and Window differentiate from the einsum alone; Map and Normalize use the row's derivative.
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
    Route,     ///< routed experts: Dispatch places tokens in their top-k experts' slots, Combine sums them back
};

/// Context of one row of a Normalize op.
struct RowContext {
    std::int64_t queryIndex = -1; ///< position of the loop before the reduced one (causal masks)
    bool causal = false;          ///< attr "causal": positions after queryIndex are masked out
    double rowsTotal = 1;         ///< number of rows of the whole (unsharded) op (for means)
};

/// Inputs along the row: a row of the reduced loop's extent for inputs indexed by it, else one
/// value. The output row has the reduced loop's extent, or one value (a loss summed over rows).
using RowFunction =
    std::function<void(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext& context)>;

/// Map backward: from the inputs at a point and the output gradient there, the gradient of
/// each input at that point (dIn has one slot per input; integer inputs' slots are ignored).
using PointwiseGrad = std::function<void(std::span<const float> in, float dy, std::span<float> dIn)>;

/// Normalize backward: from the input rows (as RowFunction sees them) and the gradient of the
/// output row, ADD the gradient of each input row into dIn (sized like the input rows; a
/// row-sized weight such as a norm's scale accumulates over the rows).
using RowGrad = std::function<void(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut,
                                   std::vector<std::vector<float>>& dIn, const RowContext& context)>;

struct OpSemantics {
    OpKind kind;
    EvalRule rule;
    std::function<float(std::span<const float>)> pointwise; ///< Map
    int multiplicands = 2;                                  ///< Contract: the first inputs multiplied; the rest added once
    RowFunction row;                                        ///< Normalize
    bool windowMax = false;                                 ///< Window without a weight: max (true) or mean (false)
    PointwiseGrad pointwiseGrad;                            ///< Map backward
    RowGrad rowGrad;                                        ///< Normalize backward

    /// Whether the backward of this row is known (Map and Normalize rows need their derivative).
    bool differentiable() const { return (rule != EvalRule::Map || pointwiseGrad) && (rule != EvalRule::Normalize || rowGrad); }
};

/// The row of a kind, or nullopt when the verifier cannot execute it (Pointwise, Opaque).
std::optional<OpSemantics> opSemantics(OpKind kind);

} // namespace tp::verify
