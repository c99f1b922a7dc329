#pragma once
// Rule-built baseline plans, costed by the same CostModel as searched plans.
#include <vector>

#include "cost_model.h"

namespace tp {

struct MegatronOptions {
    /// Megatron-LM sequence parallelism (Korthikanti et al. 2022): the ops left replicated on
    /// the tensor-parallel axis (norms, dropouts, residual adds) split their sequence dim (dim 1
    /// of a [batch, seq, ...] output) over it instead.
    bool sequenceParallel = false;
};

/// Megatron-LM tensor parallelism over the innermost mesh axis, data parallelism (the batch)
/// over the others. The rules read the graph structure, not op names: a weighted op whose
/// activation inputs are unsplit splits its weight-only output loop (column-parallel: q/k/v,
/// fc1, gate/up, the LM head) when that split can flow forward through parallel loops to a
/// contraction (or to the graph's tail); a gather loop of a weight is split (vocab-parallel
/// embedding); an op fed a split tensor keeps the split on the same loop (heads through
/// reshapes, batch matmuls and softmax; a contracted loop gives row-parallel: out, fc2, down);
/// where a split cannot continue, the op takes the cheapest choice for the axis given its
/// inputs. Returns a strategy index per op (index into CostModel::strategies).
std::vector<int> megatronAssignment(const CostModel& model, const MegatronOptions& options = {});

/// Pure data parallelism: the batch loop of each op split over every mesh axis it divides
/// (in mesh order), weights replicated; ops without a batch loop replicated.
std::vector<int> dataParallelAssignment(const CostModel& model);

} // namespace tp
