#pragma once
// The one evaluation of a plan (docs/ARCHITECTURE.md, "core/search — evaluation"): every caller
// that turns one strategy and one recompute mode per op into figures comes here — the search's
// final breakdown, baselines, `tpplan check` (plan files), `tpplan explain` and its --versus,
// the GUI and the ILP's re-cost — so a plan costed twice is costed the same.
#include <string>
#include <vector>

#include "search.h"

namespace tp {

/// Bytes a fully recomputed block keeps of input tensor `t` laid out as `spec` (the block runs
/// its forward again from it in the backward pass), micro-batch scaled as activations are.
double keptInputBytes(const CostModel& model, TensorId t, const TensorSpec& spec);

/// Per op, what the fold adds to the cost model's per-op terms: under full recomputation each
/// block instance keeps its input tensors (at their producers' layouts), charged to the
/// instance's first op. All zero without full recomputation. `folded` may be null only then.
std::vector<double> keptInputBytesOfOp(const CostModel& model, const FoldedGraph* folded, const std::vector<int>& strategyOfOp,
                                       const std::vector<Recompute>& recomputeOfOp);

/// Costs one plan: the cost model's node and edge terms (CostModel::evaluate) plus the kept
/// inputs of fully recomputed blocks, as the search's objective counts them. `recomputeOfOp`
/// empty means none anywhere. `folded` is the block structure the recompute modes refer to; it
/// may be null when no op recomputes fully (throws InputError otherwise, and for a bad index).
/// The result's fit is judged against the hardware's capacity.
SearchResult evaluatePlan(const CostModel& model, const FoldedGraph* folded, const std::vector<int>& strategyOfOp,
                          const std::vector<Recompute>& recomputeOfOp, const std::string& method);

} // namespace tp
