// Explain against the cost model it explains: per-op figures equal the Breakdown's, the sums of
// all ops equal the Breakdown's totals, and every "why not" delta equals what switching the op
// to that candidate and re-evaluating the whole plan gives.
#include <QtTest>

#include <cmath>

#include "explain/devices.h"
#include "explain/explain.h"
#include "util/format.h"
#include "search/evaluate.h"
#include "plan/planner.h"
#include "util/error.h"

using namespace tp;

namespace {

struct Planned {
    std::unique_ptr<PlanWorkspace> ws;
    SearchResult result;
};

Planned plan(const QString& model, const QString& overrides, const QString& mesh, const QString& baseline,
             const QString& lock = {})
{
    PlanRequest r;
    r.model = model.toStdString();
    for (const auto& o : overrides.split(' ', Qt::SkipEmptyParts)) r.modelOptions.overrides.push_back(o.toStdString());
    r.mesh = mesh.toStdString();
    r.baseline = baseline.toStdString();
    r.memoryLimit = "none";
    if (!lock.isEmpty()) r.locks.push_back(lock.toStdString());
    Planned p;
    p.ws = preparePlan(r);
    p.result = runPlan(*p.ws, r);
    return p;
}

bool close(double a, double b, double scale) { return std::fabs(a - b) <= 1e-11 * std::max(1.0, std::fabs(scale)); }

} // namespace

class TestExplain : public QObject {
    Q_OBJECT
private slots:
    void figuresAddUp_data();
    void figuresAddUp();
    void whyNotDeltas_data();
    void whyNotDeltas();
    void layoutsAndCollectives_data();
    void layoutsAndCollectives();
    void compareAddsUp();
    void formulaCountsMicroBatches();
    void findOpErrors();
    void summaryInPlainWords();
    void deviceStepsFollowThePlan_data();
    void deviceStepsFollowThePlan();
    void rowParallelOutputIsAllReduced();
    void deviceStepsUnderFullRecompute();
};

void TestExplain::figuresAddUp_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("overrides");
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<QString>("baseline");
    QTest::newRow("gpt2 search 8") << "gpt2"
                                   << "layers=2"
                                   << "8"
                                   << "";
    QTest::newRow("gpt2 megatron 2x4") << "gpt2"
                                       << "layers=2"
                                       << "2x4"
                                       << "megatron";
    QTest::newRow("llama search 2x8") << "llama2-7b"
                                      << "layers=2"
                                      << "2x8"
                                      << "";
    QTest::newRow("bert dp 4") << "bert-base"
                               << "layers=2"
                               << "4"
                               << "dp";
    QTest::newRow("t5 megatron-sp 8") << "t5-base"
                                      << "layers=1"
                                      << "8"
                                      << "megatron-sp";
}

// Per op: compute, communication and memory equal the Breakdown's OpBreakdown; summed over all
// ops: equal to the Breakdown's compute and communication totals.
void TestExplain::figuresAddUp()
{
    QFETCH(QString, model);
    QFETCH(QString, overrides);
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    const Planned p = plan(model, overrides, mesh, baseline);
    const CostModel& m = *p.ws->costModel;
    const Breakdown b = evaluatePlan(m, &p.ws->folded, p.result.strategyOfOp, p.result.recomputeOfOp, "plan").breakdown;
    const auto parts = explain::opComponents(m, &p.ws->folded, p.result);
    double compute = 0, comm = 0, step = 0, memory = 0;
    std::map<std::string, double> byKind;
    for (const auto& op : m.graph().ops) {
        const auto& c = parts[static_cast<size_t>(op.id)];
        const auto& ob = b.ops[static_cast<size_t>(op.id)];
        QCOMPARE(c.computeSeconds, ob.computeSeconds);
        QCOMPARE(c.commSeconds, ob.commSeconds);
        QCOMPARE(c.memoryBytes, ob.memoryBytes);
        compute += c.computeSeconds;
        comm += c.commSeconds;
        step += c.stepSeconds;
        memory += c.memoryBytes;
        for (const auto& [k, v] : c.commByKind) byKind[k] += v;
    }
    QCOMPARE(compute, b.computeSeconds);
    QVERIFY2(close(comm, b.commSeconds, b.stepSeconds), qPrintable(QString::number(comm - b.commSeconds)));
    QVERIFY(close(step, b.stepSeconds, b.stepSeconds));
    QVERIFY(close(memory, b.perDeviceBytes, b.perDeviceBytes));
    for (const auto& [kind, seconds] : b.commByKind)
        QVERIFY(close(byKind[std::string(collectiveName(kind))], seconds, b.stepSeconds));

    // The explanation of an op carries the same three figures, and its collectives into the op
    // plus its own add up to its communication.
    for (const auto& op : m.graph().ops) {
        const auto x = explain::explainOp(m, p.result, op.id, &p.ws->folded);
        const auto& ob = b.ops[static_cast<size_t>(op.id)];
        QCOMPARE(x.computeSeconds, ob.computeSeconds);
        QCOMPARE(x.commSeconds, ob.commSeconds);
        QCOMPARE(x.memoryBytes, ob.memoryBytes);
        // What the step pays of its communication: the OpBreakdown's step less its compute.
        QVERIFY(close(x.exposedCommSeconds, ob.stepSeconds - ob.computeSeconds, ob.stepSeconds));
        QVERIFY(x.exposedCommSeconds <= x.commSeconds + 1e-12);
        double seconds = 0;
        for (const auto& s : x.incoming) seconds += s.seconds;
        for (const auto& s : x.own) seconds += s.seconds;
        QVERIFY2(close(seconds, ob.commSeconds, ob.commSeconds), qPrintable(QString::fromStdString(op.name)));
        // Each of the op's own calls names the weight it moves (a norm's weight and bias are
        // alike in size, so only the cost model's record can tell them apart).
        for (const auto& s : x.own) {
            const bool aWeight = std::any_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) {
                return m.graph().tensor(t).role == TensorRole::Weight && m.graph().tensor(t).name == s.tensor;
            });
            QVERIFY2(aWeight, qPrintable(QString::fromStdString(op.name + ": '" + s.tensor + "'")));
        }
        if (op.id > 40) break; // the first blocks cover every op kind of the model; keep the test quick
    }
}

void TestExplain::whyNotDeltas_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<QString>("baseline");
    QTest::addColumn<QString>("op");
    QTest::newRow("gpt2 fc1 searched 2x4") << "gpt2"
                                           << "2x4"
                                           << ""
                                           << "layers.0/mlp/fc1";
    QTest::newRow("gpt2 out megatron 8") << "gpt2"
                                         << "8"
                                         << "megatron"
                                         << "layers.0/attn/out";
    QTest::newRow("gpt2 ln1 megatron 8") << "gpt2"
                                         << "8"
                                         << "megatron"
                                         << "layers.1/ln1";
    QTest::newRow("llama gate searched 2x8") << "llama2-7b"
                                             << "2x8"
                                             << ""
                                             << "layers.0/mlp/gate";
    QTest::newRow("gpt2 embedding dp 4") << "gpt2"
                                         << "4"
                                         << "dp"
                                         << "embed/wte";
}

// Switching the op to each candidate and re-evaluating the whole plan changes step time,
// compute, communication (per kind) and memory by exactly the reported delta.
void TestExplain::whyNotDeltas()
{
    QFETCH(QString, model);
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    QFETCH(QString, op);
    const Planned p = plan(model, "layers=2", mesh, baseline);
    const CostModel& m = *p.ws->costModel;
    const OpId id = explain::findOp(m.graph(), op.toStdString());
    const auto x = explain::explainOp(m, p.result, id);
    QCOMPARE(x.whyNot.size(), m.strategies(id).size());
    QVERIFY(x.whyNot.front().chosen);
    QCOMPARE(x.whyNot.front().strategyIndex, p.result.strategyOfOp[static_cast<size_t>(id)]);
    QCOMPARE(x.whyNot.front().delta.stepSeconds, 0.0);
    const Breakdown base = evaluatePlan(m, &p.ws->folded, p.result.strategyOfOp, p.result.recomputeOfOp, "plan").breakdown;
    for (size_t k = 1; k < x.whyNot.size(); ++k) {
        const auto& w = x.whyNot[k];
        QVERIFY(!w.chosen);
        if (k > 1) QVERIFY(x.whyNot[k - 1].objectiveDelta <= w.objectiveDelta);
        QCOMPARE(w.objectiveDelta, w.delta.stepSeconds + p.result.lambda * w.delta.memoryBytes);
        auto strategies = p.result.strategyOfOp;
        strategies[static_cast<size_t>(id)] = w.strategyIndex;
        const Breakdown b = evaluatePlan(m, &p.ws->folded, strategies, p.result.recomputeOfOp, "plan").breakdown;
        const QByteArray what = QByteArray::fromStdString(w.strategy);
        QVERIFY2(close(b.stepSeconds - base.stepSeconds, w.delta.stepSeconds, base.stepSeconds), what);
        QVERIFY2(close(b.computeSeconds - base.computeSeconds, w.delta.computeSeconds, base.stepSeconds), what);
        QVERIFY2(close(b.commSeconds - base.commSeconds, w.delta.commSeconds, base.stepSeconds), what);
        QVERIFY2(close(b.perDeviceBytes - base.perDeviceBytes, w.delta.memoryBytes, base.perDeviceBytes), what);
        std::map<std::string, double> kinds;
        for (const auto& [kind, s] : b.commByKind) kinds[std::string(collectiveName(kind))] += s;
        for (const auto& [kind, s] : base.commByKind) kinds[std::string(collectiveName(kind))] -= s;
        for (const auto& [kind, s] : kinds) {
            const auto it = w.delta.commByKind.find(kind);
            QVERIFY2(close(it == w.delta.commByKind.end() ? 0.0 : it->second, s, base.stepSeconds), what + " " + kind.c_str());
        }
    }
}

void TestExplain::layoutsAndCollectives_data()
{
    QTest::addColumn<QString>("op");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("weightSpec");
    QTest::addColumn<QString>("followedBy");
    // Megatron on 4 GPUs: fc1 column-parallel (weight split on f), fc2 row-parallel (output
    // partial: an all-reduce over x follows in the forward pass).
    QTest::newRow("fc1 column") << "layers.0/mlp/fc1"
                                << "f=x"
                                << "[-,x]"
                                << "";
    QTest::newRow("fc2 row") << "layers.0/mlp/fc2"
                             << "h=x"
                             << "[x,-]"
                             << "all-reduce";
    QTest::newRow("out row") << "layers.0/attn/out"
                             << "h=x"
                             << "[x,-]"
                             << "all-reduce";
}

// The layouts name each device's slice, and a row-parallel layer is followed by an all-reduce
// whose reason names the contracted dim.
void TestExplain::layoutsAndCollectives()
{
    QFETCH(QString, op);
    QFETCH(QString, strategy);
    QFETCH(QString, weightSpec);
    QFETCH(QString, followedBy);
    const Planned p = plan("gpt2", "layers=2", "4", "megatron"); // 12 heads: 4-way tensor parallel
    const CostModel& m = *p.ws->costModel;
    const auto x = explain::explainOp(m, p.result, explain::findOp(m.graph(), op.toStdString()));
    QCOMPARE(QString::fromStdString(x.strategy), strategy);
    const auto weight = std::find_if(x.operands.begin(), x.operands.end(), [](const auto& o) { return o.role == "weight"; });
    QVERIFY(weight != x.operands.end());
    QCOMPARE(QString::fromStdString(weight->spec), weightSpec);
    QCOMPARE(weight->devices.size(), size_t{4});
    // Device 2 holds the 3rd slice of the split weight dim.
    const int dim = weightSpec == "[x,-]" ? 0 : 1;
    const auto n = weight->shape[static_cast<size_t>(dim)];
    QCOMPARE(weight->devices[2].ranges[static_cast<size_t>(dim)].first, 2 * n / 4);
    QCOMPARE(weight->devices[2].ranges[static_cast<size_t>(dim)].second, 3 * n / 4);
    const auto forward = std::find_if(x.outgoing.begin(), x.outgoing.end(), [](const auto& s) { return s.phase == "forward"; });
    if (followedBy.isEmpty()) {
        QVERIFY(forward == x.outgoing.end());
    } else {
        QVERIFY(forward != x.outgoing.end());
        QCOMPARE(QString::fromStdString(forward->kind), followedBy);
        QVERIFY2(QString::fromStdString(forward->why).contains("'h' is contracted and split over x"), forward->why.c_str());
        QVERIFY(QString::fromStdString(forward->formula).startsWith("2(g-1)/g x "));
    }
}

// A batch tensor moves once per micro-batch, each time its share: Megatron's layout on 4 devices
// leaves GPT-2's batch of 8 whole on each, so micro-batches of 1 make 8 all-reduces of 1/8 of
// the attention output each, and the formula says so (it showed one call of the whole before).
void TestExplain::formulaCountsMicroBatches()
{
    PlanRequest r;
    r.model = "gpt2";
    r.modelOptions.batch = 8;
    r.modelOptions.overrides = {"layers=1"};
    r.mesh = "4";
    r.baseline = "megatron";
    r.memoryLimit = "none";
    r.microBatch = 1;
    const auto ws = preparePlan(r);
    const SearchResult result = runPlan(*ws, r);
    const CostModel& m = *ws->costModel;
    const auto x = explain::explainOp(m, result, explain::findOp(m.graph(), "layers.0/attn/out"));
    const auto forward = std::find_if(x.outgoing.begin(), x.outgoing.end(), [](const auto& s) { return s.phase == "forward"; });
    QVERIFY(forward != x.outgoing.end());
    const QString formula = QString::fromStdString(forward->formula);
    QVERIFY2(formula.startsWith("8 micro-batches x (2(g-1)/g x " + QString::fromStdString(formatBytes(forward->bytes / 8)) + " / "),
             qPrintable(formula));
}

// Searched versus Megatron: the totals of both sides equal their Breakdowns, blocks add up to
// the totals, and the changed-op count matches the strategies that differ.
void TestExplain::compareAddsUp()
{
    Planned p = plan("gpt2", "layers=4", "2x4", "");
    const CostModel& m = *p.ws->costModel;
    PlanRequest r;
    r.baseline = "megatron";
    const SearchResult meg = runPlan(*p.ws, r);
    const auto d = explain::comparePlans(m, p.ws->folded, p.result, meg);
    const Breakdown a = evaluatePlan(m, &p.ws->folded, p.result.strategyOfOp, p.result.recomputeOfOp, "plan").breakdown,
                    b = evaluatePlan(m, &p.ws->folded, meg.strategyOfOp, {}, "megatron").breakdown;
    QCOMPARE(d.base.computeSeconds, a.computeSeconds);
    QCOMPARE(d.other.computeSeconds, b.computeSeconds);
    QVERIFY(close(d.base.commSeconds, a.commSeconds, a.stepSeconds));
    QVERIFY(close(d.other.stepSeconds, b.stepSeconds, b.stepSeconds));
    double blockStep = 0;
    int changed = 0, differing = 0;
    for (const auto& blk : d.blocks) {
        blockStep += blk.other.stepSeconds;
        changed += blk.opsChanged;
    }
    for (size_t i = 0; i < meg.strategyOfOp.size(); ++i) differing += meg.strategyOfOp[i] != p.result.strategyOfOp[i];
    QVERIFY(close(blockStep, d.other.stepSeconds, d.other.stepSeconds));
    QCOMPARE(changed, differing);
    QVERIFY(d.other.stepSeconds >= d.base.stepSeconds); // the search is never worse than Megatron
    // Each changed op carries its own components in both plans: opComponents' of that op.
    const auto ca = explain::opComponents(m, &p.ws->folded, p.result), cb = explain::opComponents(m, &p.ws->folded, meg);
    QVERIFY(!d.changes.empty());
    for (const auto& c : d.changes) {
        const auto id = static_cast<size_t>(explain::findOp(m.graph(), c.op));
        QCOMPARE(c.base.stepSeconds, ca[id].stepSeconds);
        QCOMPARE(c.other.stepSeconds, cb[id].stepSeconds);
        QCOMPARE(c.other.memoryBytes, cb[id].memoryBytes);
    }
}

void TestExplain::findOpErrors()
{
    const Planned p = plan("gpt2", "layers=1", "2", "dp");
    QCOMPARE(p.ws->model.graph.op(explain::findOp(p.ws->model.graph, "layers.0/mlp/fc*")).name, std::string("layers.0/mlp/fc1"));
    try {
        explain::findOp(p.ws->model.graph, "layers.9/nothing");
        QFAIL("no error for an unknown op");
    } catch (const InputError& e) {
        QVERIFY(QString(e.what()).contains("layers.9/nothing"));
    }
}

// The summary names the best alternative with its figures in words, as the why-not table has
// them: "b=x would be 96.260 ms slower per step but need 4.80 GiB more per device." No raw
// units, no solver words (issue 21).
void TestExplain::summaryInPlainWords()
{
    const Planned p = plan("gpt2", "layers=2", "2x4", "");
    const auto x = explain::explainOp(*p.ws->costModel, p.result, explain::findOp(p.ws->model.graph, "layers.0/mlp/fc1"), &p.ws->folded);
    QVERIFY(x.whyNot.size() > 1);
    const auto& best = x.whyNot[1];
    const double dt = best.delta.stepSeconds, dm = best.delta.memoryBytes;
    std::string expected = "The best alternative: " + best.strategy + " would be " + formatSeconds(std::fabs(dt)) +
                           (dt < 0 ? " faster" : " slower") + " per step";
    QVERIFY2(x.summary.find(expected) != std::string::npos, x.summary.c_str());
    if (std::fabs(dm) > 0.5)
        QVERIFY2(x.summary.find(formatBytes(std::fabs(dm))) != std::string::npos, x.summary.c_str());
    else
        QVERIFY2(x.summary.find("hold the same memory") != std::string::npos, x.summary.c_str());
    QVERIFY(x.summary.find("prices memory") == std::string::npos);
    QVERIFY(x.summary.find("change the step time by") == std::string::npos);
}

// The devices view's steps (core/explain/devices.h) for every op of a GPT-2 plan: the compute
// step draws every operand exactly as the plan lays it out (explainOp's spec and slices), and
// each edge's collectives chain from the producer's layout to the consumer's, one axis each.
void TestExplain::deviceStepsFollowThePlan_data()
{
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<QString>("baseline");
    QTest::newRow("search 2x2") << "2x2" << "";
    QTest::newRow("megatron 2x2") << "2x2" << "megatron";
    QTest::newRow("megatron-sp 4") << "4" << "megatron-sp";
}

void TestExplain::deviceStepsFollowThePlan()
{
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    const Planned p = plan("gpt2", "layers=2", mesh, baseline);
    const CostModel& model = *p.ws->costModel;
    int collectives = 0;
    for (const auto& op : model.graph().ops) {
        const auto steps = explain::deviceSteps(model, p.result, op.id);
        const auto x = explain::explainOp(model, p.result, op.id);
        auto compute = std::find_if(steps.begin(), steps.end(), [](const auto& s) { return s.kind == explain::DeviceStep::Kind::Compute; });
        QVERIFY(compute != steps.end());
        QCOMPARE(compute->operands.size(), x.operands.size());
        for (size_t i = 0; i < x.operands.size(); ++i) {
            QCOMPARE(compute->operands[i].spec, x.operands[i].spec);
            QCOMPARE(compute->operands[i].devices.size(), size_t(model.mesh().devices()));
            for (size_t d = 0; d < x.operands[i].devices.size(); ++d)
                QCOMPARE(compute->operands[i].devices[d].ranges, x.operands[i].devices[d].ranges);
        }
        // Forward collectives into the op end in the layout it reads.
        std::map<std::string, std::string> lastForward;
        for (auto it = steps.begin(); it != compute; ++it)
            if (it->kind == explain::DeviceStep::Kind::Collective && it->phase == "forward" && it->before.role == "input") {
                QVERIFY(it->before.spec != it->after.spec || it->collective == "all-reduce");
                lastForward[it->before.tensor] = it->after.spec;
                ++collectives;
            }
        for (const auto& call : x.incoming)
            if (call.phase == "forward") QCOMPARE(lastForward[call.tensor], call.toSpec);
        // Each step of a chain starts where the one before it ended.
        for (size_t i = 1; i < steps.size(); ++i)
            if (steps[i].kind == explain::DeviceStep::Kind::Collective && steps[i - 1].kind == explain::DeviceStep::Kind::Collective &&
                steps[i].phase == steps[i - 1].phase && steps[i].before.tensor == steps[i - 1].before.tensor &&
                steps[i].before.role == steps[i - 1].before.role && steps[i].consumer == steps[i - 1].consumer &&
                steps[i].producer == steps[i - 1].producer)
                QVERIFY2(steps[i].before.spec == steps[i - 1].after.spec,
                         (steps[i - 1].title + " -> " + steps[i - 1].after.spec + " then " + steps[i].title + " from " + steps[i].before.spec).c_str());
    }
    QVERIFY(collectives > 0);
}

// Megatron's MLP on 4 GPUs (Shoeybi et al. 2019): fc2 is row-parallel, so its output holds
// partial sums and the step after its compute all-reduces them over x: before, every device
// holds all of [b, s, h] as a partial sum; after, the whole sum. fc1's weight: device k holds
// columns [k f/4, (k+1) f/4) of the [h, f] = [768, 3072] matrix.
void TestExplain::rowParallelOutputIsAllReduced()
{
    const Planned p = plan("gpt2", "layers=1", "4", "megatron");
    const CostModel& model = *p.ws->costModel;
    const auto steps = explain::deviceSteps(model, p.result, explain::findOp(model.graph(), "layers.0/mlp/fc2"));
    auto compute = std::find_if(steps.begin(), steps.end(), [](const auto& s) { return s.kind == explain::DeviceStep::Kind::Compute; });
    QVERIFY(compute != steps.end() && compute + 1 != steps.end());
    const auto& reduce = *(compute + 1);
    QCOMPARE(reduce.collective, std::string("all-reduce"));
    QCOMPARE(reduce.phase, std::string("forward"));
    QCOMPARE(reduce.axis, 0);
    QVERIFY(reduce.before.partial);
    QCOMPARE(reduce.before.partialAxes, std::string("x"));
    QVERIFY(!reduce.after.partial);
    QCOMPARE(reduce.before.tensor, std::string("layers.0/mlp/fc2"));

    const auto fc1 = explain::deviceSteps(model, p.result, explain::findOp(model.graph(), "layers.0/mlp/fc1"));
    auto c1 = std::find_if(fc1.begin(), fc1.end(), [](const auto& s) { return s.kind == explain::DeviceStep::Kind::Compute; });
    const auto& weight = c1->operands[1];
    QCOMPARE(weight.shape, (std::vector<std::int64_t>{768, 3072}));
    for (int k = 0; k < 4; ++k) {
        QCOMPARE(weight.devices[static_cast<size_t>(k)].ranges[0], (std::pair<std::int64_t, std::int64_t>{0, 768}));
        QCOMPARE(weight.devices[static_cast<size_t>(k)].ranges[1], (std::pair<std::int64_t, std::int64_t>{k * 768, (k + 1) * 768}));
    }
    // Backward: fc1's input gradient is partial over x (each device's column slice contributes
    // to every element) and is all-reduced before it reaches the norm.
    bool backwardAllReduce = false;
    for (auto it = c1; it != fc1.end(); ++it)
        backwardAllReduce |= it->phase == "backward" && it->collective == "all-reduce" && it->before.partial && !it->after.partial;
    QVERIFY(backwardAllReduce);
}

// A plan that recomputes its layers fully (Megatron's full recompute, as searched plans of
// large models choose): every op's steps are drawn (explainOp needs the fold for the blocks'
// kept inputs; the devices view once failed on every such plan).
void TestExplain::deviceStepsUnderFullRecompute()
{
    PlanRequest r;
    r.model = "gpt2";
    r.modelOptions.overrides.push_back("layers=2");
    r.mesh = "2x2";
    r.baseline = "megatron";
    r.recompute = "full";
    r.memoryLimit = "none";
    Planner planner;
    const PlannerResult p = planner.plan(r);
    QVERIFY(std::count(p.result.recomputeOfOp.begin(), p.result.recomputeOfOp.end(), Recompute::Full) > 0);
    for (const auto& op : p.workspace->model.graph.ops)
        QVERIFY(!explain::deviceSteps(*p.workspace->costModel, p.result, op.id, &p.workspace->folded).empty());
    QVERIFY_THROWS_EXCEPTION(InputError, explain::deviceSteps(*p.workspace->costModel, p.result, 1 << 20, &p.workspace->folded));
}

QTEST_APPLESS_MAIN(TestExplain)
#include "tst_explain.moc"
