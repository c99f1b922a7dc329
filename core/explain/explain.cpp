#include "explain.h"
#include "devices.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>
#include <cstdio>

#include "../graph/opkinds.h"
#include "../search/evaluate.h"
#include "../util/error.h"
#include "../util/format.h"

namespace tp::explain {

namespace {

constexpr AxisMask bit(int a) { return AxisMask{1} << a; }

std::string axesText(const std::vector<int>& axes, const Mesh& mesh)
{
    std::string s;
    for (size_t k = 0; k < axes.size(); ++k) s += (k ? "*" : "") + mesh.axes[static_cast<size_t>(axes[k])].name;
    return s;
}

std::string maskText(AxisMask m, const Mesh& mesh)
{
    std::string s;
    for (int a = 0; a < mesh.rank(); ++a)
        if (m & bit(a)) s += (s.empty() ? "" : ", ") + mesh.axes[static_cast<size_t>(a)].name;
    return s;
}

// Where each tensor is produced: (op, output slot), or (-1, -1).
struct Producers {
    std::vector<OpId> op;
    std::vector<int> slot;
    explicit Producers(const Graph& g) : op(g.producers()), slot(g.tensors.size(), -1)
    {
        for (const auto& o : g.ops)
            for (size_t k = 0; k < o.outputs.size(); ++k) slot[static_cast<size_t>(o.outputs[k])] = static_cast<int>(k);
    }
};

Recompute recomputeOf(const SearchResult& plan, OpId op)
{
    return plan.recomputeOfOp.empty() ? Recompute::None : plan.recomputeOfOp[static_cast<size_t>(op)];
}

void addCalls(Components& c, const std::vector<CollectiveCall>& calls, std::vector<CollectiveCall>* listed = nullptr)
{
    for (const auto& call : calls) c.commByKind[std::string(collectiveName(call.kind))] += call.seconds;
    if (listed) listed->insert(listed->end(), calls.begin(), calls.end());
}

// The op's node cost and the edges into its inputs under strategy s, the producers' strategies
// taken from the plan: CostModel::chargeOf, the terms evaluatePlan sums, plus `keptBytes` (what
// evaluatePlan charges the op for its block's kept inputs under full recomputation). The calls
// are appended to `listed` when given.
Components chargedTo(const CostModel& model, const SearchResult& plan, OpId op, int s, double keptBytes,
                     std::vector<CollectiveCall>* listed = nullptr)
{
    const CostModel::Charge charge = model.chargeOf(op, s, recomputeOf(plan, op), plan.strategyOfOp);
    Components c;
    c.computeSeconds = charge.node->computeSeconds;
    c.commSeconds = charge.commSeconds();
    c.stepSeconds = charge.stepSeconds();
    c.memoryBytes = charge.node->memoryBytes() + keptBytes;
    addCalls(c, charge.node->collectives, listed);
    for (const auto& [p, e] : charge.edges) addCalls(c, e.collectives, listed);
    return c;
}

double total(const std::vector<double>& v)
{
    double sum = 0;
    for (double x : v) sum += x;
    return sum;
}

// The edges from op (under strategy s) into its consumers, their strategies from the plan.
Components chargedToConsumers(const CostModel& model, const SearchResult& plan, OpId op, int s,
                              std::vector<CollectiveCall>* listed = nullptr)
{
    const Graph& g = model.graph();
    const auto consumers = g.consumers();
    Components c;
    const Op& o = g.op(op);
    for (size_t k = 0; k < o.outputs.size(); ++k) {
        const TensorSpec& produced = model.outputSpec(op, s, static_cast<int>(k));
        for (OpId consumer : consumers[static_cast<size_t>(o.outputs[k])]) {
            const Op& co = g.op(consumer);
            for (size_t i = 0; i < co.inputs.size(); ++i) {
                if (co.inputs[i] != o.outputs[k]) continue;
                const EdgeCost e =
                    model.edgeCost(&produced, consumer, static_cast<int>(i), plan.strategyOfOp[static_cast<size_t>(consumer)]);
                c.commSeconds += e.seconds;
                c.stepSeconds += e.exposedSeconds;
                addCalls(c, e.collectives, listed);
            }
        }
    }
    return c;
}

Components minus(const Components& a, const Components& b)
{
    Components d;
    d.stepSeconds = a.stepSeconds - b.stepSeconds;
    d.computeSeconds = a.computeSeconds - b.computeSeconds;
    d.commSeconds = a.commSeconds - b.commSeconds;
    d.memoryBytes = a.memoryBytes - b.memoryBytes;
    for (const auto& [k, v] : a.commByKind) d.commByKind[k] += v;
    for (const auto& [k, v] : b.commByKind) d.commByKind[k] -= v;
    return d;
}

Components plus(const Components& a, const Components& b)
{
    Components s = a;
    s.stepSeconds += b.stepSeconds;
    s.computeSeconds += b.computeSeconds;
    s.commSeconds += b.commSeconds;
    s.memoryBytes += b.memoryBytes;
    for (const auto& [k, v] : b.commByKind) s.commByKind[k] += v;
    return s;
}

// `micro`: how many times the collective runs a step, each on its share (a batch tensor moves
// once per micro-batch, CostModel::edgeCost); the figure is already that many calls'.
std::string formulaOf(const CollectiveCall& call, const Mesh& mesh, double micro = 1)
{
    const auto& axis = mesh.axes[static_cast<size_t>(call.axis)];
    const int g = axis.size;
    std::string factor;
    std::string latency;
    switch (call.kind) {
    case CollectiveKind::AllReduce:
        factor = "2(g-1)/g";
        latency = "2(g-1)";
        break;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
        factor = "(g-1)/g";
        latency = "(g-1)";
        break;
    case CollectiveKind::AllToAll:
        factor = "(g-1)/g^2";
        latency = "(g-1)";
        break;
    }
    const std::string share = micro > 1 ? formatBytes(call.bytes / micro) : formatBytes(call.bytes);
    std::string s = factor + " x " + share + " / " + formatBandwidth(axis.link.bandwidth);
    if (axis.link.latency > 0) s += " + " + latency + " x " + formatSeconds(axis.link.latency);
    if (micro > 1) s = formatCount(micro) + " micro-batches x (" + s + ")";
    return s + " (g = " + std::to_string(g) + ") = " + formatSeconds(call.seconds);
}

// Loops of the producer's strategy that the tensor lacks and that axis a splits: why it is partial.
std::string partialCause(const CostModel& model, const SearchResult& plan, OpId producer, int slot, int a)
{
    const Signature& sig = model.signature(producer);
    const OpStrategy& st = model.strategies(producer)[static_cast<size_t>(plan.strategyOfOp[static_cast<size_t>(producer)])];
    std::vector<bool> indexed(sig.loops.size(), false);
    for (const auto& grp : sig.outputs[static_cast<size_t>(slot)].dims)
        for (int l : grp) indexed[static_cast<size_t>(l)] = true;
    std::string labels;
    std::string role;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (!indexed[l] && std::find(st.loopAxes[l].begin(), st.loopAxes[l].end(), a) != st.loopAxes[l].end()) {
            labels += (labels.empty() ? "" : "', '") + std::string(1, sig.loops[l].label);
            role = std::string(dimRoleName(sig.loops[l].role));
        }
    if (labels.empty()) return "";
    return "'" + labels + "' is " + role + " and split over " + model.mesh().axes[static_cast<size_t>(a)].name +
           ", so each device holds a partial sum";
}

int dimSplitBy(const TensorSpec& spec, int a)
{
    for (size_t d = 0; d < spec.dims.size(); ++d)
        if (std::find(spec.dims[d].begin(), spec.dims[d].end(), a) != spec.dims[d].end()) return static_cast<int>(d);
    return -1;
}

std::string whyOf(const CollectiveCall& call, const TensorSpec& from, const TensorSpec& to, const std::string& tensor,
                  const std::string& consumer, const std::string& partialReason, const Mesh& mesh)
{
    const std::string axis = mesh.axes[static_cast<size_t>(call.axis)].name;
    const std::string need = consumer.empty() ? "" : "'" + consumer + "' ";
    if (call.phase == Phase::Backward) {
        switch (call.kind) {
        case CollectiveKind::AllReduce:
            return "backward: the gradient of '" + tensor + "' is partial over " + axis +
                   " (the dual of the forward layout change); the producer needs it summed";
        case CollectiveKind::ReduceScatter:
            return "backward: the gradient of '" + tensor + "' is partial over " + axis +
                   " and the producer keeps it split over " + axis + " (the dual of a forward all-gather)";
        case CollectiveKind::AllGather:
            return "backward: the gradient of '" + tensor + "' arrives split over " + axis +
                   " and the producer holds the tensor whole over " + axis;
        case CollectiveKind::AllToAll:
            return "backward: the gradient of '" + tensor + "' moves its split over " + axis + " back to the producer's dim";
        }
    }
    switch (call.kind) {
    case CollectiveKind::AllReduce:
        return "'" + tensor + "': " + (partialReason.empty() ? "partial over " + axis : partialReason) + "; " + need +
               "needs it whole: all-reduce over " + axis;
    case CollectiveKind::ReduceScatter: {
        const int d = dimSplitBy(to, call.axis);
        return "'" + tensor + "': " + (partialReason.empty() ? "partial over " + axis : partialReason) + "; " + need +
               "needs dim " + std::to_string(d) + " split over " + axis + ": reduce-scatter sums and splits in one step";
    }
    case CollectiveKind::AllGather: {
        const int d = dimSplitBy(from, call.axis);
        return "'" + tensor + "' has dim " + std::to_string(d) + " split over " + axis + "; " + need + "needs it whole over " +
               axis + ": all-gather";
    }
    case CollectiveKind::AllToAll: {
        const int d = dimSplitBy(from, call.axis), e = dimSplitBy(to, call.axis);
        return "'" + tensor + "' has dim " + std::to_string(d) + " split over " + axis + "; " + need + "needs dim " +
               std::to_string(e) + " split over " + axis + " instead: all-to-all";
    }
    }
    return "";
}

// Micro-batches a batch tensor moves in, laid out as `spec` (CostModel::edgeCost's count).
double microBatchesOf(const CostModel& model, TensorId t, const TensorSpec& spec)
{
    const std::int64_t micro = model.settings().microBatch, batch = model.graphBatch();
    if (micro <= 0 || batch <= 0 || !model.batchLeading(t)) return 1;
    return std::max(1.0, std::ceil(static_cast<double>(batch) / model.batchSplits(t, spec) / static_cast<double>(micro)));
}

std::vector<CollectiveStep> edgeSteps(const CostModel& model, const SearchResult& plan, OpId producer, int slot, OpId consumer,
                                      int input)
{
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const TensorId t = g.op(consumer).inputs[static_cast<size_t>(input)];
    const int cs = plan.strategyOfOp[static_cast<size_t>(consumer)];
    const TensorSpec& produced = model.outputSpec(producer, plan.strategyOfOp[static_cast<size_t>(producer)], slot);
    const TensorSpec& needed = model.inputSpec(consumer, cs, input);
    const EdgeCost e = model.edgeCost(&produced, consumer, input, cs);
    std::vector<CollectiveStep> out;
    for (const auto& call : e.collectives) {
        CollectiveStep s;
        s.kind = collectiveName(call.kind);
        s.axis = mesh.axes[static_cast<size_t>(call.axis)].name;
        s.phase = phaseName(call.phase);
        s.bytes = call.bytes;
        s.seconds = call.seconds;
        s.tensor = g.tensor(t).name;
        s.producer = g.op(producer).name;
        s.consumer = g.op(consumer).name;
        s.fromSpec = specToString(produced, mesh);
        s.toSpec = specToString(needed, mesh);
        s.why = whyOf(call, produced, needed, s.tensor, s.consumer, partialCause(model, plan, producer, slot, call.axis), mesh);
        s.formula = formulaOf(call, mesh, microBatchesOf(model, t, needed));
        out.push_back(std::move(s));
    }
    return out;
}

OperandLayout layoutOf(const CostModel& model, const Tensor& t, const TensorSpec& spec, const std::string& role,
                       const Signature& sig, const OperandIndexing& indexing)
{
    const Mesh& mesh = model.mesh();
    OperandLayout L;
    L.role = role;
    L.tensor = t.name;
    L.shape = t.shape;
    L.spec = specToString(spec, mesh);
    std::string words;
    AxisMask used = spec.splitAxes() | spec.partial;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
        if (spec.dims[d].empty()) continue;
        std::string labels;
        for (int l : indexing.dims[d]) labels += sig.loops[static_cast<size_t>(l)].label;
        const std::int64_t pieces = spec.splitsOf(d, mesh);
        const std::int64_t each = t.shape[d] / pieces;
        words += (words.empty() ? "" : "; ") + std::string("dim ") + std::to_string(d) + " (" + labels + "=" +
                 std::to_string(t.shape[d]) + ") split over " + axesText(spec.dims[d], mesh) + " into " + std::to_string(pieces) +
                 " slices of " + std::to_string(each);
        // Picture: one bar per split dim, one cell per slice, labelled by the coordinate.
        std::string bar = "  " + labels + " |";
        for (std::int64_t p = 0; p < std::min<std::int64_t>(pieces, 16); ++p) {
            std::string cell;
            std::int64_t rest = p;
            for (size_t k = spec.dims[d].size(); k-- > 0;) {
                const int a = spec.dims[d][k];
                cell =
                    mesh.axes[static_cast<size_t>(a)].name + std::to_string(rest % mesh.axes[static_cast<size_t>(a)].size) + cell;
                rest /= mesh.axes[static_cast<size_t>(a)].size;
            }
            bar += " " + cell + " |";
        }
        if (pieces > 16) bar += " ... (" + std::to_string(pieces) + " slices)";
        L.picture += bar + "   " + std::to_string(each) + " each of " + std::to_string(t.shape[d]) + "\n";
    }
    if (words.empty()) words = "whole on every device";
    const AxisMask replicatedOver = ((AxisMask{1} << mesh.rank()) - 1) & ~used;
    std::string rep;
    for (int a = 0; a < mesh.rank(); ++a)
        if ((replicatedOver & bit(a)) && mesh.axes[static_cast<size_t>(a)].size > 1)
            rep += (rep.empty() ? "" : ", ") + mesh.axes[static_cast<size_t>(a)].name;
    if (!rep.empty() && !spec.isReplicated()) words += "; replicated over " + rep;
    if (spec.partial) words += "; partial sums over " + maskText(spec.partial, mesh);
    if (L.picture.empty()) L.picture = "  (whole tensor on every device)\n";
    L.words = words;
    L.devices = deviceSlices(spec, t.shape, mesh);
    return L;
}

/// The best alternative in plain words: how much faster or slower per step and how much more
/// or less memory per device, and, when it is faster but was not chosen, that the plan is at
/// its memory limit (the search traded the time for memory there: docs/ARCHITECTURE.md).
std::string alternativeInWords(const std::string& which, const WhyNot& best, const SearchResult& plan)
{
    const double dt = best.delta.stepSeconds, dm = best.delta.memoryBytes;
    std::string s = best.strategy + " would be ";
    if (std::fabs(dt) < 5e-7)
        s += "as fast";
    else
        s += formatSeconds(std::fabs(dt)) + (dt < 0 ? " faster" : " slower") + " per step";
    const bool moreMemory = dm > 0.5, lessMemory = dm < -0.5;
    if (moreMemory || lessMemory) {
        s += (dt < 0) == moreMemory ? " and " : " but ";
        s += (moreMemory ? "need " : "save ") + formatBytes(std::fabs(dm)) + (moreMemory ? " more" : "") + " per device";
    } else {
        s += " and hold the same memory";
    }
    s += ".";
    const Breakdown& b = plan.breakdown;
    const double limit = plan.memoryLimitBytes > 0 ? plan.memoryLimitBytes : b.capacityBytes;
    if (dt < 0 && moreMemory && plan.lambda > 0)
        s += " The plan holds " + formatBytes(b.perDeviceBytes) + " of the " + formatBytes(limit) +
             " it may use, so the search keeps the slower, leaner choice here.";
    return which + ": " + s;
}

} // namespace

OpId findOp(const Graph& graph, const std::string& name)
{
    for (const auto& op : graph.ops)
        if (op.name == name) return op.id;
    for (OpId id : graph.topologicalOrder())
        if (globMatch(name, graph.op(id).name)) return id;
    throw InputError("op '" + name + "': no op of '" + graph.name +
                     "' has this name or matches it as a glob (try layers.0/mlp/*)");
}

std::vector<Components> opComponents(const CostModel& model, const FoldedGraph* folded, const SearchResult& plan)
{
    const auto kept = keptInputBytesOfOp(model, folded, plan.strategyOfOp, plan.recomputeOfOp);
    std::vector<Components> out;
    for (const auto& op : model.graph().ops) {
        const auto i = static_cast<size_t>(op.id);
        out.push_back(chargedTo(model, plan, op.id, plan.strategyOfOp[i], kept[i]));
    }
    return out;
}

std::vector<CandidateCost> costCandidates(const CostModel& model, const SearchResult& plan, OpId op, const FoldedGraph* folded)
{
    const Signature& sig = model.signature(op);
    const auto& candidates = model.strategies(op);
    const auto kept = keptInputBytesOfOp(model, folded, plan.strategyOfOp, plan.recomputeOfOp);
    const double keptTotal = total(kept);
    std::vector<CandidateCost> out;
    for (size_t c = 0; c < candidates.size(); ++c) {
        CandidateCost cost;
        cost.strategyIndex = static_cast<int>(c);
        cost.strategy = strategyToString(candidates[c], sig, model.mesh());
        cost.local = plus(chargedTo(model, plan, op, static_cast<int>(c), kept[static_cast<size_t>(op)], &cost.collectives),
                          chargedToConsumers(model, plan, op, static_cast<int>(c), &cost.collectives));
        // Under full recomputation the op's output may be a block's kept input: its layout
        // changes what that block keeps.
        if (keptTotal > 0 && cost.strategyIndex != plan.strategyOfOp[static_cast<size_t>(op)]) {
            std::vector<int> alternative = plan.strategyOfOp;
            alternative[static_cast<size_t>(op)] = cost.strategyIndex;
            cost.local.memoryBytes += total(keptInputBytesOfOp(model, folded, alternative, plan.recomputeOfOp)) - keptTotal;
        }
        cost.objective = cost.local.stepSeconds + plan.lambda * cost.local.memoryBytes;
        out.push_back(std::move(cost));
    }
    return out;
}

std::string exposedInWords(const OpExplanation& x)
{
    if (x.commSeconds - x.exposedCommSeconds <= 5e-7) return "";
    return " (" + formatSeconds(x.exposedCommSeconds) + " of it not hidden by overlap)";
}

OpExplanation explainOp(const CostModel& model, const SearchResult& plan, OpId id, const FoldedGraph* folded)
{
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const Op& op = g.op(id);
    const Signature& sig = model.signature(id);
    const int s = plan.strategyOfOp.at(static_cast<size_t>(id));
    const OpStrategy& st = model.strategies(id)[static_cast<size_t>(s)];
    const Producers prod(g);
    OpExplanation x;
    x.op = op.name;
    x.kind = opKindName(op.kind);
    x.einsum = sig.equation;
    x.strategy = strategyToString(st, sig, mesh);
    if (folded) x.block = folded->classes[static_cast<size_t>(folded->classOfOp[static_cast<size_t>(id)])].label;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        x.loops.push_back({sig.loops[l].label, sig.loops[l].size, std::string(dimRoleName(sig.loops[l].role)),
                           st.loopAxes[l].empty() ? "-" : axesText(st.loopAxes[l], mesh)});
    for (size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& t = g.tensor(op.inputs[i]);
        x.operands.push_back(layoutOf(model, t, model.inputSpec(id, s, static_cast<int>(i)),
                                      t.role == TensorRole::Weight ? "weight" : "input", sig, sig.inputs[i]));
    }
    for (size_t k = 0; k < op.outputs.size(); ++k)
        x.operands.push_back(layoutOf(model, g.tensor(op.outputs[k]), model.outputSpec(id, s, static_cast<int>(k)), "output", sig,
                                      sig.outputs[k]));

    // Collectives: into the op, its own, and from it into its consumers.
    for (size_t i = 0; i < op.inputs.size(); ++i) {
        const OpId p = prod.op[static_cast<size_t>(op.inputs[i])];
        if (p < 0) continue;
        auto steps = edgeSteps(model, plan, p, prod.slot[static_cast<size_t>(op.inputs[i])], id, static_cast<int>(i));
        x.incoming.insert(x.incoming.end(), steps.begin(), steps.end());
    }
    const OpCost& node = model.opCost(id, s, recomputeOf(plan, id));
    for (const auto& call : node.collectives) {
        CollectiveStep cs;
        cs.kind = collectiveName(call.kind);
        cs.axis = mesh.axes[static_cast<size_t>(call.axis)].name;
        cs.phase = phaseName(call.phase);
        cs.bytes = call.bytes;
        cs.seconds = call.seconds;
        // CostModel::weightTerms records which weight each of the op's own calls moves.
        if (call.weightInput >= 0 && static_cast<size_t>(call.weightInput) < op.inputs.size())
            cs.tensor = g.tensor(op.inputs[static_cast<size_t>(call.weightInput)]).name;
        cs.why = "the weight '" + cs.tensor + "' is replicated over " + cs.axis +
                 " while the op splits a loop the weight lacks over " + cs.axis +
                 " (data parallelism): each device's gradient covers only its slice, summed once per step";
        cs.formula = formulaOf(call, mesh);
        x.own.push_back(std::move(cs));
    }
    const auto consumers = g.consumers();
    for (size_t k = 0; k < op.outputs.size(); ++k)
        for (OpId c : consumers[static_cast<size_t>(op.outputs[k])]) {
            const Op& co = g.op(c);
            for (size_t i = 0; i < co.inputs.size(); ++i)
                if (co.inputs[i] == op.outputs[k]) {
                    auto steps = edgeSteps(model, plan, id, static_cast<int>(k), c, static_cast<int>(i));
                    x.outgoing.insert(x.outgoing.end(), steps.begin(), steps.end());
                }
        }

    const auto kept = keptInputBytesOfOp(model, folded, plan.strategyOfOp, plan.recomputeOfOp);
    const Components chosen = chargedTo(model, plan, id, s, kept[static_cast<size_t>(id)]);
    x.computeSeconds = chosen.computeSeconds;
    x.commSeconds = chosen.commSeconds;
    x.exposedCommSeconds = std::max(0.0, chosen.stepSeconds - chosen.computeSeconds);
    x.memoryBytes = chosen.memoryBytes;

    // Why not: each candidate against the chosen one, neighbours fixed.
    const std::vector<CandidateCost> costs = costCandidates(model, plan, id, folded);
    const Components& chosenLocal = costs[static_cast<size_t>(s)].local;
    for (const CandidateCost& cost : costs) {
        WhyNot w;
        w.strategyIndex = cost.strategyIndex;
        w.strategy = cost.strategy;
        w.chosen = cost.strategyIndex == s;
        w.delta = w.chosen ? Components{} : minus(cost.local, chosenLocal);
        w.objectiveDelta = w.delta.stepSeconds + plan.lambda * w.delta.memoryBytes;
        x.whyNot.push_back(std::move(w));
    }
    std::stable_sort(x.whyNot.begin(), x.whyNot.end(), [](const WhyNot& a, const WhyNot& b) {
        if (a.chosen != b.chosen) return a.chosen;
        return a.objectiveDelta < b.objectiveDelta;
    });
    x.lambda = plan.lambda;

    // Summary in words.
    std::string sum = "'" + x.op + "' (" + x.kind + ", " + x.einsum + ") runs " +
                      (x.strategy == "-" ? "replicated on every device" : "with " + x.strategy) + ".";
    for (const auto& l : x.loops)
        if (l.axes != "-")
            sum += " Loop '" + std::string(1, l.label) + "' (" + l.role + ", " + std::to_string(l.size) + ") is split over " +
                   l.axes + ".";
    sum += " Compute " + formatSeconds(x.computeSeconds) + ", communication charged to it " + formatSeconds(x.commSeconds) +
           exposedInWords(x) + ", memory " + formatBytes(x.memoryBytes) + " per device.";
    if (x.whyNot.size() > 1) {
        sum += " " + alternativeInWords("The best alternative", x.whyNot[1], plan);
        // A faster one that was not chosen: what it would cost (memory, under a limit).
        const auto fastest = std::min_element(x.whyNot.begin() + 1, x.whyNot.end(), [](const WhyNot& a, const WhyNot& b) {
            return a.delta.stepSeconds < b.delta.stepSeconds;
        });
        if (fastest != x.whyNot.begin() + 1 && fastest->delta.stepSeconds < -5e-7)
            sum += " " + alternativeInWords("The fastest", *fastest, plan);
    }
    x.summary = sum;
    return x;
}

PlanDiff comparePlans(const CostModel& model, const FoldedGraph& folded, const SearchResult& base, const SearchResult& other,
                      const CostModel* otherModel)
{
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const CostModel& otherCosts = otherModel ? *otherModel : model;
    if (otherCosts.graph().ops.size() != g.ops.size() || otherCosts.mesh().shapeText() != mesh.shapeText())
        throw std::logic_error("comparePlans: the two cost models are of different graphs or meshes");
    PlanDiff d;
    d.baseMethod = base.method;
    d.otherMethod = other.method;
    const auto a = opComponents(model, &folded, base), b = opComponents(otherCosts, &folded, other);
    d.blocks.resize(folded.classes.size());
    for (size_t c = 0; c < folded.classes.size(); ++c) {
        d.blocks[c].block = folded.classes[c].label;
        d.blocks[c].instances = static_cast<int>(folded.classes[c].instances.size());
    }
    for (const auto& op : g.ops) {
        const auto i = static_cast<size_t>(op.id);
        d.base = plus(d.base, a[i]);
        d.other = plus(d.other, b[i]);
        auto& blk = d.blocks[static_cast<size_t>(folded.classOfOp[i])];
        blk.base = plus(blk.base, a[i]);
        blk.other = plus(blk.other, b[i]);
        if (base.strategyOfOp[i] != other.strategyOfOp[i]) {
            ++blk.opsChanged;
            if (folded.instanceOfOp[i] == 0) {
                const Signature& sig = model.signature(op.id);
                d.changes.push_back(
                    {op.name, strategyToString(model.strategies(op.id)[static_cast<size_t>(base.strategyOfOp[i])], sig, mesh),
                     strategyToString(model.strategies(op.id)[static_cast<size_t>(other.strategyOfOp[i])], sig, mesh), a[i], b[i]});
            }
        }
    }
    return d;
}

} // namespace tp::explain
