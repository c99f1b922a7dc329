#include "export_styles.h"

#include <algorithm>
#include <map>

#include "../util/format.h"

namespace tp {

StrategyClass classifyOp(const CostModel& model, OpId op, int strategy)
{
    const Graph& g = model.graph();
    const Op& o = g.op(op);
    OperandFacts facts;
    for (TensorId t : o.inputs) {
        facts.weightInput.push_back(g.tensor(t).role == TensorRole::Weight);
        facts.batchInput.push_back(model.batchLeading(t));
        facts.routedInput.push_back(model.routedTokens(t));
    }
    for (TensorId t : o.outputs) {
        facts.batchOutput.push_back(model.batchLeading(t));
        facts.routedOutput.push_back(model.routedTokens(t));
    }
    return classifyStrategy(model.signature(op), facts, model.strategies(op)[static_cast<size_t>(strategy)], model.mesh().rank());
}

PlanAxes planAxes(const CostModel& model, const SearchResult& result)
{
    const int axes = model.mesh().rank();
    std::vector<int> weightSplits(static_cast<size_t>(axes), 0);
    // Per axis: used at all; splitting more than the batch; splitting more than batch and experts.
    std::vector<bool> used(static_cast<size_t>(axes), false), nonBatch(static_cast<size_t>(axes), false);
    std::vector<bool> expert(static_cast<size_t>(axes), false), beyondExperts(static_cast<size_t>(axes), false);
    for (size_t id = 0; id < model.graph().ops.size(); ++id) {
        const StrategyClass s = classifyOp(model, static_cast<OpId>(id), result.strategyOfOp[id]);
        for (int a = 0; a < axes; ++a) {
            const ShardClass r = s.axisClass[static_cast<size_t>(a)];
            if (r == ShardClass::Replicated) continue;
            used[static_cast<size_t>(a)] = true;
            if (r != ShardClass::Data) nonBatch[static_cast<size_t>(a)] = true;
            if (r == ShardClass::Expert) expert[static_cast<size_t>(a)] = true;
            if (r != ShardClass::Data && r != ShardClass::Expert) beyondExperts[static_cast<size_t>(a)] = true;
            if (r == ShardClass::Column || r == ShardClass::Row) ++weightSplits[static_cast<size_t>(a)];
        }
    }
    PlanAxes out;
    int best = 0;
    for (int a = axes - 1; a >= 0; --a) // ties go to the innermost axis (the fast links)
        if (weightSplits[static_cast<size_t>(a)] > best) {
            best = weightSplits[static_cast<size_t>(a)];
            out.tensorAxis = a;
        }
    for (int a = 0; a < axes; ++a) {
        const auto i = static_cast<size_t>(a);
        if (expert[i]) out.expertAxes.push_back(a);
        if (a == out.tensorAxis || !used[i]) continue;
        const bool dataAxis = expert[i] ? !beyondExperts[i] : !nonBatch[i];
        (dataAxis ? out.dataAxes : out.otherAxes).push_back(a);
    }
    return out;
}

namespace {

std::vector<std::string> nameParts(const std::string& name)
{
    std::vector<std::string> parts;
    std::string part;
    for (char c : name + "/") {
        if (c == '/' || c == '.') {
            if (!part.empty()) parts.push_back(part);
            part.clear();
        } else {
            part += c;
        }
    }
    return parts;
}

std::string joined(const std::vector<std::string>& parts)
{
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : ".") + p;
    return out;
}

} // namespace

std::string modulePattern(const Graph& graph, const FoldedGraph& folded, OpId op)
{
    const auto& bc = folded.classes[static_cast<size_t>(folded.classOfOp[static_cast<size_t>(op)])];
    const auto& own = bc.instances[static_cast<size_t>(folded.instanceOfOp[static_cast<size_t>(op)])].ops;
    const size_t slot = static_cast<size_t>(std::find(own.begin(), own.end(), op) - own.begin());
    std::vector<std::string> pattern = nameParts(graph.op(op).name);
    for (const auto& inst : bc.instances) {
        const auto parts = nameParts(graph.op(inst.ops[slot]).name);
        if (parts.size() != pattern.size()) return joined(nameParts(graph.op(op).name));
        for (size_t i = 0; i < parts.size(); ++i)
            if (parts[i] != pattern[i]) pattern[i] = "*";
    }
    return joined(pattern);
}

std::vector<OpId> representativeOps(const FoldedGraph& folded)
{
    std::vector<OpId> out;
    for (const auto& bc : folded.classes)
        for (OpId op : bc.instances[0].ops) out.push_back(op);
    return out;
}

} // namespace tp

namespace tp {

namespace {

std::string layoutOn(const TensorSpec& spec, int axis)
{
    for (size_t d = 0; d < spec.dims.size(); ++d)
        if (std::find(spec.dims[d].begin(), spec.dims[d].end(), axis) != spec.dims[d].end())
            return d + 1 == spec.dims.size() ? "Shard(-1)" : "Shard(" + std::to_string(d) + ")";
    if (spec.partial & (AxisMask{1} << axis)) return "Partial()";
    return "Replicate()";
}

// Expert parallelism: the op splits its stacked expert weights over expert axes and nothing but
// the batch elsewhere. Sets the style; false when the op has no expert split.
bool expertStyle(const StrategyClass& sh, ShardClass tensorRole, const PlanAxes& axes, const Mesh& mesh, ModuleStyle& m)
{
    std::string over;
    int devices = 1;
    for (int a : axes.expertAxes)
        if (sh.axisClass[static_cast<size_t>(a)] == ShardClass::Expert) {
            over += (over.empty() ? "" : " x ") + mesh.axes[static_cast<size_t>(a)].name;
            devices *= mesh.axes[static_cast<size_t>(a)].size;
        }
    if (over.empty()) return false;
    if (tensorRole == ShardClass::Column || tensorRole == ShardClass::Row) {
        m.inexpressible = "splits its experts over " + over + " and each expert (" + std::string(shardClassName(tensorRole)) +
                          ") over the tensor axis; apply tensor parallelism inside the experts by hand";
        return true;
    }
    m.style = ModuleStyle::Style::Expert;
    m.expertMesh = over;
    m.implies = "each device holds 1/" + std::to_string(devices) + " of the experts (stacked weights Shard(0) over " + over +
                "); tokens arrive by an all-to-all over " + over + " after the dispatch and return by another before the combine";
    return true;
}

// The rank of the op's first weight input, 0 without one.
int weightRank(const Graph& g, const Op& op)
{
    for (TensorId t : op.inputs)
        if (g.tensor(t).role == TensorRole::Weight) return static_cast<int>(g.tensor(t).shape.size());
    return 0;
}

} // namespace

std::vector<ModuleStyle> moduleStyles(const PlanWorkspace& ws, const SearchResult& result, const PlanAxes& axes)
{
    const CostModel& model = *ws.costModel;
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const FoldedGraph& folded = ws.folded;
    const auto producers = g.producers();
    const auto consumers = g.consumers();
    const int t = axes.tensorAxis;
    const std::string tName = t >= 0 ? mesh.axes[static_cast<size_t>(t)].name : "";
    auto strategyOf = [&](OpId op) { return result.strategyOfOp[static_cast<size_t>(op)]; };

    std::vector<ModuleStyle> out;
    for (OpId op : representativeOps(folded)) {
        const Op& o = g.op(op);
        const int s = strategyOf(op);
        const StrategyClass sh = classifyOp(model, op, s);
        ModuleStyle m;
        m.op = op;
        m.pattern = modulePattern(g, folded, op);
        const auto& bc = folded.classes[static_cast<size_t>(folded.classOfOp[static_cast<size_t>(op)])];
        m.blockLabel = bc.label;
        m.blockInstances = static_cast<int>(bc.instances.size());
        m.strategy = strategyToString(model.strategies(op)[static_cast<size_t>(s)], model.signature(op), mesh);

        // The plan's collectives after this op (edges it produces, its gradient reductions).
        // Same phase, kind and axis merge (a weight and its bias reduce together).
        std::vector<std::pair<std::string, double>> merged;
        bool allToAll = false; // one the styles would have to insert: not expert parallelism's token exchange
        for (const auto& c : result.breakdown.collectives) {
            if (c.at != op) continue;
            const bool tokenExchange =
                std::find(axes.expertAxes.begin(), axes.expertAxes.end(), c.axis) != axes.expertAxes.end();
            allToAll = allToAll || (c.kind == CollectiveKind::AllToAll && c.phase == Phase::Forward && !tokenExchange);
            const std::string item = std::string(phaseName(c.phase)) + " " + std::string(collectiveName(c.kind)) + " over " +
                                     mesh.axes[static_cast<size_t>(c.axis)].name;
            auto it = std::find_if(merged.begin(), merged.end(), [&](const auto& e) { return e.first == item; });
            if (it == merged.end())
                merged.emplace_back(item, c.bytes);
            else
                it->second += c.bytes;
        }
        for (const auto& [item, bytes] : merged)
            m.planCollectives += (m.planCollectives.empty() ? "" : "; ") + item + " " + formatBytes(bytes);
        if (!sh.hasWeight) {
            if (!allToAll) continue;
            m.inexpressible = "needs an all-to-all redistribution (" + m.strategy + ") that the styles do not insert";
            out.push_back(std::move(m));
            continue;
        }
        for (int a : axes.otherAxes)
            if (sh.axisClass[static_cast<size_t>(a)] != ShardClass::Replicated &&
                sh.axisClass[static_cast<size_t>(a)] != ShardClass::Data && sh.axisClass[static_cast<size_t>(a)] != ShardClass::Expert)
                m.inexpressible = "also splits over axis " + mesh.axes[static_cast<size_t>(a)].name +
                                  " (2-D tensor parallelism; parallelize_module takes a 1-D mesh)";
        const ShardClass role = t >= 0 ? sh.axisClass[static_cast<size_t>(t)] : ShardClass::Replicated;
        if (m.inexpressible.empty() && expertStyle(sh, role, axes, mesh, m)) {
            out.push_back(std::move(m));
            continue;
        }
        const bool weightSplit = role == ShardClass::Column || role == ShardClass::Row;
        if (m.inexpressible.empty() && weightSplit && weightRank(g, o) != 2)
            m.inexpressible = "the styles shard 2-D weights (nn.Linear, nn.Embedding); this weight has rank " +
                              std::to_string(weightRank(g, o));
        if (m.inexpressible.empty() && (role == ShardClass::Sequence || role == ShardClass::Feature)) {
            // The first activation dim the split loop indexes: where SequenceParallel shards.
            const int loop = sh.axisLoop[static_cast<size_t>(t)];
            const Signature& sig = model.signature(op);
            int inputDim = -1;
            for (size_t k = 0; k < o.inputs.size() && k < sig.inputs.size() && inputDim < 0; ++k)
                for (size_t d = 0; d < sig.inputs[k].dims.size() && g.tensor(o.inputs[k]).role != TensorRole::Weight; ++d)
                    if (std::find(sig.inputs[k].dims[d].begin(), sig.inputs[k].dims[d].end(), loop) !=
                        sig.inputs[k].dims[d].end()) {
                        inputDim = static_cast<int>(d);
                        break;
                    }
            m.style = ModuleStyle::Style::Sequence;
            m.sequenceDim = inputDim;
            m.implies = "works on its shard of dim " + std::to_string(inputDim) + " over " + tName +
                        "; parameters replicated, their gradients all-reduced over " + tName;
        }
        if (m.inexpressible.empty() && weightSplit) {
            m.style = role == ShardClass::Column ? ModuleStyle::Style::Colwise : ModuleStyle::Style::Rowwise;
            // What arrives: the producer's layout of the first activation input on the tensor axis.
            m.inputLayout = "Replicate()";
            for (size_t k = 0; k < o.inputs.size(); ++k) {
                if (g.tensor(o.inputs[k]).role == TensorRole::Weight) continue;
                const OpId p = producers[static_cast<size_t>(o.inputs[k])];
                if (p >= 0) {
                    const Op& po = g.op(p);
                    const int slot =
                        static_cast<int>(std::find(po.outputs.begin(), po.outputs.end(), o.inputs[k]) - po.outputs.begin());
                    m.inputLayout = layoutOn(model.outputSpec(p, strategyOf(p), slot), t);
                    if (m.inputLayout == "Partial()") m.inputLayout = "Replicate()"; // reduced by the producer's style
                }
                break;
            }
            // What leaves: the layout the first consumer of output 0 asks for on the tensor axis.
            m.outputLayout = m.style == ModuleStyle::Style::Colwise ? "Shard(-1)" : "Replicate()";
            if (!o.outputs.empty())
                for (OpId c : consumers[static_cast<size_t>(o.outputs[0])]) {
                    const Op& co = g.op(c);
                    const int k =
                        static_cast<int>(std::find(co.inputs.begin(), co.inputs.end(), o.outputs[0]) - co.inputs.begin());
                    m.outputLayout = layoutOn(model.inputSpec(c, strategyOf(c), k), t);
                    if (m.outputLayout == "Partial()") m.outputLayout = "Replicate()";
                    break;
                }
            if (m.style == ModuleStyle::Style::Colwise) {
                m.implies = m.inputLayout == "Replicate()"
                                ? "forward: no collective; backward: all-reduce of the input gradient over " + tName
                                : "forward: all-gather of the input over " + tName + "; backward: reduce-scatter of its gradient";
                if (m.outputLayout == "Replicate()") m.implies += "; forward: all-gather of the output over " + tName;
            } else {
                m.implies = m.outputLayout == "Replicate()" ? "forward: all-reduce of the output over " + tName
                                                            : "forward: reduce-scatter of the output over " + tName +
                                                                  "; backward: all-gather of its gradient";
                if (m.inputLayout == "Replicate()") m.implies += " (input sliced locally, no collective)";
            }
        }
        out.push_back(std::move(m));
    }
    return out;
}

} // namespace tp
