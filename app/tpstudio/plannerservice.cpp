#include "plannerservice.h"

#include <chrono>

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "cost/baselines.h"
#include "search/evaluate.h"
#include "util/error.h"

namespace tp {

namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

/// preparePlan, then the link overrides of the settings (the cost model is rebuilt when a link
/// changes, since it reads the mesh's links when it is built).
std::shared_ptr<PlanWorkspace> prepareWorkspace(const PlanSettings& settings)
{
    std::shared_ptr<PlanWorkspace> ws = preparePlan(settings.toRequest({}));
    if (settings.intraNodeGBps > 0 || settings.interNodeGBps > 0) {
        if (settings.intraNodeGBps > 0) ws->hardware.intraNode.bandwidth = settings.intraNodeGBps * 1e9;
        if (settings.interNodeGBps > 0) ws->hardware.interNode.bandwidth = settings.interNodeGBps * 1e9;
        assignLinks(ws->mesh, ws->hardware);
        const CostSettings costSettings = ws->costModel->settings();
        ws->costModel.reset();
        ws->costModel = std::make_unique<CostModel>(ws->model.graph, ws->mesh, ws->hardware, costSettings);
    }
    return ws;
}
} // namespace

/// The worker's state between jobs: the workspace and the session with its cached class tables,
/// and the plans that do not depend on the locks.
struct PlannerService::Engine {
    std::string workspaceKey;
    std::shared_ptr<PlanWorkspace> workspace;
    std::unique_ptr<PlannerSession> session;
    SearchResult megatron, dataParallel;
    std::string unlockedKey; ///< workspace key + memory limit of `unlocked`
    std::optional<SearchResult> unlocked;

    /// Throws tp::Cancelled when `cancel` is set: checked between the stages here, and inside
    /// the searches by PlannerSession. The engine's state stays consistent (each cache is only
    /// assigned once its value is complete), so the next job can use it.
    PlanOutcome run(const PlanSettings& settings, const std::vector<LockRequest>& locks, const std::atomic<bool>& cancel,
                    SearchProgress& progress)
    {
        auto check = [&cancel] {
            if (cancel.load(std::memory_order_relaxed)) throw Cancelled();
        };
        check();
        PlanOutcome out;
        out.settings = settings;
        out.locks = locks;
        const double limit = settings.memoryLimitBytes();
        if (!workspace || workspaceKey != settings.workspaceKey()) {
            const auto start = Clock::now();
            session.reset();
            workspace.reset();
            workspaceKey.clear();
            unlocked.reset();
            auto ws = prepareWorkspace(settings);
            session = std::make_unique<PlannerSession>(*ws->costModel, ws->folded);
            megatron = evaluatePlan(*ws->costModel, &ws->folded, megatronAssignment(*ws->costModel), {}, "megatron");
            dataParallel = evaluatePlan(*ws->costModel, &ws->folded, dataParallelAssignment(*ws->costModel), {}, "dp");
            workspace = std::move(ws);
            workspaceKey = settings.workspaceKey();
            out.newWorkspace = true;
            out.prepareMs = msSince(start);
        }
        check();
        const std::string limitKey = workspaceKey + "|" + settings.memoryLimit;
        // The flag is the job's own; it is cleared again however the solves end.
        struct CancelScope {
            PlannerSession& session;
            ~CancelScope()
            {
                session.setCancelFlag(nullptr);
                session.setProgress(nullptr);
            }
        } cancelScope{*session};
        session->setCancelFlag(&cancel);
        session->setProgress(&progress);
        session->setMemoryLimit(limit);
        if (!locks.empty() && (!unlocked || unlockedKey != limitKey)) {
            session->setLocks({});
            unlocked = session->solve();
            unlockedKey = limitKey;
        }
        session->setLocks(locks); // throws InputError for a lock that cannot be honoured
        out.result = session->solve();
        if (locks.empty()) {
            unlocked = out.result;
            unlockedKey = limitKey;
        } else {
            out.unlocked = unlocked;
        }
        // The baselines are judged against the same memory limit as the search.
        const double capacity = limit == 0 ? workspace->hardware.hbmBytes : limit;
        for (SearchResult* baseline : {&megatron, &dataParallel}) {
            baseline->memoryLimitBytes = capacity > 0 ? capacity : 0;
            baseline->fits = capacity <= 0 || baseline->breakdown.perDeviceBytes <= capacity;
        }
        out.megatron = megatron;
        out.dataParallel = dataParallel;
        out.workspace = workspace;
        return out;
    }
};

PlannerService::PlannerService(QObject* parent) : QObject(parent), engine_(std::make_shared<Engine>())
{
    qRegisterMetaType<std::shared_ptr<const tp::PlanOutcome>>();
    pool_.setMaxThreadCount(1);
}

PlannerService::~PlannerService()
{
    // The running job returns at its next cancel check (between block tables); closing waits
    // for that, not for the whole search.
    shutdown();
    pool_.waitForDone();
}

void PlannerService::shutdown()
{
    // Later jobs see a newer id than theirs and return at once; the running one is cancelled.
    latest_ = std::numeric_limits<quint64>::max();
    if (latestCancel_) latestCancel_->store(true);
}

bool PlannerService::cancel()
{
    if (running_ == 0 || !latestCancel_) return false;
    latestCancel_->store(true);
    return true;
}

void PlannerService::waitForIdle() { pool_.waitForDone(); }

JobProgress PlannerService::progress() const
{
    JobProgress p;
    p.running = running_ > 0;
    if (!latestProgress_) return p;
    p.elapsedMs = static_cast<double>(latestStart_.elapsed());
    p.pricesTried = latestProgress_->pricesTried.load(std::memory_order_relaxed);
    p.tablesSolved = latestProgress_->tablesSolved.load(std::memory_order_relaxed);
    return p;
}

quint64 PlannerService::request(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    // The running search is of no use any more: stop it at its next check.
    if (latestCancel_) latestCancel_->store(true);
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    latestCancel_ = cancel;
    auto progress = std::make_shared<SearchProgress>();
    latestProgress_ = progress;
    latestStart_.start();
    const quint64 jobId = ++latest_;
    ++running_;
    emit started(jobId);
    std::shared_ptr<Engine> engine = engine_;
    const std::atomic<quint64>* latest = &latest_;
    struct JobResult {
        std::shared_ptr<const PlanOutcome> outcome;
        QString error;
        bool skipped = false;
        bool cancelled = false;
    };
    auto* watcher = new QFutureWatcher<JobResult>(this);
    connect(watcher, &QFutureWatcher<JobResult>::finished, this, [this, watcher, jobId, cancel] {
        const JobResult r = watcher->result();
        watcher->deleteLater();
        --running_;
        if (r.cancelled) ++interrupted_;
        // A job cancelled after its search ended still delivers nothing: cancel() promised that.
        const bool stopped = r.cancelled || cancel->load();
        if (r.skipped || (stopped && jobId != latest_.load())) emit dropped(jobId);
        else if (stopped) emit cancelled(jobId);
        else deliver(jobId, r.outcome, r.error);
        if (running_ == 0) emit idle();
    });
    watcher->setFuture(QtConcurrent::run(&pool_, [engine, latest, jobId, settings, locks, cancel, progress]() -> JobResult {
        JobResult r;
        if (latest->load() != jobId) { // superseded while queued: no point searching
            r.skipped = true;
            return r;
        }
        const auto start = Clock::now();
        try {
            auto outcome = std::make_shared<PlanOutcome>(engine->run(settings, locks, *cancel, *progress));
            outcome->jobId = jobId;
            outcome->wallMs = msSince(start);
            r.outcome = std::move(outcome);
        } catch (const Cancelled&) {
            r.cancelled = true;
        } catch (const InputError& e) {
            r.error = QString::fromStdString(e.what());
        } catch (const std::exception& e) {
            r.error = QStringLiteral("internal error: %1").arg(QString::fromStdString(e.what()));
        }
        return r;
    }));
    return jobId;
}

void PlannerService::deliver(quint64 jobId, std::shared_ptr<const PlanOutcome> outcome, const QString& error)
{
    if (jobId != latest_.load()) {
        emit dropped(jobId);
        return;
    }
    if (!error.isEmpty()) emit failed(jobId, error);
    else emit finished(std::move(outcome));
}

} // namespace tp
