#include "class_table.h"

#include <span>
#include <stdexcept>

#include "session_impl.h"
#include "../util/key_builder.h"

namespace tp {
namespace search {

std::vector<Recompute> recomputeModes(double lambda, bool recomputeAllowed, bool training)
{
    if (recomputeAllowed && lambda > 0 && training) return {Recompute::None, Recompute::Selective, Recompute::Full};
    return {Recompute::None};
}

double ModeSolve::bytes() const
{
    double b = static_cast<double>(keepEntry.size() * sizeof(std::size_t) + table.size() * sizeof(double));
    for (const auto& step : elimination.steps) b += static_cast<double>(step.argmin.size() * sizeof(int));
    return b + static_cast<double>(elimination.remaining.values.size() * sizeof(double));
}

void takeMinOverModes(ClassTable& ct)
{
    const std::size_t size = product(ct.dims);
    ct.table.assign(size, kInfinity);
    ct.modeOfEntry.assign(size, 0);
    for (size_t m = 0; m < ct.modes.size(); ++m)
        for (std::size_t e = 0; e < size; ++e)
            if (ct.modes[m]->table[e] < ct.table[e]) {
                ct.table[e] = ct.modes[m]->table[e];
                ct.modeOfEntry[e] = static_cast<std::uint8_t>(m);
            }
}

std::shared_ptr<const ModeSolve> ModeCache::find(const std::string& key) const
{
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second;
}

void ModeCache::remember(const std::string& key, std::shared_ptr<const ModeSolve> solve)
{
    bytes_ += solve->bytes();
    entries_[key] = std::move(solve);
    order_.push_back(key);
    while ((bytes_ > maxBytes_ || order_.size() > maxEntries_) && order_.size() > 1) {
        auto it = entries_.find(order_.front());
        if (it != entries_.end()) {
            bytes_ -= it->second->bytes();
            entries_.erase(it);
        }
        order_.pop_front();
    }
}

} // namespace search

using namespace search;

std::shared_ptr<ClassTable> PlannerSession::Impl::classTable(ClassId cls, double lambda, bool recomputeAllowed, int slot)
{
    auto found = tables.find(tableKey(cls, slot));
    if (found != tables.end()) return found->second;
    throwIfCancelled();
    const BlockClass& bc = classAt(cls);
    auto ct = std::make_shared<ClassTable>();
    ct->classId = cls;
    ct->slot = slot;
    layOutBoundary(*ct, bc);

    // Sibling tables first (they are factors in this class's graph).
    std::vector<std::shared_ptr<ClassTable>> siblingTables;
    for (const auto& [scls, sinst] : siblingsOf(cls, InstanceId{0})) {
        siblingTables.push_back(classTable(scls, lambda, recomputeAllowed, slot));
        ct->siblingClass.push_back(scls);
        ct->siblingIndex.push_back(sinst);
    }

    for (Recompute mode : recomputeModes(lambda, recomputeAllowed, !repeatedLayer(cls))) {
        // None comes first where the search chooses; a forced mode has no alternative.
        const bool afterNone = !ct->modeKinds.empty() && ct->modeKinds.front() == Recompute::None;
        if (afterNone && skipDominatedModes && dominatedByNone(bc.instances[0], lambda, mode)) continue;
        ct->modeKinds.push_back(mode);
        ct->modes.push_back(solveMode(*ct, bc, siblingTables, lambda, mode));
    }
    takeMinOverModes(*ct);
    tables[tableKey(cls, slot)] = ct;
    return ct;
}

/// The table's dims: the class boundary's input positions that have a variable, then its outputs.
void PlannerSession::Impl::layOutBoundary(ClassTable& ct, const BlockClass& bc)
{
    const BlockInstance& rep = bc.instances[0];
    ct.opCount = static_cast<int>(rep.ops.size());
    const ClassBoundary& boundary = boundaryOf(ct.classId);
    ct.inputDomains = boundary.inputDomains;
    for (int j : boundary.outputs) {
        const TensorOrigin o = origin[static_cast<size_t>(rep.outputs[static_cast<size_t>(j)])];
        ct.outputPos.push_back(j);
        ct.outputDomains.push_back(producerSpecs(o.producer, o.slot).specs);
    }
    ct.inputDim.assign(rep.inputs.size(), -1);
    for (size_t k = 0; k < rep.inputs.size(); ++k)
        if (!ct.inputDomains[k].empty()) {
            ct.inputDim[k] = static_cast<int>(ct.dims.size());
            ct.dims.push_back(static_cast<int>(ct.inputDomains[k].size()));
        }
    for (const auto& d : ct.outputDomains) ct.dims.push_back(static_cast<int>(d.size()));
}

std::string PlannerSession::Impl::modeKey(const ClassTable& ct, const BlockClass& bc,
                                          const std::vector<std::shared_ptr<ClassTable>>& sibs, double lambda,
                                          Recompute mode) const
{
    KeyBuilder key;
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
    for (const auto& sib : sibs) key << "s" << sib->classId.value << '/' << classAt(sib->classId).instances[0].ops.front();
    // Locks last: the edges (keyed by everything between the second '|' and this) do not
    // depend on them, so a lock re-solve reuses the class's resharding costs.
    key << "|locks";
    for (OpId op : bc.instances[0].ops)
        if (forced[static_cast<size_t>(op)] >= 0) key << ' ' << op << ':' << forced[static_cast<size_t>(op)];
    for (const auto& sib : sibs) // a sibling's table follows its own locks
        for (OpId op : classAt(sib->classId).instances[0].ops)
            if (forced[static_cast<size_t>(op)] >= 0) key << " s" << op << ':' << forced[static_cast<size_t>(op)];
    return std::move(key.text);
}

/// The class factor graph's variables (identical for every mode): op strategies, then the input
/// positions' specs, then each absorbed sibling's table dims; returns their domains.
std::vector<int> PlannerSession::Impl::classVariables(ClassTable& ct, const BlockInstance& rep,
                                                      const std::vector<std::shared_ptr<ClassTable>>& sibs) const
{
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
    return domains;
}

std::shared_ptr<const ModeSolve> PlannerSession::Impl::solveMode(ClassTable& ct, const BlockClass& bc,
                                                                 const std::vector<std::shared_ptr<ClassTable>>& sibs,
                                                                 double lambda, Recompute mode)
{
    const std::string key = modeKey(ct, bc, sibs, lambda, mode);
    const BlockInstance& rep = bc.instances[0];
    const std::vector<int> domains = classVariables(ct, rep, sibs);
    if (auto known = modeCache.find(key)) return known;
    ++tablesSolved;
    if (progress) progress->tablesSolved.fetch_add(1, std::memory_order_relaxed);

    auto solve = std::make_shared<ModeSolve>();
    solve->domains = domains;
    const std::vector<Factor>& structure = structureFactors(ct, rep, sibs, domains, key);
    std::vector<Factor> factors(structure.begin(), structure.end());
    if (checkpointsBlockInput(mode)) {
        const std::vector<Factor>& again = recomputeFactors(ct, rep, sibs, domains, key);
        factors.insert(factors.end(), again.begin(), again.end());
    }
    for (size_t s = 0; s < sibs.size(); ++s) factors.push_back(Factor{ct.siblingVars[s], sibs[s]->table});
    nodeFactors(ct, rep, domains, lambda, mode, factors);

    // Keep the boundary: input spec variables and the producers of the outputs (op i is var i).
    std::vector<int> producerVarOfOutput;
    for (int j : ct.outputPos) {
        const OpId producer = origin[static_cast<size_t>(rep.outputs[static_cast<size_t>(j)])].producer;
        auto it = std::find(rep.ops.begin(), rep.ops.end(), producer);
        if (it == rep.ops.end()) throw std::logic_error("search: a block output is not produced by one of its own ops");
        producerVarOfOutput.push_back(static_cast<int>(it - rep.ops.begin()));
    }
    std::vector<int> keep;
    for (int v : ct.inputVar)
        if (v >= 0) keep.push_back(v);
    keep.insert(keep.end(), producerVarOfOutput.begin(), producerVarOfOutput.end());
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    solve->keepVars = keep;
    solve->elimination = eliminate(std::move(factors), domains, keep, threadCount(), substituteWorth, orderRule);
    fillBoundaryTable(ct, rep, producerVarOfOutput, *solve);
    modeCache.remember(key, solve);
    return solve;
}

namespace {
/// The class layout part of a mode key: between its second '|' and "|locks".
std::string structureKeyOf(const std::string& modeKey)
{
    const std::size_t start = modeKey.find('|', modeKey.find('|') + 1);
    return modeKey.substr(start, modeKey.rfind("|locks") - start);
}
} // namespace

/// Edges and sibling links do not depend on the price of memory or the recompute mode: built
/// once per class layout (structureKeyOf).
const std::vector<Factor>& PlannerSession::Impl::structureFactors(const ClassTable& ct, const BlockInstance& rep,
                                                                  const std::vector<std::shared_ptr<ClassTable>>& sibs,
                                                                  const std::vector<int>& domains, const std::string& key)
{
    const std::string structureKey = edgeRegimeKey(model.settings()) + structureKeyOf(key);
    return caches->findOrMake(caches->structureCache, structureKey, [&] {
        std::vector<Factor> structure;
        edgesIntoOps(ct, rep, sibs, domains, structure);
        siblingLinks(ct, rep, sibs, domains, structure);
        return structure;
    });
}

const std::vector<Factor>& PlannerSession::Impl::recomputeFactors(const ClassTable& ct, const BlockInstance& rep,
                                                                  const std::vector<std::shared_ptr<ClassTable>>& sibs,
                                                                  const std::vector<int>& domains, const std::string& key)
{
    const std::string structureKey = edgeRegimeKey(model.settings()) + structureKeyOf(key);
    return caches->findOrMake(caches->recomputeCache, structureKey, [&] {
        std::vector<Factor> factors;
        edgesIntoOps(ct, rep, sibs, domains, factors, EdgePart::RecomputedForward);
        return factors;
    });
}

namespace {

/// Each op of the block instance by its position in the instance.
std::map<OpId, int> localIndexOfOps(const BlockInstance& rep)
{
    std::map<OpId, int> local;
    for (size_t i = 0; i < rep.ops.size(); ++i) local[rep.ops[i]] = static_cast<int>(i);
    return local;
}

/// The input positions of the instance whose spec is a variable of the class table.
std::map<TensorId, int> variableInputPositions(const ClassTable& ct, const BlockInstance& rep)
{
    std::map<TensorId, int> inputPosition;
    for (size_t k = 0; k < rep.inputs.size(); ++k)
        if (ct.inputVar[k] >= 0) inputPosition[rep.inputs[k]] = static_cast<int>(k);
    return inputPosition;
}

} // namespace

/// The resharding edge into each op input: from an op of the block, a block input's spec, or
/// an absorbed sibling's output spec.
void PlannerSession::Impl::edgesIntoOps(const ClassTable& ct, const BlockInstance& rep,
                                        const std::vector<std::shared_ptr<ClassTable>>& sibs, const std::vector<int>& domains,
                                        std::vector<Factor>& out, EdgePart part)
{
    const std::map<OpId, int> local = localIndexOfOps(rep);
    const std::map<TensorId, int> inputPosition = variableInputPositions(ct, rep);
    // Tensors produced by absorbed siblings: (sibling, output position).
    std::map<TensorId, std::pair<int, int>> siblingOutput;
    const auto sibInstances = siblingsOf(ct.classId, InstanceId{0});
    for (size_t s = 0; s < sibInstances.size(); ++s) {
        const auto& inst = instanceAt(sibInstances[s].first, sibInstances[s].second);
        for (size_t j = 0; j < inst.outputs.size(); ++j)
            siblingOutput[inst.outputs[j]] = {static_cast<int>(s), static_cast<int>(j)};
    }
    for (size_t i = 0; i < rep.ops.size(); ++i) {
        const OpId op = rep.ops[i];
        const Op& o = model.graph().op(op);
        const int consumerVar = static_cast<int>(i);
        for (size_t k = 0; k < o.inputs.size(); ++k) {
            const TensorId t = o.inputs[k];
            const TensorOrigin src = origin[static_cast<size_t>(t)];
            const int input = static_cast<int>(k);
            // A block input position with a spec variable first: the representative's tensor
            // there may be a graph input (the first instance of a run) while the other
            // instances' is a producer's output, and the table is every instance's.
            if (auto in = inputPosition.find(t); in != inputPosition.end()) {
                const size_t pos = static_cast<size_t>(in->second);
                out.push_back(edgeFromSpecs(ct.inputVar[pos], ct.inputDomains[pos], consumerVar, op, input, domains, part));
            } else if (src.producer < 0) {
                continue; // graph input or weight: laid out for free
            } else if (auto it = local.find(src.producer); it != local.end()) {
                out.push_back(edgeFromOp(it->second, src, consumerVar, op, input, domains, part));
            } else if (auto so = siblingOutput.find(t); so != siblingOutput.end()) {
                const auto& sib = *sibs[static_cast<size_t>(so->second.first)];
                const size_t dim = sib.firstOutputDim() + static_cast<size_t>(so->second.second);
                out.push_back(edgeFromSpecs(ct.siblingVars[static_cast<size_t>(so->second.first)][dim],
                                            sib.outputDomains[static_cast<size_t>(so->second.second)], consumerVar, op, input,
                                            domains, part));
            } else {
                throw std::logic_error("search: op '" + o.name +
                                       "' reads a tensor from outside its block that is not a block input");
            }
        }
    }
}

namespace {

/// A 0/+inf factor over two variables (a < b: row-major with b fastest) that allows the pairs
/// `allowed(x, y)` returns a y >= 0 for, x over the first variable's values.
template <class Allowed>
Factor linkFactor(int xVar, int xSize, int yVar, int ySize, Allowed allowed)
{
    Factor f{{std::min(xVar, yVar), std::max(xVar, yVar)},
             std::vector<double>(static_cast<size_t>(xSize) * static_cast<size_t>(ySize), kInfinity)};
    for (int x = 0; x < xSize; ++x) {
        const int y = allowed(x);
        if (y < 0) continue;
        const size_t idx = xVar < yVar ? static_cast<size_t>(x) * static_cast<size_t>(ySize) + static_cast<size_t>(y)
                                       : static_cast<size_t>(y) * static_cast<size_t>(xSize) + static_cast<size_t>(x);
        f.values[idx] = 0;
    }
    return f;
}

} // namespace

/// Absorbed siblings' input dims, tied to the specs of what feeds them: an op of this block or
/// one of its inputs.
void PlannerSession::Impl::siblingLinks(const ClassTable& ct, const BlockInstance& rep,
                                        const std::vector<std::shared_ptr<ClassTable>>& sibs, const std::vector<int>& domains,
                                        std::vector<Factor>& out)
{
    const std::map<OpId, int> local = localIndexOfOps(rep);
    const std::map<TensorId, int> inputPosition = variableInputPositions(ct, rep);
    const auto sibInstances = siblingsOf(ct.classId, InstanceId{0});
    for (size_t s = 0; s < sibs.size(); ++s) {
        const auto& sib = *sibs[s];
        const auto& inst = instanceAt(sibInstances[s].first, sibInstances[s].second);
        for (size_t k = 0; k < inst.inputs.size(); ++k) {
            if (sib.inputDim[k] < 0) continue;
            const int var = ct.siblingVars[s][static_cast<size_t>(sib.inputDim[k])];
            const auto& domain = sib.inputDomains[k];
            const int size = static_cast<int>(domain.size());
            const TensorOrigin src = origin[static_cast<size_t>(inst.inputs[k])];
            if (auto it = local.find(src.producer); it != local.end()) {
                const int pv = it->second;
                const auto& ps = producerSpecs(src.producer, src.slot);
                out.push_back(linkFactor(pv, domains[static_cast<size_t>(pv)], var, size,
                                         [&](int sp) { return specIndex(domain, ps.specOf(StrategyIndex{sp})); }));
            } else if (auto in = inputPosition.find(inst.inputs[k]); in != inputPosition.end()) {
                const int iv = ct.inputVar[static_cast<size_t>(in->second)];
                const auto& outer = ct.inputDomains[static_cast<size_t>(in->second)];
                out.push_back(linkFactor(iv, static_cast<int>(outer.size()), var, size,
                                         [&](int a) { return specIndex(domain, outer[static_cast<size_t>(a)]); }));
            } else {
                throw std::logic_error("search: a sibling block reads a tensor its parent neither makes nor receives");
            }
        }
    }
}

/// Node costs at the price (time + lambda x memory, a lock as +inf elsewhere) and, under full
/// recomputation, the kept bytes of each block input.
void PlannerSession::Impl::nodeFactors(const ClassTable& ct, const BlockInstance& rep, const std::vector<int>& domains,
                                       double lambda, Recompute mode, std::vector<Factor>& out) const
{
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
        out.push_back(std::move(f));
    }
    if (!checkpointsBlockInput(mode)) return;
    for (size_t k = 0; k < rep.inputs.size(); ++k) {
        if (ct.inputVar[k] < 0) continue;
        Factor f{{ct.inputVar[k]}, {}};
        for (const auto& spec : ct.inputDomains[k]) f.values.push_back(lambda * keptBytes(model, rep.inputs[k], spec));
        out.push_back(std::move(f));
    }
}

/// Whether no entry of `mode`'s table can be below None's, so that it is not solved: under
/// `mode` every op costs at least what it costs under None for each strategy (the values
/// nodeFactors gives), and what the mode adds (recomputed forward edges, the kept block input)
/// costs at least zero; the two share every other factor. Such a mode never wins an entry
/// (takeMinOverModes keeps the earlier mode on ties). At a low memory price recomputing saves
/// less than it costs on every op, and a lock's re-plan solves most tables there.
bool PlannerSession::Impl::dominatedByNone(const BlockInstance& rep, double lambda, Recompute mode) const
{
    for (OpId op : rep.ops) {
        const int lockedTo = forced[static_cast<size_t>(op)];
        const int n = static_cast<int>(model.strategies(op).size());
        for (int s = 0; s < n; ++s) {
            if (lockedTo >= 0 && lockedTo != s) continue;
            const OpCost& under = model.opCost(op, s, mode);
            const OpCost& none = model.opCost(op, s, Recompute::None);
            if (under.seconds() + lambda * under.memoryBytes() < none.seconds() + lambda * none.memoryBytes()) return false;
        }
    }
    return true;
}

/// Converts the remaining factor over (input specs, producer strategies) into the table over
/// (input specs, output specs), keeping per entry the remaining index that reached it.
void PlannerSession::Impl::fillBoundaryTable(const ClassTable& ct, const BlockInstance& rep,
                                             const std::vector<int>& producerVarOfOutput, ModeSolve& solve)
{
    const std::vector<int>& keep = solve.keepVars;
    const std::size_t size = product(ct.dims);
    solve.table.assign(size, kInfinity);
    solve.keepEntry.assign(size, 0);
    std::vector<int> keepDims;
    for (int v : keep) keepDims.push_back(solve.domains[static_cast<size_t>(v)]);
    std::vector<const ProducerSpecs*> specsOfOutput; // per table output: its producer's specs
    for (int j : ct.outputPos) {
        const TensorOrigin o = origin[static_cast<size_t>(rep.outputs[static_cast<size_t>(j)])];
        specsOfOutput.push_back(&producerSpecs(o.producer, o.slot));
    }
    std::vector<int> digits, assignment(solve.domains.size(), 0), entry(ct.dims.size(), 0);
    const auto& remaining = solve.elimination.remaining;
    const size_t firstOut = ct.firstOutputDim();
    digits.assign(keepDims.size(), 0); // entry 0; advance steps them
    for (std::size_t r = 0; r < remaining.values.size(); ++r, advance(digits, keepDims)) {
        if (remaining.values[r] == kInfinity) continue;
        for (size_t p = 0; p < keep.size(); ++p) assignment[static_cast<size_t>(keep[p])] = digits[p];
        for (size_t k = 0; k < rep.inputs.size(); ++k)
            if (ct.inputDim[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = assignment[static_cast<size_t>(ct.inputVar[k])];
        for (size_t j = 0; j < ct.outputPos.size(); ++j)
            entry[firstOut + j] =
                specsOfOutput[j]->specIndexOf(StrategyIndex{assignment[static_cast<size_t>(producerVarOfOutput[j])]}).value;
        const std::size_t e = ravel(entry, ct.dims);
        if (remaining.values[r] < solve.table[e]) {
            solve.table[e] = remaining.values[r];
            solve.keepEntry[e] = r;
        }
    }
    // Decoding replays the steps from the kept variables; the remaining values are in the
    // table now.
    std::vector<double>().swap(solve.elimination.remaining.values);
}

namespace {

using EdgePlans = std::vector<std::vector<CollectiveCall>>;

/// The collectives of the edges from each of `specs` into each of the consumer's `nc`
/// strategies (CostModel::edgePlan), by spec then strategy. They are the same for every
/// micro-batch, so they are planned once and kept at `key` of `shared`'s `cache` for every
/// session; a flat search (`shared` null) shares nothing and keeps them in `unshared`.
template <class Key>
const EdgePlans& plannedEdges(const CostModel& model, std::span<const TensorSpec> specs, OpId consumer, int input, int nc,
                              SharedSearchCaches* shared, std::map<Key, EdgePlans> SharedSearchCaches::*cache, const Key& key,
                              EdgePlans& unshared)
{
    auto planAll = [&] { return model.edgePlans(specs, consumer, input, nc); };
    if (!shared) return unshared = planAll();
    return shared->findOrMake(shared->*cache, key, planAll);
}

/// The plans of the edge of `contentKey` from the cross-graph cache, made by `make` outside its
/// lock when missing (entries never change or go once made: the reference stays good).
template <class Make>
const EdgePlans& crossGraphPlans(CrossGraphEdges& cross, const std::string& contentKey, Make&& make)
{
    {
        std::lock_guard<std::mutex> lock(cross.mutex);
        if (auto it = cross.plans.find(contentKey); it != cross.plans.end()) return it->second;
    }
    EdgePlans made = make();
    std::lock_guard<std::mutex> lock(cross.mutex);
    return cross.plans.emplace(contentKey, std::move(made)).first->second;
}

} // namespace

Factor PlannerSession::Impl::edgeFromOp(int producerVar, TensorOrigin src, int consumerVar, OpId consumer, int input,
                                        const std::vector<int>& domains, EdgePart part)
{
    Factor f;
    f.vars = {std::min(producerVar, consumerVar), std::max(producerVar, consumerVar)};
    // Identical edges of identical blocks cost the same: computed once per session (also for an
    // instance that a lock split out of its class).
    const auto key = std::make_tuple(model.settings().microBatch, model.settings().pipelineBubble,
                                     model.settings().pipelineStages, keyOp(src.producer), src.slot, keyOp(consumer), input,
                                     producerVar < consumerVar, part);
    throwIfCancelled(); // one class's edges can take seconds on a 4-axis mesh
    std::shared_ptr<CrossGraphEdges> cross;
    if (!flat) {
        std::lock_guard<std::mutex> lock(caches->mutex);
        if (auto hit = caches->edgeCache.find(key); hit != caches->edgeCache.end()) {
            f.values = hit->second;
            return f;
        }
        cross = caches->crossGraph;
    }
    // Another graph of the family may have planned and priced the same edge (a pipeline's
    // stage graphs: CrossGraphEdges).
    const std::string contentKey = cross ? model.edgeContentKey(src.producer, src.slot, consumer, input) : std::string();
    auto valueKey = [&](EdgePart p) {
        return contentKey + '|' + edgeRegimeKey(model.settings()) + (producerVar < consumerVar ? '<' : '>') +
               static_cast<char>('0' + static_cast<int>(p));
    };
    if (cross) {
        std::unique_lock<std::mutex> lock(cross->mutex);
        if (auto hit = cross->values.find(valueKey(part)); hit != cross->values.end()) {
            f.values = hit->second;
            lock.unlock();
            std::lock_guard<std::mutex> own(caches->mutex);
            caches->edgeCache.emplace(key, f.values);
            return f;
        }
    }
    const auto& ps = producerSpecs(src.producer, src.slot);
    const int np = domains[static_cast<size_t>(producerVar)], nc = domains[static_cast<size_t>(consumerVar)];
    // Cost per distinct produced spec, both parts from one edge costing, then spread over the
    // producer's strategies; the other part is cached too (full-mode tables ask for it).
    std::vector<double> exposed(ps.specs.size() * static_cast<size_t>(nc)), forward(exposed.size());
    EdgePlans unshared;
    const EdgePlans& plans =
        cross ? crossGraphPlans(*cross, contentKey, [&] { return model.edgePlans(ps.specs, consumer, input, nc); })
              : plannedEdges(model, ps.specs, consumer, input, nc, flat ? nullptr : caches.get(), &SharedSearchCaches::edgePlans,
                             std::make_tuple(keyOp(src.producer), src.slot, keyOp(consumer), input), unshared);
    for (size_t v = 0; v < ps.specs.size(); ++v)
        for (int c = 0; c < nc; ++c) {
            const size_t at = v * static_cast<size_t>(nc) + static_cast<size_t>(c);
            const EdgeCost e = model.edgeSeconds(plans[at], ps.specs[v], consumer, input, c);
            exposed[at] = e.exposedSeconds;
            forward[at] = e.exposedForwardSeconds;
        }
    auto spread = [&](const std::vector<double>& perSpec) {
        std::vector<double> values(static_cast<size_t>(np * nc));
        for (int p = 0; p < np; ++p)
            for (int c = 0; c < nc; ++c) {
                const double cost =
                    perSpec[ps.specIndexOf(StrategyIndex{p}).at() * static_cast<size_t>(nc) + static_cast<size_t>(c)];
                values[producerVar < consumerVar ? static_cast<size_t>(p * nc + c) : static_cast<size_t>(c * np + p)] = cost;
            }
        return values;
    };
    f.values = spread(part == EdgePart::Exposed ? exposed : forward);
    if (!flat) {
        const EdgePart other = part == EdgePart::Exposed ? EdgePart::RecomputedForward : EdgePart::Exposed;
        auto otherKey = key;
        std::get<8>(otherKey) = other;
        std::vector<double> otherValues = spread(part == EdgePart::Exposed ? forward : exposed);
        if (cross) {
            std::lock_guard<std::mutex> lock(cross->mutex);
            cross->values.emplace(valueKey(part), f.values);
            cross->values.emplace(valueKey(other), otherValues);
        }
        std::lock_guard<std::mutex> lock(caches->mutex);
        caches->edgeCache.emplace(key, f.values);
        caches->edgeCache.emplace(otherKey, std::move(otherValues));
    }
    return f;
}

Factor PlannerSession::Impl::edgeFromSpecs(int specVar, const std::vector<TensorSpec>& domain, int consumerVar, OpId consumer,
                                           int input, const std::vector<int>& domains, EdgePart part)
{
    const int nv = static_cast<int>(domain.size()), nc = domains[static_cast<size_t>(consumerVar)];
    Factor f;
    f.vars = {std::min(specVar, consumerVar), std::max(specVar, consumerVar)};
    f.values.resize(static_cast<size_t>(nv * nc));
    for (int v = 0; v < nv; ++v) {
        const TensorSpec& spec = domain[static_cast<size_t>(v)];
        if (isFree(spec)) continue; // values stay 0
        // Keyed by the consumer itself, not its class's first instance: whether it pays its
        // input's gradient reduction can differ between instances (CostModel::edgePlan).
        EdgePlans unshared;
        const EdgePlans& plans = plannedEdges(model, std::span<const TensorSpec>(&spec, 1), consumer, input, nc,
                                              flat ? nullptr : caches.get(), &SharedSearchCaches::specEdgePlans,
                                              std::make_tuple(consumer, input, spec), unshared);
        for (int c = 0; c < nc; ++c) {
            const EdgeCost e = model.edgeSeconds(plans[static_cast<size_t>(c)], spec, consumer, input, c);
            const size_t idx = specVar < consumerVar ? static_cast<size_t>(v * nc + c) : static_cast<size_t>(c * nv + v);
            f.values[idx] = part == EdgePart::Exposed ? e.exposedSeconds : e.exposedForwardSeconds;
        }
    }
    return f;
}

} // namespace tp
