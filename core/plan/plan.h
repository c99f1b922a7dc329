#pragma once
// The plan document (docs/formats.md, "Plan file v1", key list): what `tpplan plan --json`
// prints and what a .tpplan.json file holds.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "../cost/cost_model.h"
#include "../fold/fold.h"
#include "../search/search.h"

namespace tp {

inline constexpr int kPlanFormatVersion = 1;

/// What the plan says about where it came from, beyond the cost model's own inputs.
struct PlanContext {
    std::string modelName;
    std::string modelSource;    ///< built-in name or file the user gave
    nlohmann::json modelConfig; ///< effective builder config (null for graph files)
    std::string hardwareName;
    std::string mode = "train";
    std::int64_t batch = 0;
    std::int64_t seq = 0;
    double intraNodeGBps = 0; ///< link overrides the plan was made with (PlanRequest); 0: none
    double interNodeGBps = 0;
};

/// A collective aggregated over the instances of a block class: it happens after the
/// representative op `at`, `count` times per step.
struct CollectiveSummary {
    CollectiveKind kind;
    int axis;
    double bytes;
    Phase phase;
    OpId at;
    std::int64_t count;
    double seconds; ///< one occurrence
};

/// Collectives grouped by (representative op, kind, axis, bytes, phase), in op order.
std::vector<CollectiveSummary> summarizeCollectives(const Breakdown& breakdown, const FoldedGraph& folded);

/// Mesh axes (indices) that no candidate strategy of any op uses: no loop of the model divides
/// by the axis size (or every loop that does is already split further), so every op is
/// replicated along it and those devices only repeat the work. In mesh order.
std::vector<int> axesNoOpCanSplit(const CostModel& model);

nlohmann::json planToJson(const PlanContext& context, const CostModel& model, const FoldedGraph& folded,
                          const SearchResult& result);

} // namespace tp
