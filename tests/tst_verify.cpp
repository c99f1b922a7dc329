// Verify: the executor against hand-computed values, the sharded run against the single-device
// run on searched, Megatron and data-parallel plans of every family, and a broken plan (the
// forward all-reduce after a row-parallel layer deleted) that must fail naming the op.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <sstream>

#include "graph/opkinds.h"
#include "plan/planner.h"
#include "util/error.h"
#include "verify/executor.h"
#include "verify/verify.h"

using namespace tp;

namespace {

nlohmann::json planDocument(const QString& model, const QString& overrides, const QString& mesh, const QString& baseline)
{
    PlanRequest r;
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
    void deletedAllReduceFails_data();
    void deletedAllReduceFails();
    void brokenFixtureFails();
    void shrinkKeepsDivisibility();
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
    QTest::newRow("linear with bias") << int(OpKind::Linear) << "sh,hf,f->sf" << ""
        << S{{1, 2}, {2, 2}, {2}, {1, 2}} << V{{1, 2}, {1, 2, 3, 4}, {10, 20}} << QList<float>{17, 30};
    QTest::newRow("embedding lookup") << int(OpKind::Embedding) << "s,vh->sh" << ""
        << S{{2}, {3, 2}, {2, 2}} << V{{2, 0}, {1, 2, 3, 4, 5, 6}} << QList<float>{5, 6, 1, 2};
    QTest::newRow("causal softmax") << int(OpKind::Softmax) << "st->st" << "causal"
        << S{{2, 2}, {2, 2}} << V{{0, 5, 0, 0}} << QList<float>{1, 0, 0.5f, 0.5f};
    QTest::newRow("layer norm") << int(OpKind::LayerNorm) << "sh->sh" << ""
        << S{{1, 2}, {1, 2}} << V{{1, 3}} << QList<float>{-1, 1};
    QTest::newRow("transpose") << int(OpKind::Transpose) << "ab->ba" << ""
        << S{{2, 3}, {3, 2}} << V{{1, 2, 3, 4, 5, 6}} << QList<float>{1, 4, 2, 5, 3, 6};
    QTest::newRow("head split reshape") << int(OpKind::Reshape) << "s(nd)->nsd" << ""
        << S{{2, 4}, {2, 2, 2}} << V{{1, 2, 3, 4, 5, 6, 7, 8}} << QList<float>{1, 2, 5, 6, 3, 4, 7, 8};
    QTest::newRow("mean reduce") << int(OpKind::Reduce) << "ab->a" << "mean"
        << S{{2, 2}, {2}} << V{{1, 3, 5, 7}} << QList<float>{2, 6};
    QTest::newRow("cross entropy") << int(OpKind::CrossEntropy) << "sv,s->" << ""
        << S{{1, 2}, {1}, {}} << V{{0, 0}, {1}} << QList<float>{std::log(2.0f)};
    QTest::newRow("silu") << int(OpKind::SiLU) << "a->a" << ""
        << S{{2}, {2}} << V{{0, 1}} << QList<float>{0, 1.0f / (1.0f + std::exp(-1.0f))};
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
        blocks.push_back(block(g.tensor(inputs[static_cast<size_t>(i)]).shape, std::vector<float>(values[i].begin(), values[i].end())));
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
    struct Family { const char* model; const char* overrides; const char* mesh; };
    const Family families[] = {
        {"gpt2", "layers=2", "2x2"},
        {"llama2-7b", "layers=2", "4"},
        {"llama3-8b", "layers=1", "2x2"},  // grouped-query attention
        {"bert-base", "layers=2", "4"},
        {"t5-base", "layers=1", "2x2"},
        {"vit-b16", "layers=1", "4"},
        {"resnet50", "", "2"},
    };
    for (const auto& f : families)
        for (const auto& b : baselines)
            QTest::newRow(qPrintable(QString("%1 %2 %3").arg(f.model, b.isEmpty() ? "search" : b, f.mesh)))
                << f.model << f.overrides << f.mesh << b;
}

// The sharded run equals the single-device run op by op.
void TestVerify::plansPass()
{
    QFETCH(QString, model);
    QFETCH(QString, overrides);
    QFETCH(QString, mesh);
    QFETCH(QString, baseline);
    const auto doc = planDocument(model, overrides, mesh, baseline);
    const auto report = verify::verifyPlan(doc);
    QVERIFY2(report.passed, report.message.c_str());
    QVERIFY(!report.ops.empty());
    QCOMPARE(report.ops.size(), doc["ops"].size() >= report.ops.size() ? report.ops.size() : size_t{0});
    QVERIFY(report.missing.empty());
    // Every listed forward collective was needed somewhere.
    for (const auto& c : report.collectives)
        if (c.inShrunkModel) QVERIFY2(c.performed > 0, (c.kind + " after " + c.at).c_str());
}

void TestVerify::deletedAllReduceFails_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("rowParallel");
    QTest::addColumn<QString>("consumer");
    QTest::newRow("gpt attn out") << "gpt2" << "layers.0/attn/out" << "layers.0/attn/out_dropout";
    QTest::newRow("gpt fc2") << "gpt2" << "layers.0/mlp/fc2" << "layers.0/mlp/dropout";
    QTest::newRow("llama down") << "llama2-7b" << "layers.0/mlp/down" << "layers.0/residual2";
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
        if ((*it)["at"] == rowParallel.toStdString() && (*it)["kind"] == "all-reduce" && (*it)["phase"] == "forward") it = list.erase(it);
        else ++it;
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

QTEST_APPLESS_MAIN(TestVerify)
#include "tst_verify.moc"
