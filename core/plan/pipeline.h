#pragma once
// Pipeline parallelism (docs/ARCHITECTURE.md, "Pipelines"): P stages over the outermost mesh
// factor (Megatron's rank order: pipeline outermost, then data, then tensor), each stage a
// contiguous range of the model's longest run of identical blocks (the first stage also holds
// what comes before the run, the last what comes after), run by a 1F1B or interleaved schedule.
// What a schedule costs enters each stage's own cost model (CostSettings::pipelineBubble,
// pipelineInFlight), so every stage is searched exactly by the one search; Planner::plan
// combines the stages.
#include <functional>
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

/// Where the stages fall on the graph: the run they split (the run of the largest block class
/// with the most instances) and each stage's instances of it.
struct StageSplit {
    int classId = -1;
    int runFirstInstance = 0; ///< the run's first instance, an index into the class's instances
    int runLength = 0;
    std::vector<int> firstOfStage; ///< per stage: its first instance, relative to the run
    std::vector<int> countOfStage; ///< per stage: how many instances of the run it holds
    std::string label;            ///< the class's label, e.g. "layers.*"
};

/// The run stages split: the run of more than one instance with the most ops; null when none,
/// or when its class also lies in other runs (a stack of several layer kinds).
const Run* stagedRun(const FoldedGraph& folded);
/// Why stagedRun is null, for the one-line error of --pipeline.
std::string noStagedRunReason(const FoldedGraph& folded);

/// The even split of `layers` over `stages`: equal shares, the extra layers to the middle
/// stages from the second on (never the first stage, which also holds the embedding and the
/// most activations; the second then holds the most of the middle stages, which
/// Planner::planStages relies on).
std::vector<int> evenSplit(int layers, int stages);
/// `first` layers on the first stage and `last` on the last, the middle stages sharing the rest
/// as evenSplit shares (Megatron-LM's --decoder-first/last-pipeline-num-layers). Throws
/// InputError naming --stage-layers when a stage would get no layer.
std::vector<int> splitWithEnds(int layers, int stages, int first, int last);
/// "auto" (Planner::plan balances the stages), "even" (evenSplit) or "F,L" (splitWithEnds):
/// the first and last stage's layers, 0 for evenSplit's. Throws InputError naming --stage-layers.
std::pair<int, int> parseStageLayers(const std::string& word);

/// The --stage-layers word that gives `split` back: "even" for evenSplit's, else "F,L".
std::string stageLayersWord(const std::vector<int>& split);

/// Splits the run into `schedule.stages` contiguous ranges of `counts` instances each (empty:
/// evenSplit). Throws InputError when there is no repeated block, more stages than instances,
/// counts that do not add up to the run, or chunks (V) that do not divide a stage's layers.
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

/// One stage's graph: its instances of the run, with everything before the run on the first
/// stage and everything after it on the last. Tensors it reads from other stages become its
/// inputs (listed first, so that the batch is read from them) and tensors other stages read from
/// it its outputs.
struct StageGraph {
    Graph graph;
    double receivedBytes = 0; ///< of the tensors it receives from other stages, for the whole batch
    double sentBytes = 0;     ///< of its tensors that later stages read, for the whole batch
};

/// Cuts stages from the whole graph: each op's place (its instance of the staged run, or
/// before or after the run) and the graph's order and readers are found once for every stage
/// of every split cut from it. The graph must outlive it.
class StageCutter {
public:
    /// Throws InputError when the fold has no run of repeated blocks.
    StageCutter(const Graph& graph, const FoldedGraph& folded);
    int runLength() const { return runLength_; }
    const std::string& label() const { return label_; }
    /// Stage `stage` of `stages`: instances [first, first + count) of the run, with what comes
    /// before the run on the first stage and what comes after it on the last.
    StageGraph cut(int stage, int stages, int first, int count) const;
    /// The top-level modules (op names up to their first '/') outside the run before it (the
    /// embedding, on the first stage) or after it (the head, on the last), in graph order.
    std::vector<std::string> modulesOutsideRun(bool beforeRun) const;

private:
    static constexpr int kBeforeRun = -1, kAfterRun = -2;
    const Graph& graph_;
    int runLength_ = 0;
    std::string label_;
    std::vector<int> placeOfOp_; ///< its instance of the run, or kBeforeRun / kAfterRun
    std::vector<int> rankOfOp_;  ///< its place in topological order
    /// Ops by place, in topological order: [0] before the run, [1] after it, [2 + i] instance i.
    std::vector<std::vector<OpId>> opsOfPlace_;
    std::vector<OpId> order_, producers_;
    std::vector<std::vector<OpId>> consumers_;
};

} // namespace tp
