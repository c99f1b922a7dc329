// The step timeline (core/explain/timeline.h) against the breakdown it draws: its critical path
// ends at the step time, its lanes' exposed communication adds up to the breakdown's, every
// collective of the breakdown is on its axis's lane in full, and the phases come in order.
#include <QtTest>

#include <cmath>

#include "explain/timeline.h"
#include "plan/planner.h"
#include "util/error.h"

using namespace tp;
using explain::Timeline;
using explain::TimelineSegment;

namespace {

struct Planned {
    std::unique_ptr<PlanWorkspace> ws;
    SearchResult result;
};

Planned plan(const QString& model, const QString& mesh, const QString& baseline, int zero, const QString& recompute,
             const QString& reshard, bool tpOverlap)
{
    PlanRequest r;
    r.model = model.toStdString();
    r.modelOptions.overrides.push_back("layers=2");
    r.mesh = mesh.toStdString();
    r.baseline = baseline.toStdString();
    r.memoryLimit = "none";
    r.zero = zero;
    r.microBatch = 2;
    r.recompute = recompute.toStdString();
    r.reshardAfterForward = reshard.toStdString();
    r.overlapTensorParallel = tpOverlap;
    Planned p;
    p.ws = preparePlan(r);
    p.result = runPlan(*p.ws, r);
    return p;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

} // namespace

class TestTimeline : public QObject {
    Q_OBJECT
private slots:
    void addsUpToTheBreakdown_data();
    void addsUpToTheBreakdown();
    void overlapShowsHiddenCommunication();
    void rejectsAPlanOfAnotherGraph();
    void pipelineScheduleEndsAtItsBubble_data();
    void pipelineScheduleEndsAtItsBubble();
    void pipelineScheduleRefusesBadInput();
    void pipelinedPlanSchedule_data();
    void pipelinedPlanSchedule();
};

void TestTimeline::addsUpToTheBreakdown_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<QString>("baseline");
    QTest::addColumn<int>("zero");
    QTest::addColumn<QString>("recompute");
    QTest::addColumn<QString>("reshard");
    QTest::addColumn<bool>("tpOverlap");
    // Every kind of term the cost model sums: resharding edges (search, Megatron), full
    // recompute (edges' forward collectives once more in the backward), ZeRO 1-3 (reductions,
    // FSDP's gathers under forward and backward, kept gathered), HSDP across nodes, TP overlap.
    QTest::newRow("gpt2 search 2x4") << "gpt2" << "2x4" << "" << 0 << "auto" << "on" << false;
    QTest::newRow("gpt2 megatron full recompute 8") << "gpt2" << "8" << "megatron" << 1 << "full" << "on" << false;
    QTest::newRow("llama megatron-sp 2x8 tp overlap") << "llama2-7b" << "2x8" << "megatron-sp" << 1 << "selective" << "on" << true;
    QTest::newRow("llama dp zero 3 2x8") << "llama2-7b" << "2x8" << "dp" << 3 << "none" << "on" << false;
    QTest::newRow("llama dp zero 3 kept gathered 8") << "llama2-7b" << "8" << "dp" << 3 << "none" << "off" << false;
    QTest::newRow("t5 search zero 2 2x2") << "t5-base" << "2x2" << "" << 2 << "auto" << "on" << false;
    QTest::newRow("mixtral search 8") << "mixtral-8x7b" << "8" << "" << 1 << "auto" << "on" << false;
}

void TestTimeline::addsUpToTheBreakdown()
{
    QFETCH(QString, model);
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    QFETCH(int, zero);
    QFETCH(QString, recompute);
    QFETCH(QString, reshard);
    QFETCH(bool, tpOverlap);
    const Planned p = plan(model, mesh, baseline, zero, recompute, reshard, tpOverlap);
    const Breakdown& b = p.result.breakdown;
    const Timeline t = explain::buildTimeline(*p.ws->costModel, p.result);

    // The critical path is the step: its segments follow each other without gaps.
    QVERIFY(!t.lanes.empty());
    QCOMPARE(t.lanes[0].axis, -1);
    double cursor = 0, exposedOnPath = 0;
    for (const auto& s : t.lanes[0].segments) {
        QVERIFY2(close(s.start, cursor), "the critical path has a gap or an overlap");
        QVERIFY(s.seconds > 0);
        cursor = s.end();
        if (s.kind == TimelineSegment::Kind::Communication) exposedOnPath += s.seconds;
    }
    QVERIFY2(close(t.stepSeconds, b.stepSeconds), qPrintable(QString("timeline %1 s, breakdown %2 s").arg(t.stepSeconds).arg(b.stepSeconds)));
    QVERIFY(close(cursor, b.stepSeconds));
    QVERIFY(close(exposedOnPath, b.exposedCommSeconds));
    QVERIFY2(close(t.exposedCommSeconds(), b.exposedCommSeconds),
             qPrintable(QString("lanes %1 s exposed, breakdown %2 s").arg(t.exposedCommSeconds()).arg(b.exposedCommSeconds)));

    // Every collective of the breakdown in full on its axis's lane (a fully recomputed plan runs
    // its edges' forward collectives twice); none exposed for longer than it runs.
    double onLanes = 0, recomputedOnLanes = 0;
    for (size_t l = 1; l < t.lanes.size(); ++l)
        for (const auto& s : t.lanes[l].segments) {
            QCOMPARE(s.axis, t.lanes[l].axis);
            QVERIFY(s.exposedSeconds <= s.seconds * (1 + 1e-12));
            (s.recomputed ? recomputedOnLanes : onLanes) += s.seconds;
        }
    double inBreakdown = 0;
    for (const auto& c : b.collectives) inBreakdown += c.seconds;
    QVERIFY2(close(onLanes, inBreakdown), qPrintable(QString("lanes %1 s, breakdown %2 s").arg(onLanes).arg(inBreakdown)));
    QVERIFY(close(onLanes + recomputedOnLanes, b.commSeconds));
    if (recompute == "full") QVERIFY(recomputedOnLanes > 0);

    // Forward, then backward, then the optimizer step: the compute of each phase is the breakdown's.
    double forward = 0, compute = 0, optimizer = 0;
    for (const auto& s : t.lanes[0].segments) {
        if (s.kind == TimelineSegment::Kind::Forward) {
            QVERIFY(s.end() <= t.forwardEndSeconds * (1 + 1e-12));
            forward += s.seconds;
        }
        if (s.kind == TimelineSegment::Kind::Backward) QVERIFY(s.start >= t.forwardEndSeconds * (1 - 1e-12));
        if (s.kind == TimelineSegment::Kind::Optimizer) {
            QVERIFY(s.start >= t.backwardEndSeconds * (1 - 1e-12));
            optimizer += s.seconds;
        }
        if (s.kind != TimelineSegment::Kind::Communication) compute += s.seconds;
    }
    QVERIFY(close(compute, b.computeSeconds));
    QVERIFY(close(optimizer, b.optimizerSeconds));
    QVERIFY(optimizer > 0);
    double forwardCompute = 0;
    for (const auto& o : b.ops) forwardCompute += p.ws->costModel->opCost(o.op, o.strategy, p.result.recomputeOfOp[static_cast<size_t>(o.op)]).forwardSeconds;
    QVERIFY(close(forward, forwardCompute));
}

// FSDP on 2x8 (ZeRO 3 over 16 devices, reshard after forward): the gathers hide under the
// compute they prefetch for, so the axis lanes run longer than the step waits for them.
void TestTimeline::overlapShowsHiddenCommunication()
{
    const Planned p = plan("llama2-7b", "2x8", "dp", 3, "none", "on", false);
    const Timeline t = explain::buildTimeline(*p.ws->costModel, p.result);
    double seconds = 0, exposed = 0;
    bool forwardGather = false;
    for (size_t l = 1; l < t.lanes.size(); ++l)
        for (const auto& s : t.lanes[l].segments) {
            seconds += s.seconds;
            exposed += s.exposedSeconds;
            forwardGather |= s.collective == CollectiveKind::AllGather && s.phase == Phase::Forward && s.start < t.forwardEndSeconds;
        }
    QVERIFY(p.result.breakdown.hiddenCommSeconds > 0);
    QVERIFY(close(seconds - exposed, p.result.breakdown.hiddenCommSeconds));
    QVERIFY(forwardGather);
    QCOMPARE(static_cast<int>(t.lanes.size()), 3); // the step and both axes
}

void TestTimeline::rejectsAPlanOfAnotherGraph()
{
    const Planned p = plan("gpt2", "8", "", 0, "auto", "on", false);
    SearchResult wrong = p.result;
    wrong.strategyOfOp.pop_back();
    QVERIFY_THROWS_EXCEPTION(InputError, explain::buildTimeline(*p.ws->costModel, wrong));
}

// Equal stages, no sends: a step of m micro-batches takes (m + (p - 1) / V) (f + b), and every
// stage idles (p - 1) / V (f + b) of it: the bubble (Narayanan et al. 2021, §2.2). Interleaving
// needs p to divide m; otherwise the schedule (and the cost model, pipelinedFactor) is 1F1B's.
void TestTimeline::pipelineScheduleEndsAtItsBubble_data()
{
    QTest::addColumn<int>("stages");
    QTest::addColumn<int>("chunks");
    QTest::addColumn<int>("microBatches");
    QTest::addColumn<double>("step");
    // f = 1, b = 2 per micro-batch and stage: f + b = 3.
    QTest::newRow("1F1B p4 m8") << 4 << 1 << 8 << (8 + 3) * 3.0;             // 33
    QTest::newRow("1F1B p8 m64") << 8 << 1 << 64 << (64 + 7) * 3.0;          // 213
    QTest::newRow("1F1B p4 m1") << 4 << 1 << 1 << (1 + 3) * 3.0;             // 12: one micro-batch through
    QTest::newRow("interleaved p4 V2 m8") << 4 << 2 << 8 << (8 + 3 / 2.0) * 3.0; // 28.5
    QTest::newRow("interleaved p4 V3 m4") << 4 << 3 << 4 << (4 + 3 / 3.0) * 3.0; // 15
    QTest::newRow("interleaved p8 V3 m16") << 8 << 3 << 16 << (16 + 7 / 3.0) * 3.0; // 55
    QTest::newRow("interleaved p4 V2 m6: 1F1B") << 4 << 2 << 6 << (6 + 3) * 3.0; // 27
    QTest::newRow("one stage") << 1 << 1 << 5 << 5 * 3.0;
}

void TestTimeline::pipelineScheduleEndsAtItsBubble()
{
    QFETCH(int, stages);
    QFETCH(int, chunks);
    QFETCH(int, microBatches);
    QFETCH(double, step);
    const std::vector<explain::StageTimes> times(static_cast<size_t>(stages), explain::StageTimes{1.0, 2.0, 0.0});
    const Timeline t = explain::buildPipelineTimeline(PipelineSchedule{stages, chunks}, microBatches, times);
    QVERIFY(t.schedule);
    QCOMPARE(static_cast<int>(t.lanes.size()), stages);
    QVERIFY2(close(t.stepSeconds, step), qPrintable(QString("%1 s, expected %2 s").arg(t.stepSeconds).arg(step)));
    const double bubble = step - microBatches * 3.0;
    for (const auto& lane : t.lanes) {
        double busy = 0, idle = 0, cursor = 0;
        int forwards = 0, backwards = 0;
        for (const auto& s : lane.segments) {
            QVERIFY(close(s.start, cursor)); // busy and idle tile the lane
            cursor = s.end();
            (s.kind == TimelineSegment::Kind::Idle ? idle : busy) += s.seconds;
            forwards += s.kind == TimelineSegment::Kind::Forward;
            backwards += s.kind == TimelineSegment::Kind::Backward;
        }
        QVERIFY(close(cursor, step));
        QVERIFY(close(busy, microBatches * 3.0));
        QVERIFY(close(idle, bubble));
        const int perDevice = microBatches * (microBatches % stages == 0 ? chunks : 1);
        QCOMPARE(forwards, perDevice);
        QCOMPARE(backwards, perDevice);
    }
}

void TestTimeline::pipelineScheduleRefusesBadInput()
{
    const std::vector<explain::StageTimes> four(4, explain::StageTimes{1.0, 2.0, 0.0});
    QVERIFY_THROWS_EXCEPTION(InputError, explain::buildPipelineTimeline(PipelineSchedule{4, 1}, 0, four));
    QVERIFY_THROWS_EXCEPTION(InputError, explain::buildPipelineTimeline(PipelineSchedule{8, 1}, 8, four));
}

// A planned pipeline's schedule: a lane per stage, the busiest as busy as the slowest stage's
// step less the bubble the cost model spread over it. The cost model charges the bubble at the
// slowest stage's pace ((p - 1) / V of its micro-batch times); the schedule fills and drains
// at each stage's own pace, so it ends no later than the plan's step (less the optimizer step,
// which follows it) and, with a last stage slower than the others (the head), earlier.
void TestTimeline::pipelinedPlanSchedule_data()
{
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("microBatch");
    QTest::newRow("1f1b") << "1f1b" << 1;
    QTest::newRow("interleaved:2") << "interleaved:2" << 2;
}

void TestTimeline::pipelinedPlanSchedule()
{
    QFETCH(QString, schedule);
    QFETCH(int, microBatch);
    PlanRequest r;
    r.model = "gpt2";
    r.modelOptions.overrides.push_back("layers=8");
    r.modelOptions.batch = 32;
    r.mesh = "4x2";
    r.memoryLimit = "none";
    r.pipeline = 4;
    r.schedule = schedule.toStdString();
    r.microBatch = microBatch;
    r.zero = 0;
    Planner planner;
    const PlannerResult planned = planner.plan(r);
    QVERIFY(planned.pipeline);
    const PipelinePlan& pipe = *planned.pipeline;
    const Timeline t = explain::buildPipelineTimeline(pipe);
    QCOMPARE(static_cast<int>(t.lanes.size()), 4);
    const PipelineStagePlan& slowest = pipe.stages[static_cast<size_t>(pipe.slowest)];
    const double m = slowest.microBatches;
    const double busyOfSlowest = slowest.result.breakdown.stepSeconds - slowest.result.breakdown.optimizerSeconds;
    double longestBusy = 0;
    for (const auto& lane : t.lanes) {
        double busy = 0;
        for (const auto& s : lane.segments)
            if (s.kind != TimelineSegment::Kind::Idle) busy += s.seconds;
        longestBusy = std::max(longestBusy, busy);
    }
    // The busiest lane is the slowest stage's step without its bubble.
    const double factor = pipelinedFactor(slowest.workspace->costModel->settings(), m);
    QVERIFY2(close(longestBusy, busyOfSlowest / factor), qPrintable(QString("%1 vs %2").arg(longestBusy).arg(busyOfSlowest / factor)));
    const double planStep = pipe.stepSeconds - slowest.result.breakdown.optimizerSeconds;
    QVERIFY2(t.stepSeconds <= planStep * (1 + 1e-9) && t.stepSeconds > longestBusy,
             qPrintable(QString("schedule %1 s, plan %2 s, busiest stage %3 s").arg(t.stepSeconds).arg(planStep).arg(longestBusy)));
}

QTEST_APPLESS_MAIN(TestTimeline)
#include "tst_timeline.moc"
