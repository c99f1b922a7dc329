#pragma once
// Spec domains of the search (docs/ARCHITECTURE.md, "core/search"): a tensor between blocks is
// a variable over the distinct specs its producers can give it, sorted; a class table has one
// dim per such boundary tensor. Internal to core/search.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "../cost/cost_model.h"
#include "ids.h"

namespace tp::search {

/// Where a tensor comes from: its producer op (-1: a graph input or weight) and output slot.
struct TensorOrigin {
    OpId producer = -1;
    int slot = 0;
};

/// The distinct output specs an op can produce on one output slot, sorted, and which one each
/// strategy produces.
struct ProducerSpecs {
    std::vector<TensorSpec> specs;
    std::vector<SpecIndex> specOfStrategy;

    SpecIndex specIndexOf(StrategyIndex s) const { return specOfStrategy[s.at()]; }
    const TensorSpec& specOf(StrategyIndex s) const { return specs[specIndexOf(s).at()]; }
};

/// Entries of a row-major table over `dims`.
inline std::size_t product(const std::vector<int>& dims)
{
    std::size_t n = 1;
    for (int d : dims) n *= static_cast<std::size_t>(d);
    return n;
}

/// The digits (one per dim, last fastest) of a row-major index.
inline void unravel(std::size_t index, const std::vector<int>& dims, std::vector<int>& digits)
{
    digits.resize(dims.size());
    for (std::size_t k = dims.size(); k-- > 0;) {
        digits[k] = static_cast<int>(index % static_cast<std::size_t>(dims[k]));
        index /= static_cast<std::size_t>(dims[k]);
    }
}

/// The digits of the next row-major index (last fastest), in place: a loop over every entry of a
/// table steps its digits with this instead of dividing the index anew each time.
inline void advance(std::vector<int>& digits, const std::vector<int>& dims)
{
    for (std::size_t k = dims.size(); k-- > 0;) {
        if (++digits[k] < dims[k]) return;
        digits[k] = 0;
    }
}

/// The row-major index of digits over `dims` (unravel's inverse).
inline std::size_t ravel(const std::vector<int>& digits, const std::vector<int>& dims)
{
    std::size_t index = 0;
    for (std::size_t k = 0; k < dims.size(); ++k)
        index = index * static_cast<std::size_t>(dims[k]) + static_cast<std::size_t>(digits[k]);
    return index;
}

/// The position of `spec` in a sorted domain, -1 when it is not there.
inline int specIndex(const std::vector<TensorSpec>& domain, const TensorSpec& spec)
{
    auto it = std::lower_bound(domain.begin(), domain.end(), spec);
    return (it != domain.end() && *it == spec) ? static_cast<int>(it - domain.begin()) : -1;
}

/// Stands in a class's input domain for "this instance's input has no producer" (a graph
/// input): such a tensor arrives laid out as needed, at no cost.
TensorSpec freeSpec();
bool isFree(const TensorSpec& spec);

/// The kept input of a fully recomputed block (evaluate.h); a free spec (a graph input) keeps nothing.
double keptBytes(const CostModel& model, TensorId t, const TensorSpec& spec);

/// The domain of a class input position: the union of what its instances' producers can give
/// it (each sorted), plus the free spec when some instance reads a graph input there and some
/// other a produced tensor. Sorted, without repeats; empty when nothing is produced.
std::vector<TensorSpec> unionDomain(const std::vector<const std::vector<TensorSpec>*>& producerDomains, bool someFree);

/// The spec domain of each output slot of `op` under its candidate strategies.
ProducerSpecs producerSpecsOf(const CostModel& model, OpId op, int slot);

} // namespace tp::search
