#include "baselines.h"

#include <algorithm>
#include <functional>
#include <map>

namespace tp {

namespace {

// The loop a tensor dim is split by: the outermost loop of size > 1 of its group (inner loops
// of a merged dim may not be split, see strategy.cpp).
int leadLoop(const Signature& sig, const OperandIndexing& operand, size_t dim)
{
    if (dim >= operand.dims.size()) return -1;
    for (int l : operand.dims[dim])
        if (sig.loops[static_cast<size_t>(l)].size > 1) return l;
    return -1;
}

// The dim of a spec that axis a splits, or -1.
int dimSplitBy(const TensorSpec& spec, int a)
{
    for (size_t d = 0; d < spec.dims.size(); ++d)
        if (std::find(spec.dims[d].begin(), spec.dims[d].end(), a) != spec.dims[d].end()) return static_cast<int>(d);
    return -1;
}

struct Builder {
    const CostModel& model;
    const Graph& graph;
    const Mesh& mesh;
    std::vector<OpId> producer;
    std::vector<int> producerSlot;
    std::vector<std::vector<OpId>> consumers;

    explicit Builder(const CostModel& m) :
        model(m),
        graph(m.graph()),
        mesh(m.mesh()),
        producer(graph.producers()),
        producerSlot(graph.tensors.size(), -1),
        consumers(graph.consumers())
    {
        for (const auto& op : graph.ops)
            for (size_t o = 0; o < op.outputs.size(); ++o) producerSlot[static_cast<size_t>(op.outputs[o])] = static_cast<int>(o);
    }

    // The loop carrying the batch: the lead loop of dim 0 of a batch-leading operand.
    int batchLoop(OpId id) const
    {
        const auto& op = graph.op(id);
        const auto& sig = model.signature(id);
        for (size_t o = 0; o < op.outputs.size(); ++o)
            if (model.batchLeading(op.outputs[o])) {
                if (int l = leadLoop(sig, sig.outputs[o], 0); l >= 0) return l;
            }
        for (size_t i = 0; i < op.inputs.size(); ++i)
            if (model.batchLeading(op.inputs[i])) {
                if (int l = leadLoop(sig, sig.inputs[i], 0); l >= 0) return l;
            }
        return -1;
    }

    // Strategy index with `batchAxes` on the batch loop and `tpAxis` on `tpLoop`; -1 if invalid.
    int tryBuild(OpId id, int bLoop, const std::vector<int>& batchAxes, int tpLoop, int tpAxis) const
    {
        const auto& sig = model.signature(id);
        OpStrategy st = OpStrategy::replicated(sig);
        if (bLoop >= 0) st.loopAxes[static_cast<size_t>(bLoop)] = batchAxes;
        // The tensor-parallel axis is the innermost, so on the batch loop it goes after the
        // batch axes (axes on one loop are in mesh order).
        if (tpLoop >= 0) st.loopAxes[static_cast<size_t>(tpLoop)].push_back(tpAxis);
        if (!strategyProblem(st, sig, mesh).empty()) return -1;
        return model.findStrategy(id, st);
    }

    // The batch axes among `axes` (in mesh order) that the batch loop can take: each is added
    // when the split still divides.
    std::vector<int> usableBatchAxes(OpId id, int bLoop, const std::vector<int>& axes) const
    {
        std::vector<int> used;
        if (bLoop < 0) return used;
        for (int a : axes) {
            used.push_back(a);
            if (tryBuild(id, bLoop, used, -1, -1) < 0) used.pop_back();
        }
        return used;
    }

    // Best index with the tensor-parallel axis on tpLoop (-1: unused), keeping as many batch
    // axes as still fit (dropping the innermost first).
    int withTp(OpId id, int bLoop, std::vector<int> batchAxes, int tpLoop, int tpAxis) const
    {
        while (true) {
            const int idx = tryBuild(id, bLoop, batchAxes, tpLoop, tpAxis);
            if (idx >= 0) return idx;
            if (batchAxes.empty()) return -1;
            batchAxes.pop_back();
        }
    }

    double choiceCost(OpId id, int s, const std::vector<int>& assignment) const
    {
        const auto& op = graph.op(id);
        double c = model.opCost(id, s).seconds();
        for (size_t i = 0; i < op.inputs.size(); ++i) {
            const OpId p = producer[static_cast<size_t>(op.inputs[i])];
            if (p < 0) continue;
            const auto& spec =
                model.outputSpec(p, assignment[static_cast<size_t>(p)], producerSlot[static_cast<size_t>(op.inputs[i])]);
            c += model.edgeCost(&spec, id, static_cast<int>(i), s).exposedSeconds;
        }
        return c;
    }
};

} // namespace

std::vector<int> megatronAssignment(const CostModel& model, const MegatronOptions& options)
{
    Builder b(model);
    const auto& g = b.graph;
    const auto& mesh = b.mesh;
    std::vector<int> assignment(g.ops.size(), 0);
    if (g.ops.empty()) return assignment;
    const int tp = mesh.rank() - 1;
    const int tpSize = mesh.axes[static_cast<size_t>(tp)].size;
    std::vector<int> dpAxes;
    for (int a = 0; a < tp; ++a)
        if (mesh.axes[static_cast<size_t>(a)].size > 1) dpAxes.push_back(a);
    auto hasWeight = [&](OpId id) {
        const auto& ins = g.op(id).inputs;
        return std::any_of(ins.begin(), ins.end(), [&](TensorId t) { return g.tensor(t).role == TensorRole::Weight; });
    };

    // Ops followed (inclusively) by a weighted contraction; past the last of these is the tail
    // (loss), where a split that cannot continue costs one resharding and nothing more.
    const auto order = g.topologicalOrder();
    std::vector<bool> weightedAhead(g.ops.size(), false);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        bool w = model.matmulLike(*it) && hasWeight(*it);
        for (auto t : g.op(*it).outputs)
            for (OpId c : b.consumers[static_cast<size_t>(t)]) w = w || weightedAhead[static_cast<size_t>(c)];
        weightedAhead[static_cast<size_t>(*it)] = w;
    }

    // Whether a split of dim d of tensor t flows forward through parallel loops to a
    // contraction (row-parallel linear, attention context), the graph's end, or the tail.
    std::map<std::pair<TensorId, size_t>, bool> memo;
    std::function<bool(TensorId, size_t, int)> flows = [&](TensorId t, size_t d, int depth) -> bool {
        if (depth > 64) return false;
        const auto key = std::make_pair(t, d);
        if (auto it = memo.find(key); it != memo.end()) return it->second;
        bool ok = true;
        for (OpId c : b.consumers[static_cast<size_t>(t)]) {
            const auto& op = g.op(c);
            const auto& sig = model.signature(c);
            for (size_t i = 0; i < op.inputs.size() && ok; ++i) {
                if (op.inputs[i] != t) continue;
                const int l = leadLoop(sig, sig.inputs[i], d);
                if (l < 0) continue;
                const auto& loop = sig.loops[static_cast<size_t>(l)];
                if (loop.size % tpSize != 0)
                    ok = false;
                else if (loop.role == DimRole::Contracted)
                    ok = true;
                else if (loop.role == DimRole::Parallel) {
                    for (size_t o = 0; o < op.outputs.size() && ok; ++o)
                        for (size_t e = 0; e < sig.outputs[o].dims.size() && ok; ++e)
                            if (leadLoop(sig, sig.outputs[o], e) == l) ok = flows(op.outputs[o], e, depth + 1);
                } else {
                    ok = !weightedAhead[static_cast<size_t>(c)];
                }
            }
            if (!ok) break;
        }
        memo[key] = ok;
        return ok;
    };

    for (const OpId id : order) {
        const auto& op = g.op(id);
        const auto& sig = model.signature(id);
        const int bLoop = b.batchLoop(id);
        const auto batchAxes = b.usableBatchAxes(id, bLoop, dpAxes);
        const int plain = std::max(0, b.withTp(id, bLoop, batchAxes, -1, tp));
        int chosen = -1;
        bool anySplitInput = false;
        // 1. Keep an incoming split on the loop it maps to.
        for (size_t i = 0; i < op.inputs.size() && chosen < 0; ++i) {
            const TensorId t = op.inputs[i];
            const OpId p = b.producer[static_cast<size_t>(t)];
            if (p < 0) continue;
            const int d =
                dimSplitBy(model.outputSpec(p, assignment[static_cast<size_t>(p)], b.producerSlot[static_cast<size_t>(t)]), tp);
            if (d < 0) continue;
            anySplitInput = true;
            const int l = leadLoop(sig, sig.inputs[i], static_cast<size_t>(d));
            if (l >= 0 && dimRoleSplittable(sig.loops[static_cast<size_t>(l)].role))
                chosen = b.withTp(id, bLoop, batchAxes, l, tp);
        }
        if (chosen < 0 && !anySplitInput && hasWeight(id)) {
            std::vector<bool> byWeight(sig.loops.size(), false), byActivation(sig.loops.size(), false),
                byOutput(sig.loops.size(), false);
            for (size_t i = 0; i < op.inputs.size(); ++i)
                for (const auto& grp : sig.inputs[i].dims)
                    for (int l : grp)
                        (g.tensor(op.inputs[i]).role == TensorRole::Weight ? byWeight : byActivation)[static_cast<size_t>(l)] =
                            true;
            for (const auto& out : sig.outputs)
                for (const auto& grp : out.dims)
                    for (int l : grp) byOutput[static_cast<size_t>(l)] = true;
            // 2. Vocab-parallel lookup: split the weight's gather loop.
            for (size_t l = 0; l < sig.loops.size() && chosen < 0; ++l)
                if (sig.loops[l].role == DimRole::Gather && byWeight[l] && sig.loops[l].size > 1)
                    chosen = b.withTp(id, bLoop, batchAxes, static_cast<int>(l), tp);
            // 3. Column-parallel: split the output loop only the weight has, if the split flows.
            for (size_t l = 0; l < sig.loops.size() && chosen < 0; ++l) {
                if (sig.loops[l].role != DimRole::Parallel || !byWeight[l] || byActivation[l] || !byOutput[l] ||
                    sig.loops[l].size <= 1)
                    continue;
                const int idx = b.withTp(id, bLoop, batchAxes, static_cast<int>(l), tp);
                if (idx < 0) continue;
                bool ok = true;
                for (size_t o = 0; o < op.outputs.size() && ok; ++o)
                    for (size_t e = 0; e < sig.outputs[o].dims.size() && ok; ++e)
                        if (leadLoop(sig, sig.outputs[o], e) == static_cast<int>(l)) ok = flows(op.outputs[o], e, 0);
                if (ok) chosen = idx;
            }
        }
        // 4. A split that cannot continue here: the cheapest use of the axis given the inputs.
        if (chosen < 0 && anySplitInput) {
            double best = b.choiceCost(id, plain, assignment);
            chosen = plain;
            for (size_t l = 0; l < sig.loops.size(); ++l) {
                const int idx = b.withTp(id, bLoop, batchAxes, static_cast<int>(l), tp);
                if (idx < 0 || idx == plain) continue;
                const double c = b.choiceCost(id, idx, assignment);
                if (c < best) {
                    best = c;
                    chosen = idx;
                }
            }
        }
        assignment[static_cast<size_t>(id)] = chosen >= 0 ? chosen : plain;
    }

    if (options.sequenceParallel) {
        for (const auto& op : g.ops) {
            const int s = assignment[static_cast<size_t>(op.id)];
            if (model.strategies(op.id)[static_cast<size_t>(s)].usedAxes() & (AxisMask{1} << tp)) continue;
            if (model.matmulLike(op.id) || op.outputs.empty() || g.tensor(op.outputs[0]).shape.size() < 3) continue;
            const auto& sig = model.signature(op.id);
            const int l = leadLoop(sig, sig.outputs[0], 1);
            if (l < 0) continue;
            const int bLoop = b.batchLoop(op.id);
            const int idx = b.withTp(op.id, bLoop, b.usableBatchAxes(op.id, bLoop, dpAxes), l, tp);
            if (idx >= 0) assignment[static_cast<size_t>(op.id)] = idx;
        }
    }
    return assignment;
}

std::vector<int> dataParallelAssignment(const CostModel& model)
{
    Builder b(model);
    std::vector<int> all;
    for (int a = 0; a < b.mesh.rank(); ++a)
        if (b.mesh.axes[static_cast<size_t>(a)].size > 1) all.push_back(a);
    std::vector<int> assignment(b.graph.ops.size(), 0);
    for (const auto& op : b.graph.ops) {
        const int bLoop = b.batchLoop(op.id);
        const auto axes = b.usableBatchAxes(op.id, bLoop, all);
        assignment[static_cast<size_t>(op.id)] = std::max(0, b.tryBuild(op.id, bLoop, axes, -1, -1));
    }
    return assignment;
}

} // namespace tp
