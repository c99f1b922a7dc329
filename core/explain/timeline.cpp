#include "timeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

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

/// One forward or backward of one micro-batch on one chunk of one device.
struct Task {
    bool forward = true;
    int microBatch = 0, chunk = 0;
};

/// Megatron-LM's order of one device's tasks (schedules.py, forward_backward_pipelining_with_
/// interleaving; 1F1B when V = 1): warm-up forwards, then one forward and one backward in
/// turn, then the remaining backwards. Virtual micro-batch k runs chunk (k mod pV) / p
/// (backwards in reverse) on micro-batch (k / pV) p + k mod p.
std::vector<Task> deviceOrder(int stage, int stages, int chunks, int microBatches)
{
    const int total = microBatches * chunks;
    const int warmup = std::min(total, chunks == 1 ? stages - stage - 1 : (stages - stage - 1) * 2 + (chunks - 1) * stages);
    auto task = [&](int k, bool forward) {
        const int group = k % (stages * chunks);
        int chunk = group / stages;
        if (!forward) chunk = chunks - 1 - chunk;
        return Task{forward, (k / (stages * chunks)) * stages + group % stages, chunk};
    };
    std::vector<Task> order;
    int f = 0, b = 0;
    for (; f < warmup; ++f) order.push_back(task(f, true));
    for (; f < total; ++f, ++b) {
        order.push_back(task(f, true));
        order.push_back(task(b, false));
    }
    for (; b < total; ++b) order.push_back(task(b, false));
    return order;
}

} // namespace

Timeline buildPipelineTimeline(const PipelineSchedule& schedule, int microBatches, const std::vector<StageTimes>& stages)
{
    const int p = schedule.stages;
    if (microBatches < 1) throw InputError("pipeline timeline: needs at least one micro-batch");
    if (p < 1 || static_cast<int>(stages.size()) != p)
        throw InputError("pipeline timeline: " + std::to_string(stages.size()) + " stage times for " + std::to_string(p) + " stages");
    // Interleaving needs the stages to divide the micro-batches (as Megatron-LM asks, and as the
    // cost model charges 1F1B's bubble otherwise: pipelinedFactor).
    const int v = schedule.virtualStages > 1 && microBatches % p == 0 ? schedule.virtualStages : 1;
    // done[virtual stage][micro-batch]: when its forward / backward ended (-1: not yet).
    const int virtualStages = p * v;
    std::vector<std::vector<double>> forwardDone(virtualStages, std::vector<double>(microBatches, -1.0)),
        backwardDone = forwardDone;
    std::vector<std::vector<Task>> orders;
    for (int s = 0; s < p; ++s) orders.push_back(deviceOrder(s, p, v, microBatches));
    std::vector<size_t> next(p, 0);
    std::vector<double> free(p, 0.0);
    Timeline out;
    out.schedule = true;
    for (int s = 0; s < p; ++s) out.lanes.push_back({"stage " + std::to_string(s + 1), -1, {}});
    // List scheduling: each device runs its next task once what it needs has arrived.
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < p; ++s) {
            while (next[s] < orders[s].size()) {
                const Task& t = orders[s][next[s]];
                const int vs = t.chunk * p + s;
                const auto& times = stages[static_cast<size_t>(s)];
                double ready = free[s];
                if (t.forward && vs > 0) {
                    const double before = forwardDone[vs - 1][t.microBatch];
                    if (before < 0) break;
                    ready = std::max(ready, before + times.send);
                }
                if (!t.forward) {
                    const double own = forwardDone[vs][t.microBatch];
                    const double after = vs + 1 < virtualStages ? backwardDone[vs + 1][t.microBatch] : own;
                    if (own < 0 || after < 0) break;
                    ready = std::max(ready, after + (vs + 1 < virtualStages ? times.send : 0.0));
                }
                TimelineSegment seg{t.forward ? Kind::Forward : Kind::Backward, ready, (t.forward ? times.forward : times.backward) / v};
                seg.microBatch = t.microBatch;
                seg.chunk = v > 1 ? t.chunk : -1;
                out.lanes[static_cast<size_t>(s)].segments.push_back(seg);
                free[s] = seg.end();
                (t.forward ? forwardDone : backwardDone)[vs][t.microBatch] = seg.end();
                ++next[s];
                progress = true;
            }
        }
    }
    for (int s = 0; s < p; ++s)
        if (next[s] < orders[s].size()) throw std::logic_error("pipeline timeline: the schedule deadlocked");
    for (double f : free) out.stepSeconds = std::max(out.stepSeconds, f);
    out.forwardEndSeconds = out.backwardEndSeconds = out.stepSeconds;
    // The gaps are the bubble (and waiting for sends).
    for (auto& lane : out.lanes) {
        std::vector<TimelineSegment> idle;
        double at = 0;
        for (const auto& seg : lane.segments) {
            if (seg.start > at + 1e-15) idle.push_back({Kind::Idle, at, seg.start - at});
            at = seg.end();
        }
        if (out.stepSeconds > at + 1e-15) idle.push_back({Kind::Idle, at, out.stepSeconds - at});
        lane.segments.insert(lane.segments.end(), idle.begin(), idle.end());
        std::stable_sort(lane.segments.begin(), lane.segments.end(),
                         [](const TimelineSegment& a, const TimelineSegment& b) { return a.start < b.start; });
    }
    return out;
}

Timeline buildPipelineTimeline(const PipelinePlan& plan)
{
    const int p = plan.schedule.stages;
    if (plan.stages.empty()) throw InputError("pipeline timeline: the plan has no stages");
    std::vector<StageTimes> times(static_cast<size_t>(p));
    double microBatches = 1;
    for (const auto& st : plan.stages) {
        const Breakdown& b = st.result.breakdown;
        const double m = st.microBatches;
        const double share = m * pipelinedFactor(st.workspace->costModel->settings(), m);
        const StageTimes t{b.forwardSeconds / share, (b.stepSeconds - b.forwardSeconds - b.optimizerSeconds) / share,
                           st.sendSeconds / (2 * plan.schedule.virtualStages * share)};
        for (int s = st.stage; s < std::min(p, st.stage + st.standsFor); ++s) times[static_cast<size_t>(s)] = t;
        microBatches = m;
    }
    return buildPipelineTimeline(plan.schedule, static_cast<int>(std::lround(microBatches)), times);
}

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
