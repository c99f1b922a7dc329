#pragma once
// The search: the cheapest strategy for every op under the cost model, exactly.
//
// Each block class is solved once: its ops' strategies are variables of a min-sum factor graph
// (node costs + resharding edges) and are eliminated exactly, leaving a table over the specs of
// the block's boundary tensors. Parallel siblings (MoE experts) are absorbed into their parent's
// table. The block tables are stitched by eliminating the boundary specs; a run of r identical
// chained blocks is one min-plus matrix power (repeated squaring, O(k^3 log r)).
// A memory limit is met by a Lagrange multiplier on memory, found by chords on the dual.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../cost/cost_model.h"
#include "../fold/fold.h"

namespace tp {

/// A lock as the user writes it: "GLOB=STRATEGY", e.g. "layers.*/mlp/fc1=f=y".
struct LockRequest {
    std::string pattern;
    std::string strategy;
};
/// Splits "GLOB=STRATEGY" at the first '='. Throws InputError when there is none.
LockRequest parseLockRequest(const std::string& text);
/// Whether an op name matches a glob where '*' matches any run of characters.
bool globMatch(const std::string& pattern, const std::string& name);

struct ResolvedLock {
    OpId op = -1;
    int strategy = 0; ///< index into CostModel::strategies(op)
};
/// Resolves lock requests against the graph. Throws InputError naming the lock, the op and why
/// (no op matches, strategy text invalid for that op, not a candidate). `requireMatch` false:
/// a lock that matches no op of this graph is skipped (a pipeline stage holds some ops only;
/// requireLockMatches checks the whole model).
std::vector<ResolvedLock> resolveLocks(const CostModel& model, const std::vector<LockRequest>& locks,
                                       bool requireMatch = true);
/// Throws InputError for the first lock whose pattern matches no op of `graph`.
void requireLockMatches(const Graph& graph, const std::vector<LockRequest>& locks);

/// Live counters of a running search, read by another thread for a progress display.
struct SearchProgress {
    std::atomic<int> pricesTried{0};  ///< searches at a memory price started so far
    std::atomic<int> tablesSolved{0}; ///< class tables computed so far (not taken from a cache)
    std::atomic<int> solves{0};       ///< searches finished so far (PlannerSession::solve)
    /// Their wall time summed (SearchResult::searchMs): the search proper, without the linear
    /// work around it (loading, cutting, costing and evaluating plans).
    std::atomic<std::int64_t> solveMicroseconds{0};
};

struct SearchOptions {
    double memoryLimitBytes = 0; ///< 0: the hardware's capacity; negative: no limit
    bool allowRecompute = true;  ///< consider selective and full recomputation per block (training)
    bool flat = false;           ///< every instance its own class, no runs (the unfolded baseline)
    bool mixLayers = true;       ///< under a binding limit, mix two layouts across identical layers
    std::vector<ResolvedLock> locks;
    /// Polled between block tables and between memory prices; when it reads true the search
    /// throws tp::Cancelled. Must outlive the search.
    const std::atomic<bool>* cancel = nullptr;
    /// Counted up as the search goes (never reset by it). Must outlive the search.
    SearchProgress* progress = nullptr;
    /// Threads a large block-table elimination may use (0: every hardware thread). The plan
    /// does not depend on it.
    int threads = 0;
};

struct SearchResult {
    std::string method;            ///< "folded", "flat", "megatron", "dp", "evaluated"
    std::vector<int> strategyOfOp; ///< index into CostModel::strategies(op)
    std::vector<Recompute> recomputeOfOp;
    std::vector<bool> lockedOp;
    Breakdown breakdown;
    double objective = 0; ///< time + lambda * memory at the chosen lambda
    /// The chosen plan's step time and memory per device as the search itself summed them
    /// (tables, stitching, kept inputs); `breakdown` comes from evaluatePlan and must agree
    /// (tst_search evaluationIsTheSearchsOwnFigures). Zero for plans that were not searched.
    double searchedStepSeconds = 0, searchedBytes = 0;
    double lambda = 0; ///< seconds per byte
    bool fits = true;
    double memoryLimitBytes = 0;
    double searchMs = 0;    ///< solving (tables, stitching, the memory price search), to the folded answer
    double searchCpuMs = 0; ///< the same in process CPU time (robust on a busy machine)
    double expandMs = 0;    ///< writing the folded answer out as a strategy per op
    double breakdownMs = 0; ///< building the full breakdown of the chosen plan
    int blockClasses = 0;
    int inlinedClasses = 0; ///< classes solved instance by instance (table too large)
    int opsSearched = 0;
    int tablesSolved = 0; ///< class tables computed (not taken from the cache)
    int pricesTried = 0;  ///< searches at a memory price (1 when the limit does not bind)
    /// Of those, the unpriced one taken from the session's previous solve (the same inputs).
    int attemptsReused = 0;
    /// The step time of the fastest plan with no memory limit (the first search, at price 0):
    /// with no locks, no plan of this model is faster under any limit or lock.
    double unpricedSeconds = 0;
    /// The search stopped early (PlannerSession::setStopAbove): no plan that fits is faster
    /// than `lowerBound`, which is at least the stop value. No plan is returned (fits false).
    bool bounded = false;
    double lowerBound = 0; ///< the best dual bound the search proved (seconds), when bounded
    /// Every solve at one memory price this search made, as (price, the cheapest plan's time +
    /// price x memory): with CostModel::nodeDifferenceFloor, Lagrangian bounds for models whose
    /// plans differ from this one's in node costs alone (Planner's ZeRO combinations).
    std::vector<std::pair<double, double>> pricedObjectives;
};

struct SharedSearchCaches;
struct CrossGraphEdges;
enum class EliminationOrderRule; // core/search/factor.h

/// An empty cache of op-to-op resharding edges keyed by their content (CostModel::edgeContentKey)
/// rather than by op: for the sessions of several graphs over one mesh, hardware and settings
/// family whose ops repeat (a pipeline's stage graphs, which differ in their layer counts), so
/// that an edge between layers is planned and priced once for all of them (core/plan/planner.cpp,
/// Planner::stagePlanner). Give it with PlannerSession::useCrossGraphEdges.
std::shared_ptr<CrossGraphEdges> makeCrossGraphEdges();

/// Keeps a folded graph and the solved block tables between solves, so that an edit (a lock,
/// the memory limit) re-solves only the classes it touches and re-stitches.
class PlannerSession {
public:
    /// `caches`: another session's (sharedCaches) over the same graph, mesh and strategies, as
    /// useSharedCaches; given here, the new session's own indexing already uses them.
    PlannerSession(const CostModel& model, FoldedGraph folded, std::shared_ptr<SharedSearchCaches> caches = nullptr);
    ~PlannerSession();
    PlannerSession(const PlannerSession&) = delete;
    PlannerSession& operator=(const PlannerSession&) = delete;

    /// Resolves and applies locks; a lock on some but not all instances of a class splits those
    /// instances out (refolding). Throws InputError for a lock that cannot be honoured.
    void setLocks(const std::vector<LockRequest>& locks, bool requireMatch = true);
    void setResolvedLocks(const std::vector<ResolvedLock>& locks);
    void setMemoryLimit(double bytes);
    void setAllowRecompute(bool allow);
    /// Every repeated block class (the layers) in this mode; one-off blocks (embedding, head)
    /// and the top level in none, as frameworks checkpoint only their layers. std::nullopt (the
    /// default): the search chooses per block.
    void setForcedRecompute(std::optional<Recompute> mode);
    void setFlat(bool flat);
    /// See SearchOptions::mixLayers (on by default; off gives the plain Lagrangian plan).
    void setMixLayers(bool mix);
    /// Whether a block's recompute mode that costs at least None on every op at the current
    /// price goes unsolved (on by default; it never wins an entry). Off solves every mode, as
    /// the tests' reference.
    void setSkipDominatedModes(bool skip);
    /// Where an elimination first drops the values that another value of the same variable
    /// replaces at no greater cost: at variables whose elimination work (the steps they take
    /// part in) is `worth` times the test (kSubstituteWorth by default, core/search/factor.h;
    /// 0 everywhere, infinity nowhere). The least cost is the same either way; nowhere is the
    /// tests' reference.
    void setSubstituteWorth(double worth);
    /// The elimination order of every table and of the top level (Auto by default, as
    /// eliminate() takes it; the tests' switch: the least cost is the same in any order).
    void setEliminationOrder(EliminationOrderRule rule);
    /// A class whose boundary table would exceed this many entries (default 4M) is not
    /// tabulated: its ops join the top level, each instance with its own recompute mode. The
    /// plan is the same either way (both are exact); only time and memory differ.
    void setMaxTableEntries(double entries);
    /// See SearchOptions::cancel; null: never cancelled. The session stays usable after a
    /// cancelled solve.
    void setCancelFlag(const std::atomic<bool>* cancel);
    /// See SearchOptions::progress; null: no counting.
    void setProgress(SearchProgress* progress);
    /// See SearchOptions::threads.
    void setThreads(int threads);
    /// The next solves may stop as soon as they prove that no plan that fits is faster than
    /// this many seconds (a Lagrangian bound: at any memory price, the cheapest priced plan less
    /// the price of the limit), returning SearchResult::bounded. Infinity (the default): never.
    void setStopAbove(double seconds);

    SearchResult solve();

    /// Where the next solve's price search starts (the last limited solve's prices): it decides
    /// the prices tried and where a search that stops at its bar stops, never the plan. A
    /// caller that runs a solve ahead of its turn puts it back afterwards and applies the
    /// solve's own when it takes the result (core/plan/planner.cpp, EarlySearches), so that a
    /// solve never taken leaves no trace.
    struct WarmStart {
        double lambda = 0, overLambda = 0;
        int lowInstances = -1;
    };
    WarmStart warmStart() const;
    void setWarmStart(const WarmStart& warm);

    /// The resharding costs and spec domains this session has derived, for another session to
    /// share (useSharedCaches). They depend on the graph, mesh, hardware links and candidate
    /// strategies only, not on node costs.
    std::shared_ptr<SharedSearchCaches> sharedCaches() const;
    /// Uses (and fills) caches of another session whose cost model has the same graph, mesh,
    /// links and strategies and differs only in node costs (the micro-batch, the ZeRO stage:
    /// Planner's combinations). Throws std::logic_error for another graph, mesh or strategy set.
    void useSharedCaches(std::shared_ptr<SharedSearchCaches> caches);
    /// Reads and fills `edges` (makeCrossGraphEdges) besides this graph's own caches, and so do
    /// the sessions sharing them (useSharedCaches). Only sessions whose cost models share the
    /// mesh, hardware, links, mode, dtypes and overlap settings may share one: an edge's key
    /// holds what differs between graphs and models derived from one structure, not those.
    void useCrossGraphEdges(std::shared_ptr<CrossGraphEdges> edges);

    const CostModel& model() const;
    const FoldedGraph& folded() const;
    /// Bytes held between solves: the cached class tables (bounded by the cache) and any chain
    /// powers (none once a solve has decoded); for a caller keeping many sessions to weigh
    /// against its own budget.
    double cachedBytes() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Per op, the index of its block instance in folded.sequence: the reader groups to give the
/// cost model (CostSettings::readerGroupOfOp) so that identical blocks cost the same.
std::vector<int> readerGroupsOf(const FoldedGraph& folded);

/// One-shot search.
SearchResult searchPlan(const CostModel& model, const FoldedGraph& folded, const SearchOptions& options = {});

} // namespace tp
