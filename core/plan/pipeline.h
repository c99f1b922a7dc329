#pragma once
// Pipeline parallelism (docs/ARCHITECTURE.md, "Pipelines"): P stages over the outermost mesh
// factor (Megatron's rank order: pipeline outermost, then data, then tensor), each stage a
// contiguous range of whole periods of the model's layer stack (LayerStack: a run of identical
// blocks, or a repeating pattern of layer kinds; the first stage also holds what comes before
// the stack, the last what comes after), run by a 1F1B or interleaved schedule.
// What a schedule costs enters each stage's own cost model (CostSettings::pipelineBubble,
// pipelineInFlight), so every stage is searched exactly by the one search; Planner::plan
// combines the stages.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../fold/fold.h"
#include "../graph/graph.h"
#include "../mesh/mesh.h"

namespace tp {

/// How many stages and how a device runs its share: `virtualStages` chunks per device
/// (Megatron's interleaved schedule; 1 is plain 1F1B).
struct PipelineSchedule {
    int stages = 1;
    int virtualStages = 1;
};

/// "1f1b" or "interleaved:V" (V >= 2) for `stages` stages. Throws InputError naming --schedule
/// or --pipeline for a bad value.
PipelineSchedule parseSchedule(int stages, const std::string& schedule);
/// "1F1B" or "interleaved, 3 chunks per device".
std::string scheduleText(const PipelineSchedule& schedule);
/// The --schedule word parseSchedule reads back: "1f1b" or "interleaved:V".
std::string scheduleWord(const PipelineSchedule& schedule);

/// The bubble in micro-batches of the slowest stage: (p - 1) / V (Narayanan et al. 2021, §2.2:
/// a step of m micro-batches takes (m + (p - 1) / V) micro-batch times).
double bubbleMicroBatches(const PipelineSchedule& schedule);
/// Micro-batches whose activations stage `stage` (0-based) holds at once under 1F1B: p - stage
/// (the first stage p); interleaved adds (p - 1) / V (Korthikanti et al. 2022, §4.2.3: the
/// first stage holds p (1 + (p - 1) / (p V)) micro-batches' worth).
double inFlightMicroBatches(const PipelineSchedule& schedule, int stage);

/// The mesh one stage runs on: the outermost axis divided by the number of stages (dropped when
/// that leaves 1), the others as they are: "8x8" with 8 stages is "8", "192x8" is "24x8".
/// Throws InputError when the stages do not divide the outermost axis.
std::string stageMeshText(const Mesh& mesh, int stages);

/// The layers stages split: the model's longest stretch of consecutive top-level blocks that
/// repeats with a period of `period` blocks, whole periods only. A period of 1 is one run of
/// identical layers (GPT-3's 96); Gemma-3's five local layers then a global one make a period
/// of 6. Stage boundaries fall between periods, so that middle stages of equal length are the
/// same graph (the second stage stands for them) and the folded answer holds inside each.
struct LayerStack {
    std::vector<std::pair<int, int>> layers; ///< (class, instance) of each layer in order; a multiple of `period`
    int period = 1;
    std::string label;    ///< e.g. "layers.*" (the period's labels joined by '+' where they differ)
    int layersBefore = 0; ///< top-level blocks of the stack's labels before it (DeepSeek-V3's dense layers)
    int layersAfter = 0;  ///< and after it (the layers of a last, partial period: Gemma-3 27B's 61st and 62nd)
};

/// The stack stages split: of the stretches that repeat with some period (at least two periods,
/// a period of 2 or more holding blocks of more than one class), the one of the most ops in its
/// whole periods, then the shortest period; none when no block repeats.
std::optional<LayerStack> layerStack(const FoldedGraph& folded);

/// Every stage's layers of the model's layer container, which Megatron-LM's arguments and the
/// PyTorch script count: each stage's periods of `split` (in blocks of the stack) times the
/// layers in a period (a layer the fold cut in two blocks is one), with the container's layers
/// before the stack on the first stage and after it on the last.
std::vector<int> containerLayersOfStage(const std::vector<int>& split, int period, int layersPerPeriod, int layersBefore,
                                        int layersAfter);

/// Where the stages fall on the graph: the stack they split and each stage's layers of it.
struct StageSplit {
    int stackLayers = 0;
    int period = 1;
    std::vector<int> firstOfStage; ///< per stage: its first layer, relative to the stack
    std::vector<int> countOfStage; ///< per stage: how many layers of the stack it holds
    std::string label;             ///< the stack's label, e.g. "layers.*"
};

/// The even split of `layers` over `stages`: equal shares, the extra layers to the middle
/// stages from the second on (never the first stage, which also holds the embedding and the
/// most activations; the second then holds the most of the middle stages, which
/// Planner::planStages relies on). With a `period`, in whole periods (`layers` a multiple of it).
std::vector<int> evenSplit(int layers, int stages, int period = 1);
/// `first` layers on the first stage and `last` on the last, the middle stages sharing the rest
/// as evenSplit shares (Megatron-LM's --decoder-first/last-pipeline-num-layers). Throws
/// InputError naming --stage-layers when a stage would get no layer, or the ends are not whole
/// periods.
std::vector<int> splitWithEnds(int layers, int stages, int first, int last, int period = 1);
/// "auto" (Planner::plan balances the stages), "even" (evenSplit) or "F,L" (splitWithEnds):
/// the first and last stage's layers, 0 for evenSplit's. Throws InputError naming --stage-layers.
std::pair<int, int> parseStageLayers(const std::string& word);

/// The --stage-layers word that gives `split` back: "even" for evenSplit's, else "F,L".
std::string stageLayersWord(const std::vector<int>& split, int period = 1);

/// Splits the stack into `schedule.stages` contiguous ranges of `counts` layers each (empty:
/// evenSplit). Throws InputError when there is no repeated block, more stages than periods,
/// counts that do not add up to the stack or are not whole periods, or chunks (V) that do not
/// divide a stage's periods.
StageSplit splitIntoStages(const FoldedGraph& folded, const PipelineSchedule& schedule, const std::vector<int>& counts = {});

/// What one stage of a split costs in the pipeline's step, by its role: 0 the first stage, 1
/// the second (it stands for the middle stages: it holds the most of their layers and
/// in-flight activations), 2 the last. `bar`: a stage at or over it may return infinity
/// instead of its step (the search stopped there). Infinity also when it does not fit. Must
/// not decrease with `count` (a stage with one more layer holds every plan of the smaller one).
using StageValue = std::function<double(int role, int count, double bar)>;

/// The split of `layers` over `schedule.stages` stages whose slowest stage is fastest, among
/// `start` and the splits Megatron-LM runs (the middle stages equal; with V chunks per device
/// every stage's layers a multiple of V), exactly when `value` does not decrease with the
/// count: each round asks for a split whose every stage is strictly faster than the best so far
/// (the most layers each role can take under that bar, found by scanning its monotone value),
/// so it ends at the optimum after a few evaluations. Ties keep `start`, else the split of the
/// most layers per middle stage, then the most even ends. Stages at or over `bar` are not
/// wanted; when every split reaches it, `start` comes back.
std::vector<int> balanceStages(int layers, const PipelineSchedule& schedule, const std::vector<int>& start,
                               const StageValue& value, double bar);

/// One stage's graph: its layers of the stack, with everything before the stack on the first
/// stage and everything after it on the last. Tensors it reads from other stages become its
/// inputs (listed first, so that the batch is read from them) and tensors other stages read from
/// it its outputs.
struct StageGraph {
    Graph graph;
    double receivedBytes = 0; ///< of the tensors it receives from other stages, for the whole batch
    double sentBytes = 0;     ///< of its tensors that later stages read, for the whole batch
    std::vector<TensorId> receivedTensors, sentTensors; ///< those tensors, in this graph
};

/// Cuts stages from the whole graph: each op's place (its layer of the stack, or before or after
/// the stack) and the graph's order and readers are found once for every stage
/// of every split cut from it. The graph must outlive it.
class StageCutter {
public:
    /// Throws InputError when the fold has no run of repeated blocks.
    StageCutter(const Graph& graph, const FoldedGraph& folded);
    int layers() const { return layers_; }
    int period() const { return period_; }
    /// The model's layers in a period of the stack, and its container's layers before and after
    /// the stack, from the ops' names ("layers.12/..." is layer 12 of "layers.*"); where the
    /// names give no index, LayerStack's counts of blocks.
    int layersPerPeriod() const { return layersPerPeriod_; }
    int layersBefore() const { return layersBefore_; }
    int layersAfter() const { return layersAfter_; }
    const std::string& label() const { return label_; }
    /// Stage `stage` of `stages`: layers [first, first + count) of the stack, with what comes
    /// before the stack on the first stage and what comes after it on the last.
    StageGraph cut(int stage, int stages, int first, int count) const;
    /// The top-level modules (op names up to their first '/') outside the run before it (the
    /// embedding, on the first stage) or after it (the head, on the last), in graph order.
    std::vector<std::string> modulesOutsideRun(bool beforeRun) const;

private:
    static constexpr int kBeforeRun = -1, kAfterRun = -2;
    const Graph& graph_;
    int layers_ = 0, period_ = 1, layersPerPeriod_ = 1, layersBefore_ = 0, layersAfter_ = 0;
    std::string label_;
    void countContainerLayers(const LayerStack& stack);
    std::vector<int> placeOfOp_; ///< its layer of the stack, or kBeforeRun / kAfterRun
    std::vector<int> rankOfOp_;  ///< its place in topological order
    /// Ops by place, in topological order: [0] before the stack, [1] after it, [2 + i] layer i.
    std::vector<std::vector<OpId>> opsOfPlace_;
    std::vector<OpId> order_, producers_;
    std::vector<std::vector<OpId>> consumers_;
};

} // namespace tp
