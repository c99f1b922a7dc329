#pragma once
// What the user asked for, as the GUI edits it: the inputs of one plan (model source, mesh,
// hardware, batch, ...) and the locks. Plain values, cheap to copy, compared whole: undo commands
// keep a before and an after copy.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan_file.h"
#include "plan/planner.h"
#include "search/search.h"

namespace tp {

struct PlanSettings {
    std::string model = "gpt3-175b";    ///< built-in name or file
    std::vector<std::string> overrides; ///< "key=value" model config overrides (tpplan --set), by key
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::int64_t batch = 0;          ///< 0: the model's own
    std::int64_t seq = 0;            ///< 0: the model's own
    std::int64_t microBatch = kAuto; ///< kAuto: the planner chooses; 0: the whole local batch at once
    int zero = kAuto;                ///< ZeRO stage 0-3, or kAuto: the planner chooses
    std::string mode = "train";
    std::string memoryLimit;  ///< "": the hardware's capacity; "none"; "80GiB"
    double intraNodeGBps = 0; ///< link overrides; 0 keeps the hardware preset's
    double interNodeGBps = 0;
    int overlapChunks = 1; ///< chunked comm/compute overlap (CostSettings); 1: none
    int pipeline = kDefaultPipeline;         ///< pipeline stages: 1 none, kAuto the planner chooses, or P
    std::string schedule = kDefaultSchedule; ///< "1f1b", "interleaved:V" or "auto"
    std::string stageLayers = kDefaultStageLayers; ///< "auto", "even" or "F,L" (PlanRequest::stageLayers)

    bool operator==(const PlanSettings&) const = default;

    /// The core request these settings and locks describe (core/plan/planner.h): the one
    /// planning path, shared with tpplan plan. Everything else (workspace keys, limits) is the
    /// core's, read off the request.
    PlanRequest toRequest(const std::vector<LockRequest>& locks) const;
};

std::string lockText(const LockRequest& lock); ///< "GLOB=STRATEGY"

/// The value of `key` in "key=value" overrides ("" when not overridden).
std::string overrideValue(const std::vector<std::string>& overrides, const std::string& key);
/// The overrides with `key` set to `value` (kept in place, or appended), or removed when
/// `value` is empty.
std::vector<std::string> withOverride(const std::vector<std::string>& overrides, const std::string& key,
                                      const std::string& value);
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
/// Reads the settings and locked ops of a saved plan (.tpplan.json): core/plan/plan_file's
/// projectOfPlan. Throws InputError.
ProjectData projectFromPlanJson(const nlohmann::json& json, const std::string& origin);
/// A project file as the GUI holds it (its view state read leniently).
ProjectData projectDataOf(const ProjectFile& file);

} // namespace tp
