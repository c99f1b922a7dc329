// A lower bound on a solve's least before any class table is built (PlannerSession::Impl::
// tableFreeBound): where a combination cannot beat the search's bar, building its tables is
// most of what proving that costs (Switch-Base-8 on 4x4x8: about 95% of each bounded solve).
#include <cmath>

#include "session_impl.h"

namespace tp {

using namespace search;

double PlannerSession::Impl::classLeast(ClassId cls, double lambda, bool recomputeAllowed, std::map<ClassId, double>& known)
{
    if (auto it = known.find(cls); it != known.end()) return it->second;
    throwIfCancelled();
    const BlockClass& bc = classAt(cls);
    const BlockInstance& rep = bc.instances[0];
    ClassTable ct;
    ct.classId = cls;
    layOutBoundary(ct, bc);
    // An absorbed sibling's table is a factor of this class's graph: at its own least here, its
    // dims left as free variables (linked to this class's ops as in the table).
    std::vector<std::shared_ptr<ClassTable>> sibs;
    double siblings = 0;
    for (const auto& [scls, sinst] : siblingsOf(cls, InstanceId{0})) {
        auto sib = std::make_shared<ClassTable>();
        sib->classId = scls;
        layOutBoundary(*sib, classAt(scls));
        sibs.push_back(std::move(sib));
        siblings += classLeast(scls, lambda, recomputeAllowed, known);
    }
    const std::vector<int> domains = classVariables(ct, rep, sibs);
    // Every mode classTable may solve (a dominated one too: a least over more modes is no higher).
    double least = kInfinity;
    for (Recompute mode : recomputeModes(lambda, recomputeAllowed, !repeatedLayer(cls))) {
        const std::string key = modeKey(ct, bc, sibs, lambda, mode);
        std::vector<Factor> factors = structureFactors(ct, rep, sibs, domains, key);
        if (checkpointsBlockInput(mode)) {
            const std::vector<Factor>& again = recomputeFactors(ct, rep, sibs, domains, key);
            factors.insert(factors.end(), again.begin(), again.end());
        }
        nodeFactors(ct, rep, domains, lambda, mode, factors);
        const EliminationResult all = eliminate(std::move(factors), domains, {}, threadCount(), substituteWorth, orderRule);
        least = std::min(least, all.remaining.values.empty() ? 0.0 : all.remaining.values[0]);
    }
    return known[cls] = least + siblings;
}

namespace {
/// Below this many table entries in all, a solve's tables cost about what the bound's
/// eliminations cost (their work beyond those is filling the entries, chain powers and the top
/// level over them): measured on Mixtral 8x7B on 2x2x4 (tables of a few hundred entries, the
/// bound and the tables 0.5 ms each) and Switch-Base-8 on 4x4x8 (1.5 million entries: the
/// tables 316 ms, the bound 67 ms), docs/PERFORMANCE.md (2026-12-07).
constexpr double kBoundFirstEntries = 1e5;
} // namespace

std::vector<Run> PlannerSession::Impl::topRuns(const std::set<ClassId>& inlined) const
{
    std::vector<Run> runs = folded.runs; // as collectItems lays out the top level
    for (const auto& group : folded.siblings)
        if (inlined.count(ClassId{group.parentClass}))
            for (int i : group.instances) runs.push_back(Run{group.classId, i, 1});
    return runs;
}

bool PlannerSession::Impl::tablesWorthBounding(const std::set<ClassId>& inlined)
{
    std::set<ClassId> seen;
    double entries = 0;
    for (const Run& run : topRuns(inlined)) {
        if (inlined.count(classOf(run)) || !seen.insert(classOf(run)).second) continue;
        ClassTable ct;
        ct.classId = classOf(run);
        layOutBoundary(ct, classAt(ct.classId));
        entries += static_cast<double>(product(ct.dims));
    }
    return entries >= kBoundFirstEntries;
}

double PlannerSession::Impl::tableFreeBound(double lambda, bool recomputeAllowed, const std::set<ClassId>& inlined)
{
    std::vector<Recompute> modes = recomputeModes(lambda, recomputeAllowed, true);
    if (forcedRecompute) modes.push_back(*forcedRecompute); // solveAt's pinned modes
    std::map<ClassId, double> known;
    double bound = 0;
    for (const Run& run : topRuns(inlined)) {
        if (!inlined.count(classOf(run))) {
            // A table item's entries are its class's table entries (a chained run's, sums of
            // run.count of them along the chain): none is below run.count times the least.
            bound += run.count * classLeast(classOf(run), lambda, recomputeAllowed, known);
            continue;
        }
        // An inlined op: its least node cost under any mode (its edges cost at least zero).
        for (int a = 0; a < run.count; ++a)
            for (OpId op : instanceAt(classOf(run), InstanceId{run.firstInstance + a}).ops) {
                const int lockedTo = forced[static_cast<size_t>(op)];
                double cheapest = kInfinity;
                for (Recompute mode : modes)
                    for (int s = 0; s < static_cast<int>(model.strategies(op).size()); ++s) {
                        if (lockedTo >= 0 && lockedTo != s) continue;
                        const OpCost& c = model.opCost(op, s, mode);
                        cheapest = std::min(cheapest, c.seconds() + lambda * c.memoryBytes());
                    }
                bound += cheapest;
            }
    }
    return bound;
}

} // namespace tp
