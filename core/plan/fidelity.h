#pragma once
// Published training runs and how the cost model predicts them (tpplan bench fidelity,
// docs/FIDELITY.md): each run as it was run (model, hardware, mesh, layout, recompute mode,
// batch), its measured time, and the same request costed by the one planning path.
#include <optional>
#include <string>
#include <vector>

#include "planner.h"

namespace tp {

struct PublishedRun {
    std::string name;
    std::string source;
    PlanRequest request;               ///< the run as it was run; request.baseline is its layout
    std::optional<double> stepSeconds; ///< measured seconds per iteration
    /// Measured forward and backward seconds of one layer (the model's largest block class).
    std::optional<std::pair<double, double>> layerSeconds;
};

/// Reads a published-runs file (docs/formats.md). Throws InputError naming the field.
std::vector<PublishedRun> readPublishedRuns(const std::string& text, const std::string& origin);
/// The built-in runs (resources/fidelity/published-runs.json).
std::vector<PublishedRun> builtinPublishedRuns();

struct RunPrediction {
    double stepSeconds = 0;
    double layerForwardSeconds = 0, layerBackwardSeconds = 0; ///< one instance of the largest class
};

/// Costs the run's request (preparePlan + runPlan). Throws InputError for a run that cannot be
/// built.
RunPrediction predictRun(const PublishedRun& run);

} // namespace tp
