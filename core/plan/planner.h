#pragma once
// One path from "what the user asked for" to a costed plan: PlanRequest -> preparePlan ->
// runPlan, or the stateful Planner that tpplan plan and tpstudio's PlannerService both call.
// Shared by tpplan, tpstudio and the benchmark so that all of them plan the same way.
#include <atomic>
#include <map>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../import/catalog.h"
#include "pipeline.h"
#include "plan.h"

namespace tp {

/// A PlanRequest setting that Planner::plan chooses (PlanRequest::microBatch, zero).
inline constexpr int kAuto = -1;
/// What tpplan and tpstudio ask for when not told (--pipeline, --schedule): the planner chooses
/// the stages (1 where no pipeline is faster) and the schedule. PlanRequest itself defaults to no
/// pipeline, as plan files, projects and published runs without a pipeline were planned.
inline constexpr int kDefaultPipeline = kAuto;
inline constexpr const char* kDefaultSchedule = "auto";
/// ... and the stage boundaries (--stage-layers): balanced by the search.
inline constexpr const char* kDefaultStageLayers = "auto";

struct PlanRequest {
    std::string model; ///< built-in name or file
    ModelOptions modelOptions;
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::string mode = "train"; ///< train | infer
    std::string memoryLimit;    ///< "80GiB"; empty: the hardware's capacity; "none": no limit
    /// Samples per data-parallel replica per micro-batch (gradient accumulation): -1 (auto) lets
    /// Planner::plan choose among the divisors of the batch, 0 is the whole local batch at once.
    std::int64_t microBatch = kAuto;
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
    /// Pipeline sends split over the tensor-parallel group (--scatter-gather on|off;
    /// CostSettings::pipelineScatterGather; Megatron-LM's --no-scatter-gather-tensors-in-pipeline is off).
    bool pipelineScatterGather = true;
    /// ZeRO stage over the data-parallel axes (--zero): 0 none, 1 optimizer states (Megatron's
    /// distributed optimizer), 2 also gradients, 3 also parameters (FSDP); CostSettings::zeroStage.
    /// -1 (auto): Planner::plan chooses the stage.
    int zero = kAuto;
    /// What ZeRO shards over (--zero-shard): "all" the data-parallel axes, "node" only those
    /// inside a node, replicated across nodes (HSDP; CostSettings::zeroAcrossNodes), or "auto":
    /// Planner::plan tries both for stage 3 where the data-parallel axes cross nodes.
    std::string zeroShard = "auto";
    /// FSDP's reshard_after_forward at stage 3 (--reshard-after-forward): "on" frees each
    /// gathered weight after its forward, "off" holds it to its backward
    /// (CostSettings::reshardAfterForward), "auto": Planner::plan tries both.
    std::string reshardAfterForward = "auto";
    /// Model-state accounting (--grad-dtype, --optimizer-dtype): "bf16" gradients (2 B/param,
    /// the ZeRO paper's 16 B/param in all) or Megatron's "fp32" main gradients (4 B: 18 in all);
    /// "fp32" Adam states (master weight and two moments, 12 B) or "bf16" moments (8 B).
    std::string gradDtype = "bf16";
    std::string optimizerDtype = "fp32";
    /// The Linear layers' matmuls (--dtype): "bf16", or "fp8" as Transformer Engine runs them
    /// (CostSettings::fp8Matmuls; the hardware must have an fp8 peak).
    std::string matmulDtype = "bf16";
    /// Pipeline stages over the outermost mesh axis (--pipeline; core/plan/pipeline.h): 1 none,
    /// kAuto: Planner::plan chooses (1 where no pipeline is faster).
    int pipeline = 1;
    /// How each device runs its stages (--schedule): "1f1b", "interleaved:V", or "auto" (the
    /// planner tries 1F1B and every V that divides the layers per stage).
    std::string schedule = "1f1b";
    /// Which stage this request plans, on the stage's mesh and graph (set by Planner::plan on
    /// the requests it makes per stage); -1: the whole model (a pipeline is planned stage by
    /// stage and combined).
    int pipelineStage = -1;
    /// Where the stage boundaries fall (--stage-layers; parseStageLayers): "even" (evenSplit),
    /// "auto" (Planner::plan balances them: balanceStages) or "F,L" (the first and last stage's
    /// layers, the middle stages sharing the rest).
    std::string stageLayers = "even";
    /// Set by Planner::plan on stage requests: every stage's layers of the run (empty:
    /// evenSplit). The stage's own range of it is part of the model key.
    std::vector<int> stageSplit;
    /// Set by Planner::plan on stage requests that bound every schedule with at most this
    /// one's chunks: its bubble (the least of them) and 1F1B's in-flight activations (the fewest).
    bool pipelineBound = false;
    /// Set by Planner::plan on stage requests: the whole model, loaded for the stage mesh, and
    /// its fold, which preparePlan cuts the stage from instead of loading it again (internal;
    /// not part of the workspace key, which the stage fields already make distinct).
    std::shared_ptr<const LoadedModel> wholeModel;
    std::shared_ptr<const FoldedGraph> wholeFold;
    std::shared_ptr<const StageCutter> stageCutter; ///< over wholeModel's graph, for `pipeline` stages
    /// Set by Planner::plan on stage requests: a plan at or over this step is not wanted (the
    /// pipeline already has one as fast), so combinations whose floors reach it are not solved
    /// and searches stop there; when nothing is under it the result is SearchResult::bounded.
    double stopAbove = std::numeric_limits<double>::infinity();
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
/// The bytes per device a plan must fit in under memoryLimitOf's convention: 0 is the
/// hardware's capacity, a negative limit none (infinity).
double memoryLimitBytes(double limit, const Hardware& hardware);

/// Where a workspace of one pipeline stage sits in its pipeline (PlanRequest::pipelineStage).
struct PipelineStageInfo {
    int stage = -1; ///< -1: not a stage (the whole model)
    PipelineSchedule schedule;
    std::string layerLabel;      ///< the stack the stages split, e.g. "layers.*" (LayerStack)
    int firstLayer = 0;          ///< of the stack, 0-based
    int layers = 0;              ///< layers of the stack on this stage
    double receivedBytes = 0;    ///< per step, whole batch: what it receives from the stage before
    double sentBytes = 0;        ///< per step, whole batch: what it sends to the stage after
    std::vector<TensorId> receivedTensors, sentTensors; ///< in the stage's graph (StageGraph's)
    MeshAxis link;               ///< the full mesh's outermost axis, which the stages lie along
    std::vector<int> layersOfStage;             ///< every stage's layers of the stack (StageSplit)
    int period = 1;                             ///< of the stack, in blocks: boundaries fall between whole periods
    int layersPerPeriod = 1;                    ///< StageCutter's: the model's layers in a period
    int layersBefore = 0, layersAfter = 0;      ///< StageCutter's: the container's layers outside the stack
    std::vector<std::string> firstStageModules; ///< the first stage's modules outside the run (the embedding)
    std::vector<std::string> lastStageModules;  ///< the last stage's (the head and the loss)
};

/// Everything a plan was made from, kept alive together (the cost model refers to the rest).
struct PlanWorkspace {
    /// The model; in a planner's other combinations of it the graph is filled only once the
    /// workspace leaves the planner (PlannerResult), their cost models reading `graphOwner`'s.
    LoadedModel model;
    std::shared_ptr<const PlanWorkspace> graphOwner; ///< whose graph the cost model reads (kept alive), or null
    Hardware hardware; ///< with the request's link overrides applied
    Mesh mesh;
    std::unique_ptr<CostModel> costModel;
    FoldedGraph folded;
    double foldMs = 0;
    PlanContext context;
    PipelineStageInfo stage;
};

/// Loads the model, hardware (with the link overrides) and mesh, folds and builds the cost
/// model: the one workspace builder (plan files rebuild theirs through buildWorkspace too).
/// Throws InputError.
std::unique_ptr<PlanWorkspace> preparePlan(const PlanRequest& request);

/// The cost settings a request asks for; a setting left to the planner (kAuto) takes its
/// neutral value here, ZeRO 0 and the whole local batch, as one workspace has one of each
/// (Planner::plan is where auto chooses). Before the fold's reader groups and the model's
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
/// Makes `workspace` stage `stage` of `schedule` (its model the stage's graph cut from `whole`,
/// its PipelineStageInfo filled but `link`): what preparePlan does for a stage request, and
/// plan files for a pipelined plan. `split`: every stage's layers (empty: evenSplit); `shared`
/// (optional) cuts it, over `whole`'s graph. Throws InputError when the split does not fit the
/// run or the schedule's chunks do not divide a stage's layers.
void cutStage(PlanWorkspace& workspace, int stage, const PipelineSchedule& schedule, const LoadedModel& whole,
              const FoldedGraph& wholeFold, const std::vector<int>& split = {}, const StageCutter* shared = nullptr);
/// A stage's share of its pipeline in the cost settings (CostSettings::pipelineBubble and
/// pipelineInFlight); `bound`: 1F1B's activations, the fewest of any schedule.
void applyStageSettings(CostSettings& settings, const PipelineSchedule& schedule, int stage, bool bound = false);

/// A baseline assignment ("megatron", "megatron-sp", "dp") costed on the workspace and judged
/// against the memory limit (memoryLimitOf's convention), its blocks in the recompute mode
/// given (none for std::nullopt). Throws InputError for an unknown name.
SearchResult planBaseline(const PlanWorkspace& workspace, const std::string& name, double memoryLimit,
                          std::optional<Recompute> recompute = std::nullopt);

/// Whether the request leaves a setting to the planner (micro-batch, ZeRO stage, or a baseline's
/// recompute mode).
bool choosesSettings(const PlanRequest& request);

/// Runs the search (or the requested baseline) on a prepared workspace, with the settings the
/// workspace was built for (no choosing: that is Planner::plan). Throws InputError for
/// locks that cannot be honoured or an unknown baseline. `progress`, when given, counts the
/// search's memory prices and block tables as it goes (for another thread to show).
SearchResult runPlan(const PlanWorkspace& workspace, const PlanRequest& request, SearchProgress* progress = nullptr);

/// One combination of the settings Planner::plan chooses, and how it fared.
struct SettingsCandidate {
    int zero = 0;
    std::int64_t microBatch = 0;
    std::string recompute; ///< the recompute word it ran under (a baseline's auto tries each)
    bool hybrid = false;   ///< ZeRO shards inside a node only (HSDP)
    bool reshardAfterForward = true; ///< stage 3: gathered weights freed after forward (FSDP's default)
    enum class Outcome {
        Chosen,      ///< the plan returned
        Slower,      ///< solved (or evaluated): it fits but is slower than the chosen one
        Bounded,     ///< not solved: even without a memory limit it is no faster than the chosen one
        FitsNothing, ///< no plan of it fits the memory limit
        TooLarge,    ///< not tried: its least memory is over the limit, or a leaner combination (a
                     ///< smaller micro-batch at this ZeRO stage) already fits nothing
    } outcome = Outcome::Slower;
    double stepSeconds = 0; ///< its plan's step time (Bounded: the lower bound)
    double bytes = 0;       ///< its plan's memory per device (0 when not solved)
    bool searched = false;  ///< a search (or evaluation) ran for it in this plan; else a cached bound sufficed
};
/// "chosen", "slower", "bounded", "fits nothing", "too large".
const char* outcomeName(SettingsCandidate::Outcome outcome);
/// "ZeRO 3, micro-batch 2" ("micro-batch whole" for the whole local batch; "ZeRO 3 (HSDP, kept
/// gathered)" for hybrid sharding and parameters not resharded after forward; ", recompute
/// full" when the candidate chose a recompute word): the one text for a combination, CLI and GUI.
std::string settingsText(const SettingsCandidate& candidate);
/// The combination a cost model was built with (its recompute word left empty).
SettingsCandidate candidateOf(const CostSettings& settings);
/// The chosen candidate's and the fastest other that fits, as the CLI and the GUI show them:
/// "ZeRO 3, micro-batch 1 of 40 combinations; next best ZeRO 1, micro-batch 1: +195.0 ms,
/// +25.86 GiB". Empty without candidates.
std::string choiceSummary(const std::vector<SettingsCandidate>& candidates);

/// One stage of a pipelined plan: its own plan on the stage mesh, and what the pipeline adds.
struct PipelineStagePlan {
    int stage = 0;       ///< 0-based
    /// Stages [stage, stage + standsFor) run this plan: the middle stages after the second hold
    /// no more layers and fewer in-flight activations than it, so none of them is slower.
    int standsFor = 1;
    std::shared_ptr<const PlanWorkspace> workspace;
    SearchResult result; ///< its step with its share of the bubble (CostSettings::pipelineBubble)
    double microBatches = 1; ///< per step and pipeline
    double sendSeconds = 0;  ///< point-to-point sends and receives to its neighbours per step
    /// PlanRequest::compareBaselines on this stage's graph and mesh, by name, with the workspaces
    /// of the settings each chose (filled for every stage of the chosen pipeline, so that a view
    /// of any stage compares like with like).
    std::map<std::string, SearchResult> baselines;
    std::map<std::string, std::shared_ptr<const PlanWorkspace>> baselineWorkspaces;
    double stepSeconds() const { return result.breakdown.stepSeconds + sendSeconds; }
};

/// A pipelined plan (PlanRequest::pipeline > 1): the stages that differ, solved exactly each.
struct PipelinePlan {
    PipelineSchedule schedule;
    std::string stageMesh;       ///< e.g. "8" for --mesh 8x8 --pipeline 8
    std::int64_t microBatch = 0; ///< samples per replica per micro-batch (0: the whole local batch)
    double stepSeconds = 0;      ///< the slowest stage's
    int slowest = 0;             ///< index into stages
    std::vector<int> layersOfStage; ///< every stage's layers of the run the stages split
    std::vector<PipelineStagePlan> stages;
    bool complete = true; ///< every stage solved (a search that stopped early at a bar leaves some out)
    /// The bubble's share of the step: (p - 1) / V over (m + (p - 1) / V) micro-batch times.
    double bubbleFraction() const;
};

/// "8 stages of mesh 8, interleaved (6 chunks per device), micro-batch 2: step 10.667 s, bubble
/// 3.5%, slowest stage 8": the one text for a pipelined plan, CLI and GUI.
std::string pipelineSummary(const PipelinePlan& plan);

/// What Planner::plan returns: the plan and what the request asked to compare it with, all
/// costed by the same workspace.
struct PlannerResult {
    std::shared_ptr<const PlanWorkspace> workspace;
    bool newWorkspace = false;                     ///< the workspace was (re)built for this request
    double prepareMs = 0;                          ///< model load + fold + cost model, when rebuilt
    SearchResult result;                           ///< the search around the locks, or the baseline
    std::optional<SearchResult> unlocked;          ///< request.compareUnlocked and there are locks
    std::map<std::string, SearchResult> baselines; ///< request.compareBaselines, by name
    /// Where the request left settings to the planner: every combination considered for the
    /// plan, in the order tried (empty otherwise). The chosen values are the workspace's
    /// (workspace->costModel->settings()).
    std::vector<SettingsCandidate> candidates;
    /// The baselines' chosen workspaces (the settings each chose), by name; the plan's own is
    /// `workspace`.
    std::map<std::string, std::shared_ptr<const PlanWorkspace>> baselineWorkspaces;
    /// A pipelined request: every stage's plan; `workspace`, `result`, `baselines` and
    /// `baselineWorkspaces` are then the slowest stage's.
    std::optional<PipelinePlan> pipeline;
};

/// Plans a sequence of requests, rebuilding only what each request's changed fields need: the
/// workspace when workspaceKeyOf changes, and otherwise re-solving on the same PlannerSession
/// (whose class tables survive a new memory limit or lock). Baselines are costed once per
/// workspace. Not thread-safe: one caller at a time (tpstudio calls it from one worker).
///
/// Settings left to it (kAuto: the micro-batch, the ZeRO stage; a baseline's recompute "auto")
/// are chosen jointly with the strategies, exactly: every combination (ZeRO 0-3 x the divisors
/// of the batch) is a workspace of its own, searched exactly, and the fastest plan that fits
/// wins. Two facts of the cost model prune without changing the answer: a combination's plan
/// without memory limit and locks is a lower bound on it under any limit and locks (so it is
/// solved only when that bound beats the best so far), and memory grows with the micro-batch
/// for every plan (so once a micro-batch fits nothing, larger ones at that stage are skipped).
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
    class BestPipeline;
    PlannerResult planPipeline(const PlanRequest& request, const std::atomic<bool>* cancel, SearchProgress* progress);
    /// Every pipeline of `stages` stages over `schedules` and `micro`, best first by floors,
    /// into `found` (one worker of planPipeline; each stage count has its own stage planners).
    void searchPipelines(const PlanRequest& staged, int stages, const std::vector<std::string>& schedules,
                         const std::vector<std::int64_t>& micro, bool choosing, BestPipeline& found,
                         const std::atomic<bool>* cancel, SearchProgress* progress);
    /// What planStages makes: the pipeline itself; a floor (its stages costed with this
    /// schedule's bubble, 1F1B's activations and no sends: under every schedule of at most this
    /// many chunks), its boundaries balanced in single layers where the request's are; or a floor
    /// of the even split with every stage solved (a stage at the bar does not stop the others).
    enum class StageMode { Pipeline, Floor, EvenFloor };
    /// One pipeline (stages, schedule, micro-batch): each stage that differs planned on its own
    /// planner. Stops once a stage is at or over `stopAbove` (the plan is then not `complete`),
    /// but for EvenFloor. `seed`: a floor's stages already solved (an EvenFloor's), not solved again.
    PipelinePlan planStages(const PlanRequest& request, int stages, const std::string& schedule, std::int64_t microBatch,
                            StageMode mode, double stopAbove, const std::atomic<bool>* cancel, SearchProgress* progress,
                            const PipelinePlan* seed = nullptr);
    /// The planner of one stage request (created on first use; safe from the search's workers).
    Planner& stagePlanner(const PlanRequest& stageRequest);
    struct State;
    std::unique_ptr<State> state_;
};

} // namespace tp
