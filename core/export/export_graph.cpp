// The folded, annotated plan graph (dot/svg/png) and the export dispatcher.
#include <cstdio>
#include <map>
#include <set>

#include "../util/error.h"
#include "../util/format.h"
#include "export_plan.h"
#include "export_styles.h"

namespace tp {

namespace {

std::string abbreviation(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::AllReduce:
        return "AR";
    case CollectiveKind::AllGather:
        return "AG";
    case CollectiveKind::ReduceScatter:
        return "RS";
    case CollectiveKind::AllToAll:
        return "A2A";
    }
    return "?";
}

// "layers.*.attn.q" inside class "layers.*" reads "attn.q".
std::string shortName(const std::string& pattern, const std::string& classLabel)
{
    const std::string prefix = classLabel + ".";
    if (pattern.size() > prefix.size() && pattern.compare(0, prefix.size(), prefix) == 0) return pattern.substr(prefix.size());
    return pattern;
}

std::string collectiveText(const std::vector<CollectiveCall>& calls, const Mesh& mesh)
{
    // One line for the forward pass, one for the backward; repeated calls merge.
    std::string forward, backward;
    std::set<std::string> seen;
    for (const auto& c : calls) {
        const std::string item = abbreviation(c.kind) + " " + mesh.axes[static_cast<size_t>(c.axis)].name;
        const std::string key = std::to_string(static_cast<int>(c.phase)) + item;
        if (!seen.insert(key).second) continue;
        std::string& line = c.phase == Phase::Forward ? forward : backward;
        line += (line.empty() ? "" : ", ") + item;
    }
    std::string text = forward;
    if (!backward.empty()) text += (text.empty() ? "" : "\n") + std::string("bwd ") + backward;
    return text;
}

} // namespace

LayoutInput foldedPlanGraph(const PlanWorkspace& ws, const SearchResult& result)
{
    const CostModel& model = *ws.costModel;
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const FoldedGraph& folded = ws.folded;
    const Breakdown& b = result.breakdown;
    LayoutInput in;

    std::string meshText = mesh.shapeText() + " (";
    for (size_t a = 0; a < mesh.axes.size(); ++a)
        meshText += (a ? ", " : "") + mesh.axes[a].name + "=" + std::to_string(mesh.axes[a].size) +
                    (mesh.axes[a].crossesNodes ? " inter-node" : " intra-node");
    meshText += ")";
    in.title = ws.context.modelName + " on mesh " + meshText + ", " + ws.context.hardwareName + ", " + ws.context.mode +
               ", batch " + std::to_string(ws.context.batch) + "\nstep " + formatSeconds(b.stepSeconds) + " (communication " +
               formatSeconds(b.commSeconds) + ") · " + formatBytes(b.perDeviceBytes) + " of " + formatBytes(b.capacityBytes) +
               " per device · " + result.method;

    // Legend: one swatch per kind of sharding.
    in.clusters.push_back({"legend", "sharding", "#ffffff", "#bbbbbb"});
    // dot lays out unconnected nodes of a rank right to left: add them in reverse to read in order.
    for (int k = kShardClassCount - 1; k >= 0; --k) {
        LayoutNode n;
        n.id = "legend" + std::to_string(k);
        n.label = std::string(shardClassName(static_cast<ShardClass>(k)));
        n.cluster = "legend";
        n.fillColor = std::string(shardClassColor(static_cast<ShardClass>(k)));
        n.borderColor = "#777777";
        in.nodes.push_back(n);
    }

    std::vector<OpId> repOf(g.ops.size(), -1);
    for (const auto& bc : folded.classes)
        for (const auto& inst : bc.instances)
            for (size_t i = 0; i < inst.ops.size(); ++i) repOf[static_cast<size_t>(inst.ops[i])] = bc.instances[0].ops[i];

    // Per representative op: gradient collectives (data parallel) for its label.
    std::map<OpId, std::vector<CollectiveCall>> gradients;
    for (const auto& c : b.collectives)
        if (c.phase == Phase::Gradient && repOf[static_cast<size_t>(c.at)] == c.at)
            gradients[c.at].push_back({c.kind, c.axis, c.bytes, c.seconds, c.phase});

    for (const auto& bc : folded.classes) {
        const std::string cid = "c" + std::to_string(bc.id);
        std::string label = bc.label;
        if (bc.instances.size() > 1) label += "  ×" + std::to_string(bc.instances.size());
        in.clusters.push_back({cid, label, bc.instances.size() > 1 ? "#eef3fb" : "#f4f4f4", "#8a9bb5"});
        for (OpId op : bc.instances[0].ops) {
            const int s = result.strategyOfOp[static_cast<size_t>(op)];
            const StrategyClass sh = classifyOp(model, op, s);
            LayoutNode n;
            n.id = "op" + std::to_string(op);
            n.cluster = cid;
            const std::string strategy =
                strategyToString(model.strategies(op)[static_cast<size_t>(s)], model.signature(op), mesh);
            n.label = shortName(modulePattern(g, folded, op), bc.label) + "\n" + (strategy == "-" ? "replicated" : strategy);
            if (auto it = gradients.find(op); it != gradients.end()) {
                std::string grads;
                std::set<std::string> seen;
                for (const auto& c : it->second) {
                    const std::string item = abbreviation(c.kind) + " " + mesh.axes[static_cast<size_t>(c.axis)].name;
                    if (seen.insert(item).second) grads += (grads.empty() ? "" : ", ") + item;
                }
                n.label += "\ngrad " + grads;
            }
            n.fillColor = std::string(shardClassColor(sh.kind));
            n.borderColor = sh.hasWeight ? "#222222" : "#888888";
            n.shape = sh.hasWeight ? "box" : "box";
            in.nodes.push_back(n);
        }
    }

    // Edges between representative ops: inside a class, and from other classes into it.
    // Edges from the previous instance of the same class (layer to layer) are what "×N" stands for.
    const auto producers = g.producers();
    std::set<std::pair<OpId, OpId>> done;
    for (const auto& bc : folded.classes) {
        const auto& rep = bc.instances[0];
        for (OpId op : rep.ops) {
            const Op& o = g.op(op);
            const int s = result.strategyOfOp[static_cast<size_t>(op)];
            for (size_t k = 0; k < o.inputs.size(); ++k) {
                const OpId p = producers[static_cast<size_t>(o.inputs[k])];
                if (p < 0) continue;
                const bool sameClass = folded.classOfOp[static_cast<size_t>(p)] == bc.id;
                if (sameClass && folded.instanceOfOp[static_cast<size_t>(p)] != 0) continue;
                const OpId from = repOf[static_cast<size_t>(p)];
                if (!done.insert({from, op}).second) continue;
                const Op& po = g.op(p);
                const int slot =
                    static_cast<int>(std::find(po.outputs.begin(), po.outputs.end(), o.inputs[k]) - po.outputs.begin());
                const TensorSpec& produced = model.outputSpec(p, result.strategyOfOp[static_cast<size_t>(p)], slot);
                const EdgeCost cost = model.edgeCost(&produced, op, static_cast<int>(k), s);
                LayoutEdge e;
                e.from = "op" + std::to_string(from);
                e.to = "op" + std::to_string(op);
                e.label = collectiveText(cost.collectives, mesh);
                bool forward = false;
                for (const auto& c : cost.collectives) forward = forward || c.phase == Phase::Forward;
                e.color = forward ? "#c0392b" : (e.label.empty() ? "#666666" : "#7d5ba6");
                e.bold = forward;
                in.edges.push_back(e);
            }
        }
    }
    return in;
}

std::vector<std::string> exportFormats() { return {"csv", "dot", "svg", "png", "pytorch", "megatron", "hf-tp-plan"}; }

std::string exportPlan(const PlanWorkspace& ws, const SearchResult& result, const std::string& format)
{
    if (format == "csv") return exportCsv(ws, result);
    if (format == "dot") return layoutToDot(foldedPlanGraph(ws, result));
    if (format == "svg" || format == "png") return renderLayout(foldedPlanGraph(ws, result), format);
    if (format == "pytorch") return exportPytorch(ws, result);
    if (format == "megatron") return exportMegatron(ws, result);
    if (format == "hf-tp-plan") return exportHfTpPlan(ws, result);
    std::string known;
    for (const auto& f : exportFormats()) known += (known.empty() ? "" : ", ") + f;
    throw InputError("export format '" + format + "': use one of " + known);
}

} // namespace tp
