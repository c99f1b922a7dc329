#pragma once
// Min-sum factor tables and exact variable elimination: the engine of the block search.
// Variables are small integer domains (an op's strategy index, a tensor's spec index);
// factors map an assignment of their variables to a cost (+inf = forbidden).
#include <cstdint>
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

struct EliminationResult {
    Factor remaining;                   ///< over the kept variables (ascending), min over the rest
    std::vector<EliminationStep> steps; ///< in elimination order
};

/// Eliminates every variable not in `keep` (min-sum), choosing a min-weight order
/// (smallest product of neighbour domains first; ties by variable id, so deterministic).
/// A large elimination step is split over up to `threads` threads; the result is the same.
EliminationResult eliminate(std::vector<Factor> factors, const std::vector<int>& domainSizes, const std::vector<int>& keep,
                            int threads = 1);

/// Fills the eliminated variables of `assignment` (indexed by variable id; kept variables
/// already set) by replaying the steps backwards.
void decode(const EliminationResult& result, const std::vector<int>& domainSizes, std::vector<int>& assignment);

/// Index of an assignment into a factor's table.
std::size_t factorIndex(const Factor& f, const std::vector<int>& domainSizes, const std::vector<int>& assignment);

} // namespace tp
