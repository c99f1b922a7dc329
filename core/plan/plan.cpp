#include "plan.h"

#include <map>
#include <set>
#include <tuple>

#include "../graph/opkinds.h"
#include "../graph/stats.h"
#include "../mesh/calibration.h"
#include "plan_file.h"

namespace tp {

namespace {

OpId representativeOf(const FoldedGraph& folded, OpId op)
{
    const int cls = folded.classOfOp[static_cast<size_t>(op)];
    const auto& bc = folded.classes[static_cast<size_t>(cls)];
    const auto& inst = bc.instances[static_cast<size_t>(folded.instanceOfOp[static_cast<size_t>(op)])];
    for (size_t i = 0; i < inst.ops.size(); ++i)
        if (inst.ops[i] == op) return bc.instances[0].ops[i];
    return op;
}

} // namespace

std::vector<int> axesNoOpCanSplit(const CostModel& model)
{
    AxisMask used = 0;
    // Ops with identical facts share one candidate list: visit each list once.
    std::set<const std::vector<OpStrategy>*> seen;
    for (const auto& op : model.graph().ops)
        if (const auto& candidates = model.strategies(op.id); seen.insert(&candidates).second)
            for (const auto& strategy : candidates) used |= strategy.usedAxes();
    std::vector<int> unused;
    for (int a = 0; a < static_cast<int>(model.mesh().axes.size()); ++a)
        if (!(used & (AxisMask{1} << a)) && model.mesh().axes[static_cast<size_t>(a)].size > 1) unused.push_back(a);
    return unused;
}

std::vector<CollectiveSummary> summarizeCollectives(const Breakdown& breakdown, const FoldedGraph& folded)
{
    using Key = std::tuple<OpId, int, int, double, int>;
    std::map<Key, CollectiveSummary> grouped;
    for (const auto& c : breakdown.collectives) {
        const OpId rep = representativeOf(folded, c.at);
        const Key key{rep, static_cast<int>(c.phase), static_cast<int>(c.kind), c.bytes, c.axis};
        auto it = grouped.find(key);
        if (it == grouped.end())
            grouped.emplace(key, CollectiveSummary{c.kind, c.axis, c.bytes, c.phase, rep, c.count, c.seconds});
        else
            it->second.count += c.count;
    }
    std::vector<CollectiveSummary> out;
    for (auto& [key, s] : grouped) out.push_back(s);
    return out;
}

nlohmann::json planToJson(const PlanContext& ctx, const CostModel& model, const FoldedGraph& folded, const SearchResult& result)
{
    using nlohmann::json;
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const Breakdown& b = result.breakdown;
    json doc = json::object();
    doc["format"] = "tpstudio.plan";
    doc["version"] = kPlanFormatVersion;
    doc["model"] = {{"name", ctx.modelName}, {"source", ctx.modelSource}, {"ops", g.ops.size()}, {"params", g.parameterCount()}};
    if (!ctx.modelConfig.is_null()) doc["model"]["config"] = ctx.modelConfig;
    json axes = json::array();
    for (const auto& a : mesh.axes)
        axes.push_back({{"name", a.name},
                        {"size", a.size},
                        {"bandwidth_GBps", a.link.bandwidth / 1e9},
                        {"latency_us", a.link.latency * 1e6},
                        {"crosses_nodes", a.crossesNodes}});
    doc["mesh"] = {{"shape", mesh.shapeText()}, {"devices", mesh.devices()}, {"axes", axes}};
    doc["hardware"] = {{"name", ctx.hardwareName}};
    // Link overrides (docs/formats.md): written only when set, so plans without them keep their bytes.
    if (ctx.intraNodeGBps > 0) doc["hardware"]["intra_node_GBps"] = ctx.intraNodeGBps;
    if (ctx.interNodeGBps > 0) doc["hardware"]["inter_node_GBps"] = ctx.interNodeGBps;
    // A calibrated hardware file (core/mesh/calibration.h): which figures were measured.
    if (!model.hardware().calibrated.empty()) {
        doc["hardware"]["calibrated"] = model.hardware().calibrated;
        doc["hardware"]["from_preset"] = figuresFromPreset(model.hardware());
    }
    doc["batch"] = ctx.batch;
    doc["seq"] = ctx.seq;
    doc["mode"] = ctx.mode;
    doc["micro_batch"] = model.settings().microBatch;
    doc["search"] = {{"method", result.method},
                     {"time_ms", result.searchMs},
                     {"cpu_ms", result.searchCpuMs},
                     {"breakdown_ms", result.breakdownMs},
                     {"block_classes", result.blockClasses},
                     {"ops_searched", result.opsSearched},
                     {"tables_solved", result.tablesSolved},
                     {"prices_tried", result.pricesTried},
                     {"lambda", result.lambda}};
    json byKind = json::object();
    for (const auto& [kind, seconds] : b.commByKind) byKind[std::string(collectiveName(kind))] = seconds;
    doc["cost"] = {{"step_time_s", b.stepSeconds},           {"compute_s", b.computeSeconds},        {"comm_s", b.commSeconds},
                   {"exposed_comm_s", b.exposedCommSeconds}, {"hidden_comm_s", b.hiddenCommSeconds}, {"comm_by_kind", byKind},
                   {"forward_s", b.forwardSeconds},          {"optimizer_s", b.optimizerSeconds}};
    // Only plans with FSDP's buffers have it (plans made before it re-check unchanged).
    if (b.bufferCopySeconds > 0) doc["cost"]["buffer_copy_s"] = b.bufferCopySeconds;
    doc["memory"] = {{"per_device_bytes", b.perDeviceBytes},
                     {"params_bytes", b.paramBytes},
                     {"grads_bytes", b.gradBytes},
                     {"optimizer_bytes", b.optimizerBytes},
                     {"activations_bytes", b.activationBytes},
                     {"capacity_bytes", b.capacityBytes},
                     {"limit_bytes", result.memoryLimitBytes},
                     {"fits", result.fits}};
    json ops = json::array();
    for (OpId id : g.topologicalOrder()) {
        const Op& op = g.op(id);
        const int s = result.strategyOfOp[static_cast<size_t>(id)];
        const Signature& sig = model.signature(id);
        json outputs = json::array();
        for (size_t k = 0; k < op.outputs.size(); ++k)
            outputs.push_back(specToString(model.outputSpec(id, s, static_cast<int>(k)), mesh));
        const int cls = folded.classOfOp[static_cast<size_t>(id)];
        const auto& ob = b.ops[static_cast<size_t>(id)];
        json entry = {{"name", op.name},
                      {"kind", std::string(opKindName(op.kind))},
                      {"block", folded.classes[static_cast<size_t>(cls)].label},
                      {"block_class", cls},
                      {"instance", folded.instanceOfOp[static_cast<size_t>(id)]},
                      {"einsum", sig.equation},
                      {"strategy", strategyToString(model.strategies(id)[static_cast<size_t>(s)], sig, mesh)},
                      {"outputs", outputs},
                      {"locked", static_cast<bool>(result.lockedOp[static_cast<size_t>(id)])},
                      {"compute_s", ob.computeSeconds},
                      {"forward_s", ob.forwardSeconds},
                      {"comm_s", ob.commSeconds},
                      {"memory_bytes", ob.memoryBytes}};
        if (!result.recomputeOfOp.empty() && result.recomputeOfOp[static_cast<size_t>(id)] != Recompute::None)
            entry["recompute"] = std::string(recomputeName(result.recomputeOfOp[static_cast<size_t>(id)]));
        ops.push_back(std::move(entry));
    }
    doc["ops"] = std::move(ops);
    json collectives = json::array();
    for (const auto& c : summarizeCollectives(b, folded))
        collectives.push_back({{"kind", std::string(collectiveName(c.kind))},
                               {"axis", mesh.axes[static_cast<size_t>(c.axis)].name},
                               {"bytes", c.bytes},
                               {"phase", std::string(phaseName(c.phase))},
                               {"at", g.op(c.at).name},
                               {"count", c.count},
                               {"seconds", c.seconds}});
    doc["collectives"] = std::move(collectives);
    addSelfContainedFields(doc, ctx, model);
    return doc;
}

} // namespace tp
