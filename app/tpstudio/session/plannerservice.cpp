#include "plannerservice.h"

#include <chrono>

namespace tp {

PlanRequest guiPlanRequest(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    PlanRequest request = settings.toRequest(locks);
    request.compareUnlocked = true;
    request.compareBaselines = {"megatron", "dp"};
    return request;
}

int stagePlanIndex(const PipelinePlan& pipeline, int stage)
{
    for (size_t i = 0; i < pipeline.stages.size(); ++i)
        if (const PipelineStagePlan& st = pipeline.stages[i]; st.stage <= stage && stage < st.stage + st.standsFor)
            return static_cast<int>(i);
    return -1;
}

std::shared_ptr<const PlanOutcome> showingStage(const std::shared_ptr<const PlanOutcome>& planned, int stage)
{
    if (!planned || !planned->pipeline) return planned;
    const int index = stagePlanIndex(*planned->pipeline, stage);
    if (index < 0 || index == planned->pipeline->slowest) return planned;
    const PipelineStagePlan& shown = planned->pipeline->stages[static_cast<size_t>(index)];
    // The views compare a plan with baselines of its own graph: Planner fills them for every
    // stage of a pipeline when asked (guiPlanRequest); without them the stage is not shown.
    const auto megatron = shown.baselines.find("megatron"), dataParallel = shown.baselines.find("dp");
    if (megatron == shown.baselines.end() || dataParallel == shown.baselines.end()) return planned;
    auto out = std::make_shared<PlanOutcome>(*planned);
    out->workspace = shown.workspace;
    out->newWorkspace = true;
    out->result = shown.result;
    out->unlocked.reset(); // the search without locks is the slowest stage's
    out->megatron = megatron->second;
    out->dataParallel = dataParallel->second;
    out->megatronWorkspace = shown.baselineWorkspaces.count("megatron") ? shown.baselineWorkspaces.at("megatron") : nullptr;
    out->dataParallelWorkspace = shown.baselineWorkspaces.count("dp") ? shown.baselineWorkspaces.at("dp") : nullptr;
    return out;
}

PlannerService::PlannerService(QObject* parent) :
    QObject(parent),
    planner_(std::make_shared<Planner>()),
    fitHints_(std::make_shared<std::map<std::string, std::optional<MeshFit>>>()),
    jobs_([this](quint64 jobId, std::shared_ptr<PlanOutcome> outcome) {
        outcome->jobId = jobId;
        emit finished(std::move(outcome));
    })
{
    qRegisterMetaType<std::shared_ptr<const tp::PlanOutcome>>();
    connect(&jobs_, &JobTracker::started, this, &PlannerService::started);
    connect(&jobs_, &JobTracker::failed, this, &PlannerService::failed);
    connect(&jobs_, &JobTracker::dropped, this, &PlannerService::dropped);
    connect(&jobs_, &JobTracker::cancelled, this, &PlannerService::cancelled);
    connect(&jobs_, &JobTracker::idle, this, &PlannerService::idle);
}

// The running job returns at its next cancel check (between block tables): jobs_ waits for
// that, not for the whole search.
PlannerService::~PlannerService() = default;

JobProgress PlannerService::progress() const
{
    JobProgress p;
    p.running = jobs_.isBusy();
    if (!latestProgress_) return p;
    p.elapsedMs = static_cast<double>(latestStart_.elapsed());
    p.pricesTried = latestProgress_->pricesTried.load(std::memory_order_relaxed);
    p.tablesSolved = latestProgress_->tablesSolved.load(std::memory_order_relaxed);
    return p;
}

quint64 PlannerService::request(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    auto progress = std::make_shared<SearchProgress>();
    latestProgress_ = progress;
    latestStart_.start();
    std::shared_ptr<Planner> planner = planner_;
    auto fitHints = fitHints_;
    return jobs_.start([planner, fitHints, settings, locks, progress](const std::atomic<bool>& cancel) {
        const auto start = std::chrono::steady_clock::now();
        const PlanRequest request = guiPlanRequest(settings, locks);
        PlannerResult planned = planner->plan(request, &cancel, progress.get());
        auto out = std::make_shared<PlanOutcome>();
        out->settings = settings;
        out->locks = locks;
        out->workspace = std::move(planned.workspace);
        out->newWorkspace = planned.newWorkspace;
        out->prepareMs = planned.prepareMs;
        out->result = std::move(planned.result);
        out->unlocked = std::move(planned.unlocked);
        out->megatron = std::move(planned.baselines.at("megatron"));
        out->dataParallel = std::move(planned.baselines.at("dp"));
        out->megatronWorkspace = planned.baselineWorkspaces.at("megatron");
        out->dataParallelWorkspace = planned.baselineWorkspaces.at("dp");
        out->candidates = std::move(planned.candidates);
        out->pipeline = std::move(planned.pipeline);
        if (!out->result.fits && !out->pipeline) { // the meshes tried hold no pipeline
            const std::string key = workspaceKeyOf(request) + "|" + request.memoryLimit + "|" + request.recompute;
            auto hint = fitHints->find(key);
            if (hint == fitHints->end())
                hint = fitHints->emplace(key, smallestFittingMesh(request, *out->workspace, &cancel)).first;
            out->fitsOn = hint->second;
        }
        out->wallMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        return out;
    });
}

} // namespace tp
