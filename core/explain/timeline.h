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
#include "../search/search.h"

namespace tp::explain {

struct TimelineSegment {
    enum class Kind { Forward, Backward, Optimizer, Communication };
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
    double end() const { return start + seconds; }
};

struct TimelineLane {
    std::string name; ///< "step" (the critical path) or "axis x (8, NVLink)"
    int axis = -1;    ///< -1 for the critical path
    std::vector<TimelineSegment> segments; ///< by start time
};

struct Timeline {
    double stepSeconds = 0;         ///< where the critical path ends
    double forwardEndSeconds = 0;   ///< the backward starts here
    double backwardEndSeconds = 0;  ///< the optimizer step starts here
    std::vector<TimelineLane> lanes; ///< lanes[0]: the critical path; then one per mesh axis that communicates
    /// The exposed communication of the axis lanes, summed (equals the breakdown's).
    double exposedCommSeconds() const;
};

/// Lays out the plan (its strategies and recompute modes, as `model` costs them) as one step.
Timeline buildTimeline(const CostModel& model, const SearchResult& plan);

} // namespace tp::explain
