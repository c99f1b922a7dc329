#include "decode.h"

#include "session_impl.h"

namespace tp {
namespace search {

void appendChosen(std::vector<ChosenRun>& runs, ClassId cls, InstanceId first, int count,
                  std::shared_ptr<const DecodedEntry> entry)
{
    if (!runs.empty()) {
        ChosenRun& last = runs.back();
        if (last.classId == cls && last.entry == entry && last.firstInstance.value + last.count == first.value) {
            last.count += count;
            return;
        }
    }
    runs.push_back(ChosenRun{cls, first, count, std::move(entry)});
}

} // namespace search

using namespace search;

std::shared_ptr<const DecodedEntry> PlannerSession::Impl::decodedEntry(const ClassTable& ct, std::size_t entry)
{
    auto key = std::make_pair(tableKey(ct.classId, ct.slot), entry);
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
    const BlockInstance& rep = classAt(ct.classId).instances[0];
    for (size_t i = 0; i < rep.ops.size(); ++i) {
        d->strategies.push_back(assignment[i]);
        d->memoryBytes += model.opCost(rep.ops[i], assignment[i], d->mode).memoryBytes();
    }
    if (checkpointsBlockInput(d->mode))
        for (size_t k = 0; k < rep.inputs.size(); ++k)
            if (ct.inputVar[k] >= 0)
                d->memoryBytes +=
                    keptBytes(model, rep.inputs[k],
                              ct.inputDomains[k][static_cast<size_t>(assignment[static_cast<size_t>(ct.inputVar[k])])]);
    for (size_t sb = 0; sb < ct.siblingVars.size(); ++sb) {
        const auto& sibTable = tableOf(ct.siblingClass[sb], ct.slot);
        std::vector<int> sibEntry;
        for (int v : ct.siblingVars[sb]) sibEntry.push_back(assignment[static_cast<size_t>(v)]);
        d->siblings.push_back(decodedEntry(sibTable, ravel(sibEntry, sibTable.dims)));
    }
    return decodedCache.emplace(key, std::move(d)).first->second;
}

double PlannerSession::Impl::instanceMemory(const DecodedEntry& d, ClassId cls, InstanceId inst) const
{
    double bytes = d.memoryBytes;
    if (d.siblings.empty()) return bytes;
    const auto sibs = siblingsOf(cls, inst);
    for (size_t sb = 0; sb < d.siblings.size() && sb < sibs.size(); ++sb)
        bytes += instanceMemory(*d.siblings[sb], sibs[sb].first, sibs[sb].second);
    return bytes;
}

void PlannerSession::Impl::chooseInstances(const ClassTable& ct, InstanceId first, int count, std::size_t entry, Attempt& attempt)
{
    auto d = decodedEntry(ct, entry);
    const double bytes = instanceMemory(*d, ct.classId, first) * count;
    decodedMemory += bytes;
    if (ct.slot == 1) decodedMemoryHigh += bytes;
    appendChosen(attempt.runs, ct.classId, first, count, std::move(d));
}

void PlannerSession::Impl::writeInstance(const DecodedEntry& d, ClassId cls, InstanceId inst, SearchResult& result) const
{
    const BlockInstance& instance = instanceAt(cls, inst);
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

void PlannerSession::Impl::materialize(Attempt& attempt) const
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
        for (int a = run.firstInstance.value; a < run.firstInstance.value + run.count; ++a)
            writeInstance(*run.entry, run.classId, InstanceId{a}, r);
}

void PlannerSession::Impl::decodeItem(const TopItem& item, const std::vector<int>& assignment, Attempt& attempt)
{
    const auto& ct = tableOf(classOf(item.run), item.slot);
    std::vector<int> entry(ct.dims.size(), 0);
    if (!item.chain) {
        for (size_t k = 0; k < item.inputs.size(); ++k)
            if (ct.inputDim[k] >= 0) entry[static_cast<size_t>(ct.inputDim[k])] = boundDigit(item.inputs[k], assignment);
        const size_t firstOut = ct.firstOutputDim();
        for (size_t j = 0; j < item.outputVars.size(); ++j)
            entry[firstOut + j] = assignment[static_cast<size_t>(item.outputVars[j])];
        chooseInstances(ct, InstanceId{item.run.firstInstance}, 1, ravel(entry, ct.dims), attempt);
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
    if (auto known = chainPowers.find(std::make_tuple(item.run.classId, item.run.firstInstance, item.slot, context));
        known != chainPowers.end()) {
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
    InstanceId instance{item.run.firstInstance};
    for (const StateRun& stretch : stretches) {
        for (size_t k = 0; k < item.inputs.size(); ++k)
            if (ct.inputDim[k] >= 0)
                entry[static_cast<size_t>(ct.inputDim[k])] = static_cast<int>(k) == chain ? stretch.in : context[k];
        entry[ct.dims.size() - 1] = outOfState[static_cast<size_t>(stretch.out)];
        const int count = static_cast<int>(stretch.count);
        chooseInstances(ct, instance, count, ravel(entry, ct.dims), attempt);
        instance.value += count;
    }
}

} // namespace tp
