#include "domains.h"

#include "evaluate.h"
#include "session_impl.h"

namespace tp::search {

TensorSpec freeSpec()
{
    TensorSpec s;
    s.partial = ~AxisMask{0};
    return s;
}

bool isFree(const TensorSpec& spec) { return spec.partial == ~AxisMask{0}; }

double keptBytes(const CostModel& model, TensorId t, const TensorSpec& spec)
{
    return isFree(spec) ? 0.0 : keptInputBytes(model, t, spec);
}

std::vector<TensorSpec> unionDomain(const std::vector<const std::vector<TensorSpec>*>& producerDomains, bool someFree)
{
    std::vector<TensorSpec> domain;
    for (const auto* specs : producerDomains) domain.insert(domain.end(), specs->begin(), specs->end());
    if (someFree && !domain.empty()) domain.push_back(freeSpec());
    std::sort(domain.begin(), domain.end());
    domain.erase(std::unique(domain.begin(), domain.end()), domain.end());
    return domain;
}

ProducerSpecs producerSpecsOf(const CostModel& model, OpId op, int slot)
{
    ProducerSpecs ps;
    const int n = static_cast<int>(model.strategies(op).size());
    for (int s = 0; s < n; ++s) ps.specs.push_back(model.outputSpec(op, s, slot));
    std::sort(ps.specs.begin(), ps.specs.end());
    ps.specs.erase(std::unique(ps.specs.begin(), ps.specs.end()), ps.specs.end());
    for (int s = 0; s < n; ++s) ps.specOfStrategy.push_back(SpecIndex{specIndex(ps.specs, model.outputSpec(op, s, slot))});
    return ps;
}

} // namespace tp::search

// ---------------------------------------------------------------------------------------------
// The session's view of the fold: canonical ops, producer domains, class boundaries, chained runs.

namespace tp {

using namespace search;

void PlannerSession::Impl::indexFold()
{
    canonicalOp = canonicalOps(baseFold);
    canonicalOp.resize(model.graph().ops.size());
    for (size_t op = baseFold.classOfOp.size(); op < canonicalOp.size(); ++op) canonicalOp[op] = static_cast<OpId>(op);
}

const ProducerSpecs& PlannerSession::Impl::producerSpecs(OpId op, int slot)
{
    auto key = std::make_pair(canonicalOp[static_cast<size_t>(op)], slot);
    return caches->findOrMake(caches->producerSpecCache, key, [&] { return producerSpecsOf(model, key.first, slot); });
}

bool PlannerSession::Impl::repeatedLayer(ClassId cls) const
{
    const BlockClass& bc = classAt(cls);
    if (bc.instances.empty() || bc.instances[0].ops.empty()) return false;
    const int base = baseFold.classOfOp[static_cast<size_t>(bc.instances[0].ops[0])];
    return base >= 0 && baseFold.classes[static_cast<size_t>(base)].instances.size() > 1;
}

std::vector<std::pair<ClassId, InstanceId>> PlannerSession::Impl::siblingsOf(ClassId cls, InstanceId inst) const
{
    std::vector<std::pair<ClassId, InstanceId>> out;
    for (const auto& group : folded.siblings)
        if (group.parentClass == cls.value && group.parentInstance == inst.value)
            for (int i : group.instances) out.emplace_back(ClassId{group.classId}, InstanceId{i});
    return out;
}

const ClassBoundary& PlannerSession::Impl::boundaryOf(ClassId cls)
{
    if (auto known = boundaryCache.find(cls); known != boundaryCache.end()) return known->second;
    const BlockClass& bc = classAt(cls);
    const BlockInstance& rep = bc.instances[0];
    // Tensors exchanged with the siblings this block absorbs are internal to its table.
    std::set<OpId> siblingOps;
    for (const auto& [scls, sinst] : siblingsOf(cls, InstanceId{0}))
        for (OpId op : instanceAt(scls, sinst).ops) siblingOps.insert(op);
    auto absorbedInput = [&](TensorId t) { return siblingOps.count(origin[static_cast<size_t>(t)].producer) > 0; };
    auto absorbedOutput = [&](TensorId t) {
        const auto& readers = consumersOfTensors()[static_cast<size_t>(t)];
        return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](OpId c) { return siblingOps.count(c) > 0; });
    };
    ClassBoundary boundary;
    // Input domains: the union of what the producers of each input position can produce,
    // over every instance of the class.
    boundary.inputDomains.resize(rep.inputs.size());
    for (size_t k = 0; k < rep.inputs.size(); ++k) {
        if (absorbedInput(rep.inputs[k])) continue;
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
        std::vector<const std::vector<TensorSpec>*> domains;
        for (const auto& [op, outSlot] : producers) domains.push_back(&producerSpecs(op, outSlot).specs);
        boundary.inputDomains[k] = unionDomain(domains, someFree);
    }
    for (size_t j = 0; j < rep.outputs.size(); ++j)
        if (!absorbedOutput(rep.outputs[j])) boundary.outputs.push_back(static_cast<int>(j));
    return boundaryCache.emplace(cls, std::move(boundary)).first->second;
}

void PlannerSession::Impl::indexRuns()
{
    boundaryCache.clear();
    chainCache.clear();
    for (const Run& run : folded.runs) {
        boundaryOf(classOf(run));
        chainCache.emplace(std::make_tuple(run.classId, run.firstInstance, run.count), chainShape(run));
    }
}

std::optional<ChainShape> PlannerSession::Impl::chainShape(const Run& run)
{
    if (run.count < 2 || flat) return std::nullopt;
    const BlockClass& bc = classAt(classOf(run));
    const auto& first = bc.instances[static_cast<size_t>(run.firstInstance)];
    const ClassBoundary& boundary = boundaryOf(classOf(run));
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
        for (OpId c : consumersOfTensors()[static_cast<size_t>(cur.outputs[out])])
            if (folded.classOfOp[static_cast<size_t>(c)] != run.classId || folded.instanceOfOp[static_cast<size_t>(c)] != a + 1)
                return std::nullopt;
        if (siblingsOf(classOf(run), InstanceId{a}).size() != siblingsOf(classOf(run), InstanceId{run.firstInstance}).size())
            return std::nullopt;
    }
    return ChainShape{chain};
}

const std::optional<ChainShape>& PlannerSession::Impl::chainOf(const Run& run)
{
    // Whether a run chains depends on the fold alone (its layout, not the price).
    const auto runKey = std::make_tuple(run.classId, run.firstInstance, run.count);
    auto known = chainCache.find(runKey);
    if (known == chainCache.end()) known = chainCache.emplace(runKey, chainShape(run)).first;
    return known->second;
}

} // namespace tp
