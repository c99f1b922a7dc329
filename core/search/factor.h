#pragma once
// Min-sum factor tables and exact variable elimination: the engine of the block search.
// Variables are small integer domains (an op's strategy index, a tensor's spec index);
// factors map an assignment of their variables to a cost (+inf = forbidden).
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace tp {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Factor {
    std::vector<int> vars;      ///< ascending variable ids
    std::vector<double> values; ///< row-major over vars' domains (last var fastest)
};

/// The record of one elimination, for decoding: the argmin of `var` for every assignment of
/// its neighbours at the time it was eliminated.
struct EliminationStep {
    int var = -1;
    std::vector<int> neighbours; ///< ascending
    std::vector<int> argmin;     ///< row-major over neighbours' domains
};

/// The values a domain reduction kept (dropSubstitutableValues, core/search/substitution.h):
/// per variable, the original value of each kept index (empty for a variable that kept its
/// whole domain).
struct ValueMap {
    std::vector<std::vector<int>> valuesOf;
    /// Turns an assignment over the kept indices into one over the original values.
    void toOriginal(std::vector<int>& assignment) const;
};

struct EliminationResult {
    Factor remaining;                   ///< over the kept variables (ascending), min over the rest
    std::vector<EliminationStep> steps; ///< in elimination order, over the reduced domains
    std::vector<int> reducedDomains;    ///< each variable's domain after the reduction
    ValueMap values;                    ///< the reduction's kept values
    /// Set where `stopWhen` stopped the elimination: then `remaining` is empty, there is nothing
    /// to decode, and `lowerBound` bounds the least from below.
    bool stopped = false;
    double lowerBound = 0;
};

/// Where testing a variable's values for substitutes pays (dropSubstitutableValues): the
/// elimination work its domain multiplies must be this many times the test. Measured
/// (2026-12-07, docs/PERFORMANCE.md): 16, 64 and 256 give the same times within noise on
/// T5 and LLaMA-3 8B on 3D meshes; 64 leaves a lock's re-plan of LLaMA-3 8B on 2x8 within 1% of
/// the untested instruction count and T5-base on 2x2x2 1.6x faster.
inline constexpr double kSubstituteWorth = 64;

/// A lower bound summed in another order of additions than an elimination's, lowered by a
/// relative 1e-12 so that rounding never puts it above the least the elimination computes.
inline double roundedDownBound(double sum) { return sum - 1e-12 * (sum < 0 ? -sum : sum); }

/// Below this many additions in all (about a millisecond) eliminate() is not stopped part way
/// (its `stopWorth`): finishing costs less than what its exact least saves later. The plan
/// layer keeps a search's bound for later edits (core/plan/planner.cpp, State::record), and a
/// bound stopped just at the bar settles nothing once a lock raises the bar (LLaMA-3 8B on 2x8,
/// `bench lock`: an instance lock raises it 0.6%; with small top levels stopped too, 8
/// combinations were searched again against 5, 9.5 ms against 5 ms).
inline constexpr double kStopWorth = 1e6;

/// Which greedy elimination order eliminate() takes (core/search/factor.cpp).
enum class EliminationOrderRule {
    Auto,        ///< least weight, or least fill where that promises to save a third of the work
    LeastWeight, ///< smallest product of neighbour domains first
    LeastFill,   ///< fewest new neighbour pairs first, weighted by their domains
};

/// Eliminates every variable not in `keep` (min-sum), in a greedy order worked out on the
/// factors' scopes before anything else (`rule`; ties by variable id, so deterministic; the
/// result's least is the same in any order). Then the values of the others that another value of theirs always replaces at no greater
/// cost are dropped, where the test is worth `substituteWorth` (0: everywhere; infinity:
/// nowhere). The least is the same; among equal least assignments another may be decoded.
/// A large elimination step is split over up to `threads` threads; the result is the same.
/// `stopWhen`, if given, is asked before the first step and after each with a lower bound on
/// the least (the least entries of the factors left, added up: it never falls as the
/// elimination goes on), where that bound is finite and the elimination adds up to `stopWorth`
/// additions or more (orderCost's count, on the domains before the reduction); the
/// elimination stops where it says so.
EliminationResult eliminate(std::vector<Factor> factors, const std::vector<int>& domainSizes, const std::vector<int>& keep,
                            int threads = 1, double substituteWorth = kSubstituteWorth,
                            EliminationOrderRule rule = EliminationOrderRule::Auto,
                            const std::function<bool(double)>& stopWhen = {}, double stopWorth = kStopWorth);

/// Fills the eliminated variables of `assignment` (indexed by variable id; kept variables
/// already set) by replaying the steps backwards.
void decode(const EliminationResult& result, const std::vector<int>& domainSizes, std::vector<int>& assignment);

/// Index of an assignment into a factor's table.
std::size_t factorIndex(const Factor& f, const std::vector<int>& domainSizes, const std::vector<int>& assignment);

} // namespace tp
