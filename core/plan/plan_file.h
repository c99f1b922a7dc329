#pragma once
// Plan file v1 (.tpplan.json) and project file v1 (.tpproj.json); see docs/formats.md.
//
// A plan file is the plan document of plan.h made self-contained: besides the strategies and
// the stored figures it holds the model's effective config (or the whole graph for file-based
// models) and the hardware spec when it is not a preset. Reading one rebuilds the graph, mesh
// and cost model, re-validates every strategy and spec, re-costs the stored strategies without
// searching, and lists every stored figure the recomputation does not reproduce.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner.h"

namespace tp {

inline constexpr int kProjectFileVersion = 1;
/// The most matmul chunks a project may ask for (CostSettings::overlapChunks).
inline constexpr int kMaxOverlapChunks = 1024;

/// Adds what makes a plan document self-contained (planToJson calls it): the embedded graph when
/// the model has no builder config, the full hardware spec when the hardware is not an unchanged
/// preset, and the cost settings the document does not otherwise hold.
void addSelfContainedFields(nlohmann::json& document, const PlanContext& context, const CostModel& model);

/// A pipelined plan's "pipeline" object (docs/formats.md): the whole mesh, the stages,
/// schedule and micro-batch, which stage the document's ops are (its slowest), and every
/// solved stage's layers, step, sends and memory as planned.
nlohmann::json pipelineToJson(const PipelinePlan& pipeline, const std::string& wholeMesh);

/// The hardware in the hardware-file format (resources/hardware/*.json); hardwareFromJson reads it.
nlohmann::json hardwareToJson(const Hardware& hardware);
/// Whether the hardware equals the preset of its name, field by field.
bool isUnchangedPreset(const Hardware& hardware);

/// A stored figure that the recomputation does not reproduce (beyond a relative 1e-9).
struct PlanDifference {
    std::string path;          ///< JSON pointer into the plan document, e.g. "/cost/step_time_s"
    nlohmann::json stored;     ///< null when the stored document lacks the field
    nlohmann::json recomputed; ///< null when the recomputation has no such field
    std::string message;       ///< "stored step time 1.2 s, recomputed 1.3 s"
};

/// A plan file read back: the workspace rebuilt from it and the stored strategies re-costed.
struct LoadedPlan {
    std::unique_ptr<PlanWorkspace> workspace;
    SearchResult result;   ///< stored strategies, recompute and locks; recomputed breakdown
    nlohmann::json stored; ///< the document as read
    std::vector<PlanDifference> differences;
};

/// Parses and re-validates a plan document; `origin` (usually the file name) prefixes messages,
/// which carry the JSON path of the field at fault and, for ops, the op name. Throws InputError
/// for anything that makes the plan unusable (format, version, model, mesh, hardware, op names
/// not matching the graph in topological order, a strategy or spec invalid for its op).
/// Figures that merely differ from the recomputation are listed in LoadedPlan::differences.
LoadedPlan readPlanFile(const std::string& text, const std::string& origin);
LoadedPlan readPlanJson(const nlohmann::json& document, const std::string& origin);

/// The plan document of a loaded plan regenerated from the rebuilt workspace and the re-costed
/// result (search metadata carried over from the stored document).
nlohmann::json planDocument(const LoadedPlan& plan);
/// Two-space indentation and a trailing newline; deterministic. Reading a written plan and
/// writing it again gives the same bytes.
std::string writePlanFile(const nlohmann::json& document);

/// Project file v1: what the GUI saves and opens: {"format": "tpstudio.project", "version": 1,
/// "settings": {...}, "locks": [...], "view": {...}}. The view state is opaque to the core.
struct ProjectFile {
    std::string model;                  ///< built-in name or model file, as the user gave it
    std::vector<std::string> overrides; ///< "key=value" model overrides
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx"; ///< preset name or hardware file
    std::int64_t batch = 0;                ///< 0: the model's own
    std::int64_t seq = 0;
    std::string mode = "train";
    std::int64_t microBatch = kAuto; ///< kAuto ("auto" in the file), 0 the whole local batch, or N
    int zero = kAuto;                ///< kAuto ("auto") or the ZeRO stage 0-3
    std::string memoryLimit;         ///< "80GiB", "none", or empty for the hardware's capacity
    double intraNodeGBps = 0;        ///< link bandwidth overrides; 0: the hardware's
    double interNodeGBps = 0;
    int overlapChunks = 1;          ///< chunked comm/compute overlap (CostSettings); 1: none
    int pipeline = 1;               ///< pipeline stages (PlanRequest::pipeline): 1 none, kAuto ("auto") or P
    std::string schedule = "1f1b";  ///< "1f1b", "interleaved:V" or "auto" (PlanRequest::schedule)
    std::string stageLayers = "even"; ///< "even", "auto" or "F,L" (PlanRequest::stageLayers)
    std::vector<std::string> locks; ///< "GLOB=STRATEGY"
    nlohmann::json view = nlohmann::json::object();
};

nlohmann::json projectToJson(const ProjectFile& project);
std::string writeProjectJson(const ProjectFile& project);
/// Parses and validates a project document (types, mode, mesh text, byte quantities, lock form).
/// Throws InputError naming `origin` and the JSON path of the field at fault.
ProjectFile readProjectJson(const std::string& text, const std::string& origin);

/// The plan request a project describes (for preparePlan / runPlan).
PlanRequest planRequestOf(const ProjectFile& project);

/// The settings a plan document was made with, as a project (what opening a plan in tpstudio
/// restores): model source and overrides (`overridesFromConfig`), mesh, hardware and link
/// overrides, batch, seq, mode, micro-batch, overlap, the memory limit it was searched under,
/// and its locked ops as locks. The rest of the plan is searched again (the search is exact).
/// Throws InputError naming `origin` and the JSON path of a field of the wrong type.
ProjectFile projectOfPlan(const nlohmann::json& document, const std::string& origin);

/// The `--set` overrides that turn built-in model `name`'s config into `config` (empty for a
/// model that is not built in).
std::vector<std::string> overridesFromConfig(const std::string& name, const nlohmann::json& config);

} // namespace tp
