#include "planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "../cost/baselines.h"
#include "../search/evaluate.h"
#include "../util/error.h"
#include "../util/units.h"

namespace tp {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

/// Megatron pads the vocabulary to a multiple of 128 x TP; the widest tensor-parallel group is a
/// node (or the mesh, when smaller), so builder models get "vocab_multiple" = 128 x that unless
/// the user set one. Graph and ONNX files keep their shapes.
ModelOptions withPaddedVocabulary(const std::string& model, ModelOptions options, const Mesh& mesh, const Hardware& hw)
{
    auto endsWith = [&](std::string_view tail) { return model.size() >= tail.size() && model.ends_with(tail); };
    if (endsWith(".tpgraph.json") || endsWith(".onnx")) return options;
    for (const auto& item : options.overrides)
        if (item.rfind("vocab_multiple=", 0) == 0) return options;
    options.overrides.push_back("vocab_multiple=" + std::to_string(128 * std::min(mesh.devices(), hw.gpusPerNode)));
    return options;
}

/// The baseline's strategies costed by the workspace's model, not yet judged against a limit.
SearchResult evaluateBaseline(const PlanWorkspace& ws, const std::string& name, std::optional<Recompute> recompute)
{
    const CostModel& model = *ws.costModel;
    // The layers (the instances of repeated blocks, what frameworks checkpoint) recompute as
    // asked; the rest (embedding, head, loss) keeps everything, as the search's forced mode
    // does (PlannerSession::setForcedRecompute).
    std::vector<Recompute> modes(model.graph().ops.size(), Recompute::None);
    if (recompute && model.settings().training)
        for (const auto& bc : ws.folded.classes)
            for (const auto& inst : bc.instances)
                if (bc.instances.size() > 1)
                    for (OpId op : inst.ops) modes[static_cast<size_t>(op)] = *recompute;
    SearchResult r;
    if (name == "megatron" || name == "megatron-sp") {
        MegatronOptions options;
        options.sequenceParallel = name == "megatron-sp";
        r = evaluatePlan(model, &ws.folded, megatronAssignment(model, options), modes, name);
    } else if (name == "dp") {
        r = evaluatePlan(model, &ws.folded, dataParallelAssignment(model), modes, "dp");
    } else {
        throw InputError("baseline '" + name + "': use megatron, megatron-sp, dp or flat");
    }
    r.blockClasses = static_cast<int>(ws.folded.classes.size());
    return r;
}

/// The search's convention: a limit of 0 is the hardware's capacity, a negative one none.
void judgeAgainstLimit(SearchResult& r, const PlanWorkspace& ws, double limit)
{
    const double capacity = limit == 0 ? ws.hardware.hbmBytes : limit;
    r.memoryLimitBytes = capacity > 0 ? capacity : 0;
    r.fits = capacity <= 0 || r.breakdown.perDeviceBytes <= capacity;
}

std::vector<LockRequest> locksOf(const PlanRequest& request)
{
    std::vector<LockRequest> locks;
    for (const auto& text : request.locks) locks.push_back(parseLockRequest(text));
    return locks;
}

bool isSearch(const PlanRequest& request) { return request.baseline.empty() || request.baseline == "flat"; }

} // namespace

std::string modelKeyOf(const PlanRequest& r)
{
    std::ostringstream key;
    key << r.model << '|' << r.modelOptions.batch << '|' << r.modelOptions.seq << '|' << r.modelOptions.onnxOpaqueUnsupported;
    for (const auto& item : r.modelOptions.overrides) key << '|' << item;
    return key.str();
}

std::string workspaceKeyOf(const PlanRequest& r)
{
    std::ostringstream key;
    key.precision(17);
    key << modelKeyOf(r) << "||" << r.mesh << '|' << r.hardware << '|' << r.microBatch << '|' << r.mode << '|' << r.intraNodeGBps
        << '|' << r.interNodeGBps << '|' << r.overlapChunks << '|' << r.overlapGradients << '|' << r.gradientBucketMiB << '|'
        << r.overlapTensorParallel << '|' << r.zero;
    return key.str();
}

double memoryLimitOf(const PlanRequest& request)
{
    if (request.memoryLimit.empty()) return 0;
    if (request.memoryLimit == "none") return -1;
    return parseBytes(request.memoryLimit);
}

CostSettings costSettingsOf(const PlanRequest& request)
{
    if (request.mode != "train" && request.mode != "infer") throw InputError("mode '" + request.mode + "': use train or infer");
    CostSettings settings;
    settings.training = request.mode == "train";
    settings.microBatch = request.microBatch;
    settings.overlapChunks = request.overlapChunks;
    if (!std::isfinite(request.gradientBucketMiB) || request.gradientBucketMiB < 0 || request.gradientBucketMiB > 1e6)
        throw InputError("gradient bucket " + std::to_string(request.gradientBucketMiB) + " MiB: expected 0 to 1000000");
    settings.gradientBucketBytes = request.gradientBucketMiB * 1024 * 1024;
    settings.overlapGradientReduction = request.overlapGradients;
    settings.overlapTensorParallelBackward = request.overlapTensorParallel;
    if (request.zero < 0 || request.zero > 3)
        throw InputError("ZeRO stage " + std::to_string(request.zero) + ": use 0, 1, 2 or 3");
    settings.zeroStage = request.zero;
    recomputeOf(request.recompute); // rejects a bad word before anything is built
    return settings;
}

std::optional<Recompute> recomputeOf(const std::string& mode)
{
    if (mode == "auto" || mode.empty()) return std::nullopt;
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        if (mode == recomputeName(r)) return r;
    throw InputError("recompute '" + mode + "': use auto, none, selective or full");
}

void applyKernelSettings(CostSettings& settings, const nlohmann::json& config)
{
    auto flag = [&](const char* key, bool fallback) {
        if (!config.is_object() || !config.contains(key)) return fallback;
        const auto& v = config[key];
        if (v.is_boolean()) return v.get<bool>();
        if (v.is_number_integer() && (v.get<int>() == 0 || v.get<int>() == 1)) return v.get<int>() == 1;
        throw InputError("model config: field '" + std::string(key) + "' must be true or false, not " + v.dump());
    };
    settings.flashAttention = flag("flash_attention", true);
    settings.fusedKernels = flag("fused_kernels", true);
    settings.fusedCrossEntropy = flag("fused_cross_entropy", false);
}

void applyLinkOverrides(Hardware& hardware, double intraNodeGBps, double interNodeGBps)
{
    auto apply = [](LinkSpec& link, double gbps, const char* what) {
        if (!std::isfinite(gbps) || gbps < 0)
            throw InputError(std::string(what) + " bandwidth " + std::to_string(gbps) + " GB/s: must be a positive number");
        if (gbps > 0) {
            // A measured curve no longer describes the link the user asked for.
            link.bandwidth = gbps * 1e9;
            link.busbw.clear();
        }
    };
    apply(hardware.intraNode, intraNodeGBps, "intra-node");
    apply(hardware.interNode, interNodeGBps, "inter-node");
}

void buildWorkspace(PlanWorkspace& ws, CostSettings settings)
{
    const auto start = Clock::now();
    ws.folded = foldGraph(ws.model.graph);
    ws.foldMs = msSince(start);
    settings.readerGroupOfOp = readerGroupsOf(ws.folded);
    applyKernelSettings(settings, ws.model.config);
    ws.costModel = std::make_unique<CostModel>(ws.model.graph, ws.mesh, ws.hardware, settings);
    PlanContext& c = ws.context;
    c.modelName = ws.model.name;
    c.modelSource = ws.model.source;
    c.modelConfig = ws.model.config;
    c.hardwareName = ws.hardware.name;
    c.mode = settings.training ? "train" : "infer";
    c.batch = ws.costModel->graphBatch();
    const nlohmann::json& config = ws.model.config;
    c.seq =
        config.is_object() && config.contains("seq") && config["seq"].is_number_integer() ? config["seq"].get<std::int64_t>() : 0;
}

std::unique_ptr<PlanWorkspace> preparePlan(const PlanRequest& request)
{
    auto ws = std::make_unique<PlanWorkspace>();
    const CostSettings settings = costSettingsOf(request);
    ws->hardware = loadHardware(request.hardware);
    applyLinkOverrides(ws->hardware, request.intraNodeGBps, request.interNodeGBps);
    ws->mesh = parseMesh(request.mesh, ws->hardware);
    ws->model = loadModel(request.model, withPaddedVocabulary(request.model, request.modelOptions, ws->mesh, ws->hardware));
    buildWorkspace(*ws, settings);
    ws->context.modelSource = request.model;
    ws->context.intraNodeGBps = request.intraNodeGBps;
    ws->context.interNodeGBps = request.interNodeGBps;
    return ws;
}

SearchResult planBaseline(const PlanWorkspace& ws, const std::string& name, double memoryLimit,
                          std::optional<Recompute> recompute)
{
    SearchResult r = evaluateBaseline(ws, name, recompute);
    judgeAgainstLimit(r, ws, memoryLimit);
    return r;
}

SearchResult runPlan(PlanWorkspace& ws, const PlanRequest& request, SearchProgress* progress)
{
    const double limit = memoryLimitOf(request);
    const std::vector<LockRequest> locks = locksOf(request);
    if (!isSearch(request)) {
        if (!locks.empty()) throw InputError("--lock applies to the search, not to the '" + request.baseline + "' baseline");
        return planBaseline(ws, request.baseline, limit, recomputeOf(request.recompute));
    }
    PlannerSession session(*ws.costModel, ws.folded);
    session.setForcedRecompute(recomputeOf(request.recompute));
    session.setLocks(locks);
    session.setMemoryLimit(limit);
    session.setFlat(request.baseline == "flat");
    session.setProgress(progress);
    session.setThreads(request.threads);
    return session.solve();
}

// ---------------------------------------------------------------------------------------------
// Planner

struct Planner::State {
    std::string workspaceKey;
    std::shared_ptr<PlanWorkspace> workspace;
    std::unique_ptr<PlannerSession> session;
    std::map<std::string, SearchResult> baselines; ///< evaluated, not judged (the limit may change)
    std::string unlockedKey;                       ///< memory limit + flat of `unlocked`
    std::optional<SearchResult> unlocked;

    void reset()
    {
        session.reset();
        workspace.reset();
        workspaceKey.clear();
        baselines.clear();
        unlocked.reset();
    }

    /// Each cache is assigned only once its value is complete, so a cancelled or failed build
    /// leaves the planner empty, never half-built.
    double ensureWorkspace(const PlanRequest& request)
    {
        const std::string key = workspaceKeyOf(request);
        if (workspace && key == workspaceKey) return -1;
        const auto start = Clock::now();
        reset();
        std::shared_ptr<PlanWorkspace> ws = preparePlan(request);
        session = std::make_unique<PlannerSession>(*ws->costModel, ws->folded);
        workspace = std::move(ws);
        workspaceKey = key;
        return msSince(start);
    }

    const SearchResult& baseline(const std::string& name, const std::string& recompute)
    {
        const std::string key = name + "|" + recompute;
        auto it = baselines.find(key);
        if (it == baselines.end()) it = baselines.emplace(key, evaluateBaseline(*workspace, name, recomputeOf(recompute))).first;
        return it->second;
    }

    SearchResult search(const PlanRequest& request, double limit, const std::atomic<bool>* cancel, SearchProgress* progress,
                        std::optional<SearchResult>* unlockedOut)
    {
        // The flags are the caller's; they are cleared again however the solves end.
        struct Scope {
            PlannerSession& session;
            ~Scope()
            {
                session.setCancelFlag(nullptr);
                session.setProgress(nullptr);
            }
        } scope{*session};
        session->setCancelFlag(cancel);
        session->setProgress(progress);
        session->setMemoryLimit(limit);
        session->setFlat(request.baseline == "flat");
        session->setThreads(request.threads);
        session->setForcedRecompute(recomputeOf(request.recompute));
        const std::vector<LockRequest> locks = locksOf(request);
        const std::string limitKey = request.memoryLimit + "|" + request.baseline + "|" + request.recompute;
        if (request.compareUnlocked && !locks.empty() && (!unlocked || unlockedKey != limitKey)) {
            session->setLocks({});
            unlocked = session->solve();
            unlockedKey = limitKey;
        }
        session->setLocks(locks); // throws InputError for a lock that cannot be honoured
        SearchResult result = session->solve();
        if (locks.empty()) {
            unlocked = result;
            unlockedKey = limitKey;
        } else if (request.compareUnlocked) {
            *unlockedOut = unlocked;
        }
        return result;
    }
};

Planner::Planner() : state_(std::make_unique<State>()) {}
Planner::~Planner() = default;

PlannerResult Planner::plan(const PlanRequest& request, const std::atomic<bool>* cancel, SearchProgress* progress)
{
    auto check = [cancel] {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    };
    check();
    const double limit = memoryLimitOf(request);
    if (!isSearch(request) && !request.locks.empty())
        throw InputError("--lock applies to the search, not to the '" + request.baseline + "' baseline");
    State& s = *state_;
    PlannerResult out;
    const double prepareMs = s.ensureWorkspace(request);
    out.newWorkspace = prepareMs >= 0;
    out.prepareMs = out.newWorkspace ? prepareMs : 0;
    check();
    if (isSearch(request)) {
        out.result = s.search(request, limit, cancel, progress, &out.unlocked);
    } else {
        out.result = s.baseline(request.baseline, request.recompute);
        judgeAgainstLimit(out.result, *s.workspace, limit);
    }
    for (const auto& name : request.compareBaselines) {
        SearchResult r = s.baseline(name, request.recompute);
        judgeAgainstLimit(r, *s.workspace, limit);
        out.baselines[name] = std::move(r);
    }
    out.workspace = s.workspace;
    return out;
}

} // namespace tp
