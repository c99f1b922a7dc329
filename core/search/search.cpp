#include "search.h"

#include <algorithm>
#include <thread>
#include <deque>
#include <tuple>
#include <chrono>
#include <ctime>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "../util/error.h"
#include "evaluate.h"
#include "factor.h"

namespace tp {

// ---------------------------------------------------------------------------------------------
// Locks

LockRequest parseLockRequest(const std::string& text)
{
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        throw InputError("--lock '" + text + "': expected GLOB=STRATEGY, e.g. 'layers.*/mlp/fc1=f=y'");
    return {text.substr(0, eq), text.substr(eq + 1)};
}

bool globMatch(const std::string& pattern, const std::string& name)
{
    // Iterative wildcard match with backtracking to the last '*'.
    size_t p = 0, n = 0, star = std::string::npos, mark = 0;
    while (n < name.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = n;
        } else if (p < pattern.size() && pattern[p] == name[n]) {
            ++p;
            ++n;
        } else if (star != std::string::npos) {
            p = star + 1;
            n = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

std::vector<ResolvedLock> resolveLocks(const CostModel& model, const std::vector<LockRequest>& locks)
{
    std::map<OpId, int> chosen;
    for (const auto& lock : locks) {
        const std::string label = "lock '" + lock.pattern + "=" + lock.strategy + "'";
        bool matched = false;
        for (const auto& op : model.graph().ops) {
            if (!globMatch(lock.pattern, op.name)) continue;
            matched = true;
            OpStrategy st;
            try {
                st = parseStrategy(lock.strategy, model.signature(op.id), model.mesh());
            } catch (const InputError& e) {
                throw InputError(label + ": op '" + op.name + "': " + e.what());
            }
            const int index = model.findStrategy(op.id, st);
            if (index < 0)
                throw InputError(label + ": op '" + op.name + "': strategy '" + lock.strategy +
                                 "' is not a candidate on mesh " + model.mesh().shapeText());
            chosen[op.id] = index; // a later lock overrides an earlier one on the same op
        }
        if (!matched) throw InputError(label + ": no op matches '" + lock.pattern + "'");
    }
    std::vector<ResolvedLock> out;
    for (const auto& [op, s] : chosen) out.push_back({op, s});
    return out;
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

namespace {

using Clock = std::chrono::steady_clock;

/// The distinct output specs an op can produce on one output slot, sorted, and which one each
/// strategy produces.
struct ProducerSpecs {
    std::vector<TensorSpec> specs;
    std::vector<int> specOfStrategy;
};

struct TensorOrigin {
    OpId producer = -1;
    int slot = 0;
};

std::size_t product(const std::vector<int>& dims)
{
    std::size_t n = 1;
    for (int d : dims) n *= static_cast<std::size_t>(d);
    return n;
}

void unravel(std::size_t index, const std::vector<int>& dims, std::vector<int>& digits)
{
    digits.resize(dims.size());
    for (size_t k = dims.size(); k-- > 0;) {
        digits[k] = static_cast<int>(index % static_cast<std::size_t>(dims[k]));
        index /= static_cast<std::size_t>(dims[k]);
    }
}

std::size_t ravel(const std::vector<int>& digits, const std::vector<int>& dims)
{
    std::size_t index = 0;
    for (size_t k = 0; k < dims.size(); ++k) index = index * static_cast<std::size_t>(dims[k]) + static_cast<std::size_t>(digits[k]);
    return index;
}

int specIndex(const std::vector<TensorSpec>& domain, const TensorSpec& spec)
{
    auto it = std::lower_bound(domain.begin(), domain.end(), spec);
    return (it != domain.end() && *it == spec) ? static_cast<int>(it - domain.begin()) : -1;
}

/// Stands in a class's input domain for "this instance's input has no producer" (a graph
/// input): such a tensor arrives laid out as needed, at no cost.
TensorSpec freeSpec()
{
    TensorSpec s;
    s.partial = ~AxisMask{0};
    return s;
}
bool isFree(const TensorSpec& spec) { return spec.partial == ~AxisMask{0}; }

/// The kept input of a fully recomputed block (evaluate.h); a free spec (a graph input) keeps nothing.
double keptBytes(const CostModel& model, TensorId t, const TensorSpec& spec)
{
    return isFree(spec) ? 0.0 : keptInputBytes(model, t, spec);
}

/// One class solved under one recompute mode: the elimination over its variables with the
/// boundary kept, converted into a table over boundary specs.
struct ModeSolve {
    std::vector<int> domains;           ///< per variable of the class factor graph
    std::vector<int> keepVars;          ///< ascending
    EliminationResult elimination;
    std::vector<std::size_t> keepEntry; ///< per table entry: the remaining-factor index it came from
    std::vector<double> table;          ///< over ClassTable::dims

    /// What it holds in memory (the tables and the elimination's argmin records).
    double bytes() const
    {
        double b = static_cast<double>(keepEntry.size() * sizeof(std::size_t) + table.size() * sizeof(double));
        for (const auto& step : elimination.steps) b += static_cast<double>(step.argmin.size() * sizeof(int));
        return b + static_cast<double>(elimination.remaining.values.size() * sizeof(double));
    }
};

/// The solved table of a block class and how to decode it.
struct ClassTable {
    int classId = -1;
    int slot = 0; ///< which memory price of a split solve (0: the base price, 1: the high one)
    std::vector<std::vector<TensorSpec>> inputDomains; ///< per input position; empty: no variable
    std::vector<std::vector<TensorSpec>> outputDomains; ///< per entry of outputPos
    std::vector<int> outputPos;                        ///< instance output positions that are table dims
    std::vector<int> dims;                             ///< inputs with a variable, then outputs
    std::vector<int> inputDim;                         ///< per input position: index into dims or -1
    std::vector<double> table;                         ///< min over modes
    std::vector<std::uint8_t> modeOfEntry;             ///< which ModeSolve won
    std::vector<std::shared_ptr<const ModeSolve>> modes;
    std::vector<Recompute> modeKinds;

    // Variable layout of the class factor graph: op i -> var i; input position k -> inputVar[k];
    // for each absorbed sibling instance s: its table dims -> siblingVars[s][d].
    int opCount = 0;
    std::vector<int> inputVar;
    std::vector<std::vector<int>> siblingVars;
    std::vector<int> siblingClass;   ///< class id of each absorbed sibling instance
    std::vector<int> siblingIndex;   ///< instance index of each (in the representative's groups)
};

} // namespace

// ---------------------------------------------------------------------------------------------
// The solver

struct PlannerSession::Impl {
    const CostModel& model;
    FoldedGraph baseFold;   ///< the fold without per-instance splits
    FoldedGraph folded;     ///< with splits for the current locks
    std::vector<ResolvedLock> locks;
    double memoryLimit = 0;
    bool allowRecompute = true;
    bool flat = false;
    bool mixLayers = true;
    const std::atomic<bool>* cancel = nullptr;
    SearchProgress* progress = nullptr;
    int threads = 0; // 0: every hardware thread
    // Asked once: hardware_concurrency() reads sysfs (about 10 us), too slow for every table.
    const int hardwareThreads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    int threadCount() const { return threads > 0 ? threads : hardwareThreads; }

    void throwIfCancelled() const
    {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    }

    std::vector<TensorOrigin> origin;
    std::vector<std::vector<OpId>> consumers; ///< per tensor
    std::map<std::pair<OpId, int>, ProducerSpecs> producerSpecCache;
    std::map<std::string, std::shared_ptr<const ModeSolve>> modeCache;
    /// modeCache's keys, oldest first, and what its entries hold: the cache is bounded in
    /// bytes, because on a 3D mesh one wide class table per price can take hundreds of MB.
    std::deque<std::string> modeOrder;
    double modeBytes = 0;
    static constexpr double kModeCacheBytes = 3.0 * 1024 * 1024 * 1024;

    void rememberMode(const std::string& key, std::shared_ptr<const ModeSolve> solve)
    {
        modeBytes += solve->bytes();
        modeCache[key] = std::move(solve);
        modeOrder.push_back(key);
        // The oldest go first (an edit's re-solve mostly wants the latest prices); tables in
        // use stay alive through their ClassTable until the solve that uses them ends.
        while ((modeBytes > kModeCacheBytes || modeOrder.size() > 4096) && modeOrder.size() > 1) {
            auto it = modeCache.find(modeOrder.front());
            if (it != modeCache.end()) {
                modeBytes -= it->second->bytes();
                modeCache.erase(it);
            }
            modeOrder.pop_front();
        }
    }
    std::map<std::string, std::vector<Factor>> structureCache; ///< edge and link factors per class layout
    std::map<std::tuple<OpId, int, OpId, int, bool>, std::vector<double>> edgeCache; ///< op-to-op edges by keyOp
    double lastLambda = 0; ///< the memory price of the previous solve, to warm-start the next
    std::vector<int> forced; ///< per op: locked strategy or -1
    int tablesSolved = 0;

    Impl(const CostModel& m, FoldedGraph f) : model(m), baseFold(std::move(f)), folded(baseFold)
    {
        const Graph& g = model.graph();
        origin.assign(g.tensors.size(), {});
        for (const auto& op : g.ops)
            for (size_t k = 0; k < op.outputs.size(); ++k)
                origin[static_cast<size_t>(op.outputs[k])] = {op.id, static_cast<int>(k)};
        forced.assign(g.ops.size(), -1);
        consumers = g.consumers();
        indexFold();
        indexRuns();
    }

    /// The op at the same position of its class's representative in the fold without locks:
    /// identical ops of identical blocks have identical strategies, spec sets and costs, so they
    /// share cache entries, also after a per-instance lock splits an instance out of its class.
    std::vector<OpId> canonicalOp;

    /// The op that stands for `op` in cache keys. The flat baseline shares nothing between
    /// instances, so there every op stands for itself.
    OpId keyOp(OpId op) const { return flat ? op : canonicalOp[static_cast<size_t>(op)]; }

    void indexFold()
    {
        canonicalOp.assign(model.graph().ops.size(), -1);
        for (const auto& bc : baseFold.classes)
            for (const auto& inst : bc.instances)
                for (size_t i = 0; i < inst.ops.size(); ++i) canonicalOp[static_cast<size_t>(inst.ops[i])] = bc.instances[0].ops[i];
        for (auto& c : canonicalOp)
            if (c < 0) c = static_cast<OpId>(&c - canonicalOp.data());
    }

    const ProducerSpecs& producerSpecs(OpId op, int slot)
    {
        auto key = std::make_pair(canonicalOp[static_cast<size_t>(op)], slot);
        auto it = producerSpecCache.find(key);
        if (it != producerSpecCache.end()) return it->second;
        op = key.first;
        ProducerSpecs ps;
        const int n = static_cast<int>(model.strategies(op).size());
        for (int s = 0; s < n; ++s) ps.specs.push_back(model.outputSpec(op, s, slot));
        std::sort(ps.specs.begin(), ps.specs.end());
        ps.specs.erase(std::unique(ps.specs.begin(), ps.specs.end()), ps.specs.end());
        for (int s = 0; s < n; ++s) ps.specOfStrategy.push_back(specIndex(ps.specs, model.outputSpec(op, s, slot)));
        return producerSpecCache.emplace(key, std::move(ps)).first->second;
    }

    bool hasVariable(TensorId t) const { return origin[static_cast<size_t>(t)].producer >= 0; }

    // The sibling instances absorbed into instance `inst` of class `cls`, in group order.
    std::vector<std::pair<int, int>> siblingsOf(int cls, int inst) const
    {
        std::vector<std::pair<int, int>> out;
        for (const auto& group : folded.siblings)
            if (group.parentClass == cls && group.parentInstance == inst)
                for (int i : group.instances) out.emplace_back(group.classId, i);
        return out;
    }

    /// What a class table's boundary is made of, a property of the fold (not of the price):
    /// the spec domain of each input position (empty: no variable, or absorbed from a sibling)
    /// and the output positions that are table dims.
    struct ClassBoundary {
        std::vector<std::vector<TensorSpec>> inputDomains;
        std::vector<int> outputs;
    };
    std::map<int, ClassBoundary> boundaryCache; ///< per class of the current fold

    const ClassBoundary& boundaryOf(int cls)
    {
        if (auto known = boundaryCache.find(cls); known != boundaryCache.end()) return known->second;
        const BlockClass& bc = folded.classes[static_cast<size_t>(cls)];
        const BlockInstance& rep = bc.instances[0];
        // Tensors exchanged with the siblings this block absorbs are internal to its table.
        std::set<OpId> siblingOps;
        for (const auto& [scls, sinst] : siblingsOf(cls, 0))
            for (OpId op : folded.classes[static_cast<size_t>(scls)].instances[static_cast<size_t>(sinst)].ops) siblingOps.insert(op);
        auto absorbedInput = [&](TensorId t) { return siblingOps.count(origin[static_cast<size_t>(t)].producer) > 0; };
        auto absorbedOutput = [&](TensorId t) {
            const auto& readers = consumers[static_cast<size_t>(t)];
            return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](OpId c) { return siblingOps.count(c) > 0; });
        };
        ClassBoundary boundary;
        // Input domains: the union of what the producers of each input position can produce,
        // over every instance of the class.
        boundary.inputDomains.resize(rep.inputs.size());
        for (size_t k = 0; k < rep.inputs.size(); ++k) {
            if (absorbedInput(rep.inputs[k])) continue;
            std::vector<TensorSpec> domain;
            bool someFree = false;
            std::set<std::pair<OpId, int>> producers; // canonical producer ops and slots
            std::pair<OpId, int> last{-1, -1};        // a run's instances repeat one producer
            for (const auto& inst : bc.instances) {
                const TensorOrigin o = origin[static_cast<size_t>(inst.inputs[k])];
                if (o.producer < 0) {
                    someFree = true;
                    continue;
                }
                const std::pair<OpId, int> p{canonicalOp[static_cast<size_t>(o.producer)], o.slot};
                if (p != last) producers.insert(last = p);
            }
            for (const auto& [op, outSlot] : producers) {
                const auto& specs = producerSpecs(op, outSlot).specs;
                domain.insert(domain.end(), specs.begin(), specs.end());
            }
            if (someFree && !domain.empty()) domain.push_back(freeSpec());
            std::sort(domain.begin(), domain.end());
            domain.erase(std::unique(domain.begin(), domain.end()), domain.end());
            boundary.inputDomains[k] = std::move(domain);
        }
        for (size_t j = 0; j < rep.outputs.size(); ++j)
            if (!absorbedOutput(rep.outputs[j])) boundary.outputs.push_back(static_cast<int>(j));
        return boundaryCache.emplace(cls, std::move(boundary)).first->second;
    }

    /// Per-fold facts computed when the fold is set (session set-up, like the consumer lists),
    /// so that a solve touches each instance only to write its result: class boundaries and
    /// whether each run chains.
    void indexRuns()
    {
        boundaryCache.clear();
        chainCache.clear();
        for (const Run& run : folded.runs) {
            boundaryOf(run.classId);
            chainCache.emplace(std::make_tuple(run.classId, run.firstInstance, run.count), chainShape(run));
        }
    }

    // ---- class tables -------------------------------------------------------------------

    /// Per class id and price slot (key: 2 * class + slot), for the current solve's prices.
    std::map<int, std::shared_ptr<ClassTable>> tables;
    static int tableKey(int cls, int slot) { return 2 * cls + slot; }
    const ClassTable& tableOf(int cls, int slot) const { return *tables.at(tableKey(cls, slot)); }

    /// The recompute modes a block chooses among at a memory price: recomputing only pays
    /// when memory has a price, and only in training.
    std::vector<Recompute> recomputeModes(double lambda, bool recomputeAllowed) const
    {
        if (recomputeAllowed && lambda > 0 && model.settings().training) return {Recompute::None, Recompute::Selective, Recompute::Full};
        return {Recompute::None};
    }

    std::shared_ptr<ClassTable> classTable(int cls, double lambda, bool recomputeAllowed, int slot = 0)
    {
        auto found = tables.find(tableKey(cls, slot));
        if (found != tables.end()) return found->second;
        throwIfCancelled();
        const BlockClass& bc = folded.classes[static_cast<size_t>(cls)];
        auto ct = std::make_shared<ClassTable>();
        ct->classId = cls;
        ct->slot = slot;
        const BlockInstance& rep = bc.instances[0];
        ct->opCount = static_cast<int>(rep.ops.size());

        const ClassBoundary& boundary = boundaryOf(cls);
        ct->inputDomains = boundary.inputDomains;
        for (int j : boundary.outputs) {
            const TensorOrigin o = origin[static_cast<size_t>(rep.outputs[static_cast<size_t>(j)])];
            ct->outputPos.push_back(j);
            ct->outputDomains.push_back(producerSpecs(o.producer, o.slot).specs);
        }
        ct->inputDim.assign(rep.inputs.size(), -1);
        for (size_t k = 0; k < rep.inputs.size(); ++k)
            if (!ct->inputDomains[k].empty()) {
                ct->inputDim[k] = static_cast<int>(ct->dims.size());
                ct->dims.push_back(static_cast<int>(ct->inputDomains[k].size()));
            }
        for (const auto& d : ct->outputDomains) ct->dims.push_back(static_cast<int>(d.size()));

        // Sibling tables first (they are factors in this class's graph).
        std::vector<std::shared_ptr<ClassTable>> siblingTables;
        for (const auto& [scls, sinst] : siblingsOf(cls, 0)) {
            siblingTables.push_back(classTable(scls, lambda, recomputeAllowed, slot));
            ct->siblingClass.push_back(scls);
            ct->siblingIndex.push_back(sinst);
        }

        const std::vector<Recompute> modes = recomputeModes(lambda, recomputeAllowed);
        ct->modeKinds = modes;
        for (Recompute mode : modes) ct->modes.push_back(solveMode(*ct, bc, siblingTables, lambda, mode));
        const std::size_t size = product(ct->dims);
        ct->table.assign(size, kInfinity);
        ct->modeOfEntry.assign(size, 0);
        for (size_t m = 0; m < ct->modes.size(); ++m)
            for (std::size_t e = 0; e < size; ++e)
                if (ct->modes[m]->table[e] < ct->table[e]) {
                    ct->table[e] = ct->modes[m]->table[e];
                    ct->modeOfEntry[e] = static_cast<std::uint8_t>(m);
                }
        tables[tableKey(cls, slot)] = ct;
        return ct;
    }

    std::string modeKey(const ClassTable& ct, const BlockClass& bc, const std::vector<std::shared_ptr<ClassTable>>& sibs,
                        double lambda, Recompute mode) const
    {
        std::ostringstream key;
        key.precision(17);
        key << lambda << '|' << static_cast<int>(mode) << '|';
        for (OpId op : bc.instances[0].ops) key << keyOp(op) << ',';
        key << '|';
        // Input domains are unions over the class's instances: the table depends on their content.
        for (const auto& domain : ct.inputDomains) {
            key << '<';
            for (const auto& spec : domain) {
                for (const auto& dim : spec.dims) {
                    for (int a : dim) key << a;
                    key << '.';
                }
                key << '+' << spec.partial << ';';
            }
        }
        for (size_t s = 0; s < sibs.size(); ++s) key << "s" << sibs[s]->classId << '/' << folded.classes[static_cast<size_t>(sibs[s]->classId)].instances[0].ops.front();
        // Locks last: the edges (keyed by everything between the second '|' and this) do not
        // depend on them, so a lock re-solve reuses the class's resharding costs.
        key << "|locks";
        for (OpId op : bc.instances[0].ops)
            if (forced[static_cast<size_t>(op)] >= 0) key << ' ' << op << ':' << forced[static_cast<size_t>(op)];
        for (const auto& sib : sibs) // a sibling's table follows its own locks
            for (OpId op : folded.classes[static_cast<size_t>(sib->classId)].instances[0].ops)
                if (forced[static_cast<size_t>(op)] >= 0) key << " s" << op << ':' << forced[static_cast<size_t>(op)];
        return key.str();
    }

    std::shared_ptr<const ModeSolve> solveMode(ClassTable& ct, const BlockClass& bc,
                                               const std::vector<std::shared_ptr<ClassTable>>& sibs, double lambda,
                                               Recompute mode)
    {
        const std::string key = modeKey(ct, bc, sibs, lambda, mode);
        const BlockInstance& rep = bc.instances[0];
        // Variable layout (identical for every mode).
        std::vector<int> domains;
        for (OpId op : rep.ops) domains.push_back(static_cast<int>(model.strategies(op).size()));
        ct.inputVar.assign(rep.inputs.size(), -1);
        for (size_t k = 0; k < rep.inputs.size(); ++k)
            if (!ct.inputDomains[k].empty()) {
                ct.inputVar[k] = static_cast<int>(domains.size());
                domains.push_back(static_cast<int>(ct.inputDomains[k].size()));
            }
        ct.siblingVars.clear();
        for (const auto& sib : sibs) {
            std::vector<int> vars;
            for (int d : sib->dims) {
                vars.push_back(static_cast<int>(domains.size()));
                domains.push_back(d);
            }
            ct.siblingVars.push_back(std::move(vars));
        }
        if (auto it = modeCache.find(key); it != modeCache.end()) return it->second;
        ++tablesSolved;
        if (progress) progress->tablesSolved.fetch_add(1, std::memory_order_relaxed);

        auto solve = std::make_shared<ModeSolve>();
        solve->domains = domains;
        std::vector<Factor> factors;
        std::map<OpId, int> local;
        for (size_t i = 0; i < rep.ops.size(); ++i) local[rep.ops[i]] = static_cast<int>(i);
        std::map<TensorId, int> inputPosition; // inputs with a variable
        for (size_t k = 0; k < rep.inputs.size(); ++k)
            if (ct.inputVar[k] >= 0) inputPosition[rep.inputs[k]] = static_cast<int>(k);
        // Tensors produced by absorbed siblings: (sibling, output position).
        std::map<TensorId, std::pair<int, int>> siblingOutput;
        const auto sibInstances = siblingsOf(ct.classId, 0);
        for (size_t s = 0; s < sibInstances.size(); ++s) {
            const auto& inst = folded.classes[static_cast<size_t>(sibInstances[s].first)].instances[static_cast<size_t>(sibInstances[s].second)];
            for (size_t j = 0; j < inst.outputs.size(); ++j) siblingOutput[inst.outputs[j]] = {static_cast<int>(s), static_cast<int>(j)};
        }

        // Edges and sibling links do not depend on the price of memory or the recompute mode:
        // build them once per class layout.
        const std::size_t structureStart = key.find('|', key.find('|') + 1);
        const std::string structureKey = key.substr(structureStart, key.rfind("|locks") - structureStart);
        auto cached = structureCache.find(structureKey);
        if (cached == structureCache.end()) {
            std::vector<Factor> structure;
            std::vector<Factor>& factorsOut = structure;
        // Edges into each op.
        for (size_t i = 0; i < rep.ops.size(); ++i) {
            const OpId op = rep.ops[i];
            const Op& o = model.graph().op(op);
            const int consumerVar = static_cast<int>(i);
            for (size_t k = 0; k < o.inputs.size(); ++k) {
                const TensorId t = o.inputs[k];
                const TensorOrigin src = origin[static_cast<size_t>(t)];
                if (src.producer < 0) continue; // graph input or weight: laid out for free
                if (auto it = local.find(src.producer); it != local.end()) {
                    factorsOut.push_back(edgeFromOp(it->second, src, consumerVar, op, static_cast<int>(k), domains));
                } else if (auto in = inputPosition.find(t); in != inputPosition.end()) {
                    factorsOut.push_back(edgeFromSpecs(ct.inputVar[static_cast<size_t>(in->second)],
                                                    ct.inputDomains[static_cast<size_t>(in->second)], consumerVar, op,
                                                    static_cast<int>(k), domains));
                } else if (auto so = siblingOutput.find(t); so != siblingOutput.end()) {
                    const auto& sib = *sibs[static_cast<size_t>(so->second.first)];
                    const int dim = static_cast<int>(sib.dims.size() - sib.outputDomains.size()) + so->second.second;
                    factorsOut.push_back(edgeFromSpecs(ct.siblingVars[static_cast<size_t>(so->second.first)][static_cast<size_t>(dim)],
                                                    sib.outputDomains[static_cast<size_t>(so->second.second)], consumerVar, op,
                                                    static_cast<int>(k), domains));
                } else {
                    throw std::logic_error("search: op '" + o.name + "' reads a tensor from outside its block that is not a block input");
                }
            }
        }
        // Absorbed siblings: their tables, tied to the specs of what feeds them.
        for (size_t s = 0; s < sibs.size(); ++s) {
            const auto& sib = *sibs[s];
            const auto& inst = folded.classes[static_cast<size_t>(sibInstances[s].first)].instances[static_cast<size_t>(sibInstances[s].second)];
            for (size_t k = 0; k < inst.inputs.size(); ++k) {
                if (sib.inputDim[k] < 0) continue;
                const int var = ct.siblingVars[s][static_cast<size_t>(sib.inputDim[k])];
                const auto& domain = sib.inputDomains[k];
                const TensorOrigin src = origin[static_cast<size_t>(inst.inputs[k])];
                if (auto it = local.find(src.producer); it != local.end()) {
                    const int pv = it->second;
                    const auto& ps = producerSpecs(src.producer, src.slot);
                    Factor f{{std::min(pv, var), std::max(pv, var)}, std::vector<double>(static_cast<size_t>(domains[static_cast<size_t>(pv)] * domains[static_cast<size_t>(var)]), kInfinity)};
                    for (int sp = 0; sp < domains[static_cast<size_t>(pv)]; ++sp) {
                        const int v = specIndex(domain, ps.specs[static_cast<size_t>(ps.specOfStrategy[static_cast<size_t>(sp)])]);
                        if (v < 0) continue;
                        const size_t idx = pv < var ? static_cast<size_t>(sp * domains[static_cast<size_t>(var)] + v)
                                                    : static_cast<size_t>(v * domains[static_cast<size_t>(pv)] + sp);
                        f.values[idx] = 0;
                    }
                    factorsOut.push_back(std::move(f));
                } else if (auto in = inputPosition.find(inst.inputs[k]); in != inputPosition.end()) {
                    const int iv = ct.inputVar[static_cast<size_t>(in->second)];
                    const auto& outer = ct.inputDomains[static_cast<size_t>(in->second)];
                    Factor f{{std::min(iv, var), std::max(iv, var)}, std::vector<double>(outer.size() * domain.size(), kInfinity)};
                    for (size_t a = 0; a < outer.size(); ++a) {
                        const int v = specIndex(domain, outer[a]);
                        if (v < 0) continue;
                        const size_t idx = iv < var ? a * domain.size() + static_cast<size_t>(v) : static_cast<size_t>(v) * outer.size() + a;
                        f.values[idx] = 0;
                    }
                    factorsOut.push_back(std::move(f));
                } else {
                    throw std::logic_error("search: a sibling block reads a tensor its parent neither makes nor receives");
                }
            }
        }
            cached = structureCache.emplace(structureKey, std::move(structure)).first;
        }
        factors.insert(factors.end(), cached->second.begin(), cached->second.end());
        for (size_t s = 0; s < sibs.size(); ++s) factors.push_back(Factor{ct.siblingVars[s], sibs[s]->table});
        // Node costs.
        for (size_t i = 0; i < rep.ops.size(); ++i) {
            const OpId op = rep.ops[i];
            Factor f{{static_cast<int>(i)}, {}};
            const int n = domains[i];
            for (int s = 0; s < n; ++s) {
                const int lockedTo = forced[static_cast<size_t>(op)];
                if (lockedTo >= 0 && lockedTo != s) {
                    f.values.push_back(kInfinity);
                    continue;
                }
                const OpCost& c = model.opCost(op, s, mode);
                f.values.push_back(c.seconds() + lambda * c.memoryBytes());
            }
            factors.push_back(std::move(f));
        }
        // Full recomputation keeps each block input.
        if (mode == Recompute::Full)
            for (size_t k = 0; k < rep.inputs.size(); ++k) {
                if (ct.inputVar[k] < 0) continue;
                Factor f{{ct.inputVar[k]}, {}};
                for (const auto& spec : ct.inputDomains[k]) f.values.push_back(lambda * keptBytes(model, rep.inputs[k], spec));
                factors.push_back(std::move(f));
            }

        // Keep the boundary: input spec variables and the producers of the outputs.
        std::vector<int> producerVarOfOutput;
        for (int j : ct.outputPos) {
            const TensorId t = rep.outputs[static_cast<size_t>(j)];
            auto it = local.find(origin[static_cast<size_t>(t)].producer);
            if (it == local.end()) throw std::logic_error("search: a block output is not produced by one of its own ops");
            producerVarOfOutput.push_back(it->second);
        }
        std::vector<int> keep;
        for (int v : ct.inputVar)
            if (v >= 0) keep.push_back(v);
        keep.insert(keep.end(), producerVarOfOutput.begin(), producerVarOfOutput.end());
        std::sort(keep.begin(), keep.end());
        keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
        solve->keepVars = keep;
        solve->elimination = eliminate(std::move(factors), domains, keep, threadCount());

        // Convert (input specs, producer strategies) into (input specs, output specs).
        const std::size_t size = product(ct.dims);
        solve->table.assign(size, kInfinity);
        solve->keepEntry.assign(size, 0);
        std::vector<int> keepDims;
        for (int v : keep) keepDims.push_back(domains[static_cast<size_t>(v)]);
        std::vector<int> digits, assignment(domains.size(), 0), entry(ct.dims.size(), 0);
        const auto& remaining = solve->elimination.remaining;
        for (std::size_t r = 0; r < remaining.values.size(); ++r) {
            if (remaining.values[r] == kInfinity) continue;
            unravel(r, keepDims, digits);
            for (size_t p = 0; p < keep.size(); ++p) assignment[static_cast<size_t>(keep[p])] = digits[p];
            for (size_t k = 0; k < rep.inputs.size(); ++k)
                if (ct.inputDim[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = assignment[static_cast<size_t>(ct.inputVar[k])];
            const size_t firstOut = ct.dims.size() - ct.outputPos.size();
            for (size_t j = 0; j < ct.outputPos.size(); ++j) {
                const TensorOrigin o = origin[static_cast<size_t>(rep.outputs[static_cast<size_t>(ct.outputPos[j])])];
                entry[firstOut + j] = producerSpecs(o.producer, o.slot).specOfStrategy[static_cast<size_t>(assignment[static_cast<size_t>(producerVarOfOutput[j])])];
            }
            const std::size_t e = ravel(entry, ct.dims);
            if (remaining.values[r] < solve->table[e]) {
                solve->table[e] = remaining.values[r];
                solve->keepEntry[e] = r;
            }
        }
        // Decoding replays the steps from the kept variables; the remaining values are in the
        // table now.
        std::vector<double>().swap(solve->elimination.remaining.values);
        rememberMode(key, solve);
        return solve;
    }

    Factor edgeFromOp(int producerVar, TensorOrigin src, int consumerVar, OpId consumer, int input,
                      const std::vector<int>& domains)
    {
        Factor f;
        f.vars = {std::min(producerVar, consumerVar), std::max(producerVar, consumerVar)};
        // Identical edges of identical blocks cost the same: computed once per session (also
        // for an instance that a lock split out of its class).
        const auto key = std::make_tuple(keyOp(src.producer), src.slot, keyOp(consumer), input, producerVar < consumerVar);
        throwIfCancelled(); // one class's edges can take seconds on a 4-axis mesh
        if (auto hit = edgeCache.find(key); !flat && hit != edgeCache.end()) {
            f.values = hit->second;
            return f;
        }
        const auto& ps = producerSpecs(src.producer, src.slot);
        const int np = domains[static_cast<size_t>(producerVar)], nc = domains[static_cast<size_t>(consumerVar)];
        // Cost per distinct produced spec, then spread over the producer's strategies.
        std::vector<double> perSpec(ps.specs.size() * static_cast<size_t>(nc));
        for (size_t v = 0; v < ps.specs.size(); ++v)
            for (int c = 0; c < nc; ++c)
                perSpec[v * static_cast<size_t>(nc) + static_cast<size_t>(c)] = model.edgeCost(&ps.specs[v], consumer, input, c).exposedSeconds;
        f.values.resize(static_cast<size_t>(np * nc));
        for (int p = 0; p < np; ++p)
            for (int c = 0; c < nc; ++c) {
                const double cost = perSpec[static_cast<size_t>(ps.specOfStrategy[static_cast<size_t>(p)]) * static_cast<size_t>(nc) + static_cast<size_t>(c)];
                const size_t idx = producerVar < consumerVar ? static_cast<size_t>(p * nc + c) : static_cast<size_t>(c * np + p);
                f.values[idx] = cost;
            }
        if (!flat) edgeCache.emplace(key, f.values);
        return f;
    }

    Factor edgeFromSpecs(int specVar, const std::vector<TensorSpec>& domain, int consumerVar, OpId consumer, int input,
                         const std::vector<int>& domains)
    {
        const int nv = static_cast<int>(domain.size()), nc = domains[static_cast<size_t>(consumerVar)];
        Factor f;
        f.vars = {std::min(specVar, consumerVar), std::max(specVar, consumerVar)};
        f.values.resize(static_cast<size_t>(nv * nc));
        for (int v = 0; v < nv; ++v)
            for (int c = 0; c < nc; ++c) {
                const TensorSpec& spec = domain[static_cast<size_t>(v)];
                const double cost = isFree(spec) ? 0.0 : model.edgeCost(&spec, consumer, input, c).exposedSeconds;
                const size_t idx = specVar < consumerVar ? static_cast<size_t>(v * nc + c) : static_cast<size_t>(c * nv + v);
                f.values[idx] = cost;
            }
        return f;
    }

    // ---- decoding -----------------------------------------------------------------------------

    /// The decoded choice of one class table entry: strategies of the representative's ops, the
    /// recompute mode, the per-device memory of one instance (its siblings excluded) and the
    /// choices of its absorbed siblings. Identical instances share it; a search's answer holds
    /// it by pointer, so it outlives the per-price tables.
    struct DecodedEntry {
        std::vector<int> strategies;
        Recompute mode = Recompute::None;
        double memoryBytes = 0;
        std::vector<std::shared_ptr<const DecodedEntry>> siblings; ///< per absorbed sibling position
    };
    std::map<std::pair<int, std::size_t>, std::shared_ptr<const DecodedEntry>> decodedCache; ///< per solveAt, by (table key, entry)

    /// Consecutive instances of one class that take the same decoded entry: the search's answer
    /// is a list of these (plus the inlined ops), so its size grows with the number of distinct
    /// layouts, not with depth. Writing a strategy per op happens once, for the chosen plan.
    struct ChosenRun {
        int classId = -1;
        int firstInstance = 0;
        int count = 0;
        std::shared_ptr<const DecodedEntry> entry;
    };
    /// One search at a memory price: its result (step time, memory, objective) and the folded
    /// choice that materialize() expands into a strategy per op.
    struct Attempt {
        SearchResult result;
        std::vector<ChosenRun> runs;
        std::vector<std::tuple<OpId, int, Recompute>> inlinedChoice; ///< ops solved at the top level
    };

    std::shared_ptr<const DecodedEntry> decodedEntry(const ClassTable& ct, int cls, std::size_t entry)
    {
        auto key = std::make_pair(tableKey(cls, ct.slot), entry);
        if (auto it = decodedCache.find(key); it != decodedCache.end()) return it->second;
        const size_t m = ct.modeOfEntry[entry];
        const ModeSolve& solve = *ct.modes[m];
        std::vector<int> keepDims, digits, assignment(solve.domains.size(), 0);
        for (int v : solve.keepVars) keepDims.push_back(solve.domains[static_cast<size_t>(v)]);
        unravel(solve.keepEntry[entry], keepDims, digits);
        for (size_t p = 0; p < solve.keepVars.size(); ++p) assignment[static_cast<size_t>(solve.keepVars[p])] = digits[p];
        decode(solve.elimination, solve.domains, assignment);
        auto d = std::make_shared<DecodedEntry>();
        d->mode = ct.modeKinds[m];
        const BlockInstance& rep = folded.classes[static_cast<size_t>(cls)].instances[0];
        for (size_t i = 0; i < rep.ops.size(); ++i) {
            d->strategies.push_back(assignment[i]);
            d->memoryBytes += model.opCost(rep.ops[i], assignment[i], d->mode).memoryBytes();
        }
        if (d->mode == Recompute::Full)
            for (size_t k = 0; k < rep.inputs.size(); ++k)
                if (ct.inputVar[k] >= 0)
                    d->memoryBytes += keptBytes(model, rep.inputs[k], ct.inputDomains[k][static_cast<size_t>(assignment[static_cast<size_t>(ct.inputVar[k])])]);
        for (size_t sb = 0; sb < ct.siblingVars.size(); ++sb) {
            const auto& sibTable = tableOf(ct.siblingClass[sb], ct.slot);
            std::vector<int> sibEntry;
            for (int v : ct.siblingVars[sb]) sibEntry.push_back(assignment[static_cast<size_t>(v)]);
            d->siblings.push_back(decodedEntry(sibTable, ct.siblingClass[sb], ravel(sibEntry, sibTable.dims)));
        }
        return decodedCache.emplace(key, std::move(d)).first->second;
    }

    /// Per-device memory of one instance taking `d`, with its absorbed siblings.
    double instanceMemory(const DecodedEntry& d, int cls, int inst) const
    {
        double bytes = d.memoryBytes;
        if (d.siblings.empty()) return bytes;
        const auto sibs = siblingsOf(cls, inst);
        for (size_t sb = 0; sb < d.siblings.size() && sb < sibs.size(); ++sb)
            bytes += instanceMemory(*d.siblings[sb], sibs[sb].first, sibs[sb].second);
        return bytes;
    }

    /// Records that `count` instances from `first` take table entry `entry` (a chained run's
    /// instances all have the same siblings, so one instance's memory stands for each).
    void chooseInstances(const ClassTable& ct, int cls, int first, int count, std::size_t entry, Attempt& attempt)
    {
        auto d = decodedEntry(ct, cls, entry);
        const double bytes = instanceMemory(*d, cls, first) * count;
        decodedMemory += bytes;
        if (ct.slot == 1) decodedMemoryHigh += bytes;
        if (!attempt.runs.empty()) {
            ChosenRun& last = attempt.runs.back();
            if (last.classId == cls && last.entry == d && last.firstInstance + last.count == first) {
                last.count += count;
                return;
            }
        }
        attempt.runs.push_back(ChosenRun{cls, first, count, std::move(d)});
    }

    /// Writes the strategies of one instance (and of its absorbed siblings) into the result.
    void writeInstance(const DecodedEntry& d, int cls, int inst, SearchResult& result) const
    {
        const BlockInstance& instance = folded.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(inst)];
        int* strategyOf = result.strategyOfOp.data();
        Recompute* recomputeOf = result.recomputeOfOp.data();
        const OpId* ops = instance.ops.data();
        for (size_t i = 0, n = instance.ops.size(); i < n; ++i) {
            strategyOf[ops[i]] = d.strategies[i];
            recomputeOf[ops[i]] = d.mode;
        }
        if (d.siblings.empty()) return;
        const auto sibs = siblingsOf(cls, inst);
        for (size_t sb = 0; sb < d.siblings.size() && sb < sibs.size(); ++sb)
            writeInstance(*d.siblings[sb], sibs[sb].first, sibs[sb].second, result);
    }

    /// Expands an attempt's folded choice into a strategy and recompute mode per op.
    void materialize(Attempt& attempt) const
    {
        SearchResult& r = attempt.result;
        const size_t n = model.graph().ops.size();
        r.strategyOfOp.assign(n, 0);
        r.recomputeOfOp.assign(n, Recompute::None);
        for (const auto& [op, s, mode] : attempt.inlinedChoice) {
            r.strategyOfOp[static_cast<size_t>(op)] = s;
            r.recomputeOfOp[static_cast<size_t>(op)] = mode;
        }
        for (const ChosenRun& run : attempt.runs)
            for (int a = run.firstInstance; a < run.firstInstance + run.count; ++a) writeInstance(*run.entry, run.classId, a, r);
    }

    double decodedMemory = 0;     ///< per solveAt
    double decodedMemoryHigh = 0; ///< the part of decodedMemory priced at a split solve's high price

    // ---- stitching ----------------------------------------------------------------------------

    struct MinPlus {
        int n = 0;
        std::vector<double> v;
        int left = -1, right = -1;
        std::int64_t span = 1; ///< instances the product covers
    };

    /// The min-plus product. No argmin is kept: the inner loop is a plain min over a row (the
    /// compiler vectorises it), and decoding recovers the few argmins it needs (midOf).
    static MinPlus multiply(const MinPlus& a, const MinPlus& b)
    {
        MinPlus c;
        c.n = a.n;
        const size_t n = static_cast<size_t>(a.n);
        c.v.assign(n * n, kInfinity);
        for (size_t i = 0; i < n; ++i) {
            double* out = c.v.data() + i * n;
            for (size_t m = 0; m < n; ++m) {
                const double left = a.v[i * n + m];
                if (left == kInfinity) continue;
                const double* right = b.v.data() + m * n;
                for (size_t j = 0; j < n; ++j) out[j] = std::min(out[j], left + right[j]);
            }
        }
        return c;
    }

    /// The state a product's optimal path from i to j passes between its halves: the first m
    /// (in index order) reaching the minimum, the same sums the product took its minimum of.
    static int midOf(const std::vector<MinPlus>& nodes, int node, int i, int j)
    {
        const MinPlus& p = nodes[static_cast<size_t>(node)];
        const MinPlus& a = nodes[static_cast<size_t>(p.left)];
        const MinPlus& b = nodes[static_cast<size_t>(p.right)];
        const size_t n = static_cast<size_t>(p.n);
        double best = kInfinity;
        int mid = 0;
        for (size_t m = 0; m < n; ++m) {
            const double left = a.v[static_cast<size_t>(i) * n + m];
            if (left == kInfinity) continue;
            const double sum = left + b.v[m * n + static_cast<size_t>(j)];
            if (sum < best) {
                best = sum;
                mid = static_cast<int>(m);
            }
        }
        return mid;
    }

    /// A^count by repeated squaring, keeping the product tree for decoding (last = result).
    static int power(std::vector<MinPlus>& nodes, const MinPlus& a, std::int64_t count)
    {
        nodes.push_back(a);
        int square = static_cast<int>(nodes.size()) - 1;
        int result = -1;
        while (true) {
            if (count & 1) {
                if (result < 0) {
                    result = square;
                } else {
                    MinPlus p = multiply(nodes[static_cast<size_t>(result)], nodes[static_cast<size_t>(square)]);
                    p.left = result;
                    p.right = square;
                    p.span = nodes[static_cast<size_t>(result)].span + nodes[static_cast<size_t>(square)].span;
                    nodes.push_back(std::move(p));
                    result = static_cast<int>(nodes.size()) - 1;
                }
            }
            count >>= 1;
            if (!count) break;
            MinPlus sq = multiply(nodes[static_cast<size_t>(square)], nodes[static_cast<size_t>(square)]);
            sq.left = square;
            sq.right = square;
            sq.span = 2 * nodes[static_cast<size_t>(square)].span;
            nodes.push_back(std::move(sq));
            square = static_cast<int>(nodes.size()) - 1;
        }
        return result;
    }

    /// Whether the product's optimal path from state s back to s stays in s at every boundary.
    /// O(n log^2 r) on a power's tree (squares share their two halves).
    static bool staysAt(const std::vector<MinPlus>& nodes, int node, int s)
    {
        const MinPlus& m = nodes[static_cast<size_t>(node)];
        if (m.left < 0) return true;
        if (midOf(nodes, node, s, s) != s) return false;
        return staysAt(nodes, m.left, s) && (m.right == m.left || staysAt(nodes, m.right, s));
    }

    /// One stretch of a chained run whose instances all enter in state `in` and leave in `out`.
    struct StateRun {
        int in = 0, out = 0;
        std::int64_t count = 0;
    };

    /// The product's optimal path from i to j as stretches of equal (in, out) states. A stretch
    /// that stays in one state is found without visiting its instances, so a run that settles
    /// into one layout decodes in O(log^2 r), not O(r).
    static void expandRuns(const std::vector<MinPlus>& nodes, int node, int i, int j, std::vector<StateRun>& out)
    {
        const MinPlus& m = nodes[static_cast<size_t>(node)];
        if (m.left < 0 || (i == j && staysAt(nodes, node, i))) {
            if (!out.empty() && out.back().in == i && out.back().out == j && i == j) out.back().count += m.span;
            else out.push_back(StateRun{i, j, m.span});
            return;
        }
        const int k = midOf(nodes, node, i, j);
        expandRuns(nodes, m.left, i, k, out);
        expandRuns(nodes, m.right, k, j, out);
    }

    /// A run that can be compressed: one chained input position, one output, the rest context.
    struct ChainShape {
        int chainInput = -1;
    };

    std::map<std::tuple<int, int, int>, std::optional<ChainShape>> chainCache; ///< per run of the current fold

    std::optional<ChainShape> chainShape(const Run& run)
    {
        if (run.count < 2 || flat) return std::nullopt;
        const BlockClass& bc = folded.classes[static_cast<size_t>(run.classId)];
        const auto& first = bc.instances[static_cast<size_t>(run.firstInstance)];
        const ClassBoundary& boundary = boundaryOf(run.classId);
        if (boundary.outputs.size() != 1) return std::nullopt;
        const size_t out = static_cast<size_t>(boundary.outputs[0]);
        auto isDim = [&](size_t k) { return !boundary.inputDomains[k].empty(); }; // a table dim
        const auto& second = bc.instances[static_cast<size_t>(run.firstInstance + 1)];
        int chain = -1;
        for (size_t k = 0; k < second.inputs.size(); ++k)
            if (second.inputs[k] == first.outputs[out] && isDim(k)) chain = static_cast<int>(k);
        if (chain < 0) return std::nullopt;
        for (int a = run.firstInstance; a + 1 < run.firstInstance + run.count; ++a) {
            const auto& cur = bc.instances[static_cast<size_t>(a)];
            const auto& next = bc.instances[static_cast<size_t>(a + 1)];
            if (next.inputs[static_cast<size_t>(chain)] != cur.outputs[out]) return std::nullopt;
            for (size_t k = 0; k < next.inputs.size(); ++k)
                if (static_cast<int>(k) != chain && isDim(k) && next.inputs[k] != first.inputs[k]) return std::nullopt;
            for (OpId c : consumers[static_cast<size_t>(cur.outputs[out])])
                if (folded.classOfOp[static_cast<size_t>(c)] != run.classId || folded.instanceOfOp[static_cast<size_t>(c)] != a + 1)
                    return std::nullopt;
            if (siblingsOf(run.classId, a).size() != siblingsOf(run.classId, run.firstInstance).size()) return std::nullopt;
        }
        return ChainShape{chain};
    }

    /// How one dim of a class table is bound at the top level: to a variable whose values map
    /// to class-domain indices, or fixed (a graph input's free spec).
    struct DimBinding {
        int var = -1;
        std::vector<int> toClass; ///< per value of var: class-domain index, -1 = impossible
        int fixed = -1;
    };

    struct TopItem {
        Run run;
        int slot = 0; ///< price slot of its table
        std::optional<ChainShape> chain;
        std::vector<DimBinding> inputs; ///< per input position of the first instance (var -1 and fixed -1: no dim)
        std::vector<int> outputVars;    ///< per table output (ClassTable::outputPos) of the last instance
    };

    /// Where the top level finds a tensor: the strategy variable of its inlined producer, or the
    /// spec variable of a table item's output.
    struct TensorVar {
        int var = -1;
        bool isOpVar = false;
        OpId producer = -1;
        int slot = 0;
    };

    double maxTableEntries = 4e6; ///< see PlannerSession::setMaxTableEntries

    /// The spec a top-level variable gives its tensor when it takes value `d`.
    TensorSpec specOf(const TensorVar& tv, int d) const
    {
        return tv.isOpVar ? model.outputSpec(tv.producer, d, tv.slot) : topSpecs.at(tv.var)[static_cast<size_t>(d)];
    }

    /// Classes whose boundary is too wide for a table are not tabulated: their ops join the top
    /// level directly (exact all the same, only without sharing the solve between instances).
    std::set<int> inlinedClasses()
    {
        std::set<int> inlined;
        for (const auto& bc : folded.classes) {
            const auto& rep = bc.instances[0];
            double entries = 1;
            for (TensorId t : rep.inputs)
                if (hasVariable(t)) {
                    const TensorOrigin o = origin[static_cast<size_t>(t)];
                    entries *= static_cast<double>(producerSpecs(o.producer, o.slot).specs.size() + 1);
                }
            for (TensorId t : rep.outputs) {
                const TensorOrigin o = origin[static_cast<size_t>(t)];
                entries *= static_cast<double>(producerSpecs(o.producer, o.slot).specs.size());
            }
            // Absorbed siblings shrink the boundary; without knowing it here, count generously
            // only for blocks that have none.
            if (siblingsOf(bc.id, 0).empty() && entries > maxTableEntries) inlined.insert(bc.id);
        }
        // A parent whose siblings are inlined cannot absorb them: inline it too.
        for (const auto& g : folded.siblings)
            if (inlined.count(g.classId)) inlined.insert(g.parentClass);
        return inlined;
    }

    /// A solve with two memory prices: instances of the table runs, counted in run order, from
    /// `highFrom` on are priced at `high`, the others (and inlined ops) at the base price.
    struct PriceSplit {
        double high = 0;
        int highFrom = 0;
    };

    /// Instances in table runs, the index PriceSplit::highFrom counts.
    int splittableInstances() const
    {
        int n = 0;
        for (const Run& run : folded.runs) n += run.count;
        return n;
    }

    Attempt solveAt(double lambda, bool recomputeAllowed, const std::optional<PriceSplit>& split = std::nullopt)
    {
        throwIfCancelled();
        tables.clear();
        chainPowers.clear();
        decodedCache.clear();
        decodedMemory = 0;
        decodedMemoryHigh = 0;
        topDomain.clear();
        topSpecs.clear();
        const Graph& g = model.graph();
        Attempt attempt;
        SearchResult& result = attempt.result;

        const std::set<int> inlined = inlinedClasses();
        // Instances at the top level: runs, plus the siblings of inlined parents.
        std::vector<Run> topRuns = folded.runs;
        for (const auto& group : folded.siblings)
            if (inlined.count(group.parentClass))
                for (int i : group.instances) topRuns.push_back(Run{group.classId, i, 1});

        // Under a split, a run that straddles highFrom becomes two runs, one per price.
        std::vector<std::pair<Run, int>> pricedRuns;
        int counted = 0;
        for (size_t r = 0; r < topRuns.size(); ++r) {
            const Run& run = topRuns[r];
            const bool tableRun = r < folded.runs.size();
            if (!split || !tableRun) {
                pricedRuns.emplace_back(run, 0);
                continue;
            }
            const int low = std::clamp(split->highFrom - counted, 0, run.count);
            counted += run.count;
            if (low > 0) pricedRuns.emplace_back(Run{run.classId, run.firstInstance, low}, 0);
            if (low < run.count) pricedRuns.emplace_back(Run{run.classId, run.firstInstance + low, run.count - low}, 1);
        }

        std::vector<OpId> inlinedOps;
        std::vector<const BlockInstance*> inlinedInstances;
        std::vector<TopItem> items;
        for (const auto& [run, slot] : pricedRuns) {
            if (inlined.count(run.classId)) {
                for (int a = 0; a < run.count; ++a) {
                    const BlockInstance& inst = folded.classes[static_cast<size_t>(run.classId)].instances[static_cast<size_t>(run.firstInstance + a)];
                    inlinedInstances.push_back(&inst);
                    for (OpId op : inst.ops) inlinedOps.push_back(op);
                }
                continue;
            }
            classTable(run.classId, slot == 1 ? split->high : lambda, recomputeAllowed, slot);
            // Whether a run chains depends on the fold alone (its layout, not the price).
            const auto runKey = std::make_tuple(run.classId, run.firstInstance, run.count);
            auto known = chainCache.find(runKey);
            if (known == chainCache.end()) known = chainCache.emplace(runKey, chainShape(run)).first;
            const std::optional<ChainShape> chain = known->second;
            if (chain || run.count == 1) {
                items.push_back(TopItem{run, slot, chain, {}, {}});
            } else {
                for (int a = 0; a < run.count; ++a) items.push_back(TopItem{Run{run.classId, run.firstInstance + a, 1}, slot, std::nullopt, {}, {}});
            }
        }
        std::sort(inlinedOps.begin(), inlinedOps.end());

        // Variables: the recompute mode of each inlined instance (as a class table chooses one
        // per instance), inlined ops' strategies, then the spec of every table item output.
        const std::vector<Recompute> modes = recomputeModes(lambda, recomputeAllowed);
        const int modeCount = static_cast<int>(modes.size());
        std::map<OpId, int> modeVarOfOp; // only when there is a choice
        std::vector<int> modeVarOfInstance(inlinedInstances.size(), -1);
        if (modeCount > 1)
            for (size_t i = 0; i < inlinedInstances.size(); ++i) {
                modeVarOfInstance[i] = static_cast<int>(topDomain.size());
                topDomain.push_back(modeCount);
                for (OpId op : inlinedInstances[i]->ops) modeVarOfOp[op] = modeVarOfInstance[i];
            }
        std::map<TensorId, TensorVar> varOfTensor;
        std::map<OpId, int> opVar;
        for (OpId op : inlinedOps) {
            const int var = static_cast<int>(topDomain.size());
            topDomain.push_back(static_cast<int>(model.strategies(op).size()));
            opVar[op] = var;
            const Op& o = g.op(op);
            for (size_t k = 0; k < o.outputs.size(); ++k) varOfTensor[o.outputs[k]] = TensorVar{var, true, op, static_cast<int>(k)};
        }
        for (auto& item : items) {
            const auto& ct = tableOf(item.run.classId, item.slot);
            const auto& last = folded.classes[static_cast<size_t>(item.run.classId)].instances[static_cast<size_t>(item.run.firstInstance + item.run.count - 1)];
            for (size_t j = 0; j < ct.outputPos.size(); ++j) {
                const int var = static_cast<int>(topDomain.size());
                topDomain.push_back(static_cast<int>(ct.outputDomains[j].size()));
                topSpecs[var] = ct.outputDomains[j];
                varOfTensor[last.outputs[static_cast<size_t>(ct.outputPos[j])]] = TensorVar{var, false, -1, 0};
                item.outputVars.push_back(var);
            }
        }
        // Bind each item's inputs.
        for (auto& item : items) {
            const auto& ct = tableOf(item.run.classId, item.slot);
            const auto& first = folded.classes[static_cast<size_t>(item.run.classId)].instances[static_cast<size_t>(item.run.firstInstance)];
            item.inputs.assign(first.inputs.size(), DimBinding{});
            for (size_t k = 0; k < first.inputs.size(); ++k) {
                if (ct.inputDim[k] < 0) continue;
                DimBinding& b = item.inputs[k];
                const auto& domain = ct.inputDomains[k];
                if (!hasVariable(first.inputs[k])) {
                    b.fixed = specIndex(domain, freeSpec());
                    continue;
                }
                auto it = varOfTensor.find(first.inputs[k]);
                if (it == varOfTensor.end())
                    throw std::logic_error("search: block input '" + g.tensor(first.inputs[k]).name + "' has no top-level producer");
                const TensorVar& tv = it->second;
                b.var = tv.var;
                if (tv.isOpVar) {
                    const auto& ps = producerSpecs(tv.producer, tv.slot);
                    for (int spec : ps.specOfStrategy) b.toClass.push_back(specIndex(domain, ps.specs[static_cast<size_t>(spec)]));
                } else {
                    for (const auto& spec : topSpecs.at(tv.var)) b.toClass.push_back(specIndex(domain, spec));
                }
            }
        }

        std::vector<Factor> factors;
        // Inlined ops: node costs and the edges into them.
        for (OpId op : inlinedOps) {
            const int var = opVar.at(op);
            const auto modeVar = modeVarOfOp.find(op);
            // Mode variables come first, so (mode, strategy) is already in ascending order.
            Factor f{modeVar == modeVarOfOp.end() ? std::vector<int>{var} : std::vector<int>{modeVar->second, var}, {}};
            const int modesHere = modeVar == modeVarOfOp.end() ? 1 : modeCount;
            for (int m = 0; m < modesHere; ++m)
                for (int s = 0; s < topDomain[static_cast<size_t>(var)]; ++s) {
                    const int lockedTo = forced[static_cast<size_t>(op)];
                    if (lockedTo >= 0 && lockedTo != s) {
                        f.values.push_back(kInfinity);
                        continue;
                    }
                    const OpCost& c = model.opCost(op, s, modes[static_cast<size_t>(m)]);
                    f.values.push_back(c.seconds() + lambda * c.memoryBytes());
                }
            factors.push_back(std::move(f));
            const Op& o = g.op(op);
            for (size_t k = 0; k < o.inputs.size(); ++k) {
                const TensorOrigin src = origin[static_cast<size_t>(o.inputs[k])];
                if (src.producer < 0) continue;
                auto it = varOfTensor.find(o.inputs[k]);
                if (it == varOfTensor.end())
                    throw std::logic_error("search: op '" + o.name + "' reads a tensor the top level cannot see");
                if (it->second.isOpVar)
                    factors.push_back(edgeFromOp(it->second.var, src, var, op, static_cast<int>(k), topDomain));
                else
                    factors.push_back(edgeFromSpecs(it->second.var, topSpecs.at(it->second.var), var, op, static_cast<int>(k), topDomain));
            }
        }
        // Full recomputation keeps each instance input, in the spec its producer chose.
        for (size_t i = 0; i < inlinedInstances.size(); ++i) {
            if (modeVarOfInstance[i] < 0) continue;
            for (TensorId t : inlinedInstances[i]->inputs) {
                if (!hasVariable(t)) continue;
                auto it = varOfTensor.find(t);
                if (it == varOfTensor.end()) throw std::logic_error("search: an inlined block reads a tensor the top level cannot see");
                const TensorVar& tv = it->second;
                const int modeVar = modeVarOfInstance[i];
                Factor f{{modeVar, tv.var}, {}};
                const int domain = topDomain[static_cast<size_t>(tv.var)];
                for (int m = 0; m < modeCount; ++m)
                    for (int d = 0; d < domain; ++d) {
                        if (modes[static_cast<size_t>(m)] != Recompute::Full) {
                            f.values.push_back(0);
                            continue;
                        }
                        f.values.push_back(lambda * keptBytes(model, t, specOf(tv, d)));
                    }
                factors.push_back(std::move(f));
            }
        }
        for (const auto& item : items) factors.push_back(itemFactor(item, tableOf(item.run.classId, item.slot)));

        EliminationResult top = eliminate(std::move(factors), topDomain, {}, threadCount());
        const double objective = top.remaining.values.empty() ? 0.0 : top.remaining.values[0];
        if (!(objective < kInfinity)) throw InputError("no plan satisfies the locks (every combination is forbidden)");
        std::vector<int> assignment(topDomain.size(), 0);
        decode(top, topDomain, assignment);
        result.objective = objective;

        for (OpId op : inlinedOps) {
            const int s = assignment[static_cast<size_t>(opVar.at(op))];
            const auto modeVar = modeVarOfOp.find(op);
            const Recompute mode = modeVar == modeVarOfOp.end() ? Recompute::None : modes[static_cast<size_t>(assignment[static_cast<size_t>(modeVar->second)])];
            attempt.inlinedChoice.emplace_back(op, s, mode);
            decodedMemory += model.opCost(op, s, mode).memoryBytes();
        }
        for (size_t i = 0; i < inlinedInstances.size(); ++i) {
            if (modeVarOfInstance[i] < 0 || modes[static_cast<size_t>(assignment[static_cast<size_t>(modeVarOfInstance[i])])] != Recompute::Full) continue;
            for (TensorId t : inlinedInstances[i]->inputs) {
                if (!hasVariable(t)) continue;
                const TensorVar& tv = varOfTensor.at(t);
                const int d = assignment[static_cast<size_t>(tv.var)];
                decodedMemory += keptBytes(model, t, specOf(tv, d));
            }
        }
        for (const auto& item : items) decodeItem(item, assignment, attempt);
        result.lambda = lambda;
        // Step time and memory of the decoded plan (the full breakdown comes later, once).
        result.breakdown.perDeviceBytes = decodedMemory;
        const double highPrice = split ? split->high : lambda;
        result.breakdown.stepSeconds = objective - lambda * (decodedMemory - decodedMemoryHigh) - highPrice * decodedMemoryHigh;
        return attempt;
    }

    /// Class-domain digit of an input position under a top-level assignment (-1: impossible).
    static int boundDigit(const DimBinding& b, const std::vector<int>& assignment)
    {
        if (b.var < 0) return b.fixed;
        return b.toClass[static_cast<size_t>(assignment[static_cast<size_t>(b.var)])];
    }

    void decodeItem(const TopItem& item, const std::vector<int>& assignment, Attempt& attempt)
    {
        const auto& ct = tableOf(item.run.classId, item.slot);
        std::vector<int> entry(ct.dims.size(), 0);
        if (!item.chain) {
            for (size_t k = 0; k < item.inputs.size(); ++k)
                if (ct.inputDim[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = boundDigit(item.inputs[k], assignment);
            const size_t firstOut = ct.dims.size() - ct.outputDomains.size();
            for (size_t j = 0; j < item.outputVars.size(); ++j) entry[firstOut + j] = assignment[static_cast<size_t>(item.outputVars[j])];
            chooseInstances(ct, item.run.classId, item.run.firstInstance, 1, ravel(entry, ct.dims), attempt);
            return;
        }
        // A compressed run: recover the chain of states, then each instance's entry.
        const int chain = item.chain->chainInput;
        const auto& stateDomain = ct.inputDomains[static_cast<size_t>(chain)];
        std::vector<int> context(item.inputs.size(), -1);
        for (size_t k = 0; k < item.inputs.size(); ++k)
            if (ct.inputDim[k] >= 0 && static_cast<int>(k) != chain) context[k] = boundDigit(item.inputs[k], assignment);
        std::vector<MinPlus> computed;
        const std::vector<MinPlus>* nodesOf = &computed;
        int root = -1;
        if (auto known = chainPowers.find(std::make_tuple(item.run.classId, item.run.firstInstance, item.slot, context)); known != chainPowers.end()) {
            nodesOf = &known->second.first;
            root = known->second.second;
        } else {
            root = power(computed, chainMatrix(ct, chain, context), item.run.count);
        }
        const std::vector<MinPlus>& nodes = *nodesOf;
        const int startState = boundDigit(item.inputs[static_cast<size_t>(chain)], assignment);
        const auto& lastSpec = ct.outputDomains[0][static_cast<size_t>(assignment[static_cast<size_t>(item.outputVars[0])])];
        const int endState = specIndex(stateDomain, lastSpec);
        std::vector<StateRun> stretches;
        expandRuns(nodes, root, startState, endState, stretches);
        std::vector<int> outOfState;
        for (const auto& spec : stateDomain) outOfState.push_back(specIndex(ct.outputDomains[0], spec));
        int instance = item.run.firstInstance;
        for (const StateRun& stretch : stretches) {
            for (size_t k = 0; k < item.inputs.size(); ++k)
                if (ct.inputDim[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = static_cast<int>(k) == chain ? stretch.in : context[k];
            entry[ct.dims.size() - 1] = outOfState[static_cast<size_t>(stretch.out)];
            const int count = static_cast<int>(stretch.count);
            chooseInstances(ct, item.run.classId, instance, count, ravel(entry, ct.dims), attempt);
            instance += count;
        }
    }

    MinPlus chainMatrix(const ClassTable& ct, int chain, const std::vector<int>& context) const
    {
        const auto& stateDomain = ct.inputDomains[static_cast<size_t>(chain)];
        const int n = static_cast<int>(stateDomain.size());
        MinPlus m;
        m.n = n;
        m.v.assign(static_cast<size_t>(n) * static_cast<size_t>(n), kInfinity);
        std::vector<int> outToState;
        for (const auto& spec : ct.outputDomains[0]) outToState.push_back(specIndex(stateDomain, spec));
        std::vector<int> entry(ct.dims.size(), 0);
        for (size_t k = 0; k < context.size(); ++k)
            if (context[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = context[k];
        for (int i = 0; i < n; ++i)
            for (size_t o = 0; o < ct.outputDomains[0].size(); ++o) {
                if (outToState[o] < 0) continue;
                entry[static_cast<size_t>(ct.inputDim[static_cast<size_t>(chain)])] = i;
                entry[ct.dims.size() - 1] = static_cast<int>(o);
                const double v = ct.table[ravel(entry, ct.dims)];
                double& cell = m.v[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(outToState[o])];
                cell = std::min(cell, v);
            }
        return m;
    }

    /// The top-level factor of an item: its table (or, for a compressed run, the run's min-plus
    /// power) as a function of the variables its boundary is bound to.
    /// The product trees of the chain powers itemFactor computed, per item (by its first
    /// instance and price slot) and context, kept for decodeItem to expand. Per solveAt.
    std::map<std::tuple<int, int, int, std::vector<int>>, std::pair<std::vector<MinPlus>, int>> chainPowers;

    Factor itemFactor(const TopItem& item, const ClassTable& ct)
    {
        Factor f;
        for (const auto& b : item.inputs)
            if (b.var >= 0) f.vars.push_back(b.var);
        for (int v : item.outputVars) f.vars.push_back(v);
        std::sort(f.vars.begin(), f.vars.end());
        f.vars.erase(std::unique(f.vars.begin(), f.vars.end()), f.vars.end());
        std::vector<int> fdims;
        for (int v : f.vars) fdims.push_back(topDomain[static_cast<size_t>(v)]);
        f.values.assign(product(fdims), kInfinity);
        std::vector<int> assignment(topDomain.size(), 0), digits;
        const size_t firstOut = ct.dims.size() - ct.outputDomains.size();
        const int chain = item.chain ? item.chain->chainInput : -1;
        // Per context digits: the run's power (held in chainPowers for decoding).
        std::map<std::vector<int>, const MinPlus*> powers;
        std::vector<int> entry(ct.dims.size(), 0);
        std::vector<int> context(item.inputs.size(), -1);
        // A chained run's output spec as a state of its chain input (-1: not a state).
        std::vector<int> outToState;
        if (item.chain) {
            const auto& stateDomain = ct.inputDomains[static_cast<size_t>(chain)];
            for (const auto& spec : ct.outputDomains[0]) outToState.push_back(specIndex(stateDomain, spec));
        }
        for (std::size_t idx = 0; idx < f.values.size(); ++idx) {
            unravel(idx, fdims, digits);
            for (size_t p = 0; p < f.vars.size(); ++p) assignment[static_cast<size_t>(f.vars[p])] = digits[p];
            bool ok = true;
            std::fill(context.begin(), context.end(), -1);
            for (size_t k = 0; k < item.inputs.size() && ok; ++k) {
                if (ct.inputDim[k] < 0) continue;
                const int d = boundDigit(item.inputs[k], assignment);
                if (d < 0) ok = false;
                entry[static_cast<size_t>(ct.inputDim[k])] = d;
                if (static_cast<int>(k) != chain) context[k] = d;
            }
            if (!ok) continue;
            if (!item.chain) {
                for (size_t j = 0; j < item.outputVars.size(); ++j) entry[firstOut + j] = assignment[static_cast<size_t>(item.outputVars[j])];
                f.values[idx] = ct.table[ravel(entry, ct.dims)];
                continue;
            }
            auto it = powers.find(context);
            if (it == powers.end()) {
                std::vector<MinPlus> nodes;
                const int root = power(nodes, chainMatrix(ct, chain, context), item.run.count);
                auto& kept = chainPowers[std::make_tuple(item.run.classId, item.run.firstInstance, item.slot, context)];
                kept = {std::move(nodes), root};
                it = powers.emplace(context, &kept.first[static_cast<size_t>(root)]).first;
            }
            const MinPlus& r = *it->second;
            const int i = entry[static_cast<size_t>(ct.inputDim[static_cast<size_t>(chain)])];
            const int j = outToState[static_cast<size_t>(assignment[static_cast<size_t>(item.outputVars[0])])];
            if (j < 0) continue;
            f.values[idx] = r.v[static_cast<size_t>(i) * static_cast<size_t>(r.n) + static_cast<size_t>(j)];
        }
        return f;
    }

    std::vector<int> topDomain;                      ///< per top-level variable
    std::map<int, std::vector<TensorSpec>> topSpecs; ///< per top-level variable: its spec domain
};


// ---------------------------------------------------------------------------------------------
// Folding variants, memory limit, session

namespace {

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

PlannerSession::PlannerSession(const CostModel& model, FoldedGraph folded)
    : impl_(std::make_unique<Impl>(model, std::move(folded)))
{
}

PlannerSession::~PlannerSession() = default;

const CostModel& PlannerSession::model() const { return impl_->model; }
const FoldedGraph& PlannerSession::folded() const { return impl_->folded; }

void PlannerSession::setLocks(const std::vector<LockRequest>& locks)
{
    setResolvedLocks(resolveLocks(impl_->model, locks));
}

void PlannerSession::setResolvedLocks(const std::vector<ResolvedLock>& locks)
{
    Impl& d = *impl_;
    d.locks = locks;
    std::fill(d.forced.begin(), d.forced.end(), -1);
    for (const auto& l : locks) d.forced[static_cast<size_t>(l.op)] = l.strategy;
    // A lock that differs between instances of a class splits the differing instances out.
    FoldOptions options;
    const FoldedGraph& base = d.baseFold;
    for (const auto& l : locks) {
        const auto& bc = base.classes[static_cast<size_t>(base.classOfOp[static_cast<size_t>(l.op)])];
        const auto& inst = bc.instances[static_cast<size_t>(base.instanceOfOp[static_cast<size_t>(l.op)])];
        const size_t pos = static_cast<size_t>(std::find(inst.ops.begin(), inst.ops.end(), l.op) - inst.ops.begin());
        bool uniform = true;
        for (const auto& other : bc.instances)
            if (d.forced[static_cast<size_t>(other.ops[pos])] != l.strategy) uniform = false;
        if (!uniform) options.distinctOps.insert(l.op);
    }
    d.folded = options.distinctOps.empty() ? base : foldGraph(d.model.graph(), options);
    d.indexRuns();
}

void PlannerSession::setMemoryLimit(double bytes) { impl_->memoryLimit = bytes; }
void PlannerSession::setAllowRecompute(bool allow) { impl_->allowRecompute = allow; }
void PlannerSession::setFlat(bool flat) { impl_->flat = flat; }
void PlannerSession::setMixLayers(bool mix) { impl_->mixLayers = mix; }
void PlannerSession::setCancelFlag(const std::atomic<bool>* cancel) { impl_->cancel = cancel; }
void PlannerSession::setProgress(SearchProgress* progress) { impl_->progress = progress; }
void PlannerSession::setThreads(int threads) { impl_->threads = threads; }
void PlannerSession::setMaxTableEntries(double entries) { impl_->maxTableEntries = entries; }


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
    const double capacity = d.model.hardware().hbmBytes;
    const double limit = d.memoryLimit == 0 ? capacity : d.memoryLimit;
    const bool limited = limit > 0;

    // Each attempt needs only the plan's step time and memory; the full breakdown (every
    // collective of every op) is built once, for the plan finally chosen.
    int pricesTried = 0;
    auto countPrice = [&] {
        ++pricesTried;
        if (d.progress) d.progress->pricesTried.fetch_add(1, std::memory_order_relaxed);
    };
    auto attempt = [&](double lambda) {
        countPrice();
        return d.solveAt(lambda, d.allowRecompute);
    };
    using Attempt = Impl::Attempt;
    Attempt best = attempt(0);
    if (limited && best.result.breakdown.perDeviceBytes > limit) {
        // Lagrangian relaxation: price memory at lambda seconds per byte. Each plan is a line
        // T + lambda * M in lambda, and the search returns the lowest line at the price asked:
        // the dual g(lambda) is their lower envelope, concave and piecewise linear, and the
        // plan it picks uses less memory as the price rises. The fastest plan on the envelope
        // that fits is the one just past the breakpoint where M crosses the limit.
        //
        // First a price at which the plan fits (from the last solve's price: an edit rarely
        // moves it far; else growing 8x from a tiny price). Then chords: the two lines of the
        // tightest plan over the limit and the loosest plan under it cross at one price; the
        // search at that price either finds a lower line (a plan in between, which replaces
        // one end) or proves the two adjacent on the envelope. Exact, and usually two or three
        // searches instead of a bisection's eight.
        Attempt over = best; // M > limit, at the highest price tried below `under`'s
        std::optional<Attempt> under;
        Attempt smallest = best;
        auto fitsLimit = [&](const Attempt& a) { return a.result.breakdown.perDeviceBytes <= limit; };
        auto note = [&](const Attempt& a) {
            if (a.result.breakdown.perDeviceBytes < smallest.result.breakdown.perDeviceBytes) smallest = a;
        };
        const double warm = d.lastLambda;
        for (double price = warm > 0 ? warm : 1e-12; price < 1e6; price *= 8) {
            Attempt r = attempt(price);
            note(r);
            if (fitsLimit(r)) {
                under = std::move(r);
                break;
            }
            over = std::move(r);
        }
        if (under) {
            auto value = [](const Attempt& a, double lambda) { return a.result.breakdown.stepSeconds + lambda * a.result.breakdown.perDeviceBytes; };
            for (int iteration = 0; iteration < 64; ++iteration) {
                const double dm = over.result.breakdown.perDeviceBytes - under->result.breakdown.perDeviceBytes;
                const double dt = under->result.breakdown.stepSeconds - over.result.breakdown.stepSeconds;
                if (!(dm > 0)) break;
                const double cross = dt / dm;
                // The lines cross outside the two prices only through rounding: adjacent.
                if (!(cross > over.result.lambda && cross < under->result.lambda)) break;
                // A plan over the limit found at a far lower price (typically the unpriced one,
                // with memory orders of magnitude over) makes the chord crawl up the envelope
                // one vertex at a time; step down from the fitting side in 8x strides first.
                // Only a search at the crossing itself can prove adjacency.
                const bool farBelow = over.result.lambda < under->result.lambda / 64 && cross < under->result.lambda / 8;
                const double price = farBelow ? under->result.lambda / 8 : cross;
                Attempt r = attempt(price);
                const double chord = value(*under, price);
                if (!farBelow && !(r.result.objective < chord - 1e-12 * std::abs(chord))) break;
                note(r);
                if (fitsLimit(r)) under = std::move(r);
                else over = std::move(r);
            }
            best = std::move(*under);
            // The duality gap: identical layers choose alike at one price, so the envelope
            // jumps from `over` (too big) to `under` (fits, slower) with nothing between.
            // Pricing the first k instances of the runs at over's price and the rest at
            // under's mixes the two layouts layer by layer; the most layers at the low price
            // that still fit (k bisected; memory falls as k falls) is usually much faster
            // than `under`. Kept only when it fits and is faster.
            const int instances = d.splittableInstances();
            if (d.mixLayers && over.result.lambda < best.result.lambda && instances > 1) {
                const double lowPrice = over.result.lambda, highPrice = best.result.lambda;
                int fitsAt = 0, failsAt = instances; // k = 0 is under's layout, k = all is over's
                while (failsAt - fitsAt > 1) {
                    const int k = (fitsAt + failsAt) / 2;
                    countPrice();
                    Attempt r = d.solveAt(lowPrice, d.allowRecompute, Impl::PriceSplit{highPrice, k});
                    r.result.lambda = highPrice;
                    if (!fitsLimit(r)) {
                        failsAt = k;
                        continue;
                    }
                    fitsAt = k;
                    if (r.result.breakdown.stepSeconds < best.result.breakdown.stepSeconds) best = std::move(r);
                }
            }
        } else {
            best = std::move(smallest);
            best.result.fits = false;
        }
    }
    d.lastLambda = best.result.lambda;
    SearchResult& out = best.result;
    out.searchMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    out.searchCpuMs = 1000.0 * static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC;
    // The answer so far is folded (a layout per stretch of identical instances); writing a
    // strategy per op is linear in the graph, like the breakdown, and is timed apart.
    const auto expandStart = Clock::now();
    d.materialize(best);
    out.expandMs = std::chrono::duration<double, std::milli>(Clock::now() - expandStart).count();
    const auto breakdownStart = Clock::now();
    out.searchedStepSeconds = out.breakdown.stepSeconds;
    out.searchedBytes = out.breakdown.perDeviceBytes;
    const SearchResult costed = evaluatePlan(d.model, &d.folded, out.strategyOfOp, out.recomputeOfOp, "folded");
    out.breakdown = costed.breakdown;
    out.breakdownMs = std::chrono::duration<double, std::milli>(Clock::now() - breakdownStart).count();
    out.fits = out.fits && (!limited || out.breakdown.perDeviceBytes <= limit);
    out.memoryLimitBytes = limited ? limit : 0;
    out.method = d.flat ? "flat" : "folded";
    out.lockedOp.assign(d.model.graph().ops.size(), false);
    for (const auto& l : d.locks) out.lockedOp[static_cast<size_t>(l.op)] = true;
    out.blockClasses = static_cast<int>(d.folded.classes.size());
    out.inlinedClasses = static_cast<int>(d.inlinedClasses().size());
    out.opsSearched = d.folded.searchedOps();
    out.tablesSolved = d.tablesSolved;
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
