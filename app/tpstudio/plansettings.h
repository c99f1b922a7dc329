#pragma once
// What the user asked for, as the GUI edits it: the inputs of one plan (model source, mesh,
// hardware, batch, ...) and the locks. Plain values, cheap to copy, compared whole: undo commands
// keep a before and an after copy.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/planner.h"
#include "search/search.h"

namespace tp {

struct PlanSettings {
    std::string model = "gpt3-175b"; ///< built-in name or file
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::int64_t batch = 0;          ///< 0: the model's own
    std::int64_t seq = 0;            ///< 0: the model's own
    std::int64_t microBatch = 0;     ///< 0: the whole local batch at once
    std::string mode = "train";
    std::string memoryLimit;         ///< "": the hardware's capacity; "none"; "80GiB"
    double intraNodeGBps = 0;        ///< link overrides; 0 keeps the hardware preset's
    double interNodeGBps = 0;

    bool operator==(const PlanSettings&) const = default;

    /// Everything that needs a new workspace (model load, cost model, fold) when it changes;
    /// the memory limit and the locks only re-solve.
    std::string workspaceKey() const;
    /// Everything that changes the graph itself.
    std::string modelKey() const;
    PlanRequest toRequest(const std::vector<LockRequest>& locks) const;
    /// The memory limit in bytes as PlannerSession takes it (0: capacity, -1: none).
    /// Throws InputError for a malformed limit.
    double memoryLimitBytes() const;
};

std::string lockText(const LockRequest& lock); ///< "GLOB=STRATEGY"

/// A project (.tpproj.json) as the GUI holds it; read and written by core/plan/plan_file
/// (ProjectFile), with the GUI's view state in its opaque "view" object.
struct ProjectData {
    PlanSettings settings;
    std::vector<LockRequest> locks;
    std::vector<std::string> expandedClasses; ///< view state: labels of expanded block cards
    std::string selectedOp;
};
std::string writeProject(const ProjectData& project);
/// Throws InputError naming the file and field at fault; refuses newer versions.
ProjectData readProject(const std::string& text, const std::string& origin);
/// Reads the settings and locked ops of a saved plan (.tpplan.json). Throws InputError.
ProjectData projectFromPlanJson(const nlohmann::json& json, const std::string& origin);

} // namespace tp
