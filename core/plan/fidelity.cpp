#include "fidelity.h"

#include "../util/json_reader.h"
#include "builtin_resources.h"

namespace tp {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "tpstudio.published-runs";
constexpr std::int64_t kVersion = 1;

bool flag(const JsonReader& r, const json& run, const std::string& path, const char* key, bool fallback)
{
    const json* v = r.optional(run, key);
    return v ? r.boolean(*v, path + "/" + key) : fallback;
}

PublishedRun readRun(const JsonReader& r, const json& run, const std::string& path)
{
    if (!run.is_object()) r.fail(path, "must be an object, not " + std::string(run.type_name()));
    PublishedRun p;
    p.name = r.string(run, path, "name");
    p.source = r.string(run, path, "source");
    PlanRequest& q = p.request;
    q.model = r.string(run, path, "model");
    if (const json* sets = r.optional(run, "set")) {
        if (!sets->is_array()) r.fail(path + "/set", "must be a list of \"key=value\" strings");
        for (size_t i = 0; i < sets->size(); ++i) {
            const json& s = (*sets)[i];
            if (!s.is_string() || s.get<std::string>().find('=') == std::string::npos)
                r.fail(path + "/set/" + std::to_string(i), "must be a \"key=value\" string, not " + s.dump());
            q.modelOptions.overrides.push_back(s.get<std::string>());
        }
    }
    q.modelOptions.batch = r.integer(r.field(run, path, "batch"), path + "/batch", 1);
    q.microBatch = r.integer(r.field(run, path, "micro_batch"), path + "/micro_batch", 1);
    q.mesh = r.string(run, path, "mesh");
    q.hardware = r.string(run, path, "hardware");
    q.baseline = r.string(run, path, "layout");
    if (q.baseline != "megatron" && q.baseline != "megatron-sp" && q.baseline != "dp" && q.baseline != "search")
        r.fail(path + "/layout", "is '" + q.baseline + "', expected megatron, megatron-sp, dp or search");
    if (q.baseline == "search") q.baseline.clear();
    q.zero = 0; // as the runs before ZeRO were run, unless the run says
    if (const json* z = r.optional(run, "zero")) {
        const std::int64_t stage = r.integer(*z, path + "/zero", 0);
        if (stage > 3) r.fail(path + "/zero", "is " + z->dump() + ", expected 0, 1, 2 or 3");
        q.zero = static_cast<int>(stage);
    }
    if (const json* pp = r.optional(run, "pipeline")) {
        const std::int64_t stages = r.integer(*pp, path + "/pipeline", 1);
        if (stages > 4096) r.fail(path + "/pipeline", "is " + pp->dump() + ", expected 1 to 4096 stages");
        q.pipeline = static_cast<int>(stages);
    }
    if (r.optional(run, "schedule")) {
        q.schedule = r.string(run, path, "schedule");
        r.within(path + "/schedule", "", [&] { return parseSchedule(q.pipeline, q.schedule); });
    }
    q.recompute = r.string(run, path, "recompute");
    r.within(path + "/recompute", "", [&] { return recomputeOf(q.recompute); });
    q.overlapGradients = flag(r, run, path, "grad_overlap", true);
    q.overlapTensorParallel = flag(r, run, path, "tp_overlap", false);
    q.pipelineScatterGather = flag(r, run, path, "scatter_gather", true);
    q.memoryLimit = "none"; // the run ran: cost it as it was, whatever the capacity says
    if (const json* s = r.optional(run, "step_s")) {
        p.stepSeconds = r.number(*s, path + "/step_s");
        if (!(*p.stepSeconds > 0)) r.fail(path + "/step_s", "must be a positive number of seconds");
    }
    if (const json* l = r.optional(run, "layer_ms")) {
        if (!l->is_array() || l->size() != 2 || !(*l)[0].is_number() || !(*l)[1].is_number() || !((*l)[0].get<double>() > 0) ||
            !((*l)[1].get<double>() > 0))
            r.fail(path + "/layer_ms", "must be [forward ms, backward ms], both positive, not " + l->dump());
        p.layerSeconds = std::make_pair((*l)[0].get<double>() / 1e3, (*l)[1].get<double>() / 1e3);
    }
    if (!p.stepSeconds && !p.layerSeconds) r.fail(path, "needs a measured 'step_s' or 'layer_ms'");
    return p;
}

} // namespace

std::vector<PublishedRun> readPublishedRuns(const std::string& text, const std::string& origin)
{
    const json doc = parseJsonText(text, origin);
    const JsonReader r(origin);
    r.envelope(doc, "a published-runs file", kFormat, kVersion);
    const json& runs = r.array(doc, "", "runs");
    std::vector<PublishedRun> out;
    for (size_t i = 0; i < runs.size(); ++i) out.push_back(readRun(r, runs[i], "/runs/" + std::to_string(i)));
    return out;
}

std::vector<PublishedRun> builtinPublishedRuns()
{
    for (const auto& res : builtinResources())
        if (std::string(res.path) == "fidelity/published-runs.json")
            return readPublishedRuns(std::string(res.content), "published-runs.json");
    return {};
}

RunPrediction predictRun(const PublishedRun& run)
{
    RunPrediction p;
    std::shared_ptr<const PlanWorkspace> ws;
    SearchResult r;
    if (run.request.pipeline > 1) {
        // A pipeline is its stages, each planned on its own (Planner::plan); the slowest sets
        // the step, and the layer is timed on it.
        Planner planner;
        PlannerResult planned = planner.plan(run.request);
        ws = planned.workspace;
        r = std::move(planned.result);
        p.stepSeconds = planned.pipeline->stepSeconds;
    } else {
        ws = preparePlan(run.request);
        r = runPlan(*ws, run.request);
        p.stepSeconds = r.breakdown.stepSeconds;
    }
    if (const BlockClass* layer = ws->folded.largestClass()) {
        // The middle instance: away from the model's ends, like the layer a paper times.
        const BlockInstance& inst = layer->instances[layer->instances.size() / 2];
        for (OpId op : inst.ops) {
            const OpBreakdown& o = r.breakdown.ops[static_cast<size_t>(op)];
            p.layerForwardSeconds += o.forwardSeconds;
            p.layerBackwardSeconds += o.stepSeconds - o.forwardSeconds - o.optimizerSeconds;
        }
    }
    return p;
}

} // namespace tp
