#pragma once
// Pipeline parallelism (docs/ARCHITECTURE.md, "Pipelines"): P stages over the outermost mesh
// factor (Megatron's rank order: pipeline outermost, then data, then tensor), each stage a
// contiguous range of the model's longest run of identical blocks (the first stage also holds
// what comes before the run, the last what comes after), run by a 1F1B or interleaved schedule.
// What a schedule costs enters each stage's own cost model (CostSettings::pipelineBubble,
// pipelineInFlight), so every stage is searched exactly by the one search; Planner::plan
// combines the stages.
#include <string>
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

/// The run stages split: the run of more than one instance with the most ops; null when none.
const Run* stagedRun(const FoldedGraph& folded);

/// Splits the run into `schedule.stages` contiguous ranges: evenly when they divide it, else
/// the extra instances go to the middle stages from the second on (never the first stage, which
/// also holds the embedding and the most activations). Throws InputError when there is no
/// repeated block, more stages than instances, or V does not divide an even stage's instances.
StageSplit splitIntoStages(const FoldedGraph& folded, const PipelineSchedule& schedule);

/// One stage's graph: its instances of the run, with everything before the run on the first
/// stage and everything after it on the last. Tensors it reads from other stages become its
/// inputs (listed first, so that the batch is read from them) and tensors other stages read from
/// it its outputs.
struct StageGraph {
    Graph graph;
    double receivedBytes = 0; ///< of the tensors it receives from other stages, for the whole batch
};

/// Cuts the stages of one split from the whole graph: the op-to-stage map, topological order and
/// readers are found once for every stage cut from it. The graph must outlive it.
class StageCutter {
public:
    StageCutter(const Graph& graph, const FoldedGraph& folded, StageSplit split);
    const StageSplit& split() const { return split_; }
    int stages() const { return static_cast<int>(split_.countOfStage.size()); }
    StageGraph cut(int stage) const;
    /// What stage `stage` receives from the others per step, whole batch (0 for the first).
    double receivedBytes(int stage) const;
    /// The top-level modules (op names up to their first '/') of stage `stage`'s ops outside
    /// the split run, in graph order: the embedding on the first stage, the head on the last.
    std::vector<std::string> modulesOutsideRun(int stage) const;

private:
    const Graph& graph_;
    StageSplit split_;
    std::vector<int> stageOfOp_;
    std::vector<OpId> order_, producers_;
    std::vector<std::vector<OpId>> consumers_;
};

/// StageCutter(graph, folded, split).cut(stage), for one stage.
StageGraph stageGraph(const Graph& graph, const FoldedGraph& folded, const StageSplit& split, int stage);

} // namespace tp
