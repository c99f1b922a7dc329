#pragma once
// One path from "what the user asked for" to a costed plan: PlanRequest -> preparePlan ->
// runPlan, or the stateful Planner that tpplan plan and tpstudio's PlannerService both call.
// Shared by tpplan, tpstudio and the benchmark so that all of them plan the same way.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../import/catalog.h"
#include "plan.h"

namespace tp {

struct PlanRequest {
    std::string model; ///< built-in name or file
    ModelOptions modelOptions;
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::string mode = "train"; ///< train | infer
    std::string memoryLimit;    ///< "80GiB"; empty: the hardware's capacity; "none": no limit
    std::int64_t microBatch = 0;
    int overlapChunks = 1;
    double intraNodeGBps = 0;       ///< intra-node link bandwidth override in GB/s; 0: the hardware's
    double interNodeGBps = 0;       ///< inter-node link bandwidth override in GB/s; 0: the hardware's
    std::vector<std::string> locks; ///< "GLOB=STRATEGY"
    std::string baseline;           ///< "", "megatron", "megatron-sp", "dp", "flat"
    /// "auto": the search chooses per block; "none", "selective", "full": every block (the
    /// layers) in that mode, for the search and the baselines alike.
    std::string recompute = "auto";
    bool overlapGradients = true;  ///< gradient reduction overlaps the backward pass (--grad-overlap)
    double gradientBucketMiB = 25; ///< gradient bucket size (--grad-bucket); 0: one collective per weight
    /// Megatron's async tensor-parallel backward (--tp-overlap). Off by default: the cost model
    /// has no term for the SMs NCCL takes from the GEMM it hides under, and hiding it fully
    /// undercuts Korthikanti et al.'s measured backward times (docs/FIDELITY.md).
    bool overlapTensorParallel = false;
    /// ZeRO stage over the data-parallel axes (--zero): 0 none, 1 optimizer states (Megatron's
    /// distributed optimizer), 2 also gradients, 3 also parameters (FSDP). CostSettings::zeroStage.
    int zero = 0;
    int threads = 0; ///< search threads for large block tables (0: all hardware threads)
    /// Planner::plan only: baselines to cost next to the plan ("megatron", "dp", ...), judged
    /// against the same memory limit.
    std::vector<std::string> compareBaselines;
    /// Planner::plan only: with locks, also the search without them (cached per memory limit).
    bool compareUnlocked = false;
};

/// Everything that needs a new workspace (model load, cost model, fold) when it changes; the
/// memory limit, locks, baseline and threads only re-solve.
std::string workspaceKeyOf(const PlanRequest& request);
/// Everything that changes the graph itself (a subset of the workspace key).
std::string modelKeyOf(const PlanRequest& request);
/// The memory limit as PlannerSession takes it: 0 the capacity, -1 none, else bytes. Throws
/// InputError for a malformed limit.
double memoryLimitOf(const PlanRequest& request);

/// Everything a plan was made from, kept alive together (the cost model refers to the rest).
struct PlanWorkspace {
    LoadedModel model;
    Hardware hardware; ///< with the request's link overrides applied
    Mesh mesh;
    std::unique_ptr<CostModel> costModel;
    FoldedGraph folded;
    double foldMs = 0;
    PlanContext context;
};

/// Loads the model, hardware (with the link overrides) and mesh, folds and builds the cost
/// model: the one workspace builder (plan files rebuild theirs through buildWorkspace too).
/// Throws InputError.
std::unique_ptr<PlanWorkspace> preparePlan(const PlanRequest& request);

/// The cost settings a request asks for (before the fold's reader groups and the model's
/// kernel settings, which buildWorkspace reads from the model config).
CostSettings costSettingsOf(const PlanRequest& request);
/// The request's recompute mode: std::nullopt for "auto". Throws InputError for another word.
std::optional<Recompute> recomputeOf(const std::string& mode);
/// The kernel settings a model config asks for: "flash_attention" (default true: current
/// practice), "fused_kernels" (default true) and "fused_cross_entropy" (default false: the loss
/// in separate fp32 passes, as Megatron-LM, torchtitan and Transformers run it). Throws
/// InputError naming a non-boolean field.
void applyKernelSettings(CostSettings& settings, const nlohmann::json& config);
/// Applies the link overrides (GB/s; 0 keeps the hardware's). Throws InputError for a
/// negative or non-finite value, naming the setting.
void applyLinkOverrides(Hardware& hardware, double intraNodeGBps, double interNodeGBps);
/// Folds the workspace's graph, builds its cost model with the fold's reader groups, and fills
/// the context fields that follow from the model; model, hardware and mesh must be set.
void buildWorkspace(PlanWorkspace& workspace, CostSettings settings);

/// A baseline assignment ("megatron", "megatron-sp", "dp") costed on the workspace and judged
/// against the memory limit (memoryLimitOf's convention), its blocks in the recompute mode
/// given (none for std::nullopt). Throws InputError for an unknown name.
SearchResult planBaseline(const PlanWorkspace& workspace, const std::string& name, double memoryLimit,
                          std::optional<Recompute> recompute = std::nullopt);

/// Runs the search (or the requested baseline) on a prepared workspace. Throws InputError for
/// locks that cannot be honoured or an unknown baseline. `progress`, when given, counts the
/// search's memory prices and block tables as it goes (for another thread to show).
SearchResult runPlan(PlanWorkspace& workspace, const PlanRequest& request, SearchProgress* progress = nullptr);

/// What Planner::plan returns: the plan and what the request asked to compare it with, all
/// costed by the same workspace.
struct PlannerResult {
    std::shared_ptr<const PlanWorkspace> workspace;
    bool newWorkspace = false;                     ///< the workspace was (re)built for this request
    double prepareMs = 0;                          ///< model load + fold + cost model, when rebuilt
    SearchResult result;                           ///< the search around the locks, or the baseline
    std::optional<SearchResult> unlocked;          ///< request.compareUnlocked and there are locks
    std::map<std::string, SearchResult> baselines; ///< request.compareBaselines, by name
};

/// Plans a sequence of requests, rebuilding only what each request's changed fields need: the
/// workspace when workspaceKeyOf changes, and otherwise re-solving on the same PlannerSession
/// (whose class tables survive a new memory limit or lock). Baselines are costed once per
/// workspace. Not thread-safe: one caller at a time (tpstudio calls it from one worker).
class Planner {
public:
    Planner();
    ~Planner();
    Planner(const Planner&) = delete;
    Planner& operator=(const Planner&) = delete;

    /// Throws InputError for bad input and tp::Cancelled when `cancel` is set (checked between
    /// the stages and inside the search); the planner stays usable either way.
    PlannerResult plan(const PlanRequest& request, const std::atomic<bool>* cancel = nullptr, SearchProgress* progress = nullptr);

private:
    struct State;
    std::unique_ptr<State> state_;
};

} // namespace tp
