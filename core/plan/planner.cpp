#include "planner.h"

#include <chrono>

#include "../cost/baselines.h"
#include "../search/evaluate.h"
#include "../util/error.h"
#include "../util/units.h"

namespace tp {

std::unique_ptr<PlanWorkspace> preparePlan(const PlanRequest& request)
{
    auto ws = std::make_unique<PlanWorkspace>();
    if (request.mode != "train" && request.mode != "infer")
        throw InputError("mode '" + request.mode + "': use train or infer");
    ws->model = loadModel(request.model, request.modelOptions);
    ws->hardware = loadHardware(request.hardware);
    ws->mesh = parseMesh(request.mesh, ws->hardware);
    CostSettings settings;
    settings.training = request.mode == "train";
    settings.microBatch = request.microBatch;
    settings.overlapChunks = request.overlapChunks;
    const auto start = std::chrono::steady_clock::now();
    ws->folded = foldGraph(ws->model.graph);
    ws->foldMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    settings.readerGroupOfOp = readerGroupsOf(ws->folded);
    ws->costModel = std::make_unique<CostModel>(ws->model.graph, ws->mesh, ws->hardware, settings);
    PlanContext& c = ws->context;
    c.modelName = ws->model.name;
    c.modelSource = request.model;
    c.modelConfig = ws->model.config;
    c.hardwareName = ws->hardware.name;
    c.mode = request.mode;
    c.batch = ws->costModel->graphBatch();
    c.seq = ws->model.config.is_object() && ws->model.config.contains("seq") && ws->model.config["seq"].is_number_integer()
                ? ws->model.config["seq"].get<std::int64_t>()
                : 0;
    return ws;
}

SearchResult runPlan(PlanWorkspace& ws, const PlanRequest& request, SearchProgress* progress)
{
    const CostModel& model = *ws.costModel;
    std::vector<LockRequest> locks;
    for (const auto& text : request.locks) locks.push_back(parseLockRequest(text));
    double limit = 0;
    if (request.memoryLimit == "none") limit = -1;
    else if (!request.memoryLimit.empty()) limit = parseBytes(request.memoryLimit);
    if (request.baseline.empty() || request.baseline == "flat") {
        PlannerSession session(model, ws.folded);
        session.setLocks(locks);
        session.setMemoryLimit(limit);
        session.setFlat(request.baseline == "flat");
        session.setProgress(progress);
        session.setThreads(request.threads);
        return session.solve();
    }
    if (!locks.empty()) throw InputError("--lock applies to the search, not to the '" + request.baseline + "' baseline");
    SearchResult r;
    if (request.baseline == "megatron" || request.baseline == "megatron-sp") {
        MegatronOptions options;
        options.sequenceParallel = request.baseline == "megatron-sp";
        r = evaluatePlan(model, &ws.folded, megatronAssignment(model, options), {}, request.baseline);
    } else if (request.baseline == "dp") {
        r = evaluatePlan(model, &ws.folded, dataParallelAssignment(model), {}, "dp");
    } else {
        throw InputError("baseline '" + request.baseline + "': use megatron, megatron-sp, dp or flat");
    }
    const double capacity = limit == 0 ? ws.hardware.hbmBytes : limit;
    r.memoryLimitBytes = capacity > 0 ? capacity : 0;
    r.fits = capacity <= 0 || r.breakdown.perDeviceBytes <= capacity;
    r.blockClasses = static_cast<int>(ws.folded.classes.size());
    return r;
}

} // namespace tp
