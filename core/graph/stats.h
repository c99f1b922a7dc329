#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "graph.h"

namespace tp {

/// Whole-model figures, independent of any sharding.
struct GraphStats {
    std::int64_t ops = 0;
    std::int64_t tensors = 0;
    std::int64_t params = 0;
    double forwardFlops = 0;   ///< one forward pass over the graph's batch
    double trainStepFlops = 0; ///< forward + backward, no recomputation
    std::map<std::string, std::int64_t> opsByKind;
};

GraphStats computeStats(const Graph& graph);

} // namespace tp
