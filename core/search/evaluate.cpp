#include "evaluate.h"

#include <algorithm>
#include <chrono>

#include "../util/error.h"

namespace tp {

double keptInputBytes(const CostModel& model, TensorId t, const TensorSpec& spec)
{
    const Tensor& tensor = model.graph().tensor(t);
    double bytes = static_cast<double>(spec.shardNumel(tensor.shape, model.mesh())) * dtypeBytes(tensor.dtype);
    if (!tensor.shape.empty() && tensor.shape[0] > 1)
        bytes *= heldActivationShare(model.settings(), tensor.shape[0], model.batchSplits(t, spec));
    return bytes;
}

std::vector<double> keptInputBytesOfOp(const CostModel& model, const FoldedGraph* folded, const std::vector<int>& strategyOfOp,
                                       const std::vector<Recompute>& recomputeOfOp)
{
    const Graph& g = model.graph();
    std::vector<double> kept(g.ops.size(), 0.0);
    const bool anyFull = std::any_of(recomputeOfOp.begin(), recomputeOfOp.end(), checkpointsBlockInput);
    if (!anyFull) return kept;
    if (recomputeOfOp.size() != g.ops.size() || strategyOfOp.size() != g.ops.size())
        throw InputError("plan: strategies and recompute modes must be given for every op");
    if (!folded) throw InputError("plan: full recomputation is costed per block, and no block structure was given");
    const auto producers = g.producers();
    for (const auto& bc : folded->classes)
        for (const auto& inst : bc.instances) {
            if (inst.ops.empty() || !checkpointsBlockInput(recomputeOfOp[static_cast<size_t>(inst.ops[0])])) continue;
            double& charged = kept[static_cast<size_t>(inst.ops[0])];
            for (TensorId t : inst.inputs) {
                const OpId p = producers[static_cast<size_t>(t)];
                if (p < 0) continue; // a graph input or weight: not an activation the block keeps
                const Op& op = g.op(p);
                const int slot = static_cast<int>(std::find(op.outputs.begin(), op.outputs.end(), t) - op.outputs.begin());
                charged += keptInputBytes(model, t, model.outputSpec(p, strategyOfOp[static_cast<size_t>(p)], slot));
            }
        }
    return kept;
}

SearchResult evaluatePlan(const CostModel& model, const FoldedGraph* folded, const std::vector<int>& strategyOfOp,
                          const std::vector<Recompute>& recomputeOfOp, const std::string& method)
{
    const auto start = std::chrono::steady_clock::now();
    SearchResult r;
    r.method = method;
    r.strategyOfOp = strategyOfOp;
    r.recomputeOfOp = recomputeOfOp.empty() ? std::vector<Recompute>(strategyOfOp.size(), Recompute::None) : recomputeOfOp;
    r.lockedOp.assign(strategyOfOp.size(), false);
    r.breakdown =
        model.evaluate(r.strategyOfOp, r.recomputeOfOp, keptInputBytesOfOp(model, folded, r.strategyOfOp, r.recomputeOfOp),
                       folded && folded->classOfOp.size() == strategyOfOp.size() ? canonicalOps(*folded) : std::vector<OpId>{});
    r.fits = r.breakdown.fits;
    r.objective = r.breakdown.stepSeconds;
    r.memoryLimitBytes = model.hardware().hbmBytes;
    if (folded) r.blockClasses = static_cast<int>(folded->classes.size());
    r.searchMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return r;
}

} // namespace tp
