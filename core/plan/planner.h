#pragma once
// One call from "what the user asked for" to a costed plan: shared by tpplan, tpstudio and the
// benchmark so that all three plan the same way.
#include <memory>
#include <string>
#include <vector>

#include "../import/catalog.h"
#include "plan.h"

namespace tp {

struct PlanRequest {
    std::string model;              ///< built-in name or file
    ModelOptions modelOptions;
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::string mode = "train";     ///< train | infer
    std::string memoryLimit;        ///< "80GiB"; empty: the hardware's capacity; "none": no limit
    std::int64_t microBatch = 0;
    int overlapChunks = 1;
    std::vector<std::string> locks; ///< "GLOB=STRATEGY"
    std::string baseline;           ///< "", "megatron", "megatron-sp", "dp", "flat"
    int threads = 0;                ///< search threads for large block tables (0: all hardware threads)
};

/// Everything a plan was made from, kept alive together (the cost model refers to the rest).
struct PlanWorkspace {
    LoadedModel model;
    Hardware hardware;
    Mesh mesh;
    std::unique_ptr<CostModel> costModel;
    FoldedGraph folded;
    double foldMs = 0;
    PlanContext context;
};

/// Loads the model, hardware and mesh, builds the cost model and folds. Throws InputError.
std::unique_ptr<PlanWorkspace> preparePlan(const PlanRequest& request);

/// Runs the search (or the requested baseline) on a prepared workspace. Throws InputError for
/// locks that cannot be honoured or an unknown baseline. `progress`, when given, counts the
/// search's memory prices and block tables as it goes (for another thread to show).
SearchResult runPlan(PlanWorkspace& workspace, const PlanRequest& request, SearchProgress* progress = nullptr);

} // namespace tp
