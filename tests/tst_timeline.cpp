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

QTEST_APPLESS_MAIN(TestTimeline)
#include "tst_timeline.moc"
