#pragma once
// Runs the core Planner (core/plan/planner.h, the one planning path tpplan plan uses too) off
// the GUI thread, through LatestJob: only the newest request's plan is delivered, so a burst of
// edits costs one search and the UI never waits. A newer request also cancels the search that
// is running (PlannerSession's cancel flag), and cancel() stops the newest job on request; a
// cancelled job delivers neither a plan nor an error. The planner, with its cached workspace and
// class tables, lives between requests; this class holds no planning logic of its own.
#include <map>
#include <memory>
#include <optional>

#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include "latestjob.h"
#include "plan/mesh_fit.h"
#include "plansettings.h"

namespace tp {

/// One finished job: the plan and the comparison plans, all costed by the same workspace.
struct PlanOutcome {
    quint64 jobId = 0;
    PlanSettings settings;
    std::vector<LockRequest> locks;
    std::shared_ptr<const PlanWorkspace> workspace;
    bool newWorkspace = false;            ///< the model, mesh or hardware changed: views rebuild
    SearchResult result;                  ///< the plan (the search around the locks)
    std::optional<SearchResult> unlocked; ///< the same search without locks, when there are locks
    SearchResult megatron;
    SearchResult dataParallel;
    /// The baselines' workspaces: each chose its own micro-batch and ZeRO stage (planner.h).
    std::shared_ptr<const PlanWorkspace> megatronWorkspace, dataParallelWorkspace;
    /// The combinations of settings the planner chose among (empty when all were fixed).
    std::vector<SettingsCandidate> candidates;
    /// A pipelined plan: every stage's (`workspace` and `result` are the slowest stage's).
    std::optional<PipelinePlan> pipeline;
    /// Where no plan fits: the smallest preset mesh on which one does (core/plan/mesh_fit.h),
    /// std::nullopt when the plan fits or no preset mesh helps.
    std::optional<MeshFit> fitsOn;
    double prepareMs = 0; ///< model load + cost model + fold, when redone
    double wallMs = 0;    ///< request to result, on the worker
};

/// The index into `pipeline.stages` of the stage plan that runs pipeline stage `stage`
/// (0-based; PipelineStagePlan::standsFor), or -1 when no stage plan runs it.
int stagePlanIndex(const PipelinePlan& pipeline, int stage);

/// `planned` as the views show pipeline stage `stage`: the workspace, plan and baselines of the
/// stage plan that runs it (stagePlanIndex), the rest as planned. `planned` itself when that is
/// the slowest stage's plan (the one planned), when it has no pipeline, or no such stage.
std::shared_ptr<const PlanOutcome> showingStage(const std::shared_ptr<const PlanOutcome>& planned, int stage);

/// How far the newest job has got, for a status line while it runs.
struct JobProgress {
    bool running = false;
    double elapsedMs = 0; ///< since the request
    int pricesTried = 0;  ///< memory prices searched so far (all the job's searches)
    int tablesSolved = 0; ///< class tables computed so far
};

/// The request the GUI sends for these settings: the search around the locks, compared with
/// the search without them and with the Megatron-LM and data-parallel baselines.
PlanRequest guiPlanRequest(const PlanSettings& settings, const std::vector<LockRequest>& locks);

class PlannerService : public QObject {
    Q_OBJECT
public:
    explicit PlannerService(QObject* parent = nullptr);
    ~PlannerService() override;

    /// Queues a plan for these inputs; returns its job id. Newer requests supersede older ones.
    quint64 request(const PlanSettings& settings, const std::vector<LockRequest>& locks);
    quint64 latestJob() const { return jobs_.latestJob(); }
    bool isBusy() const { return jobs_.isBusy(); }
    /// The newest job's progress (GUI thread; the counters are written by the worker).
    JobProgress progress() const;
    /// See JobTracker::cancel, shutdown, interruptedJobs, waitForIdle.
    bool cancel() { return jobs_.cancel(); }
    void shutdown() { jobs_.shutdown(); }
    int interruptedJobs() const { return jobs_.interruptedJobs(); }
    void waitForIdle() { jobs_.waitForIdle(); }

signals:
    void started(quint64 jobId);
    void finished(std::shared_ptr<const tp::PlanOutcome> outcome);
    void failed(quint64 jobId, const QString& message);
    /// A job superseded by a newer request (skipped, stopped, or its result discarded).
    void dropped(quint64 jobId);
    /// The newest job, stopped by cancel(): no plan, no error.
    void cancelled(quint64 jobId);
    /// The last job in flight ended (whatever its outcome): isBusy() is false now.
    void idle();

private:
    std::shared_ptr<Planner> planner_; // used by one job at a time (LatestJob runs them in order)
    /// Where a plan that fits nothing would fit, by workspace key and memory limit: a lock or
    /// a re-plan of the same settings does not search the larger meshes again (same one job
    /// at a time as planner_).
    std::shared_ptr<std::map<std::string, std::optional<MeshFit>>> fitHints_;
    LatestJob<std::shared_ptr<PlanOutcome>> jobs_;
    /// The newest job's counters and when it was requested (GUI thread; the job holds its own
    /// reference).
    std::shared_ptr<SearchProgress> latestProgress_;
    QElapsedTimer latestStart_;
};

} // namespace tp

Q_DECLARE_METATYPE(std::shared_ptr<const tp::PlanOutcome>)
