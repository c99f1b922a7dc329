#include "plan_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "../graph/validate.h"
#include "../search/evaluate.h"
#include "../import/graph_json.h"
#include "../util/error.h"
#include "../util/format.h"
#include "../util/json_reader.h"
#include "../util/units.h"

namespace tp {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Writing

json hardwareToJson(const Hardware& hw) { return json::parse(hardwareToJsonText(hw)); }

bool isUnchangedPreset(const Hardware& hw)
{
    const auto names = hardwarePresetNames();
    if (std::find(names.begin(), names.end(), hw.name) == names.end()) return false;
    return loadHardware(hw.name) == hw;
}

void addSelfContainedFields(json& doc, const PlanContext& ctx, const CostModel& model)
{
    // A builder config rebuilds the graph exactly; anything else (graph files, ONNX) is embedded.
    if (ctx.modelConfig.is_null()) doc["model"]["graph"] = graphToJson(model.graph());
    if (!isUnchangedPreset(model.hardware())) doc["hardware"]["spec"] = hardwareToJson(model.hardware());
    doc["overlap_chunks"] = model.settings().overlapChunks;
    const CostSettings& s = model.settings();
    doc["framework"] = {{"grad_overlap", s.overlapGradientReduction},
                        {"grad_bucket_mib", s.gradientBucketBytes / (1024.0 * 1024.0)},
                        {"tp_overlap", s.overlapTensorParallelBackward},
                        {"scatter_gather", s.pipelineScatterGather},
                        {"zero", s.zeroStage},
                        {"zero_shard", s.zeroAcrossNodes ? "all" : "node"},
                        {"reshard_after_forward", s.reshardAfterForward},
                        {"grad_bytes_per_param", s.gradBytesPerParam},
                        {"optimizer_bytes_per_param", s.optimizerBytesPerParam},
                        {"fp8_matmuls", s.fp8Matmuls}};
}

json pipelineToJson(const PipelinePlan& p, const std::string& wholeMesh)
{
    json j;
    j["mesh"] = wholeMesh;
    j["stages"] = p.schedule.stages;
    j["schedule"] = scheduleWord(p.schedule);
    j["virtual_stages"] = p.schedule.virtualStages;
    j["stage_mesh"] = p.stageMesh;
    j["micro_batch"] = p.microBatch;
    j["step_seconds"] = p.stepSeconds;
    j["bubble_fraction"] = p.bubbleFraction();
    j["stage"] = p.stages.at(static_cast<size_t>(p.slowest)).stage;
    j["layers_of_stage"] = p.layersOfStage.empty() ? p.stages.at(static_cast<size_t>(p.slowest)).workspace->stage.layersOfStage
                                                   : p.layersOfStage;
    const PipelineStageInfo& shown = p.stages.at(static_cast<size_t>(p.slowest)).workspace->stage;
    j["period"] = shown.period;
    j["layers_per_period"] = shown.layersPerPeriod;
    j["layers_before"] = shown.layersBefore;
    j["layers_after"] = shown.layersAfter;
    json list = json::array();
    for (const auto& st : p.stages) {
        const PipelineStageInfo& info = st.workspace->stage;
        list.push_back({{"stage", st.stage},
                        {"stands_for", st.standsFor},
                        {"first_layer", info.firstLayer},
                        {"layers", info.layers},
                        {"received_bytes", info.receivedBytes},
                        {"sent_bytes", info.sentBytes},
                        {"step_seconds", st.stepSeconds()},
                        {"send_seconds", st.sendSeconds},
                        {"micro_batches", st.microBatches},
                        {"bytes_per_device", st.result.breakdown.perDeviceBytes},
                        {"fits", st.result.fits}});
    }
    j["per_stage"] = std::move(list);
    return j;
}

std::string writePlanFile(const json& document) { return document.dump(2) + "\n"; }

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

// Figures are formatted by their key's unit suffix, with as many digits as it takes to tell the
// stored from the recomputed value apart.
std::string formatFigure(const std::string& key, const json& value, int digits)
{
    if (!value.is_number()) return value.dump();
    const double v = value.get<double>();
    auto ends = [&](const char* suffix) { return key.size() >= std::strlen(suffix) && key.ends_with(suffix); };
    if (ends("_s")) return formatSeconds(v, digits);
    if (ends("_bytes") || key == "bytes") return formatBytes(v, digits);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

std::string figureName(const std::string& path, const json& stored)
{
    static const std::pair<const char*, const char*> kNames[] = {
        {"/cost/step_time_s", "step time"},
        {"/cost/compute_s", "compute time"},
        {"/cost/comm_s", "communication time"},
        {"/cost/exposed_comm_s", "exposed communication"},
        {"/cost/hidden_comm_s", "hidden communication"},
        {"/memory/per_device_bytes", "memory per device"},
        {"/memory/params_bytes", "parameter memory"},
        {"/memory/grads_bytes", "gradient memory"},
        {"/memory/optimizer_bytes", "optimizer memory"},
        {"/memory/activations_bytes", "activation memory"},
        {"/memory/capacity_bytes", "device capacity"},
        {"/memory/fits", "fits"},
    };
    if (path.starts_with("/cost/comm_by_kind/")) return path.substr(19) + " time";
    for (const auto& [p, name] : kNames)
        if (path == p) return name;
    // "/ops/17/compute_s" -> "op 'layers.0/mlp/fc1' compute_s"
    if (path.starts_with("/ops/")) {
        const auto slash = path.find('/', 5);
        if (slash != std::string::npos) {
            const size_t index = std::stoul(path.substr(5, slash - 5));
            const json& ops = stored["ops"];
            if (ops.is_array() && index < ops.size() && ops[index].is_object() && ops[index].contains("name") &&
                ops[index]["name"].is_string())
                return "op '" + ops[index]["name"].get<std::string>() + "' " + path.substr(slash + 1);
        }
    }
    return path.substr(1);
}

class Differ {
public:
    Differ(const json& storedRoot, std::vector<PlanDifference>& out) : root_(storedRoot), out_(out) {}

    void compare(const std::string& path, const std::string& key, const json* stored, const json* recomputed)
    {
        if (stored && recomputed) {
            if (stored->is_number() && recomputed->is_number()) {
                const double a = stored->get<double>(), b = recomputed->get<double>();
                if (std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b))) return;
                add(path, key, *stored, *recomputed);
                return;
            }
            if (stored->is_object() && recomputed->is_object()) {
                std::set<std::string> keys;
                for (auto it = stored->begin(); it != stored->end(); ++it) keys.insert(it.key());
                for (auto it = recomputed->begin(); it != recomputed->end(); ++it) keys.insert(it.key());
                for (const auto& k : keys) {
                    auto s = stored->find(k);
                    auto r = recomputed->find(k);
                    compare(path + "/" + jsonPointerEscape(k), k, s == stored->end() ? nullptr : &*s,
                            r == recomputed->end() ? nullptr : &*r);
                }
                return;
            }
            if (stored->is_array() && recomputed->is_array()) {
                if (stored->size() != recomputed->size()) {
                    PlanDifference d{path, json(stored->size()), json(recomputed->size()), {}};
                    d.message = "stored " + path.substr(1) + " has " + std::to_string(stored->size()) + " entries, recomputed " +
                                std::to_string(recomputed->size());
                    out_.push_back(std::move(d));
                    return;
                }
                for (size_t i = 0; i < stored->size(); ++i)
                    compare(path + "/" + std::to_string(i), key, &(*stored)[i], &(*recomputed)[i]);
                return;
            }
            if (*stored == *recomputed) return;
            add(path, key, *stored, *recomputed);
            return;
        }
        // A framework setting newer than the plan was read as its default: nothing differs.
        if (!stored && path.starts_with("/framework/")) return;
        PlanDifference d{path, stored ? *stored : json(), recomputed ? *recomputed : json(), {}};
        const std::string unitKey = path.starts_with("/cost/comm_by_kind/") ? key + "_s" : key;
        d.message = stored
                        ? "stored " + path.substr(1) + " is not part of a recomputed plan"
                        : "stored plan lacks " + path.substr(1) + " (recomputed " + formatFigure(unitKey, *recomputed, 6) + ")";
        out_.push_back(std::move(d));
    }

private:
    void add(const std::string& path, const std::string& rawKey, const json& stored, const json& recomputed)
    {
        // comm_by_kind holds seconds under collective names.
        const std::string key = path.starts_with("/cost/comm_by_kind/") ? rawKey + "_s" : rawKey;
        std::string a, b;
        for (int digits = 6; digits <= 17; ++digits) {
            a = formatFigure(key, stored, digits);
            b = formatFigure(key, recomputed, digits);
            if (a != b) break;
        }
        out_.push_back({path, stored, recomputed, "stored " + figureName(path, root_) + " " + a + ", recomputed " + b});
    }

    const json& root_;
    std::vector<PlanDifference>& out_;
};

} // namespace

LoadedPlan readPlanFile(const std::string& text, const std::string& origin)
{
    return readPlanJson(parseJsonText(text, origin), origin);
}

namespace {

// The model of a plan document: the effective builder config, or the embedded graph.
void readPlanModel(const JsonReader& r, const json& doc, PlanWorkspace& ws)
{
    const json& model = r.object(doc, "", "model");
    ws.model.name = r.string(model, "/model", "name");
    ws.model.source = r.string(model, "/model", "source");
    if (const json* config = r.optional(model, "config")) {
        if (!config->is_object()) r.fail("/model/config", "must be an object, not " + std::string(config->type_name()));
        ws.model.config = *config;
        ws.model.graph = r.within("/model/config", "", [&] { return buildModel(*config); });
    } else if (const json* graph = r.optional(model, "graph")) {
        ws.model.graph = r.within("/model/graph", "", [&] { return graphFromJson(*graph, "embedded graph"); });
    } else {
        r.fail("/model", "holds neither 'config' nor 'graph', so the model cannot be rebuilt");
    }
    r.within("/model", "", [&] { validateGraph(ws.model.graph); });
}

// Layer counts beyond any model's (a fuzzed file's) are refused before they become ints.
constexpr std::int64_t kMaxStoredLayers = 1 << 20;

// The pipeline's stored split (/pipeline/layers_of_stage, every stage's layers); empty when
// the file has none (files before balanced boundaries: the even split).
std::vector<int> readLayersOfStage(const JsonReader& r, const json& pipeline, const PipelineSchedule& schedule)
{
    const json* list = r.optional(pipeline, "layers_of_stage");
    if (!list) return {};
    const std::string path = "/pipeline/layers_of_stage";
    if (!list->is_array()) r.fail(path, "must be an array, not " + std::string(list->type_name()));
    if (list->size() != static_cast<size_t>(schedule.stages))
        r.fail(path, "has " + std::to_string(list->size()) + " entries for " + std::to_string(schedule.stages) + " stages");
    std::vector<int> split;
    for (size_t i = 0; i < list->size(); ++i) {
        const std::string at = path + "/" + std::to_string(i);
        const std::int64_t n = r.integer((*list)[i], at, 1);
        if (n > kMaxStoredLayers) r.fail(at, "is " + std::to_string(n) + ", at most " + std::to_string(kMaxStoredLayers));
        split.push_back(static_cast<int>(n));
    }
    return split;
}

// The stage of a model config cut from it again (cutStage: one path with the planner).
void cutStageAgain(const JsonReader& r, PlanWorkspace& ws, const PipelineSchedule& schedule, int stage, const std::vector<int>& split)
{
    const std::string name = ws.model.name;
    const LoadedModel wholeModel = std::move(ws.model);
    ws.model = {};
    r.within(split.empty() ? "/pipeline" : "/pipeline/layers_of_stage", "", [&] {
        cutStage(ws, stage, schedule, wholeModel, foldGraph(wholeModel.graph), split);
        return 0;
    });
    ws.model.name = name;
}

// A graph file's stage as stored: its graph is the plan's, its place in the pipeline its
// per_stage entry's.
void readStoredStage(const JsonReader& r, const json& pipeline, PlanWorkspace& ws, const PipelineSchedule& schedule, int stage)
{
    const json& list = r.field(pipeline, "/pipeline", "per_stage");
    if (!list.is_array()) r.fail("/pipeline/per_stage", "must be an array, not " + std::string(list.type_name()));
    PipelineStageInfo& info = ws.stage;
    info.stage = stage;
    info.schedule = schedule;
    bool found = false;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string path = "/pipeline/per_stage/" + std::to_string(i);
        const json& entry = list[i];
        if (!entry.is_object()) r.fail(path, "must be an object, not " + std::string(entry.type_name()));
        const std::int64_t layers = r.integer(r.field(entry, path, "layers"), path + "/layers", 0);
        if (layers > kMaxStoredLayers)
            r.fail(path + "/layers", "is " + std::to_string(layers) + ", at most " + std::to_string(kMaxStoredLayers));
        const std::int64_t standsFor = r.integer(r.field(entry, path, "stands_for"), path + "/stands_for", 1);
        if (info.layersOfStage.size() + static_cast<size_t>(standsFor) > static_cast<size_t>(schedule.stages))
            r.fail(path + "/stands_for", "makes more than the pipeline's " + std::to_string(schedule.stages) + " stages");
        info.layersOfStage.insert(info.layersOfStage.end(), static_cast<size_t>(standsFor), static_cast<int>(layers));
        if (r.integer(r.field(entry, path, "stage"), path + "/stage", 0) != stage) continue;
        found = true;
        info.layers = static_cast<int>(layers);
        const std::int64_t firstLayer = r.integer(r.field(entry, path, "first_layer"), path + "/first_layer", 0);
        if (firstLayer > kMaxStoredLayers)
            r.fail(path + "/first_layer", "is " + std::to_string(firstLayer) + ", at most " + std::to_string(kMaxStoredLayers));
        info.firstLayer = static_cast<int>(firstLayer);
        info.receivedBytes = r.number(r.field(entry, path, "received_bytes"), path + "/received_bytes");
        info.sentBytes = r.number(r.field(entry, path, "sent_bytes"), path + "/sent_bytes");
        if (info.receivedBytes < 0) r.fail(path + "/received_bytes", "is negative");
        if (info.sentBytes < 0) r.fail(path + "/sent_bytes", "is negative");
    }
    if (!found) r.fail("/pipeline/per_stage", "has no entry for stage " + std::to_string(stage));
    if (std::vector<int> split = readLayersOfStage(r, pipeline, schedule); !split.empty()) info.layersOfStage = std::move(split);
    // The stack's shape (written since the layer stacks of several kinds; 1, 0, 0 before).
    auto count = [&](const char* key, std::int64_t fallback, std::int64_t least) {
        const json* v = r.optional(pipeline, key);
        const std::int64_t n = v ? r.integer(*v, std::string("/pipeline/") + key, least) : fallback;
        if (n > kMaxStoredLayers)
            r.fail(std::string("/pipeline/") + key, "is " + std::to_string(n) + ", at most " + std::to_string(kMaxStoredLayers));
        return static_cast<int>(n);
    };
    info.period = count("period", 1, 1);
    info.layersPerPeriod = count("layers_per_period", info.period, 1);
    info.layersBefore = count("layers_before", 0, 0);
    info.layersAfter = count("layers_after", 0, 0);
}

// A pipelined plan's stage (its "pipeline" object): the whole model in `ws` becomes the stage
// the ops describe, cut as the planner cut it, on `stageMesh`; its share of the pipeline goes
// into the cost settings.
void readPlanPipeline(const JsonReader& r, const json& pipeline, PlanWorkspace& ws, const std::string& stageMesh,
                      CostSettings& settings)
{
    if (!pipeline.is_object()) r.fail("/pipeline", "must be an object, not " + std::string(pipeline.type_name()));
    const std::string wholeShape = r.string(pipeline, "/pipeline", "mesh");
    const Mesh whole = r.within("/pipeline/mesh", "", [&] { return parseMesh(wholeShape, ws.hardware); });
    const int stages = static_cast<int>(r.integer(r.field(pipeline, "/pipeline", "stages"), "/pipeline/stages", 2));
    const std::string word = r.string(pipeline, "/pipeline", "schedule");
    const PipelineSchedule schedule = r.within("/pipeline/schedule", "", [&] { return parseSchedule(stages, word); });
    const std::string expected = r.within("/pipeline/stages", "", [&] { return stageMeshText(whole, stages); });
    if (expected != stageMesh)
        r.fail("/mesh/shape", "is '" + stageMesh + "', but a stage of " + std::to_string(stages) + " over mesh " + wholeShape +
                                  " runs on '" + expected + "'");
    const std::int64_t stage = r.integer(r.field(pipeline, "/pipeline", "stage"), "/pipeline/stage", 0);
    if (stage >= stages)
        r.fail("/pipeline/stage", "is " + std::to_string(stage) + ", expected 0 to " + std::to_string(stages - 1));
    if (ws.model.config.is_null()) {
        // A graph file's plan holds the stage's own graph (/model/graph); its place in the
        // pipeline comes from its per_stage entry.
        readStoredStage(r, pipeline, ws, schedule, static_cast<int>(stage));
    } else {
        cutStageAgain(r, ws, schedule, static_cast<int>(stage), readLayersOfStage(r, pipeline, schedule));
    }
    ws.stage.link = whole.axes.at(0);
    applyStageSettings(settings, schedule, static_cast<int>(stage));
}

// The hardware of a plan document: a preset by name, or the embedded spec. Returns the name.
std::string readPlanHardware(const JsonReader& r, const json& doc, PlanWorkspace& ws)
{
    const json& hardware = r.object(doc, "", "hardware");
    const std::string hardwareName = r.string(hardware, "/hardware", "name");
    if (const json* spec = r.optional(hardware, "spec")) {
        if (!spec->is_object()) r.fail("/hardware/spec", "must be an object, not " + std::string(spec->type_name()));
        ws.hardware = r.within("/hardware/spec", "", [&] { return hardwareFromJson(spec->dump(), "spec"); });
    } else {
        const auto presets = hardwarePresetNames();
        if (std::find(presets.begin(), presets.end(), hardwareName) == presets.end()) {
            std::string known;
            for (const auto& n : presets) known += (known.empty() ? "" : ", ") + n;
            r.fail("/hardware/name", "'" + hardwareName + "' is not a preset (" + known + ") and the plan holds no 'spec'");
        }
        ws.hardware = loadHardware(hardwareName);
    }
    return hardwareName;
}

// Op entry i of a plan document (the op `id`, i-th in topological order): its name, strategy
// (valid and a candidate), recompute mode, lock and output specs (valid).
void readPlanOp(const JsonReader& r, const json& ops, size_t i, OpId id, const PlanWorkspace& ws, SearchResult& result)
{
    const CostModel& cm = *ws.costModel;
    const Graph& g = ws.model.graph;
    const std::string p = "/ops/" + std::to_string(i);
    const json& entry = ops[i];
    if (!entry.is_object()) r.fail(p, "must be an object, not " + std::string(entry.type_name()));
    const Op& op = g.op(id);
    const std::string name = r.string(entry, p, "name");
    if (name != op.name)
        r.fail(p + "/name",
               "is '" + name + "', but op " + std::to_string(i) + " of the model (topological order) is '" + op.name + "'");
    const std::string opLabel = "op '" + op.name + "': ";
    const json& strategyField = r.field(entry, p, "strategy");
    if (!strategyField.is_string())
        r.fail(p + "/strategy", opLabel + "must be a string such as \"b=x,f=y\" or \"-\", not " + strategyField.dump());
    const std::string text = strategyField.get<std::string>();
    const Signature& sig = cm.signature(id);
    const OpStrategy st = r.within(p + "/strategy", opLabel, [&] { return parseStrategy(text, sig, ws.mesh); });
    const int index = cm.findStrategy(id, st);
    if (index < 0)
        r.fail(p + "/strategy", opLabel + "strategy '" + text +
                                    "' is not a candidate (axes on one dim go in mesh order; size-1 axes split nothing)");
    result.strategyOfOp[static_cast<size_t>(id)] = index;
    if (const json* rc = r.optional(entry, "recompute")) {
        if (!rc->is_string()) r.fail(p + "/recompute", opLabel + "must be a string, not " + rc->dump());
        const std::string v = rc->get<std::string>();
        bool known = false;
        for (Recompute m : {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::Op})
            if (recomputeName(m) == v) {
                result.recomputeOfOp[static_cast<size_t>(id)] = m;
                known = true;
            }
        if (!known) r.fail(p + "/recompute", opLabel + "is '" + v + "', expected none, selective, full or op");
    }
    if (const json* locked = r.optional(entry, "locked"))
        result.lockedOp[static_cast<size_t>(id)] = r.boolean(*locked, p + "/locked");
    const json& outputs = r.field(entry, p, "outputs");
    if (!outputs.is_array()) r.fail(p + "/outputs", opLabel + "must be an array, not " + std::string(outputs.type_name()));
    if (outputs.size() != op.outputs.size())
        r.fail(p + "/outputs", opLabel + "has " + std::to_string(outputs.size()) + " specs, the op has " +
                                   std::to_string(op.outputs.size()) + " outputs");
    for (size_t k = 0; k < outputs.size(); ++k) {
        const std::string q = p + "/outputs/" + std::to_string(k);
        if (!outputs[k].is_string()) r.fail(q, opLabel + "must be a string, not " + outputs[k].dump());
        const auto& shapeOf = g.tensor(op.outputs[k]).shape;
        r.within(q, opLabel, [&] { return parseSpec(outputs[k].get<std::string>(), shapeOf, ws.mesh); });
    }
}

// Ops: names in topological order, each strategy valid and a candidate, output specs valid.
void readPlanOps(const JsonReader& r, const json& doc, const PlanWorkspace& ws, SearchResult& result)
{
    const Graph& g = ws.model.graph;
    const json& ops = r.field(doc, "", "ops");
    if (!ops.is_array()) r.fail("/ops", "must be an array, not " + std::string(ops.type_name()));
    const auto order = g.topologicalOrder();
    if (ops.size() != order.size())
        r.fail("/ops", "has " + std::to_string(ops.size()) + " entries, the model has " + std::to_string(order.size()) + " ops");
    result.strategyOfOp.assign(g.ops.size(), 0);
    result.recomputeOfOp.assign(g.ops.size(), Recompute::None);
    result.lockedOp.assign(g.ops.size(), false);
    for (size_t i = 0; i < order.size(); ++i) readPlanOp(r, ops, i, order[i], ws, result);
}

// What only the search knew (method, timings, table counts, its memory limit), carried over.
void readSearchMetadata(const JsonReader& r, const json& doc, SearchResult& result)
{
    if (const json* search = r.optional(doc, "search"); search && search->is_object()) {
        if (const json* v = r.optional(*search, "method")) {
            if (!v->is_string()) r.fail("/search/method", "must be a string, not " + v->dump());
            result.method = v->get<std::string>();
        }
        if (const json* v = r.optional(*search, "time_ms")) result.searchMs = r.number(*v, "/search/time_ms");
        if (const json* v = r.optional(*search, "block_classes"))
            result.blockClasses = static_cast<int>(r.integer(*v, "/search/block_classes", 0));
        if (const json* v = r.optional(*search, "ops_searched"))
            result.opsSearched = static_cast<int>(r.integer(*v, "/search/ops_searched", 0));
        if (const json* v = r.optional(*search, "tables_solved"))
            result.tablesSolved = static_cast<int>(r.integer(*v, "/search/tables_solved", 0));
        if (const json* v = r.optional(*search, "prices_tried"))
            result.pricesTried = static_cast<int>(r.integer(*v, "/search/prices_tried", 0));
        if (const json* v = r.optional(*search, "lambda")) result.lambda = r.number(*v, "/search/lambda");
    }
    if (const json* memory = r.optional(doc, "memory"); memory && memory->is_object())
        if (const json* v = r.optional(*memory, "limit_bytes")) result.memoryLimitBytes = r.number(*v, "/memory/limit_bytes");
    result.fits = result.memoryLimitBytes <= 0 || result.breakdown.perDeviceBytes <= result.memoryLimitBytes;
}

} // namespace

LoadedPlan readPlanJson(const json& doc, const std::string& origin)
{
    const JsonReader r(origin);
    r.envelope(doc, "plan", "tpstudio.plan", kPlanFormatVersion);

    LoadedPlan plan;
    plan.stored = doc;
    plan.workspace = std::make_unique<PlanWorkspace>();
    PlanWorkspace& ws = *plan.workspace;
    readPlanModel(r, doc, ws);
    const std::string hardwareName = readPlanHardware(r, doc, ws);

    // Link overrides (PlanRequest::intraNodeGBps, ...), applied as preparePlan applies them.
    const json& hardware = r.object(doc, "", "hardware");
    double links[2] = {0, 0};
    for (int k = 0; k < 2; ++k)
        if (const json* v = r.optional(hardware, k == 0 ? "intra_node_GBps" : "inter_node_GBps")) {
            const std::string q = k == 0 ? "/hardware/intra_node_GBps" : "/hardware/inter_node_GBps";
            links[k] = r.number(*v, q);
            if (!(links[k] > 0)) r.fail(q, "is " + v->dump() + ", expected a positive bandwidth in GB/s");
        }
    applyLinkOverrides(ws.hardware, links[0], links[1]);

    const json& mesh = r.object(doc, "", "mesh");
    const std::string shape = r.string(mesh, "/mesh", "shape");
    ws.mesh = r.within("/mesh/shape", "", [&] { return parseMesh(shape, ws.hardware); });

    const std::string mode = r.string(doc, "", "mode");
    if (mode != "train" && mode != "infer") r.fail("/mode", "is '" + mode + "', expected 'train' or 'infer'");
    CostSettings settings;
    settings.training = mode == "train";
    settings.microBatch = r.integer(r.field(doc, "", "micro_batch"), "/micro_batch", 0);
    if (const json* chunks = r.optional(doc, "overlap_chunks"))
        settings.overlapChunks = static_cast<int>(r.integer(*chunks, "/overlap_chunks", 1));
    // Plans written before these settings existed are read with the defaults.
    if (const json* fw = r.optional(doc, "framework")) {
        if (!fw->is_object()) r.fail("/framework", "must be an object, not " + std::string(fw->type_name()));
        auto flag = [&](const char* key, bool& into) {
            if (const json* v = r.optional(*fw, key)) {
                if (!v->is_boolean()) r.fail(std::string("/framework/") + key, "must be true or false, not " + v->dump());
                into = v->get<bool>();
            }
        };
        flag("grad_overlap", settings.overlapGradientReduction);
        flag("tp_overlap", settings.overlapTensorParallelBackward);
        flag("scatter_gather", settings.pipelineScatterGather);
        flag("reshard_after_forward", settings.reshardAfterForward);
        flag("fp8_matmuls", settings.fp8Matmuls);
        if (const json* v = r.optional(*fw, "grad_bucket_mib")) {
            const double mib = r.number(*v, "/framework/grad_bucket_mib");
            if (!(mib >= 0 && mib <= 1e6)) r.fail("/framework/grad_bucket_mib", "is " + v->dump() + ", expected 0 to 1000000");
            settings.gradientBucketBytes = mib * 1024 * 1024;
        }
        if (const json* v = r.optional(*fw, "zero")) {
            const std::int64_t stage = r.integer(*v, "/framework/zero", 0);
            if (stage > 3) r.fail("/framework/zero", "is " + v->dump() + ", expected 0, 1, 2 or 3");
            settings.zeroStage = static_cast<int>(stage);
        }
        if (const json* v = r.optional(*fw, "zero_shard")) {
            if (!v->is_string() || (*v != "all" && *v != "node"))
                r.fail("/framework/zero_shard", "is " + v->dump() + ", expected \"all\" or \"node\"");
            settings.zeroAcrossNodes = *v == "all";
        }
        auto bytesPerParam = [&](const char* key, double& into) {
            if (const json* v = r.optional(*fw, key)) {
                const double b = r.number(*v, std::string("/framework/") + key);
                if (!(b >= 0 && b <= 64))
                    r.fail(std::string("/framework/") + key, "is " + v->dump() + ", expected 0 to 64 bytes");
                into = b;
            }
        };
        bytesPerParam("grad_bytes_per_param", settings.gradBytesPerParam);
        bytesPerParam("optimizer_bytes_per_param", settings.optimizerBytesPerParam);
    }
    r.integer(r.field(doc, "", "batch"), "/batch", 0);
    r.integer(r.field(doc, "", "seq"), "/seq", 0);
    if (const json* pipeline = r.optional(doc, "pipeline")) readPlanPipeline(r, *pipeline, ws, shape, settings);

    // The same set-up as preparePlan (planner.cpp): one workspace builder.
    buildWorkspace(ws, settings);
    const CostModel& cm = *ws.costModel;
    PlanContext& c = ws.context;
    c.hardwareName = hardwareName;
    c.mode = mode;
    c.intraNodeGBps = links[0];
    c.interNodeGBps = links[1];

    readPlanOps(r, doc, ws, plan.result);
    SearchResult& result = plan.result;

    // Re-cost without searching; carry over what only the search knew.
    const std::vector<bool> locked = result.lockedOp;
    const std::vector<Recompute> recompute = result.recomputeOfOp;
    result = evaluatePlan(cm, &ws.folded, result.strategyOfOp, recompute, "evaluated");
    result.lockedOp = locked;
    result.blockClasses = static_cast<int>(ws.folded.classes.size());
    readSearchMetadata(r, doc, result);

    const json recomputed = planDocument(plan);
    Differ(plan.stored, plan.differences).compare("", "", &plan.stored, &recomputed);
    // The totals first (step time, then the rest of the cost, then memory), then per-op figures.
    auto rank = [](const PlanDifference& d) {
        if (d.path == "/cost/step_time_s") return 0;
        if (d.path.starts_with("/cost/")) return 1;
        if (d.path.starts_with("/memory/")) return 2;
        return 3;
    };
    std::stable_sort(plan.differences.begin(), plan.differences.end(),
                     [&](const PlanDifference& a, const PlanDifference& b) { return rank(a) < rank(b); });
    return plan;
}

json planDocument(const LoadedPlan& plan)
{
    const PlanWorkspace& ws = *plan.workspace;
    json doc = planToJson(ws.context, *ws.costModel, ws.folded, plan.result);
    // Search metadata (method, timings, table counts) records how the plan was found; it is
    // provenance, not a figure to recompute, so it is kept as stored.
    if (plan.stored.contains("search") && plan.stored["search"].is_object()) doc["search"] = plan.stored["search"];
    // The pipeline's other stages are not in the file (only the stage its ops describe, whose
    // figures are recomputed above): the pipeline object is kept as stored.
    if (plan.stored.contains("pipeline")) doc["pipeline"] = plan.stored["pipeline"];
    // An embedded hardware spec is kept as stored: it parses to this hardware, and re-deriving
    // it could change the last digit of a unit conversion.
    if (plan.stored.contains("hardware") && plan.stored["hardware"].contains("spec") && doc["hardware"].contains("spec"))
        doc["hardware"]["spec"] = plan.stored["hardware"]["spec"];
    return doc;
}

// ---------------------------------------------------------------------------------------------
// Project files

json projectToJson(const ProjectFile& p)
{
    json settings = {{"model", p.model},
                     {"mesh", p.mesh},
                     {"hardware", p.hardware},
                     {"batch", p.batch},
                     {"seq", p.seq},
                     {"mode", p.mode},
                     {"memory_limit", p.memoryLimit},
                     {"intra_node_GBps", p.intraNodeGBps},
                     {"inter_node_GBps", p.interNodeGBps}};
    if (p.microBatch == kAuto)
        settings["micro_batch"] = "auto";
    else
        settings["micro_batch"] = p.microBatch;
    if (p.zero == kAuto)
        settings["zero"] = "auto";
    else
        settings["zero"] = p.zero;
    if (!p.overrides.empty()) settings["overrides"] = p.overrides;
    if (p.overlapChunks != 1) settings["overlap_chunks"] = p.overlapChunks;
    // Written only when set, so that projects without a pipeline read and write as before.
    if (p.pipeline == kAuto)
        settings["pipeline"] = "auto";
    else if (p.pipeline != 1)
        settings["pipeline"] = p.pipeline;
    if (p.schedule != "1f1b") settings["schedule"] = p.schedule;
    if (p.stageLayers != "even") settings["stage_layers"] = p.stageLayers;
    json doc = json::object();
    doc["format"] = "tpstudio.project";
    doc["version"] = kProjectFileVersion;
    doc["settings"] = std::move(settings);
    doc["locks"] = p.locks;
    doc["view"] = p.view;
    return doc;
}

std::string writeProjectJson(const ProjectFile& project) { return projectToJson(project).dump(2) + "\n"; }

ProjectFile readProjectJson(const std::string& text, const std::string& origin)
{
    const JsonReader r(origin);
    const json doc = parseJsonText(text, origin);
    r.envelope(doc, "project", "tpstudio.project", kProjectFileVersion);

    ProjectFile p;
    const json& s = r.object(doc, "", "settings");
    p.model = r.string(s, "/settings", "model");
    if (p.model.empty()) r.fail("/settings/model", "is empty");
    if (const json* overrides = r.optional(s, "overrides")) {
        if (!overrides->is_array()) r.fail("/settings/overrides", "must be an array, not " + std::string(overrides->type_name()));
        for (size_t i = 0; i < overrides->size(); ++i) {
            const std::string q = "/settings/overrides/" + std::to_string(i);
            const json& v = (*overrides)[i];
            if (!v.is_string()) r.fail(q, "must be a string, not " + v.dump());
            if (v.get<std::string>().find('=') == std::string::npos) r.fail(q, "'" + v.get<std::string>() + "' is not key=value");
            p.overrides.push_back(v.get<std::string>());
        }
    }
    p.mesh = r.string(s, "/settings", "mesh");
    Hardware any;
    any.intraNode.bandwidth = any.interNode.bandwidth = 1;
    r.within("/settings/mesh", "", [&] { return parseMesh(p.mesh, any); });
    p.hardware = r.string(s, "/settings", "hardware");
    if (p.hardware.empty()) r.fail("/settings/hardware", "is empty");
    auto optionalInt = [&](const char* key) -> std::int64_t {
        const json* v = r.optional(s, key);
        return v ? r.integer(*v, std::string("/settings/") + key, 0) : 0;
    };
    auto optionalNumber = [&](const char* key) -> double {
        const json* v = r.optional(s, key);
        if (!v) return 0;
        const double x = r.number(*v, std::string("/settings/") + key);
        if (x < 0) r.fail(std::string("/settings/") + key, "is " + v->dump() + ", must not be negative");
        return x;
    };
    p.batch = optionalInt("batch");
    p.seq = optionalInt("seq");
    // "auto" or a number; absent: auto (a project written before the planner chose them).
    auto autoOrInt = [&](const char* key, std::int64_t max) -> std::int64_t {
        const json* v = r.optional(s, key);
        if (!v || (v->is_string() && v->get<std::string>() == "auto")) return kAuto;
        if (v->is_string()) r.fail(std::string("/settings/") + key, "is " + v->dump() + ", expected \"auto\" or a number");
        const std::int64_t x = r.integer(*v, std::string("/settings/") + key, 0);
        if (x > max) r.fail(std::string("/settings/") + key, "is " + v->dump() + ", at most " + std::to_string(max));
        return x;
    };
    p.microBatch = autoOrInt("micro_batch", std::int64_t{1} << 40);
    p.zero = static_cast<int>(autoOrInt("zero", 3));
    // Absent: no pipeline (a project written before pipelines).
    p.pipeline = r.optional(s, "pipeline") ? static_cast<int>(autoOrInt("pipeline", 4096)) : 1;
    if (p.pipeline == 0) r.fail("/settings/pipeline", "is 0, expected \"auto\" or a number of stages from 1");
    if (r.optional(s, "schedule")) {
        p.schedule = r.string(s, "/settings", "schedule");
        if (p.schedule != "auto")
            r.within("/settings/schedule", "", [&] { return parseSchedule(p.pipeline > 1 ? p.pipeline : 2, p.schedule); });
    }
    // Absent: the even split (a project written before balanced boundaries).
    if (r.optional(s, "stage_layers")) {
        p.stageLayers = r.string(s, "/settings", "stage_layers");
        r.within("/settings/stage_layers", "", [&] { return parseStageLayers(p.stageLayers); });
    }
    p.intraNodeGBps = optionalNumber("intra_node_GBps");
    p.interNodeGBps = optionalNumber("inter_node_GBps");
    if (const json* chunks = r.optional(s, "overlap_chunks")) {
        const std::int64_t k = r.integer(*chunks, "/settings/overlap_chunks", 1);
        if (k > kMaxOverlapChunks)
            r.fail("/settings/overlap_chunks", "is " + chunks->dump() + ", at most " + std::to_string(kMaxOverlapChunks));
        p.overlapChunks = static_cast<int>(k);
    }
    if (r.optional(s, "mode")) p.mode = r.string(s, "/settings", "mode");
    if (p.mode != "train" && p.mode != "infer") r.fail("/settings/mode", "is '" + p.mode + "', expected 'train' or 'infer'");
    if (r.optional(s, "memory_limit")) p.memoryLimit = r.string(s, "/settings", "memory_limit");
    if (!p.memoryLimit.empty() && p.memoryLimit != "none")
        r.within("/settings/memory_limit", "", [&] { return parseBytes(p.memoryLimit); });
    if (const json* locks = r.optional(doc, "locks")) {
        if (!locks->is_array()) r.fail("/locks", "must be an array, not " + std::string(locks->type_name()));
        for (size_t i = 0; i < locks->size(); ++i) {
            const std::string q = "/locks/" + std::to_string(i);
            const json& v = (*locks)[i];
            if (!v.is_string()) r.fail(q, "must be a string, not " + v.dump());
            r.within(q, "", [&] { return parseLockRequest(v.get<std::string>()); });
            p.locks.push_back(v.get<std::string>());
        }
    }
    if (const json* view = r.optional(doc, "view")) {
        if (!view->is_object()) r.fail("/view", "must be an object, not " + std::string(view->type_name()));
        p.view = *view;
    }
    return p;
}

PlanRequest planRequestOf(const ProjectFile& p)
{
    PlanRequest request;
    request.model = p.model;
    request.modelOptions.overrides = p.overrides;
    request.modelOptions.batch = p.batch;
    request.modelOptions.seq = p.seq;
    request.mesh = p.mesh;
    request.hardware = p.hardware;
    request.mode = p.mode;
    request.memoryLimit = p.memoryLimit;
    request.microBatch = p.microBatch;
    request.zero = p.zero;
    request.pipeline = p.pipeline;
    request.schedule = p.schedule;
    request.stageLayers = p.stageLayers;
    request.overlapChunks = p.overlapChunks;
    request.intraNodeGBps = p.intraNodeGBps;
    request.interNodeGBps = p.interNodeGBps;
    request.locks = p.locks;
    return request;
}

std::vector<std::string> overridesFromConfig(const std::string& name, const nlohmann::json& config)
{
    std::vector<std::string> out;
    if (!isBuiltinModel(name) || !config.is_object()) return out;
    const ModelConfig base = builtinModelConfig(name);
    for (const auto& [key, value] : config.items()) {
        // vocab_multiple: the planner pads for the mesh it plans on (planner.cpp).
        if (key == "name" || key == "batch" || key == "seq" || key == "vocab_multiple") continue;
        if (base.contains(key) && base[key] == value) continue;
        if (value.is_string())
            out.push_back(key + "=" + value.get<std::string>());
        else if (value.is_array()) {
            std::string text; // "3,4,23,3", the form --set takes for lists
            for (const auto& v : value) text += (text.empty() ? "" : ",") + v.dump();
            out.push_back(key + "=" + text);
        } else
            out.push_back(key + "=" + value.dump());
    }
    return out;
}

ProjectFile projectOfPlan(const json& doc, const std::string& origin)
{
    const JsonReader r(origin);
    r.envelope(doc, "plan", "tpstudio.plan", kPlanFormatVersion);
    ProjectFile p;
    // Optional fields keep the project's defaults; present ones must have the right type.
    auto text = [&](const json& object, const std::string& path, const char* key, std::string& out) {
        if (const json* v = r.optional(object, key)) {
            if (!v->is_string()) r.fail(path + "/" + key, "must be a string, not " + v->dump());
            out = v->get<std::string>();
        }
    };
    auto whole = [&](const json& object, const std::string& path, const char* key, std::int64_t min, std::int64_t& out) {
        if (const json* v = r.optional(object, key)) out = r.integer(*v, path + "/" + key, min);
    };
    auto real = [&](const json& object, const std::string& path, const char* key, double& out) {
        if (const json* v = r.optional(object, key)) out = r.number(*v, path + "/" + key);
    };
    const json& model = r.object(doc, "", "model");
    p.model = r.string(model, "/model", "source");
    if (const json* config = r.optional(model, "config")) p.overrides = overridesFromConfig(p.model, *config);
    text(r.object(doc, "", "mesh"), "/mesh", "shape", p.mesh);
    const json& hardware = r.object(doc, "", "hardware");
    text(hardware, "/hardware", "name", p.hardware);
    real(hardware, "/hardware", "intra_node_GBps", p.intraNodeGBps);
    real(hardware, "/hardware", "inter_node_GBps", p.interNodeGBps);
    whole(doc, "", "batch", 0, p.batch);
    whole(doc, "", "seq", 0, p.seq);
    whole(doc, "", "micro_batch", 0, p.microBatch);
    // A plan's micro-batch and ZeRO stage are what it was made with: the project keeps them.
    if (const json* fw = r.optional(doc, "framework"); fw && fw->is_object()) {
        std::int64_t stage = 0;
        whole(*fw, "/framework", "zero", 0, stage);
        if (stage > 3) r.fail("/framework/zero", "is " + std::to_string(stage) + ", expected 0, 1, 2 or 3");
        p.zero = static_cast<int>(stage);
    } else {
        p.zero = 0;
    }
    text(doc, "", "mode", p.mode);
    std::int64_t chunks = 1;
    whole(doc, "", "overlap_chunks", 1, chunks);
    if (chunks > kMaxOverlapChunks)
        r.fail("/overlap_chunks", "is " + std::to_string(chunks) + ", expected 1 to " + std::to_string(kMaxOverlapChunks));
    p.overlapChunks = static_cast<int>(chunks);
    // The limit the plan was searched under: none (0), the capacity, or a number of bytes.
    if (const json* memory = r.optional(doc, "memory"); memory && memory->is_object()) {
        double limit = -1, capacity = 0;
        real(*memory, "/memory", "limit_bytes", limit);
        real(*memory, "/memory", "capacity_bytes", capacity);
        if (limit == 0)
            p.memoryLimit = "none";
        else if (limit > 0 && limit != capacity)
            p.memoryLimit = std::to_string(static_cast<long long>(limit));
    }
    // A pipelined plan's project is the whole pipeline: its mesh, stages and schedule.
    if (const json* pipeline = r.optional(doc, "pipeline"); pipeline && pipeline->is_object()) {
        text(*pipeline, "/pipeline", "mesh", p.mesh);
        std::int64_t stages = 1;
        whole(*pipeline, "/pipeline", "stages", 1, stages);
        if (stages > 4096) r.fail("/pipeline/stages", "is " + std::to_string(stages) + ", expected 1 to 4096");
        p.pipeline = static_cast<int>(stages);
        text(*pipeline, "/pipeline", "schedule", p.schedule);
        // Its boundaries: fixed as the plan has them when they are not the even split.
        if (const json* split = r.optional(*pipeline, "layers_of_stage"); split && split->is_array() && split->size() >= 2) {
            const json& first = split->front();
            const json& last = split->back();
            if (first.is_number_integer() && last.is_number_integer() && first.get<std::int64_t>() >= 1 &&
                last.get<std::int64_t>() >= 1 && first.get<std::int64_t>() <= (1 << 20) && last.get<std::int64_t>() <= (1 << 20)) {
                bool even = true;
                for (const auto& n : *split) even = even && n == first;
                if (!even) p.stageLayers = std::to_string(first.get<std::int64_t>()) + "," + std::to_string(last.get<std::int64_t>());
            }
        }
    }
    // The plan's own choices come back as locks only where the user had locked them.
    if (const json* ops = r.optional(doc, "ops"); ops && ops->is_array())
        for (size_t i = 0; i < ops->size(); ++i) {
            const json& op = (*ops)[i];
            const std::string path = "/ops/" + std::to_string(i);
            const json* locked = r.optional(op, "locked");
            if (!locked || !r.boolean(*locked, path + "/locked")) continue;
            p.locks.push_back(r.string(op, path, "name") + "=" + r.string(op, path, "strategy"));
        }
    return p;
}

} // namespace tp
