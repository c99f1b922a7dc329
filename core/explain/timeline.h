#pragma once
// One training step on a time axis, for the timeline view (issue 21): the step's critical path
// (every op's forward in graph order, then its backward in reverse, then the optimizer step,
// with the communication that stays exposed where it stalls them), and each mesh axis's
// collectives on a lane of their own, hidden parts under the compute they overlap.
//
// The cost model sums a step op by op (CostModel::evaluate); the timeline lays out exactly
// those terms, so its critical path ends at the breakdown's step time and its exposed
// communication adds up to the breakdown's (tests/tst_timeline.cpp). A segment covers all the
// step's micro-batches of its op: the figures are per step, as the breakdown's.
#include <string>
#include <vector>

#include "../cost/cost_model.h"
#include "../plan/pipeline.h"
#include "../plan/planner.h"
#include "../search/search.h"

namespace tp::explain {

struct TimelineSegment {
    enum class Kind { Forward, Backward, Optimizer, Communication, Idle };
    Kind kind = Kind::Forward;
    double start = 0;   ///< seconds from the start of the step
    double seconds = 0; ///< how long it runs
    OpId op = -1;       ///< the op it belongs to (-1: the optimizer step of all ops)
    // Communication only:
    double exposedSeconds = 0; ///< of `seconds`: what the step waits for (the rest overlaps compute)
    CollectiveKind collective = CollectiveKind::AllReduce;
    Phase phase = Phase::Forward;
    int axis = -1;  ///< mesh axis; -1 on the critical path, where one segment may sum several
    double bytes = 0; ///< per device
    bool recomputed = false; ///< a forward collective run again in the backward (full recompute)
    // A pipeline schedule's forward or backward of one micro-batch (op -1):
    int microBatch = -1; ///< 0-based
    int chunk = -1;      ///< the model chunk (virtual stage of the device) of an interleaved schedule, 0-based
    double end() const { return start + seconds; }
};

struct TimelineLane {
    std::string name; ///< "step" (the critical path) or "axis x (8, NVLink)"
    int axis = -1;    ///< -1 for the critical path
    std::vector<TimelineSegment> segments; ///< by start time
};

struct Timeline {
    /// A pipeline's schedule (buildPipelineTimeline: a lane per stage, no phases), else one step.
    bool schedule = false;
    double stepSeconds = 0;         ///< where the critical path ends (a schedule: its last backward)
    double forwardEndSeconds = 0;   ///< the backward starts here
    double backwardEndSeconds = 0;  ///< the optimizer step starts here
    std::vector<TimelineLane> lanes; ///< lanes[0]: the critical path; then one per mesh axis that communicates
    /// The exposed communication of the axis lanes, summed (equals the breakdown's).
    double exposedCommSeconds() const;
};

/// Lays out the plan (its strategies and recompute modes, as `model` costs them) as one step.
Timeline buildTimeline(const CostModel& model, const SearchResult& plan);

/// One pipeline stage's work for one micro-batch (all its model chunks together).
struct StageTimes {
    double forward = 0, backward = 0;
    double send = 0; ///< to or from a neighbouring stage, per micro-batch and chunk
};
/// The schedule of a step as Megatron-LM runs it (1F1B; interleaved when V > 1 and the stages
/// divide the micro-batches, else 1F1B on the device's whole share), simulated op by op: a
/// lane per stage with every micro-batch's forward and backward (per chunk) and the idle time
/// between them (Kind::Idle: the bubble). With equal stages and no sends it ends at
/// (m + (p - 1) / V) (f + b) (Narayanan et al. 2021, §2.2; tests/tst_timeline.cpp).
/// Throws InputError for fewer than one micro-batch or a stage count that `stages` does not match.
Timeline buildPipelineTimeline(const PipelineSchedule& schedule, int microBatches, const std::vector<StageTimes>& stages);
/// The schedule of a pipelined plan: each stage's forward and the rest of its step before the
/// optimizer, per micro-batch (the plan spreads the bubble over them: pipelinedFactor takes it
/// out again), and its sends per micro-batch and chunk.
Timeline buildPipelineTimeline(const PipelinePlan& plan);

} // namespace tp::explain
