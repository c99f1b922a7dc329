#pragma once
// Runs the planner off the GUI thread. Every request gets a job id; only the newest job's result
// is delivered, older ones are skipped before they start or dropped when they finish, so a burst
// of edits costs one search, and the UI never waits. A newer request also cancels the search that
// is running (PlannerSession's cancel flag), and cancel() stops the newest job on request; a
// cancelled job delivers neither a plan nor an error.
#include <atomic>
#include <memory>
#include <optional>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QThreadPool>

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
    double prepareMs = 0;                 ///< model load + cost model + fold, when redone
    double wallMs = 0;                    ///< request to result, on the worker
};

/// How far the newest job has got, for a status line while it runs.
struct JobProgress {
    bool running = false;
    double elapsedMs = 0;  ///< since the request
    int pricesTried = 0;   ///< memory prices searched so far (all the job's searches)
    int tablesSolved = 0;  ///< class tables computed so far
};

class PlannerService : public QObject {
    Q_OBJECT
public:
    explicit PlannerService(QObject* parent = nullptr);
    ~PlannerService() override;

    /// Queues a plan for these inputs; returns its job id. Newer requests supersede older ones.
    quint64 request(const PlanSettings& settings, const std::vector<LockRequest>& locks);
    quint64 latestJob() const { return latest_.load(); }
    bool isBusy() const { return running_ > 0; }
    /// The newest job's progress (GUI thread; the counters are written by the worker).
    JobProgress progress() const;
    /// Cancels the newest job (queued or running): it ends with cancelled(), not finished() or
    /// failed(). Returns false when no job was in flight.
    bool cancel();
    /// Cancels every job, queued or running, for good: for a document that is going away.
    void shutdown();
    /// Jobs whose search was stopped by their cancel flag (by cancel() or by a newer request),
    /// as opposed to skipped before they started or dropped after they finished.
    int interruptedJobs() const { return interrupted_; }
    /// Blocks until the worker is idle (tests and shutdown only).
    void waitForIdle();

signals:
    void started(quint64 jobId);
    void finished(std::shared_ptr<const tp::PlanOutcome> outcome);
    void failed(quint64 jobId, const QString& message);
    /// A job whose result arrived after a newer request was made (or that was skipped or
    /// cancelled by the newer request).
    void dropped(quint64 jobId);
    /// The newest job, stopped by cancel(): no plan, no error.
    void cancelled(quint64 jobId);
    /// The last job in flight ended (whatever its outcome): isBusy() is false now.
    void idle();

private:
    struct Engine;
    void deliver(quint64 jobId, std::shared_ptr<const PlanOutcome> outcome, const QString& error);

    QThreadPool pool_;                // one thread: the engine's session is not thread-safe
    std::shared_ptr<Engine> engine_;  // touched only on the pool's thread
    std::atomic<quint64> latest_{0};
    int running_ = 0;                 // GUI thread only
    int interrupted_ = 0;             // GUI thread only
    /// The cancel flag of the newest job (GUI thread only); the worker reads it through the
    /// search. Each job owns its flag, so a late reader never sees a freed one.
    std::shared_ptr<std::atomic<bool>> latestCancel_;
    /// The newest job's counters and when it was requested (GUI thread; the job holds its own
    /// reference, like the cancel flag).
    std::shared_ptr<SearchProgress> latestProgress_;
    QElapsedTimer latestStart_;
};

} // namespace tp

Q_DECLARE_METATYPE(std::shared_ptr<const tp::PlanOutcome>)
