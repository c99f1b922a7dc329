#include "stitch.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "../util/error.h"
#include "session_impl.h"

namespace tp {
namespace search {

std::vector<std::pair<Run, int>> splitRunsAtPrice(const std::vector<Run>& runs, std::size_t tableRuns,
                                                  const std::optional<PriceSplit>& split)
{
    std::vector<std::pair<Run, int>> priced;
    int counted = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
        const Run& run = runs[r];
        if (!split || r >= tableRuns) {
            priced.emplace_back(run, 0);
            continue;
        }
        const int low = std::clamp(split->highFrom - counted, 0, run.count);
        counted += run.count;
        if (low > 0) priced.emplace_back(Run{run.classId, run.firstInstance, low}, 0);
        if (low < run.count) priced.emplace_back(Run{run.classId, run.firstInstance + low, run.count - low}, 1);
    }
    return priced;
}

} // namespace search

using namespace search;

/// One solveAt's top level: the items (table runs), the inlined classes' instances and ops, and
/// the variables that bind them.
struct PlannerSession::Impl::TopLevel {
    std::vector<TopItem> items;
    std::vector<OpId> inlinedOps; ///< ascending
    std::vector<const BlockInstance*> inlinedInstances;
    std::vector<Recompute> modes;       ///< the recompute modes at the base price
    std::map<OpId, int> modeVarOfOp;    ///< only when there is a choice
    std::vector<int> modeVarOfInstance; ///< per inlined instance, -1 when there is no choice
    std::map<TensorId, TensorVar> varOfTensor;
    std::map<OpId, int> opVar; ///< strategy variable of each inlined op
};

std::set<ClassId> PlannerSession::Impl::inlinedClasses()
{
    std::set<ClassId> inlined;
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
        if (siblingsOf(ClassId{bc.id}, InstanceId{0}).empty() && entries > maxTableEntries) inlined.insert(ClassId{bc.id});
    }
    // A parent whose siblings are inlined cannot absorb them: inline it too.
    for (const auto& g : folded.siblings)
        if (inlined.count(ClassId{g.classId})) inlined.insert(ClassId{g.parentClass});
    return inlined;
}

int PlannerSession::Impl::splittableInstances() const
{
    int n = 0;
    for (const Run& run : folded.runs) n += run.count;
    return n;
}

PlannerSession::Impl::Attempt PlannerSession::Impl::solveAt(double lambda, bool recomputeAllowed,
                                                            const std::optional<PriceSplit>& split,
                                                            const std::function<bool(double)>& stopWhen)
{
    throwIfCancelled();
    tables.clear();
    chainPowers.clear();
    decodedCache.clear();
    decodedMemory = 0;
    decodedMemoryHigh = 0;
    topDomain.clear();
    topSpecs.clear();
    Attempt attempt;
    SearchResult& result = attempt.result;

    // Where a bar is set, a bound with no table first: most combinations that cannot beat the
    // bar are settled here, before the tables that are most of a solve's work.
    const std::set<ClassId> inlined = inlinedClasses();
    if (stopWhen && tablesWorthBounding(inlined)) {
        const double rounded = roundedDownBound(tableFreeBound(lambda, recomputeAllowed, inlined));
        if (std::isfinite(rounded) && stopWhen(rounded)) {
            attempt.stopped = true;
            result.objective = rounded;
            result.lambda = lambda;
            result.breakdown.stepSeconds = rounded;
            return attempt;
        }
    }
    TopLevel top;
    collectItems(top, inlined, lambda, recomputeAllowed, split);
    top.modes = recomputeModes(lambda, recomputeAllowed, true);
    // A forced mode reaches inlined layers through their mode variables, pinned: the forced
    // mode on the instances of repeated blocks, none on the rest (as a class table does).
    const bool pinModes = forcedRecompute && model.settings().training && *forcedRecompute != Recompute::None;
    if (pinModes) top.modes = {Recompute::None, *forcedRecompute};
    addTopVariables(top);
    bindItemInputs(top);
    std::vector<Factor> factors;
    inlinedFactors(top, lambda, factors);
    if (pinModes)
        for (size_t i = 0; i < top.inlinedInstances.size(); ++i) {
            const OpId first = top.inlinedInstances[i]->ops.front();
            const bool layer = repeatedLayer(ClassId{folded.classOfOp[static_cast<size_t>(first)]});
            factors.push_back(Factor{{top.modeVarOfInstance[i]}, {layer ? kInfinity : 0.0, layer ? 0.0 : kInfinity}});
        }
    for (const auto& item : top.items) factors.push_back(itemFactor(item, tableOf(classOf(item.run), item.slot)));

    EliminationResult eliminated =
        eliminate(std::move(factors), topDomain, {}, threadCount(), substituteWorth, orderRule, stopWhen);
    if (eliminated.stopped) {
        releaseChainPowers();
        attempt.stopped = true;
        result.objective = eliminated.lowerBound;
        result.lambda = lambda;
        result.breakdown.stepSeconds = eliminated.lowerBound;
        return attempt;
    }
    const double objective = eliminated.remaining.values.empty() ? 0.0 : eliminated.remaining.values[0];
    if (!(objective < kInfinity)) throw InputError("no plan satisfies the locks (every combination is forbidden)");
    std::vector<int> assignment(topDomain.size(), 0);
    decode(eliminated, topDomain, assignment);
    result.objective = objective;

    decodeInlined(top, assignment, attempt);
    for (const auto& item : top.items) decodeItem(item, assignment, attempt);
    releaseChainPowers();
    result.lambda = lambda;
    // Step time and memory of the decoded plan (the full breakdown comes later, once).
    result.breakdown.perDeviceBytes = decodedMemory;
    const double highPrice = split ? split->high : lambda;
    result.breakdown.stepSeconds = objective - lambda * (decodedMemory - decodedMemoryHigh) - highPrice * decodedMemoryHigh;
    return attempt;
}

/// The top level's pieces: table items (a chained run as one, else one per instance; their
/// tables solved at their price) and the instances and ops of inlined classes.
void PlannerSession::Impl::collectItems(TopLevel& top, const std::set<ClassId>& inlined, double lambda, bool recomputeAllowed,
                                        const std::optional<PriceSplit>& split)
{
    for (const auto& [run, slot] : splitRunsAtPrice(topRuns(inlined), folded.runs.size(), split)) {
        if (inlined.count(classOf(run))) {
            for (int a = 0; a < run.count; ++a) {
                const BlockInstance& inst = instanceAt(classOf(run), InstanceId{run.firstInstance + a});
                top.inlinedInstances.push_back(&inst);
                for (OpId op : inst.ops) top.inlinedOps.push_back(op);
            }
            continue;
        }
        classTable(classOf(run), slot == 1 ? split->high : lambda, recomputeAllowed, slot);
        const std::optional<ChainShape> chain = chainOf(run);
        if (chain || run.count == 1) {
            top.items.push_back(TopItem{run, slot, chain, {}, {}});
        } else {
            for (int a = 0; a < run.count; ++a)
                top.items.push_back(TopItem{Run{run.classId, run.firstInstance + a, 1}, slot, std::nullopt, {}, {}});
        }
    }
    std::sort(top.inlinedOps.begin(), top.inlinedOps.end());
}

/// Variables: the recompute mode of each inlined instance (as a class table chooses one per
/// instance), inlined ops' strategies, then the spec of every table item output.
void PlannerSession::Impl::addTopVariables(TopLevel& top)
{
    const int modeCount = static_cast<int>(top.modes.size());
    top.modeVarOfInstance.assign(top.inlinedInstances.size(), -1);
    if (modeCount > 1)
        for (size_t i = 0; i < top.inlinedInstances.size(); ++i) {
            top.modeVarOfInstance[i] = static_cast<int>(topDomain.size());
            topDomain.push_back(modeCount);
            for (OpId op : top.inlinedInstances[i]->ops) top.modeVarOfOp[op] = top.modeVarOfInstance[i];
        }
    for (OpId op : top.inlinedOps) {
        const int var = static_cast<int>(topDomain.size());
        topDomain.push_back(static_cast<int>(model.strategies(op).size()));
        top.opVar[op] = var;
        const Op& o = model.graph().op(op);
        for (size_t k = 0; k < o.outputs.size(); ++k)
            top.varOfTensor[o.outputs[k]] = TensorVar{var, true, op, static_cast<int>(k)};
    }
    for (auto& item : top.items) {
        const auto& ct = tableOf(classOf(item.run), item.slot);
        const auto& last = instanceAt(classOf(item.run), InstanceId{item.run.firstInstance + item.run.count - 1});
        for (size_t j = 0; j < ct.outputPos.size(); ++j) {
            const int var = static_cast<int>(topDomain.size());
            topDomain.push_back(static_cast<int>(ct.outputDomains[j].size()));
            topSpecs[var] = ct.outputDomains[j];
            top.varOfTensor[last.outputs[static_cast<size_t>(ct.outputPos[j])]] = TensorVar{var, false, -1, 0};
            item.outputVars.push_back(var);
        }
    }
}

/// Binds each item's input dims to the top-level variable of the tensor (mapping its values to
/// the class domain), or fixes a graph input to the free spec.
void PlannerSession::Impl::bindItemInputs(TopLevel& top)
{
    for (auto& item : top.items) {
        const auto& ct = tableOf(classOf(item.run), item.slot);
        const auto& first = instanceAt(classOf(item.run), InstanceId{item.run.firstInstance});
        item.inputs.assign(first.inputs.size(), DimBinding{});
        for (size_t k = 0; k < first.inputs.size(); ++k) {
            if (ct.inputDim[k] < 0) continue;
            DimBinding& b = item.inputs[k];
            const auto& domain = ct.inputDomains[k];
            if (!hasVariable(first.inputs[k])) {
                b.fixed = specIndex(domain, freeSpec());
                continue;
            }
            auto it = top.varOfTensor.find(first.inputs[k]);
            if (it == top.varOfTensor.end())
                throw std::logic_error("search: block input '" + model.graph().tensor(first.inputs[k]).name +
                                       "' has no top-level producer");
            const TensorVar& tv = it->second;
            b.var = tv.var;
            if (tv.isOpVar) {
                const auto& ps = producerSpecs(tv.producer, tv.slot);
                for (const auto spec : ps.specOfStrategy) b.toClass.push_back(specIndex(domain, ps.specs[spec.at()]));
            } else {
                for (const auto& spec : topSpecs.at(tv.var)) b.toClass.push_back(specIndex(domain, spec));
            }
        }
    }
}

/// Inlined ops: node costs (per recompute mode when there is a choice) and the edges into
/// them; then, per inlined instance, the kept inputs of full recomputation in the spec their
/// producer chose.
void PlannerSession::Impl::inlinedFactors(const TopLevel& top, double lambda, std::vector<Factor>& factors)
{
    const int modeCount = static_cast<int>(top.modes.size());
    for (OpId op : top.inlinedOps) {
        const int var = top.opVar.at(op);
        const auto modeVar = top.modeVarOfOp.find(op);
        const bool choosesMode = modeVar != top.modeVarOfOp.end();
        // Mode variables come first, so (mode, strategy) is already in ascending order.
        Factor f{choosesMode ? std::vector<int>{modeVar->second, var} : std::vector<int>{var}, {}};
        const int modesHere = choosesMode ? modeCount : 1;
        for (int m = 0; m < modesHere; ++m)
            for (int s = 0; s < topDomain[static_cast<size_t>(var)]; ++s) {
                const int lockedTo = forced[static_cast<size_t>(op)];
                if (lockedTo >= 0 && lockedTo != s) {
                    f.values.push_back(kInfinity);
                    continue;
                }
                const OpCost& c = model.opCost(op, s, top.modes[static_cast<size_t>(m)]);
                f.values.push_back(c.seconds() + lambda * c.memoryBytes());
            }
        factors.push_back(std::move(f));
        const Op& o = model.graph().op(op);
        for (size_t k = 0; k < o.inputs.size(); ++k) {
            const TensorOrigin src = origin[static_cast<size_t>(o.inputs[k])];
            if (src.producer < 0) continue;
            auto it = top.varOfTensor.find(o.inputs[k]);
            if (it == top.varOfTensor.end())
                throw std::logic_error("search: op '" + o.name + "' reads a tensor the top level cannot see");
            auto edge = [&](EdgePart part) {
                return it->second.isOpVar ? edgeFromOp(it->second.var, src, var, op, static_cast<int>(k), topDomain, part)
                                          : edgeFromSpecs(it->second.var, topSpecs.at(it->second.var), var, op,
                                                          static_cast<int>(k), topDomain, part);
            };
            factors.push_back(edge(EdgePart::Exposed));
            if (!choosesMode) continue;
            // Full recomputation runs the forward collectives again: the edge's forward part,
            // gated by the mode (mode variables come first, so the order stays ascending).
            const Factor again = edge(EdgePart::RecomputedForward);
            Factor gated{{modeVar->second}, {}};
            gated.vars.insert(gated.vars.end(), again.vars.begin(), again.vars.end());
            for (int m = 0; m < modeCount; ++m)
                for (double v : again.values)
                    gated.values.push_back(checkpointsBlockInput(top.modes[static_cast<size_t>(m)]) ? v : 0.0);
            factors.push_back(std::move(gated));
        }
    }
    for (size_t i = 0; i < top.inlinedInstances.size(); ++i) {
        const int modeVar = top.modeVarOfInstance[i];
        if (modeVar < 0) continue;
        for (TensorId t : top.inlinedInstances[i]->inputs) {
            if (!hasVariable(t)) continue;
            auto it = top.varOfTensor.find(t);
            if (it == top.varOfTensor.end())
                throw std::logic_error("search: an inlined block reads a tensor the top level cannot see");
            const TensorVar& tv = it->second;
            Factor f{{modeVar, tv.var}, {}};
            const int domain = topDomain[static_cast<size_t>(tv.var)];
            for (int m = 0; m < modeCount; ++m)
                for (int d = 0; d < domain; ++d)
                    f.values.push_back(
                        !checkpointsBlockInput(top.modes[static_cast<size_t>(m)]) ? 0.0 : lambda * keptBytes(model, t, specOf(tv, d)));
            factors.push_back(std::move(f));
        }
    }
}

/// The inlined ops' choices under the top-level assignment, and their memory.
void PlannerSession::Impl::decodeInlined(const TopLevel& top, const std::vector<int>& assignment, Attempt& attempt)
{
    for (OpId op : top.inlinedOps) {
        const int s = assignment[static_cast<size_t>(top.opVar.at(op))];
        const auto modeVar = top.modeVarOfOp.find(op);
        const Recompute mode = modeVar == top.modeVarOfOp.end()
                                   ? Recompute::None
                                   : top.modes[static_cast<size_t>(assignment[static_cast<size_t>(modeVar->second)])];
        attempt.inlinedChoice.emplace_back(op, s, mode);
        decodedMemory += model.opCost(op, s, mode).memoryBytes();
    }
    for (size_t i = 0; i < top.inlinedInstances.size(); ++i) {
        const int modeVar = top.modeVarOfInstance[i];
        if (modeVar < 0 || !checkpointsBlockInput(top.modes[static_cast<size_t>(assignment[static_cast<size_t>(modeVar)])])) continue;
        for (TensorId t : top.inlinedInstances[i]->inputs) {
            if (!hasVariable(t)) continue;
            const TensorVar& tv = top.varOfTensor.at(t);
            decodedMemory += keptBytes(model, t, specOf(tv, assignment[static_cast<size_t>(tv.var)]));
        }
    }
}

/// One instance of a chained run as a min-plus matrix over the chain input's states: entry
/// (i, j) the cheapest table entry entering in state i and leaving in the output spec that is
/// state j, the other inputs fixed to `context`.
PlannerSession::Impl::MinPlus PlannerSession::Impl::chainMatrix(const ClassTable& ct, int chain,
                                                                const std::vector<int>& context) const
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

Factor PlannerSession::Impl::itemFactor(const TopItem& item, const ClassTable& ct)
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
    const size_t firstOut = ct.firstOutputDim();
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
    digits.assign(fdims.size(), 0); // entry 0; advance steps them
    for (std::size_t idx = 0; idx < f.values.size(); ++idx, advance(digits, fdims)) {
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
            for (size_t j = 0; j < item.outputVars.size(); ++j)
                entry[firstOut + j] = assignment[static_cast<size_t>(item.outputVars[j])];
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
        f.values[idx] = r.at(i, j);
    }
    return f;
}

} // namespace tp
