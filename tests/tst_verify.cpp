// Verify: the executor against hand-computed values and its backward against finite
// differences, the sharded run (forward and, for train-mode plans, backward with every weight
// gradient) against the single-device run on searched, Megatron and data-parallel plans of every
// family, and broken plans (a forward all-reduce, a backward all-reduce or a weight-gradient
// all-reduce deleted) that must fail naming the op and the pass.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "graph/opkinds.h"
#include "plan/planner.h"
#include "util/error.h"
#include "verify/executor.h"
#include "verify/verify.h"

// Under AddressSanitizer (the asan preset: Debug, -fsanitize=address,undefined) the executor is
// about ten times slower: the plan table keeps one row per family.
#if defined(__SANITIZE_ADDRESS__)
#define TP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TP_SANITIZED 1
#endif
#endif
#ifndef TP_SANITIZED
#define TP_SANITIZED 0
#endif

using namespace tp;

namespace {

nlohmann::json planDocument(const QString& model, const QString& overrides, const QString& mesh, const QString& baseline,
                            const QString& mode = "train")
{
    PlanRequest r;
    r.mode = mode.toStdString();
    r.model = model.toStdString();
    for (const auto& o : overrides.split(' ', Qt::SkipEmptyParts)) r.modelOptions.overrides.push_back(o.toStdString());
    r.mesh = mesh.toStdString();
    r.baseline = baseline.toStdString();
    r.memoryLimit = "none";
    auto ws = preparePlan(r);
    const SearchResult result = runPlan(*ws, r);
    return planToJson(ws->context, *ws->costModel, ws->folded, result);
}

verify::Block block(std::vector<std::int64_t> shape, std::vector<float> values)
{
    std::vector<verify::Range> r;
    for (auto d : shape) r.push_back({0, d});
    verify::Block b = verify::Block::zeros(r);
    b.data = std::move(values);
    return b;
}

} // namespace

class TestVerify : public QObject {
    Q_OBJECT
private slots:
    void executorByHand_data();
    void executorByHand();
    void plansPass_data();
    void plansPass();
    void inferencePlanRunsForwardOnly();
    void backwardByFiniteDifferences_data();
    void backwardByFiniteDifferences();
    void deletedBackwardAllReduceFails_data();
    void deletedBackwardAllReduceFails();
    void deletedGradientAllReduceFails();
    void brokenBackwardThroughCli();
    void deletedAllReduceFails_data();
    void deletedAllReduceFails();
    void brokenFixtureFails();
    void shrinkKeepsDivisibility();
    void malformedPlanNamesTheField_data();
    void malformedPlanNamesTheField();
};

void TestVerify::executorByHand_data()
{
    QTest::addColumn<int>("kind");
    QTest::addColumn<QString>("einsum");
    QTest::addColumn<QString>("attrs");
    QTest::addColumn<QList<QList<qint64>>>("shapes"); // inputs..., output last
    QTest::addColumn<QList<QList<float>>>("values");  // inputs...
    QTest::addColumn<QList<float>>("expected");
    using S = QList<QList<qint64>>;
    using V = QList<QList<float>>;
    QTest::newRow("linear with bias") << int(OpKind::Linear) << "sh,hf,f->sf"
                                      << "" << S{{1, 2}, {2, 2}, {2}, {1, 2}} << V{{1, 2}, {1, 2, 3, 4}, {10, 20}}
                                      << QList<float>{17, 30};
    QTest::newRow("embedding lookup") << int(OpKind::Embedding) << "s,vh->sh"
                                      << "" << S{{2}, {3, 2}, {2, 2}} << V{{2, 0}, {1, 2, 3, 4, 5, 6}}
                                      << QList<float>{5, 6, 1, 2};
    QTest::newRow("causal softmax") << int(OpKind::Softmax) << "st->st"
                                    << "causal" << S{{2, 2}, {2, 2}} << V{{0, 5, 0, 0}} << QList<float>{1, 0, 0.5f, 0.5f};
    QTest::newRow("layer norm") << int(OpKind::LayerNorm) << "sh->sh"
                                << "" << S{{1, 2}, {1, 2}} << V{{1, 3}} << QList<float>{-1, 1};
    QTest::newRow("transpose") << int(OpKind::Transpose) << "ab->ba"
                               << "" << S{{2, 3}, {3, 2}} << V{{1, 2, 3, 4, 5, 6}} << QList<float>{1, 4, 2, 5, 3, 6};
    QTest::newRow("head split reshape") << int(OpKind::Reshape) << "s(nd)->nsd"
                                        << "" << S{{2, 4}, {2, 2, 2}} << V{{1, 2, 3, 4, 5, 6, 7, 8}}
                                        << QList<float>{1, 2, 5, 6, 3, 4, 7, 8};
    QTest::newRow("mean reduce") << int(OpKind::Reduce) << "ab->a"
                                 << "mean" << S{{2, 2}, {2}} << V{{1, 3, 5, 7}} << QList<float>{2, 6};
    QTest::newRow("cross entropy") << int(OpKind::CrossEntropy) << "sv,s->"
                                   << "" << S{{1, 2}, {1}, {}} << V{{0, 0}, {1}} << QList<float>{std::log(2.0f)};
    QTest::newRow("silu") << int(OpKind::SiLU) << "a->a"
                          << "" << S{{2}, {2}} << V{{0, 1}} << QList<float>{0, 1.0f / (1.0f + std::exp(-1.0f))};
}

// Each rule of the semantics table on numbers small enough to check by hand.
void TestVerify::executorByHand()
{
    QFETCH(int, kind);
    QFETCH(QString, einsum);
    QFETCH(QString, attrs);
    QFETCH(QList<QList<qint64>>, shapes);
    QFETCH(QList<QList<float>>, values);
    QFETCH(QList<float>, expected);
    Graph g;
    std::vector<TensorId> inputs;
    for (qsizetype i = 0; i + 1 < shapes.size(); ++i) {
        std::vector<std::int64_t> shape(shapes[i].begin(), shapes[i].end());
        inputs.push_back(g.addTensor("in" + std::to_string(i), shape, DType::F32, TensorRole::Input));
    }
    std::vector<std::int64_t> outShape(shapes.back().begin(), shapes.back().end());
    const TensorId out = g.addTensor("out", outShape, DType::F32, TensorRole::Output);
    Attrs a;
    if (attrs == "causal") a["causal"] = std::int64_t{1};
    if (attrs == "mean") a["reduction"] = std::string("mean");
    const OpId id = g.addOp("op", static_cast<OpKind>(kind), inputs, {out}, einsum.toStdString(), a);
    const Signature sig = opSignature(g.op(id), g);
    std::vector<verify::Range> loops;
    for (const auto& l : sig.loops) loops.push_back({0, l.size});
    std::vector<verify::Block> blocks;
    for (qsizetype i = 0; i < values.size(); ++i)
        blocks.push_back(
            block(g.tensor(inputs[static_cast<size_t>(i)]).shape, std::vector<float>(values[i].begin(), values[i].end())));
    std::vector<const verify::Block*> in;
    for (const auto& b : blocks) in.push_back(&b);
    const auto outs = verify::evaluateOp(g.op(id), sig, *verify::opSemantics(static_cast<OpKind>(kind)), g, loops, in);
    QCOMPARE(outs[0].data.size(), static_cast<size_t>(expected.size()));
    for (qsizetype k = 0; k < expected.size(); ++k)
        QVERIFY2(std::fabs(outs[0].data[static_cast<size_t>(k)] - expected[k]) < 1e-5,
                 qPrintable(QString("element %1: %2 vs %3").arg(k).arg(outs[0].data[static_cast<size_t>(k)]).arg(expected[k])));

    // Split the first splittable loop in two: the halves (summed when the loop is contracted)
    // reproduce the whole.
    int split = -1;
    for (size_t l = 0; l < sig.loops.size() && split < 0; ++l)
        if (dimRoleSplittable(sig.loops[l].role) && sig.loops[l].size % 2 == 0) split = static_cast<int>(l);
    if (split < 0) return;
    std::vector<float> assembled(outs[0].data.size(), 0.0f);
    for (int half = 0; half < 2; ++half) {
        auto part = loops;
        const auto n = sig.loops[static_cast<size_t>(split)].size / 2;
        part[static_cast<size_t>(split)] = {half * n, (half + 1) * n};
        const auto o = verify::evaluateOp(g.op(id), sig, *verify::opSemantics(static_cast<OpKind>(kind)), g, part, in);
        const auto st = outs[0].strides();
        const auto pst = o[0].strides();
        for (std::int64_t k = 0; k < o[0].numel(); ++k) {
            std::int64_t rest = k, off = 0;
            for (size_t d = 0; d < pst.size(); ++d) {
                off += (rest / pst[d] + o[0].start[d]) * st[d];
                rest %= pst[d];
            }
            assembled[static_cast<size_t>(off)] += o[0].data[static_cast<size_t>(k)];
        }
    }
    for (size_t k = 0; k < assembled.size(); ++k) QVERIFY(std::fabs(assembled[k] - outs[0].data[k]) < 1e-5);
}

void TestVerify::plansPass_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("overrides");
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<QString>("baseline");
    const QStringList baselines{"", "megatron", "dp"};
    struct Family {
        const char* model;
        const char* overrides;
        const char* mesh;
    };
    const Family families[] =
        {
            {"gpt2", "layers=2", "2x2"},      {"llama2-7b", "layers=2", "4"},
            {"llama3-8b", "layers=1", "2x2"}, // grouped-query attention
            {"bert-base", "layers=2", "4"},   {"t5-base", "layers=1", "2x2"},
            {"vit-b16", "layers=1", "4"},     {"resnet50", "", "2"},
            {"mixtral-8x7b", "layers=1", "2x2"},                  // routed experts: dispatch, expert FFN, combine
            {"deepseek-v3", "layers=2 dense_layers=1", "2x2"},    // latent attention, shared expert, selection bias
        };
    int family = -1;
    for (const auto& f : families) {
        ++family;
        for (const auto& b : baselines) {
            // Sanitized: one baseline per family, in turn (every family and every baseline
            // still covered); ResNet, the slowest (its shrunk model still has 2048 channels and
            // a 7x7 stem), its data-parallel plan.
            const bool resnet = QString(f.model) == "resnet50";
            if (TP_SANITIZED && (resnet ? b != "dp" : family % 3 != baselines.indexOf(b))) continue;
            QTest::newRow(qPrintable(QString("%1 %2 %3").arg(f.model, b.isEmpty() ? "search" : b, f.mesh)))
                << f.model << f.overrides << f.mesh << b;
        }
    }
}

// The sharded run equals the single-device run op by op, forward and backward (these plans are
// train-mode plans): every op's gradients and every weight gradient match.
void TestVerify::plansPass()
{
    QFETCH(QString, model);
    QFETCH(QString, overrides);
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    const auto doc = planDocument(model, overrides, mesh, baseline);
    QCOMPARE(QString::fromStdString(doc["mode"].get<std::string>()), QString("train"));
    const auto report = verify::verifyPlan(doc);
    // Known cost-model gap (docs/ARCHITECTURE.md, "Gradients of a tensor with several readers"):
    // the first reader of a tensor pays the backward reduction over its own partial axes; under
    // Megatron's rules DeepSeek-V3's mlp_norm output is read first by the replicated router and
    // later by the column-parallel shared expert, whose partial gradient goes unreduced.
    QEXPECT_FAIL("deepseek-v3 megatron 2x2", "a later reader's partial gradient axes are not reduced", Abort);
    QVERIFY2(report.passed, report.message.c_str());
    QVERIFY(report.failedOp.empty());
    QVERIFY(!report.ops.empty());
    QVERIFY(report.missing.empty());
    // The backward ran over every op and checked weight gradients.
    QVERIFY(report.backward);
    QVERIFY(report.weightGradients > 0);
    for (const auto& c : report.ops) {
        QVERIFY2(c.backwardRun && c.backwardOk, c.name.c_str());
        QVERIFY(c.maxError <= 1e-3 && c.backwardError <= 1e-3);
    }
    QVERIFY(report.backwardError <= 1e-3);
    // Collectives performed without a listing: only a tied weight's later reader (the plan
    // states a weight's gradient collectives at its first reader).
    for (const auto& u : report.unlisted) {
        qInfo("%s", u.c_str());
        QVERIFY2(u.rfind("weight '", 0) == 0, u.c_str());
    }
    // Every listed collective was needed somewhere. ResNet's shrunk model has one bottleneck per
    // stage, so its representatives feed other consumers than in the plan: only its forward
    // collectives are checked.
    int performed[3] = {0, 0, 0}, listedCount[3] = {0, 0, 0};
    for (const auto& c : report.collectives) {
        if (!c.inShrunkModel) continue;
        const int phase = c.phase == "forward" ? 0 : c.phase == "backward" ? 1 : 2;
        ++listedCount[phase];
        performed[phase] += c.performed > 0;
        if (phase == 0 || model != "resnet50")
            QVERIFY2(c.performed > 0, (c.phase + " " + c.kind + " over " + c.axis + " after " + c.at).c_str());
    }
    // Data parallelism always has weight gradients to all-reduce.
    if (baseline == "dp") QVERIFY(listedCount[2] > 0 && performed[2] > 0);
    if (listedCount[1] > 0) QVERIFY(performed[1] > 0);
}

// An inference-mode plan runs the forward pass only.
void TestVerify::inferencePlanRunsForwardOnly()
{
    const auto doc = planDocument("gpt2", "layers=1", "4", "megatron", "infer");
    const auto report = verify::verifyPlan(doc);
    QVERIFY2(report.passed, report.message.c_str());
    QVERIFY(!report.backward);
    QCOMPARE(report.weightGradients, 0);
    for (const auto& c : report.ops) QVERIFY(!c.backwardRun);
    for (const auto& c : report.collectives) QCOMPARE(QString::fromStdString(c.phase), QString("forward"));
}

void TestVerify::backwardByFiniteDifferences_data()
{
    QTest::addColumn<int>("kind");
    QTest::addColumn<QString>("einsum");
    QTest::addColumn<QString>("attrs");
    QTest::addColumn<int>("outputs");
    QTest::addColumn<QList<QList<qint64>>>("shapes");  // inputs..., outputs last
    QTest::addColumn<QList<QList<float>>>("integers"); // per input: fixed integer values (empty: random floats)
    using S = QList<QList<qint64>>;
    using V = QList<QList<float>>;
    auto row = [](const char* name, OpKind k, const char* e, const char* a, S shapes, V ints = {}, int outputs = 1) {
        QTest::newRow(name) << int(k) << QString(e) << QString(a) << outputs << shapes << ints;
    };
    row("linear with bias", OpKind::Linear, "sh,hf,f->sf", "", S{{3, 4}, {4, 2}, {2}, {3, 2}});
    row("scaled scores", OpKind::BatchMatMul, "bsd,btd->bst", "scale", S{{2, 3, 2}, {2, 3, 2}, {2, 3, 3}});
    row("grouped scores", OpKind::BatchMatMul, "kgsd,ktd->kgst", "", S{{2, 2, 2, 2}, {2, 3, 2}, {2, 2, 2, 3}});
    row("embedding", OpKind::Embedding, "bs,vh->bsh", "", S{{2, 2}, {5, 3}, {2, 2, 3}}, V{{0, 3, 3, 1}, {}});
    row("causal softmax", OpKind::Softmax, "st->st", "causal", S{{3, 3}, {3, 3}});
    row("layer norm", OpKind::LayerNorm, "sh,h,h->sh", "", S{{2, 4}, {4}, {4}, {2, 4}});
    row("rms norm", OpKind::RMSNorm, "sh,h->sh", "", S{{2, 4}, {4}, {2, 4}});
    row("rotary", OpKind::Rotary, "bsd,sd->bsd", "", S{{2, 3, 4}, {3, 4}, {2, 3, 4}});
    row("batch norm", OpKind::BatchNorm, "nchw,c,c->nchw", "", S{{2, 2, 2, 2}, {2}, {2}, {2, 2, 2, 2}});
    row("gelu", OpKind::GeLU, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("silu", OpKind::SiLU, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("relu", OpKind::ReLU, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("tanh", OpKind::Tanh, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("sigmoid", OpKind::Sigmoid, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("mul", OpKind::Mul, "ab,ab->ab", "", S{{2, 3}, {2, 3}, {2, 3}});
    row("broadcast add", OpKind::Add, "bst,1st->bst", "", S{{2, 2, 3}, {1, 2, 3}, {2, 2, 3}});
    row("dropout", OpKind::Dropout, "ab->ab", "", S{{2, 3}, {2, 3}});
    row("transpose", OpKind::Transpose, "ab->ba", "", S{{2, 3}, {3, 2}});
    row("head split reshape", OpKind::Reshape, "s(nd)->nsd", "", S{{2, 4}, {2, 2, 2}});
    row("mean reduce", OpKind::Reduce, "ab->a", "mean", S{{2, 3}, {2}});
    row("cross entropy", OpKind::CrossEntropy, "sv,s->", "", S{{3, 4}, {3}, {}}, V{{}, {1, 0, 3}});
    row("strided conv with bias", OpKind::Conv2d, "nchw,ockl,o->nohw", "conv", S{{2, 2, 5, 5}, {3, 2, 3, 3}, {3}, {2, 3, 3, 3}});
    row("max pool", OpKind::MaxPool, "nchw->nchw", "pool", S{{1, 2, 5, 5}, {1, 2, 3, 3}});
    row("avg pool", OpKind::AvgPool, "nchw->nchw", "pool", S{{1, 2, 5, 5}, {1, 2, 3, 3}});
    row("class token concat", OpKind::Concat, "11h,bth->bsh", "axis", S{{1, 1, 3}, {2, 2, 3}, {2, 3, 3}});
    row("first token split", OpKind::Split, "bwt->but,bvt", "axis", S{{2, 3, 2}, {2, 1, 2}, {2, 2, 2}}, {}, 2);
    // Routed experts, top-2 of 3 experts with 2 slots each for 4 tokens: some copies are dropped.
    row("dispatch top-2", OpKind::Dispatch, "bsh,bse->bech", "route", S{{2, 4, 2}, {2, 4, 3}, {2, 3, 2, 2}});
    row("combine top-2", OpKind::Combine, "bech,bse->bsh", "route", S{{2, 3, 2, 2}, {2, 4, 3}, {2, 4, 2}});
}

// Each rule's backward against central differences of L = sum(seed * outputs), and split in
// two along its first splittable loop: the halves' input gradients add up to the whole's (or, for
// an input the split loop neither indexes nor sums, each half holds the whole's).
void TestVerify::backwardByFiniteDifferences()
{
    QFETCH(int, kind);
    QFETCH(QString, einsum);
    QFETCH(QString, attrs);
    QFETCH(int, outputs);
    QFETCH(QList<QList<qint64>>, shapes);
    QFETCH(QList<QList<float>>, integers);
    Graph g;
    std::vector<TensorId> inputs, outs;
    const qsizetype nIn = shapes.size() - outputs;
    for (qsizetype i = 0; i < nIn; ++i) {
        const bool integer = i < integers.size() && !integers[i].isEmpty();
        inputs.push_back(g.addTensor("in" + std::to_string(i), std::vector<std::int64_t>(shapes[i].begin(), shapes[i].end()),
                                     integer ? DType::I64 : DType::F32, TensorRole::Input));
    }
    for (qsizetype o = nIn; o < shapes.size(); ++o)
        outs.push_back(g.addTensor("out" + std::to_string(o), std::vector<std::int64_t>(shapes[o].begin(), shapes[o].end()),
                                   DType::F32, TensorRole::Output));
    Attrs a;
    if (attrs == "causal") a["causal"] = std::int64_t{1};
    if (attrs == "mean") a["reduction"] = std::string("mean");
    if (attrs == "scale") a["scale_by_head_dim"] = std::int64_t{1};
    if (attrs == "axis") a["axis"] = std::int64_t{1};
    if (attrs == "route") a["top_k"] = std::int64_t{2};
    if (attrs == "conv") {
        a["stride"] = std::int64_t{2};
        a["padding"] = std::int64_t{1};
    }
    if (attrs == "pool") {
        a["kernel"] = std::int64_t{3};
        a["stride"] = std::int64_t{2};
        a["padding"] = std::int64_t{1};
    }
    const OpId id = g.addOp("op", static_cast<OpKind>(kind), inputs, outs, einsum.toStdString(), a);
    const Op& op = g.op(id);
    const Signature sig = opSignature(op, g);
    const auto sem = *verify::opSemantics(op.kind);
    QVERIFY(sem.differentiable());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<verify::Block> in, seed;
    for (qsizetype i = 0; i < nIn; ++i) {
        std::vector<float> v(static_cast<size_t>(g.tensor(inputs[static_cast<size_t>(i)]).numel()));
        const bool integer = i < integers.size() && !integers[i].isEmpty();
        for (size_t k = 0; k < v.size(); ++k) v[k] = integer ? integers[i][static_cast<qsizetype>(k)] : dist(rng);
        if (op.kind == OpKind::MaxPool) {
            // Values 0.1 apart, so that a step of eps never changes which element is the max.
            std::vector<int> order(v.size());
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), rng);
            for (size_t k = 0; k < v.size(); ++k) v[k] = 0.1f * static_cast<float>(order[k]) - 2.0f;
        }
        in.push_back(block(g.tensor(inputs[static_cast<size_t>(i)]).shape, v));
    }
    for (auto t : outs) {
        std::vector<float> v(static_cast<size_t>(g.tensor(t).numel()));
        for (auto& x : v) x = dist(rng);
        seed.push_back(block(g.tensor(t).shape, v));
    }
    std::vector<verify::Range> loops;
    for (const auto& l : sig.loops) loops.push_back({0, l.size});
    auto pointers = [](const std::vector<verify::Block>& v) {
        std::vector<const verify::Block*> p;
        for (const auto& b : v) p.push_back(&b);
        return p;
    };
    auto loss = [&](const std::vector<verify::Block>& x) {
        const auto y = verify::evaluateOp(op, sig, sem, g, loops, pointers(x));
        double l = 0;
        for (size_t o = 0; o < y.size(); ++o)
            for (size_t k = 0; k < y[o].data.size(); ++k) l += static_cast<double>(y[o].data[k]) * seed[o].data[k];
        return l;
    };
    const auto grads = verify::backwardOp(op, sig, sem, g, loops, pointers(in), pointers(seed));
    QCOMPARE(grads.size(), in.size());
    int checked = 0;
    for (size_t i = 0; i < in.size(); ++i) {
        if (g.tensor(inputs[i]).dtype == DType::I64) continue;
        QCOMPARE(grads[i].data.size(), in[i].data.size());
        for (size_t k = 0; k < in[i].data.size(); ++k) {
            const float eps = 1e-2f;
            auto x = in;
            x[i].data[k] += eps;
            const double up = loss(x);
            x[i].data[k] -= 2 * eps;
            const double numeric = (up - loss(x)) / (2 * eps);
            QVERIFY2(std::fabs(numeric - grads[i].data[k]) < 2e-3,
                     qPrintable(QString("input %1 element %2: backward %3, finite differences %4")
                                    .arg(i)
                                    .arg(k)
                                    .arg(grads[i].data[k])
                                    .arg(numeric)));
            ++checked;
        }
    }
    QVERIFY(checked > 0);

    int split = -1;
    for (size_t l = 0; l < sig.loops.size() && split < 0; ++l)
        if (dimRoleSplittable(sig.loops[l].role) && sig.loops[l].size % 2 == 0) split = static_cast<int>(l);
    if (split < 0) return;
    for (size_t i = 0; i < in.size(); ++i) {
        if (g.tensor(inputs[i]).dtype == DType::I64) continue;
        const auto summed = verify::gradientSummedLoops(sig, sem, op, i);
        bool indexed = false;
        for (const auto& grp : sig.inputs[i].dims) indexed = indexed || std::find(grp.begin(), grp.end(), split) != grp.end();
        const bool replicated = !indexed && !summed[static_cast<size_t>(split)];
        std::vector<double> assembled(grads[i].data.size(), 0.0);
        for (int half = 0; half < 2; ++half) {
            auto part = loops;
            const auto n = sig.loops[static_cast<size_t>(split)].size / 2;
            part[static_cast<size_t>(split)] = {half * n, (half + 1) * n};
            std::vector<verify::Block> seedPart;
            for (size_t o = 0; o < seed.size(); ++o)
                seedPart.push_back(seed[o].slice(verify::operandRanges(sig.outputs[o], sig, part, g.tensor(outs[o]).shape)));
            const auto gp = verify::backwardOp(op, sig, sem, g, part, pointers(in), pointers(seedPart))[i];
            const auto st = grads[i].strides();
            const auto pst = gp.strides();
            for (std::int64_t k = 0; k < gp.numel(); ++k) {
                std::int64_t rest = k, off = 0;
                for (size_t d = 0; d < pst.size(); ++d) {
                    off += (rest / pst[d] + gp.start[d]) * st[d];
                    rest %= pst[d];
                }
                if (replicated)
                    QVERIFY(std::fabs(gp.data[static_cast<size_t>(k)] - grads[i].data[static_cast<size_t>(off)]) < 1e-5);
                else
                    assembled[static_cast<size_t>(off)] += gp.data[static_cast<size_t>(k)];
            }
        }
        if (!replicated)
            for (size_t k = 0; k < assembled.size(); ++k)
                QVERIFY2(std::fabs(assembled[k] - grads[i].data[k]) < 1e-5,
                         qPrintable(QString("input %1 element %2").arg(i).arg(k)));
    }
}

void TestVerify::deletedBackwardAllReduceFails_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("at");       // the representative the collective is listed after
    QTest::addColumn<QString>("failedOp"); // the last instance, which the reverse sweep meets first
    QTest::newRow("gpt ln1 (before q/k/v)") << "gpt2"
                                            << "layers.0/ln1"
                                            << "layers.1/ln1";
    QTest::newRow("gpt ln2 (before fc1)") << "gpt2"
                                          << "layers.0/ln2"
                                          << "layers.1/ln2";
    QTest::newRow("llama attn norm") << "llama2-7b"
                                     << "layers.0/attn_norm"
                                     << "layers.1/attn_norm";
}

// Deleting the backward all-reduce after the norm that feeds column-parallel layers (the dual
// of the row-parallel forward all-reduce) leaves the norm with partial input gradients: verify
// fails in the backward at that norm and names the collective.
void TestVerify::deletedBackwardAllReduceFails()
{
    QFETCH(QString, model);
    QFETCH(QString, at);
    QFETCH(QString, failedOp);
    auto doc = planDocument(model, "layers=2", "4", "megatron");
    QVERIFY2(verify::verifyPlan(doc).passed, "the intact plan verifies");
    auto& list = doc["collectives"];
    const auto before = list.size();
    for (auto it = list.begin(); it != list.end();)
        if ((*it)["at"] == at.toStdString() && (*it)["kind"] == "all-reduce" && (*it)["phase"] == "backward")
            it = list.erase(it);
        else
            ++it;
    QCOMPARE(list.size(), before - 1);
    const auto report = verify::verifyPlan(doc);
    QVERIFY(!report.passed);
    QCOMPARE(QString::fromStdString(report.failedPhase), QString("backward"));
    QCOMPARE(QString::fromStdString(report.failedOp), failedOp);
    const QString message = QString::fromStdString(report.message);
    QVERIFY2(message.startsWith("backward: op '" + failedOp + "'"), report.message.c_str());
    QVERIFY2(message.contains("no backward all-reduce or reduce-scatter") && message.contains(at), report.message.c_str());
    QVERIFY(!report.missing.empty());
    // The forward was intact.
    for (const auto& c : report.ops) QVERIFY(c.ok);
}

// Deleting the data-parallel gradient all-reduce listed at a layer leaves that layer's weight
// gradients partial: verify fails in the backward naming the op and the weight.
void TestVerify::deletedGradientAllReduceFails()
{
    auto doc = planDocument("gpt2", "layers=2", "4", "dp");
    auto& list = doc["collectives"];
    const auto before = list.size();
    for (auto it = list.begin(); it != list.end();)
        if ((*it)["at"] == "layers.0/mlp/fc1" && (*it)["phase"] == "gradient")
            it = list.erase(it);
        else
            ++it;
    QVERIFY(list.size() < before);
    const auto report = verify::verifyPlan(doc);
    QVERIFY(!report.passed);
    QCOMPARE(QString::fromStdString(report.failedPhase), QString("backward"));
    QCOMPARE(QString::fromStdString(report.failedOp), QString("layers.1/mlp/fc1"));
    QVERIFY2(QString::fromStdString(report.message).contains("weight gradient of 'layers.1/mlp/fc1."), report.message.c_str());
    QVERIFY2(QString::fromStdString(report.message).contains("no gradient all-reduce over x"), report.message.c_str());
}

// The CLI on a plan file with a backward all-reduce deleted: exit 3, the op and pass named.
void TestVerify::brokenBackwardThroughCli()
{
    auto doc = planDocument("gpt2", "layers=1", "4", "megatron");
    auto& list = doc["collectives"];
    for (auto it = list.begin(); it != list.end();)
        if ((*it)["at"] == "layers.0/ln2" && (*it)["kind"] == "all-reduce" && (*it)["phase"] == "backward")
            it = list.erase(it);
        else
            ++it;
    QTemporaryDir dir;
    const QString path = dir.filePath("broken.tpplan.json");
    std::ofstream(path.toStdString()) << doc.dump();
    QProcess p;
    p.start(TP_TPPLAN, {"verify", path, "--json"});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 3);
    const auto out = nlohmann::json::parse(p.readAllStandardOutput().toStdString());
    QCOMPARE(QString::fromStdString(out["failed_op"].get<std::string>()), QString("layers.0/ln2"));
    QCOMPARE(QString::fromStdString(out["failed_phase"].get<std::string>()), QString("backward"));
    QCOMPARE(QString::fromStdString(out["executed"].get<std::string>()), QString("forward+backward"));
    QVERIFY(QString(p.readAllStandardError()).contains("backward: op 'layers.0/ln2'"));
}

void TestVerify::deletedAllReduceFails_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("rowParallel");
    QTest::addColumn<QString>("consumer");
    QTest::newRow("gpt attn out") << "gpt2"
                                  << "layers.0/attn/out"
                                  << "layers.0/attn/out_dropout";
    QTest::newRow("gpt fc2") << "gpt2"
                             << "layers.0/mlp/fc2"
                             << "layers.0/mlp/dropout";
    QTest::newRow("llama down") << "llama2-7b"
                                << "layers.0/mlp/down"
                                << "layers.0/residual2";
}

// Deleting the forward all-reduce after a row-parallel layer from a Megatron plan leaves its
// consumer with partial sums: verify fails at that consumer and says which collective is missing.
void TestVerify::deletedAllReduceFails()
{
    QFETCH(QString, model);
    QFETCH(QString, rowParallel);
    QFETCH(QString, consumer);
    auto doc = planDocument(model, "layers=2", "4", "megatron");
    auto& list = doc["collectives"];
    const auto before = list.size();
    for (auto it = list.begin(); it != list.end();)
        if ((*it)["at"] == rowParallel.toStdString() && (*it)["kind"] == "all-reduce" && (*it)["phase"] == "forward")
            it = list.erase(it);
        else
            ++it;
    QCOMPARE(list.size(), before - 1);
    const auto report = verify::verifyPlan(doc);
    QVERIFY(!report.passed);
    QCOMPARE(QString::fromStdString(report.failedOp), consumer);
    QVERIFY2(QString::fromStdString(report.message).contains(rowParallel), report.message.c_str());
    QVERIFY(!report.missing.empty());
}

// The committed broken plan (tests/data/verify): verify names the op through the CLI too.
void TestVerify::brokenFixtureFails()
{
    std::ifstream in(TP_TEST_DATA "/verify/gpt2-megatron-missing-allreduce.tpplan.json");
    QVERIFY(in.good());
    std::stringstream text;
    text << in.rdbuf();
    const auto report = verify::verifyPlan(nlohmann::json::parse(text.str()));
    QVERIFY(!report.passed);
    QCOMPARE(QString::fromStdString(report.failedOp), QString("layers.0/mlp/dropout"));

    QProcess p;
    p.start(TP_TPPLAN, {"verify", TP_TEST_DATA "/verify/gpt2-megatron-missing-allreduce.tpplan.json"});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 3);
    QVERIFY(QString(p.readAllStandardError()).contains("layers.0/mlp/dropout"));
}

// The shrunk model keeps every split of the plan legal: on a 2x4 mesh a plan that splits
// heads over x*y still verifies, and the overrides are multiples of the device count.
void TestVerify::shrinkKeepsDivisibility()
{
    const auto o = verify::shrinkOverrides({{"family", "gpt"}, {"heads", 12}, {"hidden", 768}}, 8);
    QVERIFY(std::find(o.begin(), o.end(), "heads=8") != o.end());
    QVERIFY(std::find(o.begin(), o.end(), "hidden=64") != o.end());
    auto doc = planDocument("gpt2", "layers=1", "2x4", "");
    const auto report = verify::verifyPlan(doc);
    QVERIFY2(report.passed, report.message.c_str());
    QCOMPARE(report.devices, 8);
}

// verify reads plans with the shared JSON reader (core/util/json_reader.h): each fault is one
// line naming the JSON pointer of the field, never a library exception. Each row edits the
// committed fixture by one field.
void TestVerify::malformedPlanNamesTheField_data()
{
    QTest::addColumn<QString>("pointer");
    QTest::addColumn<QString>("value"); // JSON text; empty: remove the field
    QTest::addColumn<QString>("message");
    QTest::newRow("format") << "/format"
                            << "\"tpstudio.graph\""
                            << "plan: /format: is 'tpstudio.graph', expected 'tpstudio.plan'";
    QTest::newRow("no config") << "/model/config"
                               << ""
                               << "plan: /model/config: is missing; verify shrinks the model from its builder config, so it "
                                  "needs a plan of a built-in or config.json model";
    QTest::newRow("axis size 0") << "/mesh/axes/0/size"
                                 << "0"
                                 << "plan: /mesh/axes/0/size: is 0, must be at least 1";
    QTest::newRow("axis name") << "/mesh/axes/0/name"
                               << "7"
                               << "plan: /mesh/axes/0/name: must be a string, not number";
    QTest::newRow("no strategy") << "/ops/2/strategy"
                                 << ""
                                 << "plan: /ops/2/strategy: is missing";
    QTest::newRow("class not int") << "/ops/2/block_class"
                                   << "\"a\""
                                   << "plan: /ops/2/block_class: must be an integer, not \"a\"";
    QTest::newRow("collectives") << "/collectives"
                                 << "{}"
                                 << "plan: /collectives: must be an array, not object";
    QTest::newRow("count") << "/collectives/0/count"
                           << "1.5"
                           << "plan: /collectives/0/count: must be an integer, not 1.5";
}

void TestVerify::malformedPlanNamesTheField()
{
    QFETCH(QString, pointer);
    QFETCH(QString, value);
    QFETCH(QString, message);
    std::ifstream in(TP_TEST_DATA "/verify/gpt2-megatron-missing-allreduce.tpplan.json");
    QVERIFY(in.good());
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json doc = nlohmann::json::parse(text.str());
    const nlohmann::json::json_pointer at(pointer.toStdString());
    QVERIFY2(doc.contains(at), "the fixture has the field");
    if (value.isEmpty())
        doc[at.parent_pointer()].erase(at.back());
    else
        doc[at] = nlohmann::json::parse(value.toStdString());
    try {
        verify::verifyPlan(doc);
        QFAIL("the edited plan was accepted");
    } catch (const InputError& e) {
        QCOMPARE(QString::fromStdString(e.what()), message);
    }
}

QTEST_APPLESS_MAIN(TestVerify)
#include "tst_verify.moc"
