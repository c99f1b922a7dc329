#pragma once
// Stitching (docs/ARCHITECTURE.md, "core/search"): the top-level factor graph. Its variables
// are the specs of tensors between items (a class table, or a chained run of one as a min-plus
// power) and the strategies and recompute modes of inlined classes' ops. Internal to core/search.
#include <optional>
#include <utility>
#include <vector>

#include "../fold/fold.h"

namespace tp::search {

/// A run that can be compressed: one chained input position, one output, the rest context.
struct ChainShape {
    int chainInput = -1;
};

/// How one dim of a class table is bound at the top level: to a variable whose values map to
/// class-domain indices, or fixed (a graph input's free spec).
struct DimBinding {
    int var = -1;
    std::vector<int> toClass; ///< per value of var: class-domain index, -1 = impossible
    int fixed = -1;
};

/// Class-domain digit of an input position under a top-level assignment (-1: impossible).
inline int boundDigit(const DimBinding& b, const std::vector<int>& assignment)
{
    if (b.var < 0) return b.fixed;
    return b.toClass[static_cast<std::size_t>(assignment[static_cast<std::size_t>(b.var)])];
}

/// One factor of the top level: a run of a class table's instances (chained, or one instance).
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

/// A solve with two memory prices: instances of the table runs, counted in run order, from
/// `highFrom` on are priced at `high`, the others (and inlined ops) at the base price.
struct PriceSplit {
    double high = 0;
    int highFrom = 0;
};

/// Each run with its price slot (0: the base price, 1: the split's high one). The first
/// `tableRuns` runs are the table runs a split counts; under a split a run that straddles
/// highFrom becomes two, one per price. Without a split every run is at slot 0.
std::vector<std::pair<Run, int>> splitRunsAtPrice(const std::vector<Run>& runs, std::size_t tableRuns,
                                                  const std::optional<PriceSplit>& split);

} // namespace tp::search
