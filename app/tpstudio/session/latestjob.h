#pragma once
// "Newest job wins" background work, the one helper for it in tpstudio (docs/ARCHITECTURE.md,
// app/): every start() supersedes the jobs before it. A superseded job that has not begun is
// skipped, one that runs has its cancel flag set (work that polls it, such as the search through
// PlannerSession, stops early), and whatever a superseded job returns is dropped. Only the
// newest job's value reaches the deliver callback, on the thread that owns the LatestJob. Jobs
// run one at a time on the LatestJob's own thread, in order, so work may share state between
// jobs without locks.
#include <atomic>
#include <functional>
#include <memory>

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <QtConcurrent/QtConcurrentRun>

#include "util/error.h"

namespace tp {

/// The signals and bookkeeping of LatestJob<T> (a class template cannot declare signals).
class JobTracker : public QObject {
    Q_OBJECT
public:
    explicit JobTracker(QObject* parent = nullptr);
    ~JobTracker() override;

    quint64 latestJob() const { return latest_.load(); }
    bool isBusy() const { return running_ > 0; }
    /// Cancels the newest job (queued or running): it ends with cancelled(), not delivered or
    /// failed(). Returns false when no job was in flight.
    bool cancel();
    /// Cancels every job for good (the owner is going away); later start()s run nothing.
    void shutdown();
    /// Jobs whose work stopped by throwing tp::Cancelled (cancel() or a newer start()), as
    /// opposed to skipped before they began or dropped after they finished.
    int interruptedJobs() const { return interrupted_; }
    /// Blocks until no job runs (tests and shutdown only).
    void waitForIdle() { pool_.waitForDone(); }

signals:
    void started(quint64 jobId);
    /// A job superseded by a newer start(): skipped, stopped or its value discarded.
    void dropped(quint64 jobId);
    /// The newest job, stopped by cancel(): no value, no error.
    void cancelled(quint64 jobId);
    /// The newest job's work threw: tp::InputError's message, or "internal error: ..." for any
    /// other exception.
    void failed(quint64 jobId, const QString& message);
    /// The last job in flight ended, whatever its outcome: isBusy() is false now.
    void idle();

protected:
    /// How a job's work ended on the worker.
    struct Ending {
        bool skipped = false;     ///< superseded before it began
        bool interrupted = false; ///< threw tp::Cancelled
        QString error;
    };
    struct Ticket {
        quint64 id = 0;
        std::shared_ptr<std::atomic<bool>> cancel;
    };
    Ticket begin();
    /// On the owner's thread: true when the job's value is to be delivered; otherwise emits
    /// what became of it. ended() follows, after any delivery.
    bool settle(const Ticket& ticket, const Ending& ending);
    void ended();
    /// Runs `work` on the worker with the skip check and the exception mapping.
    template <typename Work>
    Ending guarded(const Ticket& ticket, Work&& work) const
    {
        Ending e;
        if (latest_.load() != ticket.id) {
            e.skipped = true;
            return e;
        }
        try {
            work();
        } catch (const Cancelled&) {
            e.interrupted = true;
        } catch (const InputError& x) {
            e.error = QString::fromUtf8(x.what());
        } catch (const std::exception& x) {
            e.error = QStringLiteral("internal error: %1").arg(QString::fromUtf8(x.what()));
        }
        return e;
    }

    QThreadPool pool_; // one thread: jobs run in order
    std::atomic<quint64> latest_{0};

private:
    int running_ = 0;     // owner's thread only
    int interrupted_ = 0; // owner's thread only
    /// The newest job's flag; each job owns its flag, so a late reader never sees a freed one.
    std::shared_ptr<std::atomic<bool>> latestCancel_;
};

template <typename T>
class LatestJob : public JobTracker {
public:
    using Work = std::function<T(const std::atomic<bool>& cancel)>;
    using Deliver = std::function<void(quint64 jobId, T value)>;

    /// `deliver` receives the newest job's value on the owner's thread.
    explicit LatestJob(Deliver deliver, QObject* parent = nullptr) : JobTracker(parent), deliver_(std::move(deliver)) {}

    /// Queues `work`, superseding every earlier job; returns the new job's id.
    quint64 start(Work work)
    {
        const Ticket ticket = begin();
        struct Done {
            Ending ending;
            std::shared_ptr<T> value;
        };
        auto* watcher = new QFutureWatcher<Done>(this);
        connect(watcher, &QFutureWatcher<Done>::finished, this, [this, watcher, ticket] {
            Done done = watcher->result();
            watcher->deleteLater();
            if (settle(ticket, done.ending) && done.value) deliver_(ticket.id, std::move(*done.value));
            ended();
        });
        watcher->setFuture(QtConcurrent::run(&pool_, [this, ticket, work = std::move(work)] {
            Done done;
            done.ending = guarded(ticket, [&] { done.value = std::make_shared<T>(work(*ticket.cancel)); });
            return done;
        }));
        return ticket.id;
    }

private:
    Deliver deliver_;
};

} // namespace tp
