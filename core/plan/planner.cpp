#include "planner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cmath>
#include <functional>
#include <iomanip>
#include <exception>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "../cost/baselines.h"
#include "../cost/collectives.h"
#include "../search/evaluate.h"
#include "../sharding/strategy.h"
#include "../util/error.h"
#include "../util/format.h"
#include "../util/key_builder.h"
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

void judgeAgainstLimit(SearchResult& r, const PlanWorkspace& ws, double limit)
{
    const double capacity = memoryLimitBytes(limit, ws.hardware);
    r.memoryLimitBytes = capacity > 0 && std::isfinite(capacity) ? capacity : 0;
    r.fits = !(capacity > 0) || r.breakdown.perDeviceBytes <= capacity;
}

std::vector<LockRequest> locksOf(const PlanRequest& request)
{
    std::vector<LockRequest> locks;
    for (const auto& text : request.locks) locks.push_back(parseLockRequest(text));
    return locks;
}

bool isSearch(const PlanRequest& request) { return request.baseline.empty() || request.baseline == "flat"; }

/// Threads for the pipeline search and a choice's searches: PlanRequest::threads, 0 for every
/// hardware thread.
int workersOf(const PlanRequest& request)
{
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return request.threads > 0 ? std::min(request.threads, hardware) : hardware;
}

} // namespace

std::string modelKeyOf(const PlanRequest& r)
{
    KeyBuilder key;
    key << r.model << '|' << r.modelOptions.batch << '|' << r.modelOptions.seq << '|' << r.modelOptions.onnxOpaqueUnsupported;
    for (const auto& item : r.modelOptions.overrides) key << '|' << item;
    // A stage's graph depends on the number of stages only; its schedule is a cost setting
    // (workspaceKeyOf), so one stage's combinations share its graph, fold and caches.
    if (r.pipeline != 1) key << "|pipeline " << r.pipeline << ' ' << r.pipelineStage;
    // A stage's own layers: the other stages' counts do not change its graph.
    if (r.pipelineStage >= 0 && static_cast<size_t>(r.pipelineStage) < r.stageSplit.size()) {
        int first = 0;
        for (int s = 0; s < r.pipelineStage; ++s) first += r.stageSplit[static_cast<size_t>(s)];
        key << " layers " << first << '+' << r.stageSplit[static_cast<size_t>(r.pipelineStage)];
    }
    return std::move(key.text);
}

std::string workspaceKeyOf(const PlanRequest& r)
{
    KeyBuilder key;
    key << modelKeyOf(r) << "||" << r.mesh << '|' << r.hardware << '|' << r.microBatch << '|' << r.mode << '|' << r.intraNodeGBps
        << '|' << r.interNodeGBps << '|' << r.overlapChunks << '|' << r.overlapGradients << '|' << r.gradientBucketMiB << '|'
        << r.overlapTensorParallel << '|' << r.zero << '|' << r.zeroShard << '|' << r.reshardAfterForward << '|' << r.gradDtype << '|' << r.optimizerDtype << '|' << r.matmulDtype;
    if (r.pipeline != 1) key << '|' << r.schedule << (r.pipelineBound ? " bound" : "");
    return std::move(key.text);
}

/// What every combination of one request shares (workspaceKeyOf without the ZeRO layout, the
/// micro-batch and the pipeline schedule): the slots of a planner, and their caches, are of one
/// family at a time.
std::string familyKeyOf(PlanRequest neutral)
{
    neutral.zero = 0;
    neutral.microBatch = 0;
    neutral.zeroShard = "all";
    neutral.reshardAfterForward = "on";
    neutral.schedule = "1f1b";
    neutral.pipelineBound = false;
    return workspaceKeyOf(neutral);
}

double memoryLimitOf(const PlanRequest& request)
{
    if (request.memoryLimit.empty()) return 0;
    if (request.memoryLimit == "none") return -1;
    return parseBytes(request.memoryLimit);
}

double memoryLimitBytes(double limit, const Hardware& hardware)
{
    if (limit < 0) return std::numeric_limits<double>::infinity();
    return limit == 0 ? hardware.hbmBytes : limit;
}

CostSettings costSettingsOf(const PlanRequest& request)
{
    if (request.mode != "train" && request.mode != "infer") throw InputError("mode '" + request.mode + "': use train or infer");
    CostSettings settings;
    settings.training = request.mode == "train";
    if (request.microBatch < kAuto)
        throw InputError("micro-batch " + std::to_string(request.microBatch) + ": use auto or a positive number");
    settings.microBatch = std::max<std::int64_t>(0, request.microBatch);
    settings.overlapChunks = request.overlapChunks;
    if (!std::isfinite(request.gradientBucketMiB) || request.gradientBucketMiB < 0 || request.gradientBucketMiB > 1e6)
        throw InputError("gradient bucket " + std::to_string(request.gradientBucketMiB) + " MiB: expected 0 to 1000000");
    settings.gradientBucketBytes = request.gradientBucketMiB * 1024 * 1024;
    settings.overlapGradientReduction = request.overlapGradients;
    settings.overlapTensorParallelBackward = request.overlapTensorParallel;
    settings.pipelineScatterGather = request.pipelineScatterGather;
    if (request.zero < kAuto || request.zero > 3)
        throw InputError("ZeRO stage " + std::to_string(request.zero) + ": use auto, 0, 1, 2 or 3");
    settings.zeroStage = std::max(0, request.zero);
    if (request.zeroShard != "auto" && request.zeroShard != "all" && request.zeroShard != "node")
        throw InputError("ZeRO sharding '" + request.zeroShard + "': use auto, all or node");
    settings.zeroAcrossNodes = request.zeroShard != "node";
    if (request.reshardAfterForward != "auto" && request.reshardAfterForward != "on" && request.reshardAfterForward != "off")
        throw InputError("reshard after forward '" + request.reshardAfterForward + "': use auto, on or off");
    settings.reshardAfterForward = request.reshardAfterForward != "off";
    if (request.gradDtype != "bf16" && request.gradDtype != "fp32")
        throw InputError("gradient dtype '" + request.gradDtype + "': use bf16 or fp32");
    if (request.optimizerDtype != "bf16" && request.optimizerDtype != "fp32")
        throw InputError("optimizer dtype '" + request.optimizerDtype + "': use fp32 or bf16");
    if (request.matmulDtype != "bf16" && request.matmulDtype != "fp8")
        throw InputError("--dtype '" + request.matmulDtype + "': use bf16 or fp8");
    settings.fp8Matmuls = request.matmulDtype == "fp8";
    settings.gradBytesPerParam = request.gradDtype == "fp32" ? 4 : 2;
    // The fp32 master weight is kept either way; the two Adam moments take the dtype.
    settings.optimizerBytesPerParam = request.optimizerDtype == "fp32" ? 12 : 8;
    recomputeOf(request.recompute); // rejects a bad word before anything is built
    if (request.pipeline < kAuto || request.pipeline == 0)
        throw InputError("--pipeline " + std::to_string(request.pipeline) + ": use auto or a positive number of stages");
    if (request.pipeline == kAuto && request.pipelineStage >= 0) throw std::logic_error("costSettingsOf: a stage of no pipeline");
    const bool choosing = request.pipeline == kAuto || request.schedule == "auto";
    const PipelineSchedule schedule =
        choosing ? PipelineSchedule{} : parseSchedule(request.pipeline, request.schedule);
    if (request.pipeline > 1 && !settings.training)
        throw InputError("--pipeline " + std::to_string(request.pipeline) + ": pipelines are costed for training, not --mode infer");
    if (request.pipeline > 1 && request.pipelineStage >= 0) {
        if (request.pipelineStage >= request.pipeline) throw std::logic_error("costSettingsOf: no such pipeline stage");
        if (choosing) throw std::logic_error("costSettingsOf: a pipeline stage with its schedule left open");
        applyStageSettings(settings, schedule, request.pipelineStage, request.pipelineBound);
    }
    return settings;
}

std::optional<Recompute> recomputeOf(const std::string& mode)
{
    if (mode == "auto" || mode.empty()) return std::nullopt;
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::Op})
        if (mode == recomputeName(r)) return r;
    throw InputError("recompute '" + mode + "': use auto, none, selective, full or op");
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

namespace {

/// The cost model of a workspace whose graph, hardware, mesh and fold are set, with the fold's
/// reader groups and the model config's kernel settings; derived from `structure` (the model of
/// another combination of the same graph) when given.
void attachCostModel(PlanWorkspace& ws, CostSettings settings, const CostModel* structure = nullptr,
                     std::shared_ptr<ClassCostCache> classCosts = nullptr)
{
    settings.readerGroupOfOp = readerGroupsOf(ws.folded);
    applyKernelSettings(settings, ws.model.config);
    const Graph& graph = ws.graphOwner ? ws.graphOwner->model.graph : ws.model.graph;
    ws.costModel = structure ? std::make_unique<CostModel>(*structure, graph, std::move(settings), std::move(classCosts))
                             : std::make_unique<CostModel>(graph, ws.mesh, ws.hardware, settings);
}

} // namespace

void cutStage(PlanWorkspace& ws, int stage, const PipelineSchedule& schedule, const LoadedModel& whole,
              const FoldedGraph& wholeFold, const std::vector<int>& split, const StageCutter* shared)
{
    PipelineStageInfo& info = ws.stage;
    info.stage = stage;
    info.schedule = schedule;
    const StageSplit cutAt = splitIntoStages(wholeFold, schedule, split); // also checks the chunks divide the layers
    std::optional<StageCutter> own;
    if (!shared) shared = &own.emplace(whole.graph, wholeFold);
    info.layerLabel = cutAt.label;
    info.firstLayer = cutAt.firstOfStage.at(static_cast<size_t>(stage));
    info.layers = cutAt.countOfStage.at(static_cast<size_t>(stage));
    StageGraph cut = shared->cut(stage, schedule.stages, info.firstLayer, info.layers);
    info.receivedBytes = cut.receivedBytes;
    info.sentBytes = cut.sentBytes;
    info.receivedTensors = cut.receivedTensors;
    info.sentTensors = cut.sentTensors;
    info.layersOfStage = cutAt.countOfStage;
    info.period = cutAt.period;
    info.layersPerPeriod = shared->layersPerPeriod();
    info.layersBefore = shared->layersBefore();
    info.layersAfter = shared->layersAfter();
    info.firstStageModules = shared->modulesOutsideRun(true);
    info.lastStageModules = shared->modulesOutsideRun(false);
    ws.model.source = whole.source;
    ws.model.name = whole.name + " (stage " + std::to_string(stage + 1) + " of " + std::to_string(schedule.stages) + ")";
    ws.model.config = whole.config;
    ws.model.graph = std::move(cut.graph);
}

void applyStageSettings(CostSettings& settings, const PipelineSchedule& schedule, int stage, bool bound)
{
    settings.pipelineBubble = bubbleMicroBatches(schedule);
    settings.pipelineStages = schedule.stages;
    settings.pipelineInFlight = inFlightMicroBatches(bound ? PipelineSchedule{schedule.stages, 1} : schedule, stage);
}

void buildWorkspace(PlanWorkspace& ws, CostSettings settings)
{
    const auto start = Clock::now();
    ws.folded = foldGraph(ws.model.graph);
    ws.foldMs = msSince(start);
    attachCostModel(ws, std::move(settings));
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
    if (settings.fp8Matmuls && !ws->hardware.peakFlops.count(DType::F8))
        throw InputError("--dtype fp8: hardware '" + ws->hardware.name + "' has no fp8 peak (its peak_tflops has no \"f8\")");
    applyLinkOverrides(ws->hardware, request.intraNodeGBps, request.interNodeGBps);
    ws->mesh = parseMesh(request.mesh, ws->hardware);
    const bool staged = request.pipeline > 1 && request.pipelineStage >= 0;
    if (staged) {
        ws->stage.link = ws->mesh.axes.at(0);
        ws->mesh = parseMesh(stageMeshText(ws->mesh, request.pipeline), ws->hardware);
    }
    if (staged) {
        std::shared_ptr<const LoadedModel> model = request.wholeModel;
        if (!model)
            model = std::make_shared<const LoadedModel>(
                loadModel(request.model, withPaddedVocabulary(request.model, request.modelOptions, ws->mesh, ws->hardware)));
        std::shared_ptr<const FoldedGraph> folded = request.wholeFold;
        if (!folded) folded = std::make_shared<const FoldedGraph>(foldGraph(model->graph));
        // A floor's stage (pipelineBound) may hold layers its schedule's chunks do not divide
        // (Planner::planStages): it is cut as 1F1B's, its schedule a cost setting.
        PipelineSchedule schedule = parseSchedule(request.pipeline, request.schedule);
        cutStage(*ws, request.pipelineStage, request.pipelineBound ? PipelineSchedule{schedule.stages, 1} : schedule, *model,
                 *folded, request.stageSplit, request.wholeModel ? request.stageCutter.get() : nullptr);
        ws->stage.schedule = schedule;
    } else {
        ws->model = loadModel(request.model, withPaddedVocabulary(request.model, request.modelOptions, ws->mesh, ws->hardware));
    }
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

SearchResult runPlan(const PlanWorkspace& ws, const PlanRequest& request, SearchProgress* progress)
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

bool choosesSettings(const PlanRequest& request)
{
    return request.microBatch == kAuto || request.zero == kAuto ||
           (request.zero == 3 && (request.zeroShard == "auto" || request.reshardAfterForward == "auto")) ||
           (!isSearch(request) && request.recompute == "auto");
}

const char* outcomeName(SettingsCandidate::Outcome outcome)
{
    switch (outcome) {
    case SettingsCandidate::Outcome::Chosen:
        return "chosen";
    case SettingsCandidate::Outcome::Slower:
        return "slower";
    case SettingsCandidate::Outcome::Bounded:
        return "bounded";
    case SettingsCandidate::Outcome::FitsNothing:
        return "fits nothing";
    case SettingsCandidate::Outcome::TooLarge:
        return "too large";
    }
    return "?";
}

std::string settingsText(const SettingsCandidate& c)
{
    std::string layout;
    if (c.hybrid && c.zero > 0) layout = "HSDP";
    if (!c.reshardAfterForward && c.zero >= 3) layout += std::string(layout.empty() ? "" : ", ") + "kept gathered";
    return "ZeRO " + std::to_string(c.zero) + (layout.empty() ? "" : " (" + layout + ")") + ", micro-batch " +
           (c.microBatch > 0 ? std::to_string(c.microBatch) : "whole") +
           (c.recompute.empty() || c.recompute == "auto" ? "" : ", recompute " + c.recompute);
}

SettingsCandidate candidateOf(const CostSettings& settings)
{
    SettingsCandidate c;
    c.zero = settings.zeroStage;
    c.microBatch = settings.microBatch;
    c.hybrid = !settings.zeroAcrossNodes;
    c.reshardAfterForward = settings.reshardAfterForward;
    return c;
}

std::string choiceSummary(const std::vector<SettingsCandidate>& candidates)
{
    const SettingsCandidate* chosen = nullptr;
    const SettingsCandidate* next = nullptr;
    for (const auto& c : candidates) {
        if (c.outcome == SettingsCandidate::Outcome::Chosen) chosen = &c;
        if (c.outcome == SettingsCandidate::Outcome::Slower && (!next || c.stepSeconds < next->stepSeconds)) next = &c;
    }
    if (!chosen) return {};
    std::string out = settingsText(*chosen) + " of " +
                      std::to_string(candidates.size()) + " combinations";
    if (next)
        out += "; next best " + settingsText(*next) + ": " +
               formatSecondsDelta(next->stepSeconds - chosen->stepSeconds) + ", " + formatBytesDelta(next->bytes - chosen->bytes);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Planner

namespace {

/// One concrete combination of settings: its workspace, its search session (dropped when it
/// loses, to bound memory; rebuilt on demand), its evaluated baselines and the lower bound of
/// its search (the plan without memory limit and locks), per forced recompute word and flat.
/// Gives a workspace that shares its planner's graph (PlanWorkspace::graphOwner) a copy of
/// its own, as one handed out of the planner has. Workspaces are created mutable by the
/// planner (Slot::workspace), so the const a PlannerResult adds can be set aside here.
void fillGraph(const PlanWorkspace& handedOut)
{
    auto& ws = const_cast<PlanWorkspace&>(handedOut);
    if (ws.graphOwner && ws.model.graph.ops.size() != ws.graphOwner->model.graph.ops.size())
        ws.model.graph = ws.graphOwner->model.graph;
}

/// A workspace of `base`'s model, hardware, mesh, fold and stage that shares its graph (not
/// copied: filled in when handed out, fillGraph) and has no cost model yet.
std::shared_ptr<PlanWorkspace> sharingGraphOf(const std::shared_ptr<const PlanWorkspace>& base)
{
    auto ws = std::make_shared<PlanWorkspace>();
    ws->model.source = base->model.source;
    ws->model.name = base->model.name;
    ws->model.config = base->model.config;
    ws->graphOwner = base->graphOwner ? base->graphOwner : base;
    ws->hardware = base->hardware;
    ws->mesh = base->mesh;
    ws->folded = base->folded;
    ws->foldMs = base->foldMs;
    ws->context = base->context;
    ws->stage = base->stage;
    return ws;
}

struct Slot {
    std::shared_ptr<PlanWorkspace> workspace;
    std::unique_ptr<PlannerSession> session;
    std::map<std::string, SearchResult> baselines; ///< evaluated, not judged (the limit may change)
    std::map<std::string, double> lowerBound;      ///< by baseline|recompute: the unpriced plan (any limit, any locks)
    /// By limit|baseline|recompute: what the search without locks proved under that limit (its
    /// plan's time, the dual bound it stopped at, or infinity when nothing fits): a bound for
    /// any locks.
    std::map<std::string, double> limitBound;
    std::string unlockedKey; ///< memory limit + flat + recompute of `unlocked`
    std::optional<SearchResult> unlocked;
    double prepareMs = 0;
};

/// The divisors of the batch, ascending, the batch itself as 0 (the whole local batch): the
/// micro-batches the planner tries (only 0 when the graph has no batch the cost model knows).
std::vector<std::int64_t> microBatchCandidates(std::int64_t batch)
{
    if (batch <= 0) return {0};
    std::vector<std::int64_t> out;
    for (std::int64_t d = 1; d * d <= batch; ++d)
        if (batch % d == 0) {
            out.push_back(d);
            if (d * d != batch) out.push_back(batch / d);
        }
    std::sort(out.begin(), out.end());
    out.back() = 0; // the whole batch: the workspace the planner builds first anyway
    return out;
}

/// A fixed micro-batch must divide the batch (a local batch that does not split evenly into
/// micro-batches is not how gradient accumulation runs).
void checkMicroBatch(std::int64_t microBatch, std::int64_t batch)
{
    if (microBatch <= 0 || batch <= 0) return;
    if (microBatch > batch || batch % microBatch != 0)
        throw InputError("micro-batch " + std::to_string(microBatch) + " does not divide the batch of " + std::to_string(batch) +
                         " samples");
}

} // namespace

/// A search handed to the planner's worker (SearchWorker), which whichever thread gets to it
/// first runs: the worker thread, or the thread that needs its result (SearchWorker::await).
struct SearchJob {
    enum class State : std::uint8_t { Queued, Running, Done };
    std::function<SearchResult()> search;
    State state = State::Queued;
    bool awaited = false; ///< its result was taken
    std::optional<SearchResult> result;
    std::exception_ptr error;
    /// Run when the result is taken, on the taking thread (EarlySearches: the session's warm
    /// start after the search).
    std::function<void()> onTaken;
};

/// One thread, kept for the planner's life, that runs the searches handed to it in order
/// (State::Chooser's early searches; a thread per search cost more than the search). A thread
/// that awaits a job runs it itself if nobody has started it, and while the worker runs it,
/// runs the queued others meanwhile: each search's bar was fixed when it was handed over, so
/// where it runs changes nothing but the time.
class SearchWorker {
public:
    SearchWorker() = default;
    SearchWorker(const SearchWorker&) = delete;
    SearchWorker& operator=(const SearchWorker&) = delete;
    ~SearchWorker()
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    /// A job for `search`: queued for the worker thread when `thread`, else run when awaited.
    std::shared_ptr<SearchJob> submit(std::function<SearchResult()> search, bool thread, std::function<void()> onTaken = {})
    {
        auto job = std::make_shared<SearchJob>();
        job->search = std::move(search);
        job->onTaken = std::move(onTaken);
        if (!thread) return job;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(job);
            if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
        }
        wake_.notify_all();
        return job;
    }

    /// The job's result (or its exception), once.
    SearchResult await(SearchJob& job)
    {
        std::unique_lock<std::mutex> lock(mutex_);
        job.awaited = true;
        while (job.state != SearchJob::State::Done) {
            if (job.state == SearchJob::State::Queued) {
                runHere(lock, job);
            } else if (auto other = std::find_if(queue_.begin(), queue_.end(),
                                                 [](const auto& j) { return j->state == SearchJob::State::Queued; });
                       other != queue_.end()) {
                const std::shared_ptr<SearchJob> next = *other; // kept alive while it runs here
                runHere(lock, *next);
            } else {
                done_.wait(lock);
            }
        }
        if (job.onTaken) job.onTaken();
        if (job.error) std::rethrow_exception(job.error);
        return std::move(*job.result);
    }

    /// A job nobody will await: not run unless it already runs.
    void drop(SearchJob& job)
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (job.state == SearchJob::State::Queued) job.state = SearchJob::State::Done;
    }

    /// Returns once no job runs or waits to (however each ended).
    void waitIdle()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] {
            return running_ == 0 &&
                   std::none_of(queue_.begin(), queue_.end(), [](const auto& j) { return j->state == SearchJob::State::Queued; });
        });
    }

private:
    /// Runs `job` on this thread, the lock released meanwhile.
    void runHere(std::unique_lock<std::mutex>& lock, SearchJob& job)
    {
        job.state = SearchJob::State::Running;
        ++running_;
        lock.unlock();
        std::optional<SearchResult> result;
        std::exception_ptr error;
        try {
            result = job.search();
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        job.result = std::move(result);
        job.error = error;
        job.state = SearchJob::State::Done;
        --running_;
        done_.notify_all();
    }

    void loop()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            const std::shared_ptr<SearchJob> job = std::move(queue_.front());
            queue_.pop_front();
            if (job->state == SearchJob::State::Queued) runHere(lock, *job); // else taken or dropped
            done_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::deque<std::shared_ptr<SearchJob>> queue_;
    int running_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

/// What the stage planners of one stage count share across their stage graphs: op-to-op edges
/// and op classes' costs, by content.
struct CrossGraphCaches {
    std::shared_ptr<CrossGraphEdges> edges;
    std::shared_ptr<ClassCostCache> classCosts;
};

struct Planner::State {
    std::map<std::string, std::unique_ptr<Slot>> slots; ///< by workspaceKeyOf, of the current model
    std::string modelKey;                               ///< what the slots were built for
    /// The slots' sessions' resharding caches (keyed inside by micro-batch where edges depend
    /// on it, SharedSearchCaches).
    std::shared_ptr<SharedSearchCaches> caches;
    std::map<std::string, std::string> lastChoice;      ///< per baseline ("" the search): the last winner
    /// A pipelined request's planners, one per stage request it makes (model key: the stages,
    /// schedule and stage; mesh, hardware), kept between requests (Planner::planStages).
    std::map<std::string, std::unique_ptr<Planner>> stagePlanners;
    /// What the stage planners of one stage count share across their graphs, by the family of
    /// their requests with the stage left out (Planner::stagePlanner).
    std::map<std::string, CrossGraphCaches> crossGraphs;
    std::mutex stagePlannersMutex; ///< the pipeline search's workers add stage planners (and crossGraphs)
    /// A stage planner's: its stage count's edges and class costs across graphs (null for other
    /// planners).
    CrossGraphCaches crossGraph;
    const std::atomic<bool>* cancel = nullptr;
    SearchProgress* progress = nullptr;

    void check() const
    {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    }

    /// Each slot is stored only once its workspace is complete, so a cancelled or failed build
    /// leaves nothing half-built.
    Slot& slotFor(const PlanRequest& concrete)
    {
        const std::string key = workspaceKeyOf(concrete);
        auto it = slots.find(key);
        if (it != slots.end()) return *it->second;
        check();
        const auto start = Clock::now();
        auto slot = std::make_unique<Slot>();
        if (slots.empty()) {
            slot->workspace = preparePlan(concrete);
        } else {
            // Another combination of the same model: the graph, hardware, mesh and fold are the
            // first slot's; only the cost model is new.
            const std::shared_ptr<PlanWorkspace>& first = slots.begin()->second->workspace;
            const PlanWorkspace& base = *first;
            // The graph is shared, not copied (a pipeline stage's planner holds hundreds of
            // combinations): filled in when the workspace is handed out (State::handOut).
            auto ws = sharingGraphOf(first);
            if (concrete.pipeline > 1 && concrete.pipelineStage >= 0)
                ws->stage.schedule = parseSchedule(concrete.pipeline, concrete.schedule);
            attachCostModel(*ws, costSettingsOf(concrete), base.costModel.get(), crossGraph.classCosts);
            slot->workspace = std::move(ws);
        }
        slot->prepareMs = msSince(start);
        return *slots.emplace(key, std::move(slot)).first->second;
    }

    /// A slot's workspace as the planner hands it out: with its own copy of the graph.
    static std::shared_ptr<const PlanWorkspace> handOut(Slot& slot)
    {
        fillGraph(*slot.workspace);
        return slot.workspace;
    }

    /// The slots' sessions share their resharding caches: they differ in node costs and the
    /// micro-batch only.
    PlannerSession& sessionOf(Slot& slot)
    {
        if (!slot.session) {
            auto session = std::make_unique<PlannerSession>(*slot.workspace->costModel, slot.workspace->folded, caches);
            if (!caches) {
                caches = session->sharedCaches();
                if (crossGraph.edges) session->useCrossGraphEdges(crossGraph.edges);
            }
            slot.session = std::move(session);
        }
        return *slot.session;
    }

    const SearchResult& baseline(Slot& slot, const std::string& name, const std::string& recompute)
    {
        const std::string key = name + "|" + recompute;
        auto it = slot.baselines.find(key);
        if (it == slot.baselines.end())
            it = slot.baselines.emplace(key, evaluateBaseline(*slot.workspace, name, recomputeOf(recompute))).first;
        return it->second;
    }

    static std::string boundKey(const PlanRequest& request, double limit)
    {
        std::ostringstream key;
        key.precision(17);
        key << limit << '|' << request.baseline << '|' << request.recompute;
        return key.str();
    }

    /// What the slot's earlier solves without locks proved for this request (-infinity when
    /// nothing): its unpriced plan, a bound under any limit and locks ...
    static double unpricedBoundOf(const Slot& slot, const PlanRequest& request)
    {
        auto it = slot.lowerBound.find(request.baseline + "|" + request.recompute);
        return it == slot.lowerBound.end() ? -std::numeric_limits<double>::infinity() : it->second;
    }
    /// ... and what its search under `limit` proved (infinity: nothing fits).
    static double limitBoundOf(const Slot& slot, const PlanRequest& request, double limit)
    {
        auto it = slot.limitBound.find(boundKey(request, limit));
        return it == slot.limitBound.end() ? -std::numeric_limits<double>::infinity() : it->second;
    }

    /// Records a bound proved without locks for the request's plans under `limit` (its best
    /// such bound stays: limitBoundOf).
    static void proveUnderLimit(Slot& slot, const PlanRequest& request, double limit, double bound)
    {
        auto [it, inserted] = slot.limitBound.emplace(boundKey(request, limit), bound);
        if (!inserted) it->second = std::max(it->second, bound);
    }

    /// Solves on the slot's session (made already: sessionOf) with the request's limit, locks and
    /// modes; the session's flags are cleared again however the solve ends. Touches the slot's
    /// session alone, so it may run on another thread (EarlySearches).
    SearchResult searchOn(PlannerSession& session, const PlanRequest& request, double limit,
                          const std::vector<LockRequest>& locks, double stopAbove) const
    {
        struct Scope {
            PlannerSession& session;
            ~Scope()
            {
                session.setCancelFlag(nullptr);
                session.setProgress(nullptr);
            }
        } scope{session};
        session.setCancelFlag(cancel);
        session.setProgress(progress);
        session.setMemoryLimit(limit);
        session.setFlat(request.baseline == "flat");
        session.setThreads(request.threads);
        session.setForcedRecompute(recomputeOf(request.recompute));
        session.setStopAbove(stopAbove);
        // Throws InputError for a lock that cannot be honoured; a stage holds some ops only (the
        // whole model is checked by Planner::planPipeline).
        session.setLocks(locks, request.pipelineStage < 0);
        return session.solve();
    }

    /// What a search without locks proved for the slot's later choices (unpricedBoundOf,
    /// limitBoundOf).
    static void record(Slot& slot, const PlanRequest& request, double limit, bool locked, const SearchResult& r)
    {
        if (!locked) {
            slot.lowerBound[request.baseline + "|" + request.recompute] = r.unpricedSeconds;
            slot.limitBound[boundKey(request, limit)] = r.bounded ? r.lowerBound
                                                        : r.fits  ? r.breakdown.stepSeconds
                                                                  : std::numeric_limits<double>::infinity();
        }
    }

    /// searchOn and record; `early`: the search, started before its turn (State::Chooser).
    SearchResult solve(Slot& slot, const PlanRequest& request, double limit, const std::vector<LockRequest>& locks,
                       double stopAbove = std::numeric_limits<double>::infinity(), SearchJob* early = nullptr)
    {
        SearchResult r = early ? worker.await(*early) : searchOn(sessionOf(slot), request, limit, locks, stopAbove);
        record(slot, request, limit, !locks.empty(), r);
        return r;
    }

    /// The search on one slot without locks, cached per limit, recompute and flat: what the
    /// locks cost (PlanRequest::compareUnlocked).
    const SearchResult& unlockedOf(Slot& slot, const PlanRequest& request, double limit)
    {
        const std::string limitKey = request.memoryLimit + "|" + request.baseline + "|" + request.recompute;
        if (!slot.unlocked || slot.unlockedKey != limitKey) {
            slot.unlocked = solve(slot, request, limit, {});
            slot.unlockedKey = limitKey;
        }
        return *slot.unlocked;
    }

    /// The plan (search or baseline) of one concrete combination, judged against the limit;
    /// `early`: its search, started before its turn (EarlySearches).
    SearchResult planOne(Slot& slot, const PlanRequest& request, double limit, double stopAbove,
                         SearchJob* early = nullptr)
    {
        if (isSearch(request)) {
            const std::vector<LockRequest> locks = locksOf(request);
            SearchResult r = solve(slot, request, limit, locks, stopAbove, early);
            if (locks.empty() && !r.bounded) {
                slot.unlocked = r;
                slot.unlockedKey = request.memoryLimit + "|" + request.baseline + "|" + request.recompute;
            }
            return r;
        }
        SearchResult r = baseline(slot, request.baseline, request.recompute);
        judgeAgainstLimit(r, *slot.workspace, limit);
        return r;
    }

    struct Choice {
        Slot* slot = nullptr;
        SearchResult result;
        std::optional<SearchResult> unlocked;
        std::vector<SettingsCandidate> candidates;
    };

    struct Chooser;
    Choice choose(const PlanRequest& request, double limit);

    /// Slots hold one model's workspaces; another model (or mesh, hardware, ...) starts afresh.
    void useFamilyOf(const PlanRequest& request)
    {
        const std::string family = familyKeyOf(request);
        if (family == modelKey) return;
        slots.clear();
        lastChoice.clear();
        caches.reset();
        modelKey = family;
    }

    /// The losing combinations keep their sessions (an edit re-solves them from warm tables)
    /// while all sessions' tables together stay under a budget; past it, theirs are dropped
    /// (their workspaces and lower bounds stay).
    void trimSessions(const Slot* keep)
    {
        constexpr double kBudgetBytes = 1024.0 * 1024 * 1024;
        double total = 0;
        for (const auto& [key, slot] : slots)
            if (slot->session) total += slot->session->cachedBytes();
        for (auto& [key, slot] : slots) {
            if (total <= kBudgetBytes) break;
            if (!slot->session || slot.get() == keep) continue;
            total -= slot->session->cachedBytes();
            slot->session.reset();
        }
    }

    /// Runs the choices' early searches (Chooser, EarlySearches). Declared last, so destroyed
    /// first: no search of a slot outlives it.
    SearchWorker worker;
};

namespace {

/// The combinations a request leaves open, grouped so that the micro-batch grows within a group
/// (ZeRO stage, recompute word): Planner::State::choose skips the rest of a group once one
/// fits nothing.
struct CandidateGroup {
    int zero = 0;
    std::string recompute;
    std::vector<std::int64_t> microBatches;
    bool hybrid = false;             ///< ZeRO shards inside a node only (HSDP)
    bool reshardAfterForward = true; ///< stage 3: gathered weights freed after forward
};

/// Whether hybrid sharding differs from sharding over every axis on this mesh: some axis of
/// more than one device crosses nodes and some other stays inside one.
bool hybridShardingApplies(const Mesh& mesh)
{
    bool across = false, inside = false;
    for (const auto& axis : mesh.axes) {
        if (axis.size <= 1) continue;
        (axis.crossesNodes ? across : inside) = true;
    }
    return across && inside;
}

std::vector<CandidateGroup> candidateGroups(const PlanRequest& request, std::int64_t batch, bool training, const Mesh& mesh)
{
    std::vector<int> zeros = {request.zero};
    if (request.zero == kAuto) zeros = training ? std::vector<int>{3, 2, 1, 0} : std::vector<int>{0};
    std::vector<std::string> recomputes = {request.recompute};
    if (!isSearch(request) && request.recompute == "auto")
        recomputes = training ? std::vector<std::string>{"none", "selective", "full"} : std::vector<std::string>{"none"};
    const std::vector<std::int64_t> micro =
        request.microBatch == kAuto ? microBatchCandidates(batch) : std::vector<std::int64_t>{request.microBatch};
    std::vector<CandidateGroup> groups;
    for (int z : zeros) {
        // HSDP is FSDP's form (stage 3): at stages 1-2 an all-reduce across nodes of the shard
        // moves what the reduce-scatter and all-gather across nodes move, and holds more.
        std::vector<bool> hybrids = {request.zeroShard == "node"};
        if (request.zeroShard == "auto" && z == 3 && hybridShardingApplies(mesh)) hybrids = {false, true};
        // Holding gathered weights to the backward is a stage-3 choice (stages 0-2 hold them
        // whole anyway). Kept gathered is listed first: where it is also solved first, its
        // unpriced plan bounds the resharded layout's (State::choose).
        std::vector<bool> reshards = {request.reshardAfterForward != "off"};
        if (request.reshardAfterForward == "auto" && z == 3 && mesh.devices() > 1) reshards = {false, true};
        for (bool hybrid : hybrids)
            for (bool reshard : reshards)
                for (const auto& rc : recomputes) groups.push_back({z, rc, micro, hybrid, reshard});
    }
    return groups;
}

/// The concrete request of one combination.
PlanRequest combinationOf(const PlanRequest& request, const CandidateGroup& g, std::int64_t microBatch)
{
    PlanRequest c = request;
    c.zero = g.zero;
    c.microBatch = microBatch;
    c.recompute = g.recompute;
    c.zeroShard = g.hybrid ? "node" : "all";
    c.reshardAfterForward = g.reshardAfterForward ? "on" : "off";
    return c;
}

std::string choiceKeyOf(const PlanRequest& c) { return workspaceKeyOf(c) + "|" + c.recompute; }

struct Pending {
    const CandidateGroup* group;
    std::int64_t microBatch;
    CostModel::Floor floor;
};

/// The searches of a list of combinations (State::Chooser) started before their turn: as the
/// search before them starts, at the bar of that moment, at most kAhead of them at a time,
/// each where it finishes soonest (SearchWorker; with one thread, at its turn). Its stop bar
/// is then at least the bar at its turn, so it stops no sooner: a plan under that bar is the
/// plan a later start would find, a bound is still a bound, and what each turn decides never
/// depends on where or when the search ran (tst_planner choicesAreTheSameOnAnyNumberOfThreads).
class EarlySearches {
public:
    static constexpr size_t kAhead = 2;
    EarlySearches(SearchWorker& worker, bool twoThreads) : worker_(worker), twoThreads_(twoThreads) {}
    EarlySearches(const EarlySearches&) = delete;
    EarlySearches& operator=(const EarlySearches&) = delete;
    /// However the choice ends, none runs on past it (each reads the choice's sessions): on an
    /// exception too, where Chooser::run's own wait before finish is never reached.
    ~EarlySearches()
    {
        for (auto& [index, started] : ahead_) worker_.drop(*started.job);
        worker_.waitIdle();
    }

    /// Whether a search may start now: a turn is being settled and fewer than kAhead are out.
    bool mayStart() const { return turn_ < count_ && ahead_.size() < kAhead; }
    /// The combination settled now.
    size_t turn() const { return turn_; }
    /// Whether combination `index` has its search started (one search per session at a time).
    bool started(size_t index) const { return ahead_.count(index) > 0; }
    /// Whether a search at micro-batch `microBatch` is out.
    bool outAt(std::int64_t microBatch) const
    {
        return std::any_of(ahead_.begin(), ahead_.end(), [&](const auto& a) { return a.second.microBatch == microBatch; });
    }
    void start(size_t index, std::int64_t microBatch, PlannerSession& session, std::function<SearchResult()> search)
    {
        ahead_[index] = Started{aside(session, std::move(search)), microBatch};
    }
    /// A search on `session` outside the turns (the last winner's), run where it finishes
    /// soonest. It leaves the session's warm start as it found it and applies its own when
    /// taken: a search never taken leaves no trace, wherever it ran (PlannerSession::WarmStart).
    std::shared_ptr<SearchJob> aside(PlannerSession& session, std::function<SearchResult()> search)
    {
        auto after = std::make_shared<PlannerSession::WarmStart>();
        auto job = worker_.submit(
            [&session, after, search = std::move(search)] {
                const PlannerSession::WarmStart before = session.warmStart();
                struct Restore {
                    PlannerSession& session;
                    const PlannerSession::WarmStart& before;
                    PlannerSession::WarmStart& after;
                    ~Restore()
                    {
                        after = session.warmStart();
                        session.setWarmStart(before);
                    }
                } restore{session, before, *after};
                return search();
            },
            twoThreads_, [&session, after] { session.setWarmStart(*after); });
        return job;
    }
    /// Begins turn `turn` of `count`: its search if one was started for it.
    std::shared_ptr<SearchJob> beginTurn(size_t turn, size_t count)
    {
        turn_ = turn;
        count_ = count;
        auto it = ahead_.find(turn);
        if (it == ahead_.end()) return nullptr;
        std::shared_ptr<SearchJob> job = std::move(it->second.job);
        ahead_.erase(it);
        return job;
    }
    /// Ends a turn: its search, if nothing took it (the turn settled without it), is dropped.
    void endTurn(const std::shared_ptr<SearchJob>& job)
    {
        if (job && !job->awaited) worker_.drop(*job);
    }

private:
    struct Started {
        std::shared_ptr<SearchJob> job;
        std::int64_t microBatch = 0;
    };
    SearchWorker& worker_;
    const bool twoThreads_;
    size_t turn_ = 0, count_ = 0; ///< none before the turns
    std::map<size_t, Started> ahead_; ///< by index in the list
};

/// Best first: every combination's floor under the limit (CostModel::floor: no plan of it that
/// fits is faster, none holds less) orders those that may fit by that least time, so that the
/// incumbent comes early and the rest stop at their floor unsearched; those whose fastest node
/// choices fit the limit first (their floor is tight and one price solves them), those whose
/// least memory is over the limit last (once anything fits they cannot win; while nothing
/// does, the least memory is sought).
/// The last winner (`last`), solved before the others, is left out.
/// The floors obey the request's locks (`forced`: the ops grouped by the strategy the locks give
/// them, CostModel::opChoices; the combinations' cost models share one structure), which lifts
/// them by what the locks cost at least.
std::vector<Pending> bestFirst(const PlanRequest& request, const std::vector<CandidateGroup>& groups, const std::string& last,
                               double capacity, const CostModel::OpChoices& forced,
                               const std::function<const CostModel&(const PlanRequest&)>& modelOf)
{
    std::vector<Pending> pending;
    for (const auto& g : groups)
        for (std::int64_t m : g.microBatches)
            if (const PlanRequest c = combinationOf(request, g, m); choiceKeyOf(c) != last)
                pending.push_back({&g, m, modelOf(c).floor(capacity, forced)});
    std::stable_sort(pending.begin(), pending.end(), [&](const Pending& a, const Pending& b) {
        const bool aOver = a.floor.bytes > capacity, bOver = b.floor.bytes > capacity;
        if (aOver != bOver) return bOver;
        if (a.floor.priced != b.floor.priced) return b.floor.priced;
        return a.floor.seconds < b.floor.seconds;
    });
    return pending;
}

/// The search's locks as op -> strategy (none for a baseline); a stage holds some ops only.
std::map<OpId, int> lockedStrategies(const CostModel& model, const PlanRequest& request)
{
    std::map<OpId, int> forced;
    if (isSearch(request))
        for (const ResolvedLock& lock : resolveLocks(model, locksOf(request), request.pipelineStage < 0)) forced[lock.op] = lock.strategy;
    return forced;
}

/// One concrete combination of a request (its first slot, which every other derives from).
PlanRequest probeOf(const PlanRequest& request)
{
    PlanRequest probe = request;
    probe.zero = std::max(0, request.zero);
    probe.microBatch = std::max<std::int64_t>(0, request.microBatch);
    probe.zeroShard = request.zeroShard == "node" ? "node" : "all";
    probe.reshardAfterForward = request.reshardAfterForward == "off" ? "off" : "on";
    return probe;
}

/// The least lower bound of the combinations a bar settled unsearched (infinity if none).
double leastBound(const std::vector<SettingsCandidate>& candidates)
{
    double least = std::numeric_limits<double>::infinity();
    for (const auto& c : candidates)
        if (c.outcome == SettingsCandidate::Outcome::Bounded) least = std::min(least, c.stepSeconds);
    return least;
}

/// The (ZeRO stage, micro-batch, layout) at which nothing fits. Memory grows with the
/// micro-batch for every plan; HSDP holds at least as much per device as sharding over every
/// axis (its shards are over fewer devices), and weights kept gathered at least as much as
/// resharded ones: a combination no leaner than one that fits nothing fits nothing either.
/// (Recompute words are not compared: a baseline's auto tries each, and they hold unlike.)
class FitsNothing {
public:
    explicit FitsNothing(std::int64_t batch) : batch_(batch) {}
    void add(const CandidateGroup& g, std::int64_t m) { seen_.insert({g.zero, m, g.hybrid, g.reshardAfterForward, g.recompute}); }
    bool coversLeaner(const CandidateGroup& g, std::int64_t m) const
    {
        for (const auto& [zero, micro, hybrid, reshard, recompute] : seen_)
            if (zero == g.zero && recompute == g.recompute && wholeOf(micro) <= wholeOf(m) && (!hybrid || g.hybrid) &&
                (reshard || !g.reshardAfterForward))
                return true;
        return false;
    }

private:
    std::int64_t wholeOf(std::int64_t m) const { return m > 0 ? m : batch_; }
    std::int64_t batch_;
    std::set<std::tuple<int, std::int64_t, bool, bool, std::string>> seen_;
};

/// How far over the bar a carried bound must reach to settle a combination unsearched. A
/// combination settled by a thin margin is searched after most edits (a lock moves the best
/// step by a fraction of a percent: LLaMA-3 8B on 2x8, an instance lock 0.6%), and then from
/// cold tables; searched now, its tables stay warm and its own bound, usually stronger, is kept
/// for the next edit. Any margin gives the same plans (docs/PERFORMANCE.md: 0 to 1% tried).
constexpr double kCarriedMargin = 0.01;

/// Under locks no bound is kept for a later edit (solve and proveUnderLimit store lock-free
/// bounds only), so the margin buys nothing there and costs searches (LLaMA-3
/// 8B on 2x8, a class lock: 22 combinations searched with it, 16 without).
double carriedMarginOf(const PlanRequest& c) { return locksOf(c).empty() ? kCarriedMargin : 0.0; }

/// Every solve at one price in one choice, with its model. The ZeRO stage changes node costs
/// alone, so at such a price every plan of another stage costs that solve's cheapest plan plus
/// at least the least difference of the two models' node costs (nodeDifferenceFloor): a
/// Lagrangian bound carried to a combination that was never searched.
class CarriedBounds {
public:
    void remember(const CostModel& model, const SearchResult& r)
    {
        for (const auto& [price, objective] : r.pricedObjectives) solves_.push_back({&model, price, objective});
    }
    /// The best such bound on `model`'s plans under the locks (`forced`, the same on every call)
    /// and the limit.
    double of(const CostModel& model, const CostModel::OpChoices& forced, double capacity)
    {
        double bound = -std::numeric_limits<double>::infinity();
        for (size_t k = 0; k < solves_.size(); ++k) {
            const Solve& p = solves_[k];
            if (p.model == &model) continue;
            // A combination is asked again each time the bar moves: each difference once.
            auto [at, fresh] = differences_.try_emplace({&model, k}, 0.0);
            if (fresh) at->second = model.nodeDifferenceFloor(*p.model, p.price, forced);
            bound = std::max(bound, p.objective + at->second - (p.price > 0 ? p.price * capacity : 0.0));
        }
        return bound;
    }

private:
    struct Solve {
        const CostModel* model;
        double price, objective;
    };
    std::vector<Solve> solves_;
    std::map<std::pair<const CostModel*, size_t>, double> differences_; ///< nodeDifferenceFloor by (model, solve)
};

} // namespace

/// One choice among a request's combinations (State::choose): what its steps share. Best first
/// (bestFirst), each combination either settled by what is known (floors, bounds of earlier
/// solves) or searched under the bar of the best so far.
struct Planner::State::Chooser {
    Chooser(State& state, const PlanRequest& request, double limit);
    Chooser(const Chooser&) = delete;
    Chooser& operator=(const Chooser&) = delete;
    Choice run();

private:
    /// What a combination must beat: the best that fits so far, or the caller's bar.
    double bar() const
    {
        return best.slot && best.result.fits ? std::min(request.stopAbove, best.result.breakdown.stepSeconds) : request.stopAbove;
    }
    bool better(const SearchResult& r) const
    {
        if (!best.slot) return true;
        if (r.fits != best.result.fits) return r.fits;
        return r.fits ? r.breakdown.stepSeconds < best.result.breakdown.stepSeconds
                      : r.breakdown.perDeviceBytes < best.result.breakdown.perDeviceBytes;
    }
    static std::tuple<std::int64_t, bool, std::string> keptKey(const PlanRequest& c)
    {
        return std::make_tuple(c.microBatch, c.zeroShard == "node", c.recompute);
    }
    void remember(const Slot& slot, const SearchResult& r) { carried.remember(*slot.workspace->costModel, r); }
    double carriedBound(const PlanRequest& c) { return carried.of(*s.slotFor(c).workspace->costModel, forced, capacity); }
    /// What settles a combination unsearched: a bound that reaches the bar, by what proved it.
    struct Settling {
        enum class Kind { KeptGathered, Unpriced, UnderLimit, Carried } kind;
        double bound; ///< infinite for UnderLimit: nothing of it fits the limit
    };
    std::optional<Settling> settlingBound(const PlanRequest& c);
    void startNext(EarlySearches& ahead, const std::vector<const Pending*>& list, const PlanRequest& now, bool probe);
    bool consider(const PlanRequest& c, SearchJob* early = nullptr);
    std::optional<bool> settleByBounds(const PlanRequest& c, Slot& slot, SettingsCandidate& cand);
    bool fastestFits(const PlanRequest& c, SearchJob* early);
    void settle(const Pending& p, bool probe, SearchJob* early = nullptr);
    Choice finish();

    State& s;
    const PlanRequest& request;
    const double limit;
    const PlanRequest probe;
    std::int64_t batch = 0;
    std::vector<CandidateGroup> groups;
    double capacity = 0;
    CostModel::OpChoices forced; ///< the ops grouped as the locks leave them (lockedStrategies)
    Choice best;
    size_t chosenIndex = 0;
    // Weights kept gathered (stage 3) make every plan at least as fast as resharding them after
    // forward (the backward all-gathers go; nothing else changes), so the kept layout's fastest
    // plan with no memory limit (under these locks and this recompute word) bounds the resharded
    // layout's best under any limit. Only that bound carries over: a priced (Lagrangian) bound
    // of the kept layout counts its extra memory against it and can exceed the resharded optimum.
    // By (micro-batch, HSDP, recompute word).
    std::map<std::tuple<std::int64_t, bool, std::string>, double> keptGatheredBound;
    CarriedBounds carried;
    std::optional<FitsNothing> fitsNothing; ///< made once the batch is known
    std::vector<Pending> pending;
    std::vector<const Pending*> probed; ///< `pending` in order: each first searched at price 0
    std::vector<const Pending*> priced; ///< those whose search needs a memory price, after the rest
    /// Declared last, so destroyed first: they wait for their searches, which read the members.
    EarlySearches earlyProbes, early; ///< of `probed` at price 0, of `priced` under the limit
};

Planner::State::Chooser::Chooser(State& state, const PlanRequest& r, double l) :
    s(state), request(r), limit(l), probe(probeOf(r)),
    // A pipeline's stages run on two threads already.
    earlyProbes(state.worker, workersOf(r) > 1 && r.pipelineStage < 0), early(state.worker, workersOf(r) > 1 && r.pipelineStage < 0)
{
    const PlanWorkspace& first = *s.slotFor(probe).workspace;
    batch = first.costModel->graphBatch();
    checkMicroBatch(request.microBatch, batch);
    groups = candidateGroups(request, batch, first.costModel->settings().training, first.costModel->mesh());
    capacity = memoryLimitBytes(limit, first.hardware);
    forced = first.costModel->opChoices(lockedStrategies(*first.costModel, request));
    fitsNothing.emplace(batch);
}

/// What earlier solves proved of `c` that settles it without a search, if anything does (the
/// bar only falls and the bounds only grow, so what settles it now settles it at its turn):
/// the kept-gathered layout's fastest plan (keptGatheredBound), its own unpriced plan, its
/// bound under the limit, or a bound carried from another combination (CarriedBounds).
std::optional<Planner::State::Chooser::Settling> Planner::State::Chooser::settlingBound(const PlanRequest& c)
{
    using Kind = Settling::Kind;
    const double stopAbove = bar();
    const bool incumbent = std::isfinite(stopAbove);
    if (incumbent && c.zero == 3 && c.reshardAfterForward != "off")
        if (auto known = keptGatheredBound.find(keptKey(c)); known != keptGatheredBound.end() && known->second >= stopAbove)
            return Settling{Kind::KeptGathered, known->second};
    if (!isSearch(c)) return std::nullopt;
    const Slot& slot = s.slotFor(c);
    if (const double unpriced = unpricedBoundOf(slot, c); unpriced >= stopAbove) return Settling{Kind::Unpriced, unpriced};
    if (!incumbent) return std::nullopt;
    if (const double proved = limitBoundOf(slot, c, limit); proved >= stopAbove) return Settling{Kind::UnderLimit, proved};
    if (const double carriedBy = carriedBound(c); carriedBy >= stopAbove * (1 + carriedMarginOf(c)))
        return Settling{Kind::Carried, carriedBy};
    return std::nullopt;
}

/// Starts the searches of the next combinations of `list` that what is known leaves open, as
/// the search of `now` starts (EarlySearches): at price 0 for the probed (`probe`: those whose
/// fastest node choices fit), else under the limit. Priced ones only at other micro-batches
/// than those searching: a search carries bounds to the combinations at its own micro-batch
/// (CarriedBounds), which mostly settles them; a price-0 search's bound rarely does (LLaMA-3 8B
/// on 2x8, a class lock: 8.9 against 9.3 ms with price-0 searches at the same micro-batch).
void Planner::State::Chooser::startNext(EarlySearches& ahead, const std::vector<const Pending*>& list, const PlanRequest& now,
                                        bool probe)
{
    if (!isSearch(request) || !ahead.mayStart()) return;
    for (size_t k = ahead.turn() + 1; k < list.size(); ++k) {
        const Pending& p = *list[k];
        // Settled at its turn unsearched: the bar only falls, fitsNothing and the bounds only grow.
        if (ahead.started(k) || (!probe && (p.microBatch == now.microBatch || ahead.outAt(p.microBatch))) ||
            (probe && p.floor.priced) || fitsNothing->coversLeaner(*p.group, p.microBatch) || p.floor.bytes > capacity ||
            p.floor.seconds >= bar())
            continue;
        const PlanRequest c = combinationOf(request, *p.group, p.microBatch);
        if (settlingBound(c)) continue;
        PlannerSession& session = s.sessionOf(s.slotFor(c));
        const double stopAbove = bar(), searchLimit = probe ? -1 : limit;
        State& state = s;
        ahead.start(k, p.microBatch, session,
                    [&state, &session, c, searchLimit, stopAbove] { return state.searchOn(session, c, searchLimit, locksOf(c), stopAbove); });
        if (!ahead.mayStart()) return;
    }
}

/// A combination that cannot beat the best so far is not solved: true or false (fits nothing)
/// when what earlier solves proved settles it (settlingBound), with its candidate recorded.
std::optional<bool> Planner::State::Chooser::settleByBounds(const PlanRequest& c, Slot& slot, SettingsCandidate& cand)
{
    // The kept-gathered layout's unpriced plan, once known, bounds its resharded twin's.
    if (c.zero == 3 && !cand.reshardAfterForward && isSearch(c))
        if (const double unpriced = unpricedBoundOf(slot, c); unpriced > -std::numeric_limits<double>::infinity())
            keptGatheredBound[keptKey(c)] = unpriced;
    const std::optional<Settling> settling = settlingBound(c);
    if (!settling) return std::nullopt;
    if (settling->kind == Settling::Kind::UnderLimit && !std::isfinite(settling->bound)) { // nothing fits, without locks already
        cand.outcome = SettingsCandidate::Outcome::FitsNothing;
        best.candidates.push_back(cand);
        return false;
    }
    // Without locks a carried bound holds under any lock, as a search's own bound does.
    if (settling->kind == Settling::Kind::Carried && locksOf(c).empty()) proveUnderLimit(slot, c, limit, settling->bound);
    cand.outcome = SettingsCandidate::Outcome::Bounded;
    cand.stepSeconds = settling->bound;
    best.candidates.push_back(cand);
    return true;
}

/// Settles one combination, searching it (or taking its `early` search) unless what is known
/// settles it; whether it fits.
bool Planner::State::Chooser::consider(const PlanRequest& c, SearchJob* earlySearch)
{
    s.check();
    Slot& slot = s.slotFor(c);
    SettingsCandidate cand{c.zero, c.microBatch, c.recompute, c.zeroShard == "node", c.reshardAfterForward != "off"};
    if (const std::optional<bool> settled = settleByBounds(c, slot, cand)) return *settled;
    const bool kept = c.zero == 3 && !cand.reshardAfterForward;
    cand.searched = true;
    startNext(early, priced, c, false);
    SearchResult r = s.planOne(slot, c, limit, bar(), earlySearch);
    if (isSearch(c)) remember(slot, r);
    // A search's unpriced plan obeys the locks; a baseline is one plan, faster kept gathered.
    if (kept) keptGatheredBound[keptKey(c)] = isSearch(c) ? r.unpricedSeconds : r.breakdown.stepSeconds;
    if (r.bounded) {
        cand.outcome = SettingsCandidate::Outcome::Bounded;
        cand.stepSeconds = r.lowerBound;
        best.candidates.push_back(cand);
        return true;
    }
    cand.stepSeconds = r.breakdown.stepSeconds;
    cand.bytes = r.breakdown.perDeviceBytes;
    cand.outcome = r.fits ? SettingsCandidate::Outcome::Slower : SettingsCandidate::Outcome::FitsNothing;
    const bool fits = r.fits;
    if (better(r)) {
        best.slot = &slot;
        best.result = std::move(r);
        chosenIndex = best.candidates.size();
    }
    best.candidates.push_back(cand);
    return fits;
}

/// Whether the combination's fastest plan, limit aside (one search at price 0, which its
/// search under the limit starts with and finds cached), fits: then it is that search's
/// answer. Searches that need a memory price cost several times more, so those wait until
/// every combination whose fastest plan fits has set the bar (they then stop at it).
bool Planner::State::Chooser::fastestFits(const PlanRequest& c, SearchJob* earlySearch)
{
    if (!isSearch(c) || settlingBound(c)) return true;
    Slot& slot = s.slotFor(c);
    startNext(earlyProbes, probed, c, true);
    const SearchResult r = s.solve(slot, c, -1, locksOf(c), bar(), earlySearch);
    remember(slot, r);
    return r.bounded || r.breakdown.perDeviceBytes <= capacity;
}

/// Settles a combination by its floor, or defers it to the priced turns (`probeFirst`), or
/// considers it. `earlySearch`: its search started before its turn, at price 0 when probed.
void Planner::State::Chooser::settle(const Pending& p, bool probeFirst, SearchJob* earlySearch)
{
    const CandidateGroup& g = *p.group;
    const PlanRequest c = combinationOf(request, g, p.microBatch);
    SettingsCandidate cand{c.zero, p.microBatch, c.recompute, g.hybrid, g.reshardAfterForward};
    const bool incumbent = best.slot && best.result.fits;
    if (fitsNothing->coversLeaner(g, p.microBatch) || (incumbent && p.floor.bytes > capacity)) {
        fitsNothing->add(g, p.microBatch);
        cand.outcome = SettingsCandidate::Outcome::TooLarge;
        best.candidates.push_back(cand);
    } else if (std::isfinite(bar()) && p.floor.seconds >= bar()) {
        cand.outcome = SettingsCandidate::Outcome::Bounded;
        cand.stepSeconds = p.floor.seconds;
        best.candidates.push_back(cand);
    } else if (probeFirst && (p.floor.priced || !fastestFits(c, earlySearch))) {
        priced.push_back(&p);
    } else if (!consider(c, probeFirst ? nullptr : earlySearch) && // a probe's early search is its price-0 one
               best.candidates.back().outcome == SettingsCandidate::Outcome::FitsNothing) {
        fitsNothing->add(g, p.microBatch);
    }
}

Planner::State::Choice Planner::State::Chooser::run()
{
    const std::string last = s.lastChoice[request.baseline];
    // The last winner first: after an edit it is usually still the best, and its bound prunes.
    // Its search (at the caller's bar: nothing is known yet) runs beside the floors' ordering.
    std::optional<PlanRequest> lastWinner;
    for (const auto& g : groups)
        for (std::int64_t m : g.microBatches)
            if (const PlanRequest c = combinationOf(request, g, m); choiceKeyOf(c) == last) lastWinner = c;
    std::shared_ptr<SearchJob> lastSearch;
    if (lastWinner && isSearch(*lastWinner)) {
        PlannerSession& session = s.sessionOf(s.slotFor(*lastWinner));
        State& state = s;
        lastSearch = earlyProbes.aside(session, [&state, &session, c = *lastWinner, l = limit, stopAbove = bar()] {
            return state.searchOn(session, c, l, locksOf(c), stopAbove);
        });
    }
    pending = bestFirst(request, groups, last, capacity, forced,
                        [&](const PlanRequest& c) -> const CostModel& { return *s.slotFor(c).workspace->costModel; });
    if (lastWinner) consider(*lastWinner, lastSearch.get());
    earlyProbes.endTurn(lastSearch);
    for (const auto& p : pending) probed.push_back(&p);
    auto settleInTurn = [&](EarlySearches& ahead, const std::vector<const Pending*>& list, bool probe) {
        for (size_t turn = 0; turn < list.size(); ++turn) {
            const std::shared_ptr<SearchJob> started = ahead.beginTurn(turn, list.size());
            settle(*list[turn], probe, started.get());
            ahead.endTurn(started);
        }
    };
    settleInTurn(earlyProbes, probed, true);
    settleInTurn(early, priced, false);
    // Every turn is taken, but a dropped search may still run, reading a session that finish
    // drops (trimSessions).
    s.worker.waitIdle();
    return finish();
}

Planner::State::Choice Planner::State::Chooser::finish()
{
    if (!best.slot) { // every combination is at or over the caller's bar (PlanRequest::stopAbove)
        best.slot = &s.slotFor(probe);
        best.result.bounded = true;
        best.result.lowerBound = leastBound(best.candidates);
        return std::move(best);
    }
    best.candidates[chosenIndex].outcome = SettingsCandidate::Outcome::Chosen;
    const SettingsCandidate& won = best.candidates[chosenIndex];
    const PlanRequest w = combinationOf(request, {won.zero, won.recompute, {}, won.hybrid, won.reshardAfterForward}, won.microBatch);
    s.lastChoice[request.baseline] = choiceKeyOf(w);
    s.trimSessions(best.slot);
    if (isSearch(request) && request.compareUnlocked && !request.locks.empty()) best.unlocked = s.unlockedOf(*best.slot, w, limit);
    return std::move(best);
}

Planner::State::Choice Planner::State::choose(const PlanRequest& request, double limit)
{
    Chooser chooser(*this, request, limit);
    return chooser.run();
}

Planner::Planner() : state_(std::make_unique<State>()) {}
Planner::~Planner() = default;

PlannerResult Planner::plan(const PlanRequest& request, const std::atomic<bool>* cancel, SearchProgress* progress)
{
    if (request.pipeline != 1 && request.pipelineStage < 0) return planPipeline(request, cancel, progress);
    State& s = *state_;
    struct Flags {
        State& s;
        ~Flags()
        {
            s.cancel = nullptr;
            s.progress = nullptr;
        }
    } flags{s};
    s.cancel = cancel;
    s.progress = progress;
    s.check();
    const double limit = memoryLimitOf(request);
    costSettingsOf(request); // rejects bad settings before anything is built
    if (!isSearch(request) && !request.locks.empty())
        throw InputError("--lock applies to the search, not to the '" + request.baseline + "' baseline");
    s.useFamilyOf(request);
    const size_t slotsBefore = s.slots.size();
    double prepareMs = 0;
    for (const auto& [key, slot] : s.slots) prepareMs -= slot->prepareMs;

    PlannerResult out;
    State::Choice plan = s.choose(request, limit);
    out.result = std::move(plan.result);
    out.unlocked = std::move(plan.unlocked);
    if (choosesSettings(request)) out.candidates = std::move(plan.candidates);
    // A pipeline stage's workspace keeps sharing its planner's graph: planPipeline fills in
    // those of the pipeline it chooses (fillGraph), not those of the hundreds it rejects.
    out.workspace = request.pipelineStage >= 0 ? plan.slot->workspace : State::handOut(*plan.slot);
    for (const auto& name : request.compareBaselines) {
        PlanRequest b = request;
        b.baseline = name;
        b.locks.clear();
        b.compareUnlocked = false;
        State::Choice c = s.choose(b, limit);
        out.baselines[name] = std::move(c.result);
        out.baselineWorkspaces[name] = State::handOut(*c.slot);
    }
    for (const auto& [key, slot] : s.slots) prepareMs += slot->prepareMs;
    out.newWorkspace = s.slots.size() > slotsBefore;
    out.prepareMs = prepareMs;
    return out;
}

std::string pipelineSummary(const PipelinePlan& p)
{
    std::ostringstream out;
    out << p.schedule.stages << " stages of mesh " << p.stageMesh << ", " << scheduleText(p.schedule) << ", micro-batch "
        << (p.microBatch > 0 ? std::to_string(p.microBatch) : std::string("whole local batch")) << ": step "
        << formatSeconds(p.stepSeconds) << ", bubble " << std::fixed << std::setprecision(1) << 100 * p.bubbleFraction()
        << "%, slowest stage " << (p.stages.empty() ? 0 : p.stages[static_cast<size_t>(p.slowest)].stage + 1);
    return out.str();
}

double PipelinePlan::bubbleFraction() const
{
    if (stages.empty()) return 0;
    const PipelineStagePlan& st = stages[static_cast<size_t>(slowest)];
    // The bubble the cost model charged (pipelinedFactor: interleaving only on multiples of p).
    CostSettings settings;
    settings.pipelineBubble = bubbleMicroBatches(schedule);
    settings.pipelineStages = schedule.stages;
    return 1 - 1 / pipelinedFactor(settings, st.microBatches);
}

namespace {

/// Micro-batches per step and pipeline: the local batch of one replica over the micro-batch,
/// the replicas being the ways the plan splits the batch of the stage's first input (what it
/// receives, or the tokens on the first stage).
double microBatchesOf(const PlanWorkspace& ws, const SearchResult& r)
{
    const CostModel& model = *ws.costModel;
    const std::int64_t micro = model.settings().microBatch, batch = model.graphBatch();
    if (micro <= 0 || batch <= 0) return 1;
    const Graph& g = model.graph();
    double replicas = 1;
    for (const auto& op : g.ops) {
        auto it = std::find_if(op.inputs.begin(), op.inputs.end(),
                               [&](TensorId t) { return g.tensor(t).role == TensorRole::Input && model.batchLeading(t); });
        if (it == op.inputs.end()) continue;
        const int input = static_cast<int>(it - op.inputs.begin());
        const int strategy = r.strategyOfOp.at(static_cast<size_t>(op.id));
        replicas = model.inputSpec(op.id, strategy, input).splitsOf(0, model.mesh());
        break;
    }
    return std::max(1.0, std::ceil(static_cast<double>(batch) / replicas / static_cast<double>(micro)));
}

/// The bytes one device holds of the tensors `tensors` of a stage's graph under its plan: each
/// as its producer writes it (sent) or as its first reader reads it (received, a graph input).
double localBytesOf(const PipelineStagePlan& plan, const std::vector<TensorId>& tensors, bool sent)
{
    const PlanWorkspace& ws = *plan.workspace;
    const CostModel& cm = *ws.costModel;
    const Graph& graph = cm.graph();
    const auto producers = graph.producers();
    const auto consumers = graph.consumers();
    double bytes = 0;
    for (TensorId t : tensors) {
        const Tensor& tensor = graph.tensor(t);
        const OpId op = sent ? producers[static_cast<size_t>(t)]
                             : (consumers[static_cast<size_t>(t)].empty() ? -1 : consumers[static_cast<size_t>(t)].front());
        if (op < 0) {
            bytes += static_cast<double>(tensor.bytes());
            continue;
        }
        const std::vector<TensorId>& operands = sent ? graph.op(op).outputs : graph.op(op).inputs;
        const size_t k = static_cast<size_t>(std::find(operands.begin(), operands.end(), t) - operands.begin());
        const OpStrategy& s = cm.strategies(op).at(static_cast<size_t>(plan.result.strategyOfOp.at(static_cast<size_t>(op))));
        const TensorSpec spec = sent ? outputSpec(cm.signature(op), s, k) : inputSpec(cm.signature(op), s, k);
        bytes += static_cast<double>(spec.shardNumel(tensor.shape, ws.mesh) * dtypeBytes(tensor.dtype));
    }
    return bytes;
}

/// The stage's point-to-point traffic per step: activations to the next stage and gradients
/// back, both ways on its boundaries, over the pipeline axis's link, once per micro-batch and
/// per chunk (interleaved), through the bubble as every per-micro-batch cost. Each device sends
/// its 1/devices share (Megatron's scatter-gather over the tensor-parallel group), or without
/// scatter-gather the tensors as its plan holds them (a tensor replicated over the
/// tensor-parallel group sent whole by each of its devices).
double sendSecondsOf(const PipelineStagePlan& plan)
{
    const PlanWorkspace& ws = *plan.workspace;
    const PipelineStageInfo& info = ws.stage;
    const double perDevice =
        ws.costModel->settings().pipelineScatterGather
            ? std::max(info.receivedBytes, info.sentBytes) / static_cast<double>(ws.mesh.devices())
            : std::max(localBytesOf(plan, info.receivedTensors, false), localBytesOf(plan, info.sentTensors, true));
    if (perDevice <= 0 || info.link.link.bandwidth <= 0) return 0;
    const double oneWay = perDevice / info.link.link.bandwidth + plan.microBatches * info.link.link.latency;
    return 2 * oneWay * info.schedule.virtualStages * pipelinedFactor(ws.costModel->settings(), plan.microBatches);
}

/// The stages whose plans differ: the first (embedding, the most activations), the second (the
/// most layers and activations of the middle stages: every plan that fits it fits the later
/// middle stages, so no middle stage is slower than its best) and the last (the head).
std::vector<std::pair<int, int>> stagesToSolve(int stages)
{
    if (stages == 2) return {{0, 1}, {1, 1}};
    return {{0, 1}, {1, stages - 2}, {stages - 1, 1}};
}

} // namespace

namespace {

/// The pipelines a request leaves open: (stages, schedule) pairs, `--pipeline auto` every
/// divisor of the outermost mesh axis from 2 up to the stack's periods, `--schedule auto` 1F1B
/// and every interleaving whose chunks divide the periods per stage (of `fixedSplit` when the boundaries
/// are fixed).
std::vector<std::pair<int, std::vector<std::string>>> pipelineCandidates(const PlanRequest& request, const Mesh& mesh, int layers,
                                                                         int period, const std::vector<int>& fixedSplit)
{
    const int units = layers / period; // what a stage holds whole: a layer, or a pattern of kinds
    std::vector<int> stages = {request.pipeline};
    if (request.pipeline == kAuto) {
        stages.clear();
        for (int p = 2; p <= mesh.axes.at(0).size && p <= units; ++p)
            if (mesh.axes[0].size % p == 0) stages.push_back(p);
    }
    std::vector<std::pair<int, std::vector<std::string>>> out;
    for (int p : stages) {
        std::vector<std::string> schedules = {request.schedule};
        if (request.schedule == "auto") {
            schedules = {"1f1b"};
            for (int v = 2; v <= units / p; ++v) {
                // Chunks divide every stage's periods: the even split's, or the fixed split's.
                const bool divides = fixedSplit.empty() ? units % (p * v) == 0
                                                        : std::all_of(fixedSplit.begin(), fixedSplit.end(),
                                                                      [&](int n) { return n / period % v == 0; });
                if (divides) schedules.push_back("interleaved:" + std::to_string(v));
            }
        }
        out.emplace_back(p, std::move(schedules));
    }
    return out;
}

} // namespace

namespace {

/// The request of one stage of a pipeline (its own planner's: Planner::State::stagePlanners).
PlanRequest stageRequestOf(const PlanRequest& request, const PipelineSchedule& schedule, std::int64_t microBatch, int stage)
{
    PlanRequest r = request;
    r.compareBaselines.clear();
    r.compareUnlocked = false;
    r.pipeline = schedule.stages;
    r.schedule = scheduleWord(schedule);
    r.microBatch = microBatch;
    r.pipelineStage = stage;
    return r;
}

} // namespace

Planner& Planner::stagePlanner(const PlanRequest& stageRequest)
{
    State& s = *state_;
    std::lock_guard<std::mutex> lock(s.stagePlannersMutex);
    auto& planner = s.stagePlanners[modelKeyOf(stageRequest) + "|" + stageRequest.mesh + "|" + stageRequest.hardware];
    if (!planner) planner = std::make_unique<Planner>();
    // The stage graphs of one stage count repeat the same layers on the same stage mesh, each
    // with its own ops: their edges are shared by content (CrossGraphEdges), within the family
    // of this request (a kept planner asked under other links or dtypes starts its caches
    // afresh, State::useFamilyOf, and takes this family's).
    PlanRequest anyStage = stageRequest;
    anyStage.pipelineStage = -1;
    anyStage.stageSplit.clear();
    auto& cross = s.crossGraphs[familyKeyOf(anyStage)];
    if (!cross.edges) cross = {makeCrossGraphEdges(), makeClassCostCache()};
    planner->state_->crossGraph = cross;
    return *planner; // a map's elements stay where they are while others are added
}

namespace {

/// A split in which stage `stage` holds instances [first, first + count) of the run and every
/// stage a multiple of `chunk` (the others sharing the rest evenly, in chunks): the split a
/// stage's own plan is solved under while the boundaries are searched (its graph depends on its
/// own range only; Planner::planPipeline writes the chosen split into the plan's workspaces).
std::vector<int> splitHolding(int layers, int stages, int chunk, int stage, int first, int count)
{
    std::vector<int> split(static_cast<size_t>(stages), 0);
    split[static_cast<size_t>(stage)] = count;
    if (stage == 1 && stages > 2) split[0] = first;
    std::vector<size_t> open;
    int rest = layers;
    for (size_t s = 0; s < split.size(); ++s) {
        rest -= split[s];
        if (split[s] == 0) open.push_back(s);
    }
    const int units = rest / chunk, share = units / static_cast<int>(open.size());
    for (size_t i = 0; i < open.size(); ++i)
        split[open[i]] = chunk * (share + (static_cast<int>(i) < units % static_cast<int>(open.size()) ? 1 : 0));
    return split;
}

} // namespace

PipelinePlan Planner::planStages(const PlanRequest& request, int stages, const std::string& schedule, std::int64_t microBatch,
                                 StageMode mode, double stopAbove, const std::atomic<bool>* cancel, SearchProgress* progress,
                                 const PipelinePlan* seed)
{
    const bool bound = mode != StageMode::Pipeline, everyStage = mode == StageMode::EvenFloor;
    PipelinePlan plan;
    plan.schedule = parseSchedule(stages, schedule);
    plan.microBatch = microBatch;
    // A floor (bound) balances in single periods: it bounds every schedule of its stage count,
    // whose splits are those of their chunks, all among the single-period ones.
    const int layers = request.stageCutter->layers(), period = request.stageCutter->period();
    const int chunk = period * (bound ? 1 : plan.schedule.virtualStages);
    const auto [firstLayers, lastLayers] = parseStageLayers(request.stageLayers);
    const std::vector<int> start =
        firstLayers > 0 ? splitWithEnds(layers, stages, firstLayers, lastLayers, period) : evenSplit(layers, stages, period);
    // Every stage solved for this pipeline, by stage and range; a stage that stopped at its bar
    // is not kept (balanceStages remembers the bar).
    std::map<std::tuple<int, int, int>, PipelineStagePlan> solved;
    if (seed && bound)
        for (const auto& st : seed->stages) solved.emplace(std::make_tuple(st.stage, -1, st.workspace->stage.layers), st);
    auto solve = [&](int stage, const std::vector<int>& split, double bar) -> const PipelineStagePlan* {
        int first = 0;
        for (int s = 0; s < stage; ++s) first += split[static_cast<size_t>(s)];
        // A floor needs its stages' steps and sends only, which do not depend on where the
        // range lies: one solve per stage and count.
        const auto key = std::make_tuple(stage, bound ? -1 : first, split[static_cast<size_t>(stage)]);
        if (auto it = solved.find(key); it != solved.end()) return &it->second;
        PlanRequest r = stageRequestOf(request, plan.schedule, microBatch, stage);
        r.stageSplit = split;
        r.pipelineBound = bound;
        r.stopAbove = bar;
        PlannerResult got = stagePlanner(r).plan(r, cancel, progress);
        if (got.result.bounded) return nullptr; // no plan of this stage is under the bar
        PipelineStagePlan st;
        st.stage = stage;
        st.workspace = got.workspace;
        st.result = std::move(got.result);
        st.microBatches = microBatchesOf(*st.workspace, st.result);
        if (!bound) st.sendSeconds = sendSecondsOf(st);
        return &solved.emplace(key, std::move(st)).first->second;
    };
    std::vector<int> split = start;
    const bool balancing = request.stageLayers == "auto" && !everyStage;
    if (balancing) {
        const StageValue value = [&](int role, int count, double bar) {
            const int stage = role == 0 ? 0 : role == 1 ? 1 : stages - 1;
            // The middle stages' representative where the start split puts it, moved where
            // that leaves the later stages too few layers.
            const int first = role != 1 ? (role == 0 ? 0 : layers - count)
                                        : std::clamp(start.front() / chunk * chunk, chunk, layers - count - (stages - 2) * chunk);
            const PipelineStagePlan* st = solve(stage, splitHolding(layers, stages, chunk, stage, first, count), bar);
            return st && st->result.fits ? st->stepSeconds() : std::numeric_limits<double>::infinity();
        };
        split = balanceStages(layers, PipelineSchedule{stages, chunk}, start, value, stopAbove);
    }
    plan.layersOfStage = split;
    // The last stage (the head and the loss) first: it is the slowest more often than not, and a
    // stage at or over `stopAbove` settles the pipeline.
    auto order = stagesToSolve(stages);
    std::rotate(order.begin(), order.end() - 1, order.end());
    for (const auto& [stage, standsFor] : order) {
        const PipelineStagePlan* st = solve(stage, split, stopAbove);
        // An even floor under balanced boundaries needs every stage (floorOf): one over the bar
        // is left out.
        if (!st && everyStage) continue;
        if (!st) { // no plan of this stage is under the bar: neither is the pipeline
            plan.stages.clear();
            plan.complete = false;
            return plan;
        }
        plan.stages.push_back(*st);
        plan.stages.back().standsFor = standsFor;
        // A stage that does not fit settles it too once something fits (a plan to beat).
        if (!everyStage && std::isfinite(stopAbove) && (!st->result.fits || st->stepSeconds() >= stopAbove)) break;
    }
    if (plan.stages.empty()) {
        plan.complete = false;
        return plan;
    }
    std::sort(plan.stages.begin(), plan.stages.end(), [](const auto& x, const auto& y) { return x.stage < y.stage; });
    plan.stageMesh = plan.stages.front().workspace->mesh.shapeText();
    plan.complete = plan.stages.size() == order.size();
    for (size_t i = 0; i < plan.stages.size(); ++i)
        if (i == 0 || plan.stages[i].stepSeconds() > plan.stepSeconds) {
            plan.stepSeconds = plan.stages[i].stepSeconds();
            plan.slowest = static_cast<int>(i);
        }
    return plan;
}

namespace {

/// The layers of the stack that stages split and its period ({0, 1} when there is none).
std::pair<int, int> stackOf(const FoldedGraph& folded)
{
    const std::optional<LayerStack> stack = layerStack(folded);
    return stack ? std::pair{static_cast<int>(stack->layers.size()), stack->period} : std::pair{0, 1};
}

bool fitsAll(const PipelinePlan& p)
{
    return std::all_of(p.stages.begin(), p.stages.end(), [](const auto& st) { return st.result.fits; });
}

/// A floor under a schedule's pipeline, whatever its split: the floor of every schedule (the
/// least bubble, no sends; with balanced boundaries the best split's) plus the least sends of
/// `schedule` of any stage (one message per micro-batch, no bubble factor).
double floorWithSends(const PipelinePlan& floor, double floorSeconds, const PipelineSchedule& schedule)
{
    double least = std::numeric_limits<double>::infinity();
    for (const auto& st : floor.stages) {
        const PipelineStageInfo& info = st.workspace->stage;
        const double perDevice = std::max(info.receivedBytes, info.sentBytes) / static_cast<double>(st.workspace->mesh.devices());
        least = std::min(least, info.link.link.bandwidth > 0 ? 2 * schedule.virtualStages * perDevice / info.link.link.bandwidth : 0);
    }
    // A stage left out (over the bar) may send the least: then none is assumed.
    if (floor.stages.size() < stagesToSolve(schedule.stages).size()) least = 0;
    return floorSeconds + (std::isfinite(least) ? least : 0);
}

/// The floor of a micro-batch's pipelines from a bound plan (every schedule's least bubble,
/// 1F1B's in-flight activations: no stage of any schedule is faster). Its slowest stage when the
/// plan's split is the one to beat (fixed boundaries, or the balanced floor: StageMode::Floor).
/// `evenOfBalanced`: the plan is the even split's with the boundaries left to balance
/// (StageMode::EvenFloor), and its fastest stage is the floor (a stage over the bar or not
/// fitting counts as infinite): any split gives some stage at least the layers the even split
/// gives it (they add up to the same), and a stage with more layers is no faster.
double floorOf(const PipelinePlan& bound, bool evenOfBalanced)
{
    const double inf = std::numeric_limits<double>::infinity();
    if (!evenOfBalanced) return bound.complete && fitsAll(bound) ? bound.stepSeconds : inf;
    double least = inf;
    for (const auto& st : bound.stages)
        if (st.result.fits) least = std::min(least, st.stepSeconds());
    return least;
}

/// The workspace of a chosen pipeline's stage with that pipeline's split: a stage's plan is
/// solved once for every split that gives it the same layers (the graph is its own range
/// only), so the split it was first solved under may differ. The copy shares the graph and
/// rebuilds the cost model from the solved one's structure, so the plan's strategies hold.
std::shared_ptr<const PlanWorkspace> withSplit(const std::shared_ptr<const PlanWorkspace>& solved, const std::vector<int>& split)
{
    if (solved->stage.layersOfStage == split) return solved;
    auto ws = sharingGraphOf(solved);
    ws->stage.layersOfStage = split;
    attachCostModel(*ws, solved->costModel->settings(), solved->costModel.get());
    fillGraph(*ws);
    return ws;
}

double mostMemory(const PipelinePlan& p)
{
    double most = 0;
    for (const auto& st : p.stages) most = std::max(most, st.result.breakdown.perDeviceBytes);
    return most;
}

/// The best pipeline found so far, shared by the workers that search them (Planner::planPipeline).
/// Which of two equal pipelines wins does not depend on the order they are found in (fewer
/// stages, then fewer chunks, then the smaller micro-batch), and a bar prunes only what is
/// strictly slower, so the answer is the same with any number of workers.
} // namespace

class Planner::BestPipeline {
public:
    /// Whatever is at or over this is strictly slower than a pipeline that fits, or no faster
    /// than the plan without a pipeline that fits (which wins ties: Planner::planPipeline).
    double pruneAt() const
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const double pipeline = best_ && fitsAll(*best_) ? std::nextafter(best_->stepSeconds, std::numeric_limits<double>::infinity())
                                                         : std::numeric_limits<double>::infinity();
        return std::min(pipeline, flat_);
    }
    /// The plan without a pipeline, once solved: a pipeline must be strictly faster to win.
    void considerFlat(const SearchResult& r)
    {
        if (r.bounded || !r.fits) return;
        std::lock_guard<std::mutex> lock(mutex_);
        flat_ = std::min(flat_, r.breakdown.stepSeconds);
    }
    void consider(PipelinePlan p)
    {
        if (!p.complete) return;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!best_ || better(p, *best_)) best_ = std::move(p);
    }
    std::optional<PipelinePlan>& best() { return best_; } ///< once the workers are done

private:
    static bool better(const PipelinePlan& p, const PipelinePlan& q)
    {
        const bool pf = fitsAll(p), qf = fitsAll(q);
        if (pf != qf) return pf;
        const double pv = pf ? p.stepSeconds : mostMemory(p), qv = qf ? q.stepSeconds : mostMemory(q);
        if (pv != qv) return pv < qv;
        return std::make_tuple(p.schedule.stages, p.schedule.virtualStages, p.microBatch) <
               std::make_tuple(q.schedule.stages, q.schedule.virtualStages, q.microBatch);
    }
    mutable std::mutex mutex_;
    std::optional<PipelinePlan> best_;
    double flat_ = std::numeric_limits<double>::infinity();
};

namespace {

/// Runs `tasks` on up to `workers` threads (the first task alone first: it sets the bar the
/// others start from); the first exception is rethrown once every thread is done.
void runTasks(const std::vector<std::function<void()>>& tasks, int workers)
{
    if (tasks.empty()) return;
    tasks.front()();
    std::atomic<size_t> next{1};
    std::mutex failed;
    std::exception_ptr error;
    auto work = [&] {
        for (size_t i = next++; i < tasks.size(); i = next++) {
            try {
                tasks[i]();
            } catch (...) {
                std::lock_guard<std::mutex> lock(failed);
                if (!error) error = std::current_exception();
                next = tasks.size(); // the others stop after their current task
            }
        }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < workers && static_cast<size_t>(w) < tasks.size() - 1; ++w) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
}

/// Adds to `staged` the request of each stage count it lacks: the whole model loaded for the
/// stage mesh (its vocabulary padded for the mesh's tensor parallelism; one load per stage
/// mesh) and folded once, for every stage request to cut its stage from.
void addStagedRequests(std::map<int, PlanRequest>& staged, const PlanRequest& whole, const Mesh& mesh,
                       const std::vector<int>& stageCounts)
{
    const Hardware hardware = loadHardware(whole.hardware);
    for (int stages : stageCounts) {
        if (staged.count(stages)) continue;
        const std::string stageMesh = stageMeshText(mesh, stages);
        auto same = std::find_if(staged.begin(), staged.end(), [&](const auto& s) { return stageMeshText(mesh, s.first) == stageMesh; });
        PlanRequest r = whole;
        if (same != staged.end()) {
            r.wholeModel = same->second.wholeModel;
            r.wholeFold = same->second.wholeFold;
        } else {
            r.wholeModel = std::make_shared<const LoadedModel>(loadModel(
                whole.model, withPaddedVocabulary(whole.model, whole.modelOptions, parseMesh(stageMesh, hardware), hardware)));
            r.wholeFold = std::make_shared<const FoldedGraph>(foldGraph(r.wholeModel->graph));
        }
        if (same != staged.end()) r.stageCutter = same->second.stageCutter;
        else if (stackOf(*r.wholeFold).first > 0)
            r.stageCutter = std::make_shared<const StageCutter>(r.wholeModel->graph, *r.wholeFold);
        staged.emplace(stages, std::move(r));
    }
}

} // namespace

void Planner::searchPipelines(const PlanRequest& staged, int stages, const std::vector<std::string>& schedules,
                              const std::vector<std::int64_t>& micro, bool choosing, BestPipeline& found,
                              const std::atomic<bool>* cancel, SearchProgress* progress)
{
    // Best first: every micro-batch gets a floor under all the schedules (the bubble of the
    // most chunks, no sends, 1F1B's in-flight activations: the least of each of any schedule;
    // a stage's step grows with its bubble and its activations), and the pipelines are solved
    // in the order of their floors until the next floor reaches the best step so far.
    struct Open {
        std::int64_t microBatch;
        double floor;
        PipelinePlan bound;
    };
    auto solveSchedules = [&](const Open& o) {
        for (const std::string& schedule : schedules) {
            // Each stage pays at least its floor plus the sends of this schedule.
            if (choosing && floorWithSends(o.bound, o.floor, parseSchedule(stages, schedule)) >= found.pruneAt()) continue;
            found.consider(planStages(staged, stages, schedule, o.microBatch, StageMode::Pipeline, found.pruneAt(), cancel, progress));
        }
    };
    // With balanced boundaries a micro-batch first gets the even split's floor with every stage
    // solved (its fastest stage bounds every split: floorOf), and only when that is under the bar
    // at its turn the balanced floor (Floor), asked under the bar of that moment.
    const bool balanced = staged.stageLayers == "auto";
    auto refine = [&](Open& o) {
        if (!balanced) return true;
        o.bound = planStages(staged, stages, schedules.back(), o.microBatch, StageMode::Floor, found.pruneAt(), cancel, progress,
                             &o.bound);
        o.floor = floorOf(o.bound, false);
        return o.floor < found.pruneAt();
    };
    std::vector<Open> open;
    for (std::int64_t m : micro) {
        if (!choosing) {
            open.push_back({m, 0, {}});
            continue;
        }
        PipelinePlan f = planStages(staged, stages, schedules.back(), m, balanced ? StageMode::EvenFloor : StageMode::Floor,
                                    found.pruneAt(), cancel, progress);
        const double floor = floorOf(f, balanced);
        if (!(floor < found.pruneAt())) continue;
        Open o{m, floor, std::move(f)};
        // Nothing to beat yet: this one's schedules now, so that the other floors stop at them.
        if (!std::isfinite(found.pruneAt())) {
            if (refine(o)) solveSchedules(o);
        } else {
            open.push_back(std::move(o));
        }
    }
    std::stable_sort(open.begin(), open.end(), [](const Open& x, const Open& y) { return x.floor < y.floor; });
    for (Open& o : open) {
        if (o.floor >= found.pruneAt()) break;
        if (!choosing || refine(o)) solveSchedules(o);
    }
}

PlannerResult Planner::planPipeline(const PlanRequest& request, const std::atomic<bool>* cancel, SearchProgress* progress)
{
    State& s = *state_;
    if (request.pipeline < kAuto || request.pipeline == 0)
        throw InputError("--pipeline " + std::to_string(request.pipeline) + ": use auto or a positive number of stages");
    if (request.pipeline != kAuto) parseSchedule(request.pipeline, request.schedule == "auto" ? "1f1b" : request.schedule);
    PlanRequest whole = request;
    whole.pipeline = 1;
    whole.schedule = "1f1b";
    costSettingsOf(whole); // rejects bad settings before anything is built
    const bool automatic = request.pipeline == kAuto;
    const auto [firstLayers, lastLayers] = parseStageLayers(request.stageLayers);
    if (automatic && firstLayers > 0)
        throw InputError("--stage-layers " + request.stageLayers + ": fixes the boundaries of one pipeline; give --pipeline P too");
    if (whole.mode != "train") {
        if (automatic) return plan(whole, cancel, progress);
        throw InputError("--pipeline: pipelines are costed for training, not --mode infer");
    }
    const Mesh mesh = parseMesh(request.mesh, loadHardware(request.hardware));
    if (request.pipeline != kAuto) stageMeshText(mesh, request.pipeline); // the stages must divide the outer axis
    // Locks name the axes of the mesh they are planned on, which differs between a stage's mesh
    // and the whole one: a locked `auto` is planned on the whole mesh; --pipeline P locks a
    // stage's ops on the stage mesh (each stage honours the locks that match its ops).
    if (automatic && (mesh.axes.at(0).size < 2 || !request.locks.empty())) return plan(whole, cancel, progress);
    const int firstCount = automatic ? mesh.axes.at(0).size : request.pipeline;
    std::map<int, PlanRequest> staged;
    addStagedRequests(staged, whole, mesh, {firstCount});
    const PlanRequest& any = staged.begin()->second;
    requireLockMatches(any.wholeModel->graph, locksOf(request));
    const auto [layers, period] = stackOf(*any.wholeFold);
    // A fixed schedule is checked against the layers here: the stage planners' later
    // combinations share the graph their first one checked (Planner::State::slotFor).
    std::vector<int> fixedSplit;
    if (!automatic) {
        splitIntoStages(*any.wholeFold, PipelineSchedule{request.pipeline, 1}); // a stack of at least P periods
        if (firstLayers > 0) fixedSplit = splitWithEnds(layers, request.pipeline, firstLayers, lastLayers, period);
        splitIntoStages(*any.wholeFold, parseSchedule(request.pipeline, request.schedule == "auto" ? "1f1b" : request.schedule),
                        fixedSplit);
    }
    const std::int64_t batch = graphBatchOf(any.wholeModel->graph);
    checkMicroBatch(request.microBatch, batch);
    const std::vector<std::int64_t> micro =
        request.microBatch == kAuto ? microBatchCandidates(batch) : std::vector<std::int64_t>{request.microBatch};
    const auto candidates = pipelineCandidates(request, mesh, layers, period, fixedSplit);
    if (candidates.empty()) return plan(whole, cancel, progress); // auto, and no pipeline can be laid out
    // Every pipeline keeps the model states on the devices that run them: at least the whole
    // model's states (ZeRO 3 over every device) over all of them. Past the limit no pipeline
    // fits, and `auto` plans without one, which reports what does fit (DeepSeek-V3 on 64 GPUs:
    // 671B x 16 B / 64 = 168 GB, where the stage searches took a minute to find nothing).
    if (automatic) {
        const CostSettings settings = costSettingsOf(whole);
        const double states = static_cast<double>(any.wholeModel->graph.parameterCount()) *
                              (settings.paramBytesPerParam + settings.gradBytesPerParam + settings.optimizerBytesPerParam);
        const double limit = memoryLimitBytes(memoryLimitOf(request), loadHardware(request.hardware));
        if (limit > 0 && std::isfinite(limit) && states / static_cast<double>(mesh.devices()) > limit) return plan(whole, cancel, progress);
    }
    const bool choosing = candidates.size() > 1 || micro.size() > 1 || candidates.front().second.size() > 1 || automatic;
    std::vector<int> counts;
    for (const auto& c : candidates) counts.push_back(c.first);
    addStagedRequests(staged, whole, mesh, counts);

    // The plan without a pipeline first, alone: its step bars every stage count's pipelines
    // (a pipeline must be strictly faster to win), and measured it prunes them at least as well
    // as the most stages first pruned it (LLaMA-3 8B on 2x8: 0.17 s of CPU against 0.28 s;
    // llama3-8b on 4x4x8: 8.9 s against 12.8 s). Then the stage counts, most stages first (the
    // smallest stage meshes, the fastest searches, whose best bars the others), in parallel,
    // each on its own stage planners.
    BestPipeline found;
    std::optional<PlannerResult> flat;
    std::vector<std::function<void()>> tasks;
    auto searchCount = [&](auto c) {
        return [&, c] { searchPipelines(staged.at(c->first), c->first, c->second, micro, choosing, found, cancel, progress); };
    };
    if (automatic)
        tasks.push_back([&] {
            PlanRequest w = whole;
            w.stopAbove = found.pruneAt();
            flat = plan(w, cancel, progress);
            found.considerFlat(flat->result);
        });
    tasks.push_back(searchCount(candidates.rbegin()));
    for (auto c = std::next(candidates.rbegin()); c != candidates.rend(); ++c) tasks.push_back(searchCount(c));
    runTasks(tasks, workersOf(request));
    std::optional<PipelinePlan>& best = found.best();
    // Only the chosen pipeline's stage planners are kept (their sessions hold the most memory).
    std::vector<std::string> kept;
    if (best)
        for (const auto& st : best->stages) {
            const PipelineStageInfo& info = st.workspace->stage;
            kept.push_back("|pipeline " + std::to_string(best->schedule.stages) + " " + std::to_string(st.stage) + " layers " +
                           std::to_string(info.firstLayer) + "+" + std::to_string(info.layers) + "|");
        }
    for (auto it = s.stagePlanners.begin(); it != s.stagePlanners.end();) {
        const bool keep = std::any_of(kept.begin(), kept.end(), [&](const std::string& k) { return it->first.find(k) != std::string::npos; });
        it = keep ? std::next(it) : s.stagePlanners.erase(it);
    }
    s.crossGraphs.clear(); // the kept planners keep theirs
    if (flat && !flat->result.bounded &&
        (!best || (flat->result.fits && (!fitsAll(*best) || flat->result.breakdown.stepSeconds <= best->stepSeconds))))
        return std::move(*flat);
    // Nothing fits: the pipeline with the fewest activations (the smallest micro-batch), to show
    // what it needs.
    if (!best) {
        const auto& [stages, schedules] = candidates.front();
        found.consider(planStages(staged.at(stages), stages, schedules.front(), micro.front(), StageMode::Pipeline,
                                  std::numeric_limits<double>::infinity(), cancel, progress));
    }
    for (auto& st : best->stages) {
        st.workspace = withSplit(st.workspace, best->layersOfStage);
        fillGraph(*st.workspace);
    }
    PlannerResult out;
    const PipelineStagePlan& slowest = best->stages[static_cast<size_t>(best->slowest)];
    out.workspace = slowest.workspace;
    out.result = slowest.result;
    if (!request.compareBaselines.empty()) {
        // Every stage's baselines, each on its stage's own planner (its workspaces are cached),
        // so that a view of any stage compares with baselines of the same graph.
        for (PipelineStagePlan& st : best->stages) {
            PlanRequest r = stageRequestOf(staged.at(best->schedule.stages), best->schedule, best->microBatch, st.stage);
            r.stageSplit = best->layersOfStage;
            r.compareBaselines = request.compareBaselines;
            PlannerResult withBaselines = stagePlanner(r).plan(r, cancel, progress);
            st.baselines = std::move(withBaselines.baselines);
            st.baselineWorkspaces = std::move(withBaselines.baselineWorkspaces);
        }
        out.baselines = slowest.baselines;
        out.baselineWorkspaces = slowest.baselineWorkspaces;
    }
    out.pipeline = std::move(best);
    return out;
}

} // namespace tp
