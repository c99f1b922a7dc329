#include "timeline.h"

#include <algorithm>
#include <map>

#include "../util/error.h"

namespace tp::explain {

namespace {

using Kind = TimelineSegment::Kind;

/// Collectives that start together (one op's forward gathers, one edge's backward dual, ...)
/// and the part of them the step waits for, shared out in proportion to their times.
struct CallGroup {
    std::vector<const CollectiveCall*> calls;
    double exposed = 0;
    bool recomputed = false;

    double seconds() const
    {
        double sum = 0;
        for (const auto* c : calls) sum += c->seconds;
        return sum;
    }
};

class Builder {
public:
    Builder(const CostModel& model, const SearchResult& plan) : model_(model), plan_(plan)
    {
        out_.lanes.push_back({"step", -1, {}});
        laneOfAxis_.assign(model.mesh().axes.size(), -1);
        laneEnd_.assign(model.mesh().axes.size(), 0.0);
    }

    Timeline build()
    {
        const auto& ops = model_.graph().ops;
        charges_.reserve(ops.size());
        for (const auto& op : ops) charges_.push_back(model_.chargeOf(op.id, strategyOf(op.id), recomputeOf(op.id), plan_.strategyOfOp));
        for (const auto& op : ops) forwardOf(op.id);
        out_.forwardEndSeconds = now_;
        for (auto it = ops.rbegin(); it != ops.rend(); ++it) backwardOf(it->id);
        out_.backwardEndSeconds = now_;
        double optimizer = 0;
        for (const auto& c : charges_) optimizer += c.node->optimizerSeconds;
        if (optimizer > 0) critical({Kind::Optimizer, now_, optimizer, -1});
        out_.stepSeconds = now_;
        for (auto& lane : out_.lanes)
            std::stable_sort(lane.segments.begin(), lane.segments.end(),
                             [](const TimelineSegment& a, const TimelineSegment& b) { return a.start < b.start; });
        return std::move(out_);
    }

private:
    int strategyOf(OpId op) const { return plan_.strategyOfOp.at(static_cast<size_t>(op)); }
    Recompute recomputeOf(OpId op) const
    {
        return plan_.recomputeOfOp.empty() ? Recompute::None : plan_.recomputeOfOp[static_cast<size_t>(op)];
    }
    const CostModel::Charge& chargeOf(OpId op) const { return charges_[static_cast<size_t>(op)]; }

    void critical(TimelineSegment s)
    {
        if (!(s.seconds > 0)) return;
        s.start = now_;
        now_ += s.seconds;
        out_.lanes[0].segments.push_back(s);
    }

    /// The group's calls on their axes' lanes from `anchor` (each axis runs one collective at a
    /// time), and what the step waits for on the critical path.
    void communicate(const CallGroup& group, OpId op, double anchor)
    {
        const double total = group.seconds();
        if (!(total > 0)) return;
        const double share = group.exposed / total;
        for (const auto* call : group.calls) {
            TimelineSegment s{Kind::Communication, 0, call->seconds, op};
            s.exposedSeconds = call->seconds * share;
            s.collective = call->kind;
            s.phase = call->phase;
            s.axis = call->axis;
            s.bytes = call->bytes;
            s.recomputed = group.recomputed;
            double& end = laneEnd_[static_cast<size_t>(call->axis)];
            s.start = std::max(anchor, end);
            end = s.end();
            laneOf(call->axis).segments.push_back(s);
        }
        TimelineSegment stall{Kind::Communication, 0, group.exposed, op};
        stall.exposedSeconds = group.exposed;
        stall.collective = group.calls.front()->kind;
        stall.phase = group.calls.front()->phase;
        stall.recomputed = group.recomputed;
        for (const auto* call : group.calls) stall.bytes += call->bytes;
        critical(stall);
    }

    TimelineLane& laneOf(int axis)
    {
        int& index = laneOfAxis_[static_cast<size_t>(axis)];
        if (index < 0) {
            const MeshAxis& a = model_.mesh().axes[static_cast<size_t>(axis)];
            index = static_cast<int>(out_.lanes.size());
            out_.lanes.push_back({"axis " + a.name + " (" + std::to_string(a.size) + ")", axis, {}});
        }
        return out_.lanes[static_cast<size_t>(index)];
    }

    /// An op's own collectives (weights: gradient reductions, FSDP's gathers) of the phases asked.
    static CallGroup ownCalls(const OpCost& node, bool forward)
    {
        CallGroup g;
        for (const auto& call : node.collectives)
            if ((call.phase == Phase::Forward) == forward) g.calls.push_back(&call);
        return g;
    }

    // Forward: the edges' forward reshardings into the op, its prefetched gathers, its compute.
    void forwardOf(OpId op)
    {
        const auto& c = chargeOf(op);
        for (const auto& [producer, e] : c.edges) {
            CallGroup g;
            for (const auto& call : e.collectives)
                if (call.phase == Phase::Forward) g.calls.push_back(&call);
            g.exposed = e.exposedForwardSeconds;
            communicate(g, op, now_);
        }
        CallGroup gathers = ownCalls(*c.node, true);
        gathers.exposed = gathers.seconds() - c.node->hiddenForwardCommSeconds;
        const double start = now_;
        communicate(gathers, op, start);
        critical({Kind::Forward, 0, c.node->forwardSeconds, op});
    }

    // Backward: the op's backward compute (with any recomputed forward and FSDP's buffer
    // copies), its own collectives hidden under it as far as they are, then the edges' duals
    // (and, under full recompute, their forward collectives once more).
    void backwardOf(OpId op)
    {
        const auto& c = chargeOf(op);
        const OpCost& node = *c.node;
        const double start = now_;
        critical({Kind::Backward, 0, node.computeSeconds - node.forwardSeconds - node.optimizerSeconds, op});
        CallGroup own = ownCalls(node, false);
        const double forwardGathers = ownCalls(node, true).seconds();
        own.exposed = node.commSeconds - node.hiddenCommSeconds - (forwardGathers - node.hiddenForwardCommSeconds);
        communicate(own, op, start);
        for (const auto& [producer, e] : c.edges) {
            if (c.recomputesForward) {
                CallGroup again;
                for (const auto& call : e.collectives)
                    if (call.phase == Phase::Forward) again.calls.push_back(&call);
                again.exposed = e.exposedForwardSeconds;
                again.recomputed = true;
                communicate(again, op, now_);
            }
            CallGroup dual;
            for (const auto& call : e.collectives)
                if (call.phase != Phase::Forward) dual.calls.push_back(&call);
            dual.exposed = e.exposedSeconds - e.exposedForwardSeconds;
            communicate(dual, op, now_);
        }
    }

    const CostModel& model_;
    const SearchResult& plan_;
    std::vector<CostModel::Charge> charges_;
    Timeline out_;
    std::vector<int> laneOfAxis_;
    std::vector<double> laneEnd_;
    double now_ = 0;
};

} // namespace

double Timeline::exposedCommSeconds() const
{
    double sum = 0;
    for (const auto& lane : lanes)
        if (lane.axis >= 0)
            for (const auto& s : lane.segments) sum += s.exposedSeconds;
    return sum;
}

Timeline buildTimeline(const CostModel& model, const SearchResult& plan)
{
    if (plan.strategyOfOp.size() != model.graph().ops.size())
        throw InputError("timeline: the plan has " + std::to_string(plan.strategyOfOp.size()) + " strategies for " +
                         std::to_string(model.graph().ops.size()) + " ops");
    return Builder(model, plan).build();
}

} // namespace tp::explain
