// PlannerSession's public methods (search.h): settings, locks with refolding, and solve(),
// which runs the memory-price search (price_search.cpp) and writes out and costs its answer.
#include <chrono>
#include <cmath>
#include <ctime>
#include <sstream>

#include "evaluate.h"
#include "locks.h"
#include "session_impl.h"
#include "../util/key_builder.h"

namespace tp {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

/// Every instance its own class and its own run: the unfolded baseline.
FoldedGraph unfoldClasses(const FoldedGraph& folded)
{
    FoldedGraph flat;
    flat.classOfOp.assign(folded.classOfOp.size(), -1);
    flat.instanceOfOp.assign(folded.instanceOfOp.size(), 0);
    std::map<std::pair<int, int>, int> newClass;
    for (const auto& [cls, inst] : folded.sequence) {
        BlockClass bc;
        bc.id = static_cast<int>(flat.classes.size());
        bc.label = folded.classes[static_cast<size_t>(cls)].label;
        bc.instances.push_back(folded.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(inst)]);
        for (OpId op : bc.instances[0].ops) flat.classOfOp[static_cast<size_t>(op)] = bc.id;
        newClass[{cls, inst}] = bc.id;
        flat.classes.push_back(std::move(bc));
        flat.sequence.emplace_back(newClass[{cls, inst}], 0);
    }
    for (const auto& run : folded.runs)
        for (int a = 0; a < run.count; ++a) flat.runs.push_back(Run{newClass.at({run.classId, run.firstInstance + a}), 0, 1});
    for (const auto& group : folded.siblings)
        for (int i : group.instances) {
            SiblingGroup g;
            g.classId = newClass.at({group.classId, i});
            g.instances = {0};
            g.parentClass = newClass.at({group.parentClass, group.parentInstance});
            g.parentInstance = 0;
            flat.siblings.push_back(std::move(g));
        }
    return flat;
}

} // namespace

std::string edgeRegimeKey(const CostSettings& settings)
{
    std::ostringstream key;
    key.precision(17);
    key << settings.microBatch << '/' << settings.pipelineBubble << '/' << settings.pipelineStages << '|';
    return key.str();
}

PlannerSession::Impl::Impl(const CostModel& m, FoldedGraph f) : model(m), baseFold(std::move(f)), folded(baseFold)
{
    const Graph& g = model.graph();
    origin.assign(g.tensors.size(), {});
    for (const auto& op : g.ops)
        for (size_t k = 0; k < op.outputs.size(); ++k) origin[static_cast<size_t>(op.outputs[k])] = {op.id, static_cast<int>(k)};
    forced.assign(g.ops.size(), -1);
    indexFold();
}

PlannerSession::PlannerSession(const CostModel& model, FoldedGraph folded, std::shared_ptr<SharedSearchCaches> caches) :
    impl_(std::make_unique<Impl>(model, std::move(folded)))
{
    // Runs are indexed with the shared caches (tensor readers, producer specs), not with caches
    // of its own that useSharedCaches would drop.
    if (caches) useSharedCaches(std::move(caches));
    impl_->indexRuns();
}

PlannerSession::~PlannerSession() = default;

const CostModel& PlannerSession::model() const { return impl_->model; }
const FoldedGraph& PlannerSession::folded() const { return impl_->folded; }

void PlannerSession::setLocks(const std::vector<LockRequest>& locks, bool requireMatch)
{
    std::string key(1, requireMatch ? '1' : '0');
    for (const auto& l : locks) // length-prefixed: any text keys apart
        key += std::to_string(l.pattern.size()) + ':' + l.pattern + std::to_string(l.strategy.size()) + ':' + l.strategy;
    SharedSearchCaches& shared = *impl_->caches;
    std::vector<ResolvedLock> resolved;
    {
        std::lock_guard<std::mutex> lock(shared.mutex);
        auto& cache = shared.resolvedLocks;
        auto found = cache.find(key);
        if (found == cache.end()) {
            if (cache.size() >= 64) cache.clear(); // a GUI session's many edits
            found = cache.emplace(key, resolveLocks(impl_->model, locks, requireMatch)).first;
        }
        resolved = found->second;
    }
    setResolvedLocks(resolved);
}

void PlannerSession::setResolvedLocks(const std::vector<ResolvedLock>& locks)
{
    Impl& d = *impl_;
    const bool same =
        std::equal(locks.begin(), locks.end(), d.locks.begin(), d.locks.end(),
                   [](const ResolvedLock& a, const ResolvedLock& b) { return a.op == b.op && a.strategy == b.strategy; });
    if (!same) ++d.solveInputs;
    d.locks = locks;
    std::fill(d.forced.begin(), d.forced.end(), -1);
    for (const auto& l : locks) d.forced[static_cast<size_t>(l.op)] = l.strategy;
    // A lock that differs between instances of a class splits the differing instances out.
    FoldOptions options;
    options.distinctOps = search::opsSplitByLocks(d.baseFold, d.forced, locks);
    if (options.distinctOps.empty()) {
        d.folded = d.baseFold;
    } else {
        std::lock_guard<std::mutex> lock(d.caches->mutex);
        auto cached = d.caches->splitFolds.find(options.distinctOps);
        if (cached == d.caches->splitFolds.end()) {
            if (d.caches->splitFolds.size() >= 16) d.caches->splitFolds.clear(); // a GUI session's many edits
            cached = d.caches->splitFolds.emplace(options.distinctOps, foldGraph(d.model.graph(), options)).first;
        }
        d.folded = cached->second;
    }
    d.indexRuns();
}

PlannerSession::WarmStart PlannerSession::warmStart() const
{
    return {impl_->lastLambda, impl_->lastOverLambda, impl_->lastLowInstances};
}

void PlannerSession::setWarmStart(const WarmStart& warm)
{
    impl_->lastLambda = warm.lambda;
    impl_->lastOverLambda = warm.overLambda;
    impl_->lastLowInstances = warm.lowInstances;
}

void PlannerSession::setMemoryLimit(double bytes) { impl_->memoryLimit = bytes; }
void PlannerSession::setAllowRecompute(bool allow) { impl_->setInput(impl_->allowRecompute, allow); }
void PlannerSession::setForcedRecompute(std::optional<Recompute> mode) { impl_->setInput(impl_->forcedRecompute, mode); }
void PlannerSession::setFlat(bool flat) { impl_->setInput(impl_->flat, flat); }
void PlannerSession::setMixLayers(bool mix) { impl_->setInput(impl_->mixLayers, mix); }
void PlannerSession::setSkipDominatedModes(bool skip) { impl_->setInput(impl_->skipDominatedModes, skip); }
void PlannerSession::setSubstituteWorth(double worth) { impl_->setInput(impl_->substituteWorth, worth); }
void PlannerSession::setEliminationOrder(EliminationOrderRule rule) { impl_->setInput(impl_->orderRule, rule); }
void PlannerSession::setCancelFlag(const std::atomic<bool>* cancel) { impl_->cancel = cancel; }
void PlannerSession::setProgress(SearchProgress* progress) { impl_->progress = progress; }
std::shared_ptr<SharedSearchCaches> PlannerSession::sharedCaches() const { return impl_->caches; }

std::shared_ptr<CrossGraphEdges> makeCrossGraphEdges() { return std::make_shared<CrossGraphEdges>(); }

void PlannerSession::useCrossGraphEdges(std::shared_ptr<CrossGraphEdges> edges)
{
    std::lock_guard<std::mutex> lock(impl_->caches->mutex);
    impl_->caches->crossGraph = std::move(edges);
}

void PlannerSession::useSharedCaches(std::shared_ptr<SharedSearchCaches> caches)
{
    // What the caches were derived from, checked as far as is cheap: op count, mesh, strategy counts.
    const CostModel& m = impl_->model;
    KeyBuilder key;
    key << m.mesh().shapeText();
    for (size_t op = 0; op < m.graph().ops.size(); ++op) key << ',' << m.strategies(static_cast<OpId>(op)).size();
    std::string fingerprint = std::move(key.text);
    if (impl_->caches->fingerprint.empty()) impl_->caches->fingerprint = fingerprint;
    if (caches->fingerprint.empty()) caches->fingerprint = impl_->caches->fingerprint;
    if (caches->fingerprint != fingerprint)
        throw std::logic_error("PlannerSession::useSharedCaches: another graph, mesh or strategy set");
    impl_->caches = std::move(caches);
    ++impl_->solveInputs;
}

double PlannerSession::cachedBytes() const
{
    double chains = 0;
    for (const auto& [key, tree] : impl_->chainPowers)
        for (const auto& node : tree.first) chains += static_cast<double>(node.v.size() * sizeof(double));
    return impl_->modeCache.bytes() + chains;
}

void PlannerSession::setStopAbove(double seconds) { impl_->stopAbove = seconds; }

void PlannerSession::setThreads(int threads) { impl_->threads = threads; }
void PlannerSession::setMaxTableEntries(double entries) { impl_->setInput(impl_->maxTableEntries, entries); }

SearchResult PlannerSession::solve()
{
    Impl& d = *impl_;
    const auto start = Clock::now();
    const std::clock_t cpuStart = std::clock();
    // The flat baseline searches the same instances with nothing shared.
    std::optional<FoldedGraph> saved;
    if (d.flat) {
        saved = std::move(d.folded);
        d.folded = unfoldClasses(*saved);
        // Nothing precomputed for the flat fold: it pays its per-instance work in the solve.
        d.chainCache.clear();
        d.boundaryCache.clear();
    }
    // The session's own fold comes back however the solve ends (a cancellation throws).
    struct RestoreFold {
        Impl& d;
        std::optional<FoldedGraph>& saved;
        ~RestoreFold()
        {
            if (saved) {
                d.folded = std::move(*saved);
                d.indexRuns();
            }
            saved.reset();
        }
    } restoreFold{d, saved};
    d.tablesSolved = 0;
    d.attemptsReused = 0;
    d.pricedObjectives.clear();
    const double capacity = d.model.hardware().hbmBytes;
    const double limit = d.memoryLimit == 0 ? capacity : d.memoryLimit;
    const bool limited = limit > 0;

    // The solve's own time (the tables, their stitching and the memory prices; not writing a
    // strategy per op or the breakdown), also summed over every solve into the progress.
    auto timeSolve = [&](SearchResult& r) {
        r.searchMs = msSince(start);
        r.searchCpuMs = 1000.0 * static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC;
        if (!d.progress) return;
        d.progress->solves.fetch_add(1, std::memory_order_relaxed);
        d.progress->solveMicroseconds.fetch_add(std::llround(r.searchMs * 1e3), std::memory_order_relaxed);
    };
    int pricesTried = 0;
    Impl::Attempt best = d.searchPrices(limit, limited, pricesTried);
    SearchResult& out = best.result;
    out.pricedObjectives = d.pricedObjectives;
    if (out.bounded) {
        // No plan to write out: the caller has a faster one.
        timeSolve(out);
        out.method = d.flat ? "flat" : "folded";
        out.memoryLimitBytes = limited ? limit : 0;
        out.tablesSolved = d.tablesSolved;
        out.attemptsReused = d.attemptsReused;
        out.pricesTried = pricesTried;
        out.strategyOfOp.clear();
        out.recomputeOfOp.clear();
        return std::move(out);
    }
    // A solve without a limit says nothing about the price under one: the next limited solve
    // still starts from the last limited one's.
    if (limited) d.lastLambda = best.result.lambda;
    timeSolve(out);
    // The answer so far is folded (a layout per stretch of identical instances); writing a
    // strategy per op is linear in the graph, like the breakdown, and is timed apart.
    const auto expandStart = Clock::now();
    d.materialize(best);
    out.expandMs = msSince(expandStart);
    const auto breakdownStart = Clock::now();
    out.searchedStepSeconds = out.breakdown.stepSeconds;
    out.searchedBytes = out.breakdown.perDeviceBytes;
    const SearchResult costed = evaluatePlan(d.model, &d.folded, out.strategyOfOp, out.recomputeOfOp, "folded");
    out.breakdown = costed.breakdown;
    out.breakdownMs = msSince(breakdownStart);
    out.fits = out.fits && (!limited || out.breakdown.perDeviceBytes <= limit);
    out.memoryLimitBytes = limited ? limit : 0;
    out.method = d.flat ? "flat" : "folded";
    out.lockedOp.assign(d.model.graph().ops.size(), false);
    for (const auto& l : d.locks) out.lockedOp[static_cast<size_t>(l.op)] = true;
    out.blockClasses = static_cast<int>(d.folded.classes.size());
    out.inlinedClasses = static_cast<int>(d.inlinedClasses().size());
    out.opsSearched = d.folded.searchedOps();
    out.tablesSolved = d.tablesSolved;
    out.attemptsReused = d.attemptsReused;
    out.pricesTried = pricesTried;
    return std::move(out);
}

std::vector<int> readerGroupsOf(const FoldedGraph& folded)
{
    std::vector<int> group(folded.classOfOp.size(), 0);
    for (size_t i = 0; i < folded.sequence.size(); ++i) {
        const auto& [cls, inst] = folded.sequence[i];
        for (OpId op : folded.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(inst)].ops)
            group[static_cast<size_t>(op)] = static_cast<int>(i);
    }
    return group;
}

SearchResult searchPlan(const CostModel& model, const FoldedGraph& folded, const SearchOptions& options)
{
    PlannerSession session(model, folded);
    if (!options.locks.empty()) session.setResolvedLocks(options.locks);
    session.setMemoryLimit(options.memoryLimitBytes);
    session.setAllowRecompute(options.allowRecompute);
    session.setFlat(options.flat);
    session.setMixLayers(options.mixLayers);
    session.setCancelFlag(options.cancel);
    session.setProgress(options.progress);
    session.setThreads(options.threads);
    return session.solve();
}

} // namespace tp
