#pragma once
// PlannerSession's state, shared by the units of core/search (docs/ARCHITECTURE.md,
// "core/search"): domains.cpp (the fold's boundaries), class_table.cpp, stitch.cpp, decode.cpp,
// price_search.cpp and session.cpp each define the members of their step. Internal.
#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../util/error.h"
#include "class_table.h"
#include "decode.h"
#include "domains.h"
#include "minplus.h"
#include "search.h"
#include "stitch.h"

namespace tp {

/// Which part of an edge's time a factor holds: what a step pays for it, or the forward
/// collectives that full recomputation runs once more (CostModel::Charge).
enum class EdgePart : std::uint8_t { Exposed, RecomputedForward };

/// What a session derives from the graph, mesh and candidate strategies alone (spec domains,
/// resharding edges), which sessions over cost models that differ only in node costs (the
/// micro-batch, the ZeRO stage) can share (PlannerSession::shareCaches).
/// What edge costs depend on besides the graph and mesh: the micro-batch and the pipeline bubble.
std::string edgeRegimeKey(const CostSettings& settings);

/// Op-to-op edges by content (CostModel::edgeContentKey), shared by the sessions of several
/// graphs (makeCrossGraphEdges): the collectives, and the costs per edge regime, direction and part.
struct CrossGraphEdges {
    std::mutex mutex;
    std::map<std::string, std::vector<std::vector<CollectiveCall>>> plans; ///< by content key
    std::map<std::string, std::vector<double>> values;                     ///< by content key, edge regime, direction and part
};

struct SharedSearchCaches {
    std::string fingerprint; ///< mesh and strategy counts of the sessions sharing it
    std::shared_ptr<CrossGraphEdges> crossGraph; ///< null unless given (useCrossGraphEdges)
    std::map<std::pair<OpId, int>, search::ProducerSpecs> producerSpecCache;
    // Edge costs depend on the micro-batch (a batch tensor's collectives run once per
    // micro-batch: CostModel::edgeCost) and on a pipeline's bubble (those collectives are paid
    // (n + bubble) / n times), so these are keyed by both (edgeRegimeKey).
    std::map<std::string, std::vector<Factor>> structureCache; ///< edge and link factors per micro-batch and class layout
    std::map<std::string, std::vector<Factor>> recomputeCache; ///< recomputeFactors per micro-batch and class layout
    std::map<std::tuple<std::int64_t, double, int, OpId, int, OpId, int, bool, EdgePart>, std::vector<double>> edgeCache; ///< op-to-op edges by micro-batch, bubble, stages and keyOp
    /// Per op-to-op edge (keyOp producer, its output slot, keyOp consumer, input), the collectives
    /// of each (distinct produced spec, consumer strategy) at whole size (CostModel::edgePlan):
    /// the same for every micro-batch, so each is planned once.
    std::map<std::tuple<OpId, int, OpId, int>, std::vector<std::vector<CollectiveCall>>> edgePlans;
    /// The same for edges from a class's boundary specs (edgeFromSpecs): per (consumer, input,
    /// produced spec), the collectives into each consumer strategy.
    std::map<std::tuple<OpId, int, TensorSpec>, std::vector<std::vector<CollectiveCall>>> specEdgePlans;
    /// The graph folded with instances split out by per-instance locks, per set of split ops: the
    /// same for every session sharing the graph, so a lock's re-plan folds once, not once per
    /// combination.
    std::map<std::set<OpId>, FoldedGraph> splitFolds;
    /// Lock requests resolved to (op, strategy), by their text and whether each must match: a
    /// glob over every op name, the same for every session sharing the graph and strategies.
    std::map<std::string, std::vector<ResolvedLock>> resolvedLocks;
    /// The graph's readers of each tensor (Graph::consumers), made on first use: a pipeline
    /// search makes hundreds of sessions of one stage graph.
    std::vector<std::vector<OpId>> consumers;

    /// Guards every cache above: the sessions of one planner may solve on two threads at once
    /// (core/plan/planner.cpp, State::choose's priced combinations).
    std::mutex mutex;
    /// The entry of `key` in `cache`, made by `make` outside the lock when missing (two threads
    /// may both make it; the first kept wins, and both are the same). Entries of these caches
    /// never change or go once made, so the reference stays good.
    template <class Map, class Key, class Make>
    const typename Map::mapped_type& findOrMake(Map& cache, const Key& key, Make&& make)
    {
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (auto it = cache.find(key); it != cache.end()) return it->second;
        }
        auto value = make();
        std::lock_guard<std::mutex> lock(mutex);
        return cache.emplace(key, std::move(value)).first->second;
    }
};

struct PlannerSession::Impl {
    using ClassBoundary = search::ClassBoundary;
    using ClassTable = search::ClassTable;
    using ModeSolve = search::ModeSolve;
    using Attempt = search::Attempt;
    using DecodedEntry = search::DecodedEntry;
    using ChainShape = search::ChainShape;
    using TopItem = search::TopItem;
    using TensorVar = search::TensorVar;
    using PriceSplit = search::PriceSplit;
    using MinPlus = search::MinPlus;
    using ProducerSpecs = search::ProducerSpecs;
    using TensorOrigin = search::TensorOrigin;
    using ClassId = search::ClassId;
    using InstanceId = search::InstanceId;
    using StrategyIndex = search::StrategyIndex;

    const CostModel& model;
    FoldedGraph baseFold; ///< the fold without per-instance splits
    FoldedGraph folded;   ///< with splits for the current locks
    std::vector<ResolvedLock> locks;
    double memoryLimit = 0;
    bool allowRecompute = true;
    /// Every block class in this mode (a published run costed as it ran); the top level, which
    /// frameworks do not recompute, keeps everything. Empty: the search chooses.
    std::optional<Recompute> forcedRecompute;
    bool flat = false;
    bool mixLayers = true;
    bool skipDominatedModes = true; ///< PlannerSession::setSkipDominatedModes
    double substituteWorth = kSubstituteWorth; ///< PlannerSession::setSubstituteWorth
    EliminationOrderRule orderRule = EliminationOrderRule::Auto; ///< PlannerSession::setEliminationOrder
    const std::atomic<bool>* cancel = nullptr;
    SearchProgress* progress = nullptr;
    int threads = 0;                                            // 0: every hardware thread
    double stopAbove = std::numeric_limits<double>::infinity(); ///< PlannerSession::setStopAbove
    // Asked once: hardware_concurrency() reads sysfs (about 10 us), too slow for every table.
    const int hardwareThreads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    int threadCount() const { return threads > 0 ? threads : hardwareThreads; }
    double maxTableEntries = 4e6; ///< see PlannerSession::setMaxTableEntries

    /// Counts the changes to what a solve's answer depends on (locks, recompute, flat, the
    /// options above); the setters bump it only when a value changes (`setInput`).
    std::uint64_t solveInputs = 0;
    template <class T>
    void setInput(T& field, const T& value)
    {
        if (field == value) return;
        field = value;
        ++solveInputs;
    }
    /// The last unpriced attempt (price 0, no split) and the inputs it was solved under. The
    /// planner asks a combination for its fastest plan, then searches it under the limit, which
    /// starts at price 0 again (core/plan/planner.cpp, Chooser::fastestFits then consider); with
    /// layers inlined at the top level that second solve was most of the search (T5-3B on
    /// 2x2x2, inference: 1.9 s of its 2.2 s). An attempt holds its decoded entries by
    /// shared_ptr (ChosenRun), so it stays whole after later solves.
    struct UnpricedAttempt {
        std::uint64_t inputs = 0;
        bool recomputeAllowed = true;
        Attempt attempt;
    };
    std::optional<UnpricedAttempt> lastUnpriced;

    void throwIfCancelled() const
    {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    }

    std::vector<TensorOrigin> origin;
    /// Each tensor's readers (shared by the sessions of one graph: SharedSearchCaches).
    const std::vector<std::vector<OpId>>& consumersOfTensors()
    {
        std::lock_guard<std::mutex> lock(caches->mutex);
        if (caches->consumers.empty()) caches->consumers = model.graph().consumers();
        return caches->consumers;
    }
    std::shared_ptr<SharedSearchCaches> caches = std::make_shared<SharedSearchCaches>();
    search::ModeCache modeCache;
    double lastLambda = 0;     ///< the memory price of the previous solve, to warm-start the next
    double lastOverLambda = 0; ///< the low end of the previous solve's price bracket (plan over the limit)
    int lastLowInstances = -1; ///< the previous solve's layers at the low price (bisectLowPricedLayers)
    std::vector<int> forced;   ///< per op: locked strategy or -1
    int tablesSolved = 0;
    int attemptsReused = 0;                                  ///< this solve's, SearchResult::attemptsReused
    std::vector<std::pair<double, double>> pricedObjectives; ///< of the current solve (SearchResult::pricedObjectives)

    Impl(const CostModel& m, FoldedGraph f);

    // ---- the fold and its domains (domains.cpp) ------------------------------------------

    /// The op at the same position of its class's representative in the fold without locks:
    /// identical ops of identical blocks have identical strategies, spec sets and costs, so they
    /// share cache entries, also after a per-instance lock splits an instance out of its class.
    std::vector<OpId> canonicalOp;

    /// The op that stands for `op` in cache keys. The flat baseline shares nothing between
    /// instances, so there every op stands for itself.
    OpId keyOp(OpId op) const { return flat ? op : canonicalOp[static_cast<size_t>(op)]; }

    void indexFold();
    const BlockClass& classAt(ClassId cls) const { return folded.classes[cls.at()]; }
    const BlockInstance& instanceAt(ClassId cls, InstanceId inst) const { return classAt(cls).instances[inst.at()]; }
    static ClassId classOf(const Run& run) { return ClassId{run.classId}; }
    const ProducerSpecs& producerSpecs(OpId op, int slot);
    /// Whether a class is one of the model's repeated blocks (two or more instances in the fold
    /// without lock splits), the layers frameworks checkpoint: a forced recompute mode applies
    /// to them, not to a one-off block such as the embedding or the head.
    bool repeatedLayer(ClassId cls) const;
    bool hasVariable(TensorId t) const { return origin[static_cast<size_t>(t)].producer >= 0; }
    /// The sibling instances absorbed into instance `inst` of class `cls`, in group order.
    std::vector<std::pair<ClassId, InstanceId>> siblingsOf(ClassId cls, InstanceId inst) const;

    std::map<ClassId, ClassBoundary> boundaryCache; ///< per class of the current fold
    const ClassBoundary& boundaryOf(ClassId cls);
    /// Per-fold facts computed when the fold is set (session set-up, like the consumer lists),
    /// so that a solve touches each instance only to write its result: class boundaries and
    /// whether each run chains.
    void indexRuns();

    std::map<std::tuple<int, int, int>, std::optional<ChainShape>> chainCache; ///< per run of the current fold
    std::optional<ChainShape> chainShape(const Run& run);
    /// chainShape of a run, from chainCache (filled by indexRuns, or now).
    const std::optional<ChainShape>& chainOf(const Run& run);

    // ---- class tables (class_table.cpp) ----------------------------------------------------

    /// Per class id and price slot (key: 2 * class + slot), for the current solve's prices.
    std::map<int, std::shared_ptr<ClassTable>> tables;
    static int tableKey(ClassId cls, int slot) { return 2 * cls.value + slot; }
    const ClassTable& tableOf(ClassId cls, int slot) const { return *tables.at(tableKey(cls, slot)); }

    std::vector<Recompute> recomputeModes(double lambda, bool recomputeAllowed, bool topLevel = false) const
    {
        if (forcedRecompute && model.settings().training) return {topLevel ? Recompute::None : *forcedRecompute};
        return search::recomputeModes(lambda, recomputeAllowed, model.settings().training);
    }
    std::shared_ptr<ClassTable> classTable(ClassId cls, double lambda, bool recomputeAllowed, int slot = 0);
    void layOutBoundary(ClassTable& ct, const BlockClass& bc);
    std::string modeKey(const ClassTable& ct, const BlockClass& bc, const std::vector<std::shared_ptr<ClassTable>>& sibs,
                        double lambda, Recompute mode) const;
    std::vector<int> classVariables(ClassTable& ct, const BlockInstance& rep,
                                    const std::vector<std::shared_ptr<ClassTable>>& sibs) const;
    std::shared_ptr<const ModeSolve> solveMode(ClassTable& ct, const BlockClass& bc,
                                               const std::vector<std::shared_ptr<ClassTable>>& sibs, double lambda,
                                               Recompute mode);
    const std::vector<Factor>& structureFactors(const ClassTable& ct, const BlockInstance& rep,
                                                const std::vector<std::shared_ptr<ClassTable>>& sibs,
                                                const std::vector<int>& domains, const std::string& key);
    void edgesIntoOps(const ClassTable& ct, const BlockInstance& rep, const std::vector<std::shared_ptr<ClassTable>>& sibs,
                      const std::vector<int>& domains, std::vector<Factor>& out, EdgePart part = EdgePart::Exposed);
    void siblingLinks(const ClassTable& ct, const BlockInstance& rep, const std::vector<std::shared_ptr<ClassTable>>& sibs,
                      const std::vector<int>& domains, std::vector<Factor>& out);
    void nodeFactors(const ClassTable& ct, const BlockInstance& rep, const std::vector<int>& domains, double lambda,
                     Recompute mode, std::vector<Factor>& out) const;
    bool dominatedByNone(const BlockInstance& rep, double lambda, Recompute mode) const;
    void fillBoundaryTable(const ClassTable& ct, const BlockInstance& rep, const std::vector<int>& producerVarOfOutput,
                           ModeSolve& solve);
    Factor edgeFromOp(int producerVar, TensorOrigin src, int consumerVar, OpId consumer, int input,
                      const std::vector<int>& domains, EdgePart part = EdgePart::Exposed);
    Factor edgeFromSpecs(int specVar, const std::vector<TensorSpec>& domain, int consumerVar, OpId consumer, int input,
                         const std::vector<int>& domains, EdgePart part = EdgePart::Exposed);
    /// The forward collectives that full recomputation runs again: the edges into the ops,
    /// forward part only, built once per class layout like structureFactors.
    const std::vector<Factor>& recomputeFactors(const ClassTable& ct, const BlockInstance& rep,
                                                const std::vector<std::shared_ptr<ClassTable>>& sibs,
                                                const std::vector<int>& domains, const std::string& key);

    // ---- decoding (decode.cpp) -------------------------------------------------------------

    std::map<std::pair<int, std::size_t>, std::shared_ptr<const DecodedEntry>>
        decodedCache;             ///< per solveAt, by (table key, entry)
    double decodedMemory = 0;     ///< per solveAt
    double decodedMemoryHigh = 0; ///< the part of decodedMemory priced at a split solve's high price

    std::shared_ptr<const DecodedEntry> decodedEntry(const ClassTable& ct, std::size_t entry);
    /// Per-device memory of one instance taking `d`, with its absorbed siblings.
    double instanceMemory(const DecodedEntry& d, ClassId cls, InstanceId inst) const;
    /// Records that `count` instances from `first` take table entry `entry` (a chained run's
    /// instances all have the same siblings, so one instance's memory stands for each).
    void chooseInstances(const ClassTable& ct, InstanceId first, int count, std::size_t entry, Attempt& attempt);
    /// Writes the strategies of one instance (and of its absorbed siblings) into the result.
    void writeInstance(const DecodedEntry& d, ClassId cls, InstanceId inst, SearchResult& result) const;
    /// Expands an attempt's folded choice into a strategy and recompute mode per op.
    void materialize(Attempt& attempt) const;
    /// The table entries an item's instances took under the top-level assignment.
    void decodeItem(const TopItem& item, const std::vector<int>& assignment, Attempt& attempt);

    // ---- stitching (stitch.cpp) ------------------------------------------------------------

    /// The product trees of the chain powers itemFactor computed, per item (by its first
    /// instance and price slot) and context, kept for decodeItem to expand. Per solveAt.
    std::map<std::tuple<int, int, int, std::vector<int>>, std::pair<std::vector<MinPlus>, int>> chainPowers;
    /// Frees chainPowers once the solve has decoded (or stopped): nothing else reads them, and a
    /// pipeline search keeps hundreds of sessions (T5-base on 4x4x8: 2.3 GB of them).
    void releaseChainPowers() { decltype(chainPowers)().swap(chainPowers); }
    std::vector<int> topDomain;                      ///< per top-level variable
    std::map<int, std::vector<TensorSpec>> topSpecs; ///< per top-level variable: its spec domain

    /// The spec a top-level variable gives its tensor when it takes value `d`.
    TensorSpec specOf(const TensorVar& tv, int d) const
    {
        return tv.isOpVar ? model.outputSpec(tv.producer, d, tv.slot) : topSpecs.at(tv.var)[static_cast<size_t>(d)];
    }
    /// Classes whose boundary is too wide for a table are not tabulated: their ops join the top
    /// level directly (exact all the same, only without sharing the solve between instances).
    std::set<ClassId> inlinedClasses();
    /// A lower bound on solveAt's least at `lambda` without building a table (least_bound.cpp):
    /// each tabled run at its count times its class's least (classLeast), each inlined op at its
    /// least node cost. Edge costs are never negative, and a least over fewer constraints is no
    /// higher.
    double tableFreeBound(double lambda, bool recomputeAllowed, const std::set<ClassId>& inlined);
    /// Whether the tables a solve builds are large enough that tableFreeBound, tried first,
    /// costs little beside them (their entries in all, kBoundFirstEntries).
    bool tablesWorthBounding(const std::set<ClassId>& inlined);
    /// The runs at the top level: the fold's, and the siblings of the `inlined` parents.
    std::vector<Run> topRuns(const std::set<ClassId>& inlined) const;
    /// The least entry any table of class `cls` can hold at `lambda`: the class's factors
    /// minimised over every variable, boundary included, under each mode, absorbed siblings at
    /// their own least (`known`: per class, within one bound).
    double classLeast(ClassId cls, double lambda, bool recomputeAllowed, std::map<ClassId, double>& known);
    /// Instances in table runs, the index PriceSplit::highFrom counts.
    int splittableInstances() const;

    struct TopLevel; // one solveAt's top-level factor graph (stitch.cpp)
    Attempt solveAt(double lambda, bool recomputeAllowed, const std::optional<PriceSplit>& split = std::nullopt,
                    const std::function<bool(double)>& stopWhen = {});
    void collectItems(TopLevel& top, const std::set<ClassId>& inlined, double lambda, bool recomputeAllowed,
                      const std::optional<PriceSplit>& split);
    void addTopVariables(TopLevel& top);
    void bindItemInputs(TopLevel& top);
    void inlinedFactors(const TopLevel& top, double lambda, std::vector<Factor>& factors);
    void decodeInlined(const TopLevel& top, const std::vector<int>& assignment, Attempt& attempt);
    MinPlus chainMatrix(const ClassTable& ct, int chain, const std::vector<int>& context) const;
    /// The top-level factor of an item: its table (or, for a compressed run, the run's min-plus
    /// power) as a function of the variables its boundary is bound to.
    Factor itemFactor(const TopItem& item, const ClassTable& ct);

    // ---- the memory price (price_search.cpp) -----------------------------------------------

    /// The fastest plan that fits `limit` on the envelope of the searches at a memory price,
    /// then mixed layer by layer across the duality gap; counts each search in pricesTried.
    Attempt searchPrices(double limit, bool limited, int& pricesTried);
    /// searchPrices' first step for a cold session with a bar to beat whose node costs alone
    /// exceed the limit: the dual at the estimated start price, as a bounded attempt when it
    /// reaches the bar (else nothing). `attemptAt` solves at a price.
    template <class AttemptAt>
    std::optional<Attempt> boundAtStartPrice(double limit, const CostModel::Floor& floor, AttemptAt&& attemptAt);
    /// Where nothing fits (`floor`, the node costs under the limit, holds more than it): the plan
    /// that needs least memory, the fastest of those (price_search.cpp).
    template <class AttemptAt>
    Attempt leastMemoryPlan(double limit, const CostModel::Floor& floor, AttemptAt&& attemptAt);
};

} // namespace tp
