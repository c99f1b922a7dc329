#include "latestjob.h"

#include <limits>

namespace tp {

JobTracker::JobTracker(QObject* parent) : QObject(parent) { pool_.setMaxThreadCount(1); }

JobTracker::~JobTracker()
{
    // The running job returns at its next cancel check; the watchers (children) go with us, so
    // nothing is delivered after this.
    shutdown();
    pool_.waitForDone();
}

void JobTracker::shutdown()
{
    // Later jobs see a newer id than theirs and return at once; the running one is cancelled.
    latest_ = std::numeric_limits<quint64>::max();
    if (latestCancel_) latestCancel_->store(true);
}

bool JobTracker::cancel()
{
    if (running_ == 0 || !latestCancel_) return false;
    latestCancel_->store(true);
    return true;
}

JobTracker::Ticket JobTracker::begin()
{
    // The running job is of no use any more: stop it at its next check.
    if (latestCancel_) latestCancel_->store(true);
    Ticket ticket;
    ticket.cancel = std::make_shared<std::atomic<bool>>(false);
    latestCancel_ = ticket.cancel;
    if (latest_.load() != std::numeric_limits<quint64>::max())
        ticket.id = ++latest_;
    else
        ticket.id = 0; // shut down: the job is skipped
    ++running_;
    emit started(ticket.id);
    return ticket;
}

bool JobTracker::settle(const Ticket& ticket, const Ending& ending)
{
    --running_;
    if (ending.interrupted) ++interrupted_;
    // A job cancelled after its work ended still delivers nothing: cancel() promised that.
    const bool stopped = ending.interrupted || ticket.cancel->load();
    const bool newest = ticket.id == latest_.load();
    bool deliver = false;
    if (ending.skipped || !newest)
        emit dropped(ticket.id);
    else if (stopped)
        emit cancelled(ticket.id);
    else if (!ending.error.isEmpty())
        emit failed(ticket.id, ending.error);
    else
        deliver = true;
    return deliver;
}

void JobTracker::ended()
{
    if (running_ == 0) emit idle();
}

} // namespace tp
