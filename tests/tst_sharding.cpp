// Tensor specs (text form round trip and errors), op strategies (enumeration counts, operand
// specs, gradient partial axes), on small hand-checkable signatures; and the sharding classifier
// (core/sharding/classify.h) on hand-checked candidates and on every candidate of every built-in.
#include <QtTest>

#include <algorithm>
#include <array>
#include <memory>

#include "export/export_styles.h"
#include "graph/signature.h"
#include "import/catalog.h"
#include "mesh/mesh.h"
#include "plan/planner.h"
#include "sharding/classify.h"
#include "sharding/spec.h"
#include "sharding/strategy.h"
#include "util/error.h"

using namespace tp;

namespace {
Mesh mesh(const char* text) { return parseMesh(text, loadHardware("a100-80g-dgx")); }
// Linear x[b,s,h] @ w[h,f] with b=2, s=4, h=8, f=4.
Signature linearSig() { return parseSignature("bsh,hf->bsf", {{2, 4, 8}, {8, 4}}, {{2, 4, 4}}); }

// A small built-in workspace: two layers (or encoder/decoder layers) where the config has them.
std::unique_ptr<PlanWorkspace> workspace(const std::string& model, const std::string& mesh,
                                         const std::vector<std::string>& overrides = {})
{
    PlanRequest request;
    request.modelOptions.overrides = overrides;
    request.model = model;
    request.mesh = mesh;
    request.modelOptions.batch = 8;
    const ModelConfig config = builtinModelConfig(model);
    for (const char* key : {"layers", "decoder_layers"})
        if (config.contains(key)) request.modelOptions.overrides.push_back(std::string(key) + "=2");
    return preparePlan(request);
}

bool indexesLoop(const OperandIndexing& operand, int loop)
{
    for (const auto& group : operand.dims)
        if (std::find(group.begin(), group.end(), loop) != group.end()) return true;
    return false;
}
} // namespace

Q_DECLARE_METATYPE(tp::ShardClass)

class TestSharding : public QObject {
    Q_OBJECT
private slots:
    void specRoundTrip_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<qint64>("shardNumel"); // shape [8, 16, 32] = 4096 elements on mesh 2x4
        QTest::newRow("replicated") << "[-,-,-]" << qint64(4096);
        QTest::newRow("last on y") << "[-,-,y]" << qint64(4096 / 4);
        QTest::newRow("first on x") << "[x,-,-]" << qint64(4096 / 2);
        QTest::newRow("last on x*y") << "[-,-,x*y]" << qint64(4096 / 8);
        QTest::newRow("y*x") << "[-,-,y*x]" << qint64(4096 / 8);
        QTest::newRow("partial x") << "[-,-,-]+x" << qint64(4096);
        QTest::newRow("partial x+y") << "[-,-,-]+x+y" << qint64(4096);
        QTest::newRow("split and partial") << "[-,y,-]+x" << qint64(4096 / 4);
    }
    void specRoundTrip()
    {
        QFETCH(QString, text);
        QFETCH(qint64, shardNumel);
        const Mesh m = mesh("2x4");
        const std::vector<std::int64_t> shape{8, 16, 32};
        const TensorSpec s = parseSpec(text.toStdString(), shape, m);
        QCOMPARE(QString::fromStdString(specToString(s, m)), text);
        QCOMPARE(qint64(s.shardNumel(shape, m)), shardNumel);
    }

    void specErrors_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("says");
        QTest::newRow("unknown axis") << "[-,z,-]"
                                      << "unknown mesh axis 'z'";
        QTest::newRow("axis twice") << "[x,x,-]"
                                    << "used twice";
        QTest::newRow("split and partial on one axis") << "[x,-,-]+x"
                                                       << "used twice";
        QTest::newRow("rank") << "[-,-]"
                              << "rank 3";
        QTest::newRow("no brackets") << "-,-,-"
                                     << "expected the form";
        QTest::newRow("junk after") << "[-,-,-]x"
                                    << "unexpected";
        QTest::newRow("not dividing") << "[-,-,-]"
                                      << ""; // placeholder replaced below
    }
    void specErrors()
    {
        QFETCH(QString, text);
        QFETCH(QString, says);
        const Mesh m = mesh("2x4");
        std::vector<std::int64_t> shape{8, 16, 32};
        std::string t = text.toStdString();
        if (says.isEmpty()) { // dim 0 of size 6 does not split 4 ways
            shape = {6, 16, 32};
            t = "[y,-,-]";
            says = "does not divide";
        }
        try {
            parseSpec(t, shape, m);
            QFAIL("expected InputError");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains(says), e.what());
        }
    }

    // Hand-checked candidates of GPT-2 (two layers) on 2x4. Every linear layer is written
    // "bsh,hf,f->bsf" (h contracted, f its output; in fc2 h is the ffn dim), gelu "bst->bst" (t
    // the ffn features), wte "bs,vh->bsh" (v gathered), wpe "s,vh->sh", the embedding add
    // "bsh,sh->bsh", ln "bsh,h,h->bsh", the loss "bsv,bs->" (b and s summed over).
    void handClasses_data()
    {
        QTest::addColumn<QString>("op");
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<ShardClass>("expected");
        QTest::newRow("fc1 -") << "layers.0/mlp/fc1"
                               << "-" << ShardClass::Replicated;
        QTest::newRow("fc1 f=y") << "layers.0/mlp/fc1"
                                 << "f=y" << ShardClass::Column;
        QTest::newRow("fc1 b=x,f=y") << "layers.0/mlp/fc1"
                                     << "b=x,f=y" << ShardClass::Column; // data + column
        QTest::newRow("fc1 h=y") << "layers.0/mlp/fc1"
                                 << "h=y" << ShardClass::Row;
        QTest::newRow("fc1 h=x,f=y") << "layers.0/mlp/fc1"
                                     << "h=x,f=y" << ShardClass::Mixed;
        QTest::newRow("fc1 b=x") << "layers.0/mlp/fc1"
                                 << "b=x" << ShardClass::Data;
        QTest::newRow("fc1 b=x*y") << "layers.0/mlp/fc1"
                                   << "b=x*y" << ShardClass::Data;
        QTest::newRow("fc1 s=y") << "layers.0/mlp/fc1"
                                 << "s=y" << ShardClass::Sequence;
        QTest::newRow("fc1 b=x,s=y") << "layers.0/mlp/fc1"
                                     << "b=x,s=y" << ShardClass::Sequence;
        QTest::newRow("fc1 s=x,f=y") << "layers.0/mlp/fc1"
                                     << "s=x,f=y" << ShardClass::Mixed;
        QTest::newRow("fc2 h=y") << "layers.0/mlp/fc2"
                                 << "h=y" << ShardClass::Row; // the ffn dim, contracted
        QTest::newRow("fc2 f=y") << "layers.0/mlp/fc2"
                                 << "f=y" << ShardClass::Column;
        QTest::newRow("gelu t=y") << "layers.0/mlp/gelu"
                                  << "t=y" << ShardClass::Feature;
        QTest::newRow("gelu b=x,t=y") << "layers.0/mlp/gelu"
                                      << "b=x,t=y" << ShardClass::Feature;
        QTest::newRow("gelu s=y") << "layers.0/mlp/gelu"
                                  << "s=y" << ShardClass::Sequence;
        QTest::newRow("heads n=y") << "layers.0/attn/scores"
                                   << "n=y" << ShardClass::Feature; // "bnsd,bntd->bnst"
        QTest::newRow("scores s=y") << "layers.0/attn/scores"
                                    << "s=y" << ShardClass::Sequence;
        QTest::newRow("context t=y") << "layers.0/attn/context"
                                     << "t=y" << ShardClass::Sequence; // contracted, no weight
        QTest::newRow("ln1 s=y") << "layers.0/ln1"
                                 << "s=y" << ShardClass::Sequence;
        QTest::newRow("ln1 b=x") << "layers.0/ln1"
                                 << "b=x" << ShardClass::Data;
        QTest::newRow("wte v=y") << "embed/wte"
                                 << "v=y" << ShardClass::Row; // vocab-parallel embedding
        QTest::newRow("wte h=y") << "embed/wte"
                                 << "h=y" << ShardClass::Column;
        QTest::newRow("wpe s=y") << "embed/wpe"
                                 << "s=y" << ShardClass::Sequence; // [s, h]: no batch dim
        QTest::newRow("add s=y") << "embed/add"
                                 << "s=y" << ShardClass::Sequence; // "bsh,sh->bsh"
        QTest::newRow("loss b=x") << "head/loss"
                                  << "b=x" << ShardClass::Data; // summed over, still the batch
        QTest::newRow("lm_head v=y") << "head/lm_head"
                                     << "v=y" << ShardClass::Column; // "bsh,vh->bsv"
        QTest::newRow("loss -") << "head/loss"
                                << "-" << ShardClass::Replicated;
    }
    void handClasses()
    {
        QFETCH(QString, op);
        QFETCH(QString, strategy);
        QFETCH(ShardClass, expected);
        static const auto ws = workspace("gpt2", "2x4", {"vocab=50304"}); // GPT-2's 50257 divides by nothing
        const CostModel& model = *ws->costModel;
        const Graph& g = model.graph();
        OpId id = -1;
        for (const Op& o : g.ops)
            if (o.name == op.toStdString()) id = o.id;
        QVERIFY2(id >= 0, qPrintable(op));
        const OpStrategy st = parseStrategy(strategy.toStdString(), model.signature(id), model.mesh());
        const auto& candidates = model.strategies(id);
        const auto it = std::find(candidates.begin(), candidates.end(), st);
        QVERIFY(it != candidates.end());
        const ShardClass got = classifyOp(model, id, static_cast<int>(it - candidates.begin())).kind;
        QVERIFY2(got == expected, qPrintable(QString::fromStdString(std::string(shardClassName(got)))));
    }

    // A batched matmul over stacked expert weights "ech,ehf->ecf" (experts, capacity, hidden,
    // ffn), input 1 the weight: e indexes the weight and the activation and is not contracted.
    void expertClasses_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<ShardClass>("expected");
        QTest::newRow("e") << "e=x" << ShardClass::Expert;
        QTest::newRow("f") << "f=y" << ShardClass::Column;
        QTest::newRow("h") << "h=y" << ShardClass::Row;
        QTest::newRow("c") << "c=y" << ShardClass::Sequence; // the token (capacity) axis of [e, c, h]
        QTest::newRow("e and f") << "e=x,f=y" << ShardClass::Mixed;
    }
    void expertClasses()
    {
        QFETCH(QString, strategy);
        QFETCH(ShardClass, expected);
        const Mesh m = mesh("2x4");
        const Signature sig = parseSignature("ech,ehf->ecf", {{4, 8, 16}, {4, 16, 32}}, {{4, 8, 32}});
        OperandFacts facts;
        facts.weightInput = {false, true};
        const StrategyClass c = classifyStrategy(sig, facts, parseStrategy(strategy.toStdString(), sig, m), m.rank());
        QVERIFY2(c.kind == expected, qPrintable(QString::fromStdString(std::string(shardClassName(c.kind)))));
    }

    // An activation between expert matmuls, on routed tokens [b, e, c, f] (dim 1 the experts):
    // a split of e is expert parallelism without a weight; b stays data, f a feature split.
    void routedTokensClasses_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<bool>("routed");
        QTest::addColumn<ShardClass>("expected");
        QTest::newRow("e routed") << "e=x" << true << ShardClass::Expert;
        QTest::newRow("b routed") << "b=x" << true << ShardClass::Data;
        QTest::newRow("f routed") << "f=y" << true << ShardClass::Feature;
        QTest::newRow("e not routed") << "e=x" << false << ShardClass::Feature;
    }
    void routedTokensClasses()
    {
        QFETCH(QString, strategy);
        QFETCH(bool, routed);
        QFETCH(ShardClass, expected);
        const Mesh m = mesh("2x4");
        const Signature sig = parseSignature("becf->becf", {{4, 8, 16, 32}}, {{4, 8, 16, 32}});
        OperandFacts facts;
        facts.weightInput = {false};
        facts.batchInput = facts.batchOutput = {true};
        facts.routedInput = facts.routedOutput = {routed};
        const StrategyClass c = classifyStrategy(sig, facts, parseStrategy(strategy.toStdString(), sig, m), m.rank());
        QVERIFY2(c.kind == expected, qPrintable(QString::fromStdString(std::string(shardClassName(c.kind)))));
    }

    // Every candidate of every op of every built-in model, on a 2-D and a 3-D mesh, gets one
    // class that agrees with its loops: replicated exactly when nothing is split; a strategy
    // that splits only loops indexing no weight is never column-, row- or expert-parallel; data
    // exactly when every split loop is a data loop; per axis the class of the loop it splits.
    void everyCandidateHasOneClass_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        for (const std::string& name : builtinModelNames())
            for (const char* m : {"2x4", "2x2x2"})
                QTest::newRow((name + " " + m).c_str()) << QString::fromStdString(name) << QString(m);
    }
    void everyCandidateHasOneClass()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        const auto ws = workspace(model.toStdString(), mesh.toStdString());
        const CostModel& cm = *ws->costModel;
        const Graph& g = cm.graph();
        std::array<int, kShardClassCount> seen{};
        for (const Op& op : g.ops) {
            const Signature& sig = cm.signature(op.id);
            for (size_t s = 0; s < cm.strategies(op.id).size(); ++s) {
                const OpStrategy& st = cm.strategies(op.id)[s];
                const StrategyClass c = classifyOp(cm, op.id, static_cast<int>(s));
                QVERIFY(static_cast<int>(c.kind) < kShardClassCount);
                ++seen[static_cast<size_t>(c.kind)];
                bool anySplit = false, weightSplit = false, allData = true;
                for (size_t l = 0; l < st.loopAxes.size(); ++l) {
                    if (st.loopAxes[l].empty()) {
                        QCOMPARE(c.loopClass[l], ShardClass::Replicated);
                        continue;
                    }
                    anySplit = true;
                    allData = allData && c.loopClass[l] == ShardClass::Data;
                    for (size_t k = 0; k < op.inputs.size(); ++k)
                        weightSplit = weightSplit || (g.tensor(op.inputs[k]).role == TensorRole::Weight &&
                                                      indexesLoop(sig.inputs[k], static_cast<int>(l)));
                    for (int a : st.loopAxes[l]) {
                        QCOMPARE(c.axisLoop[static_cast<size_t>(a)], static_cast<int>(l));
                        QCOMPARE(c.axisClass[static_cast<size_t>(a)], c.loopClass[l]);
                    }
                }
                const QString what = QString::fromStdString(op.name + " " + strategyToString(st, sig, cm.mesh()) + ": " +
                                                            std::string(shardClassName(c.kind)));
                QVERIFY2((c.kind == ShardClass::Replicated) == !anySplit, qPrintable(what));
                QVERIFY2((c.kind == ShardClass::Data) == (anySplit && allData), qPrintable(what));
                // Expert without a weight: only on routed tokens (an activation between expert matmuls).
                bool routed = false;
                for (TensorId t : op.inputs) routed = routed || cm.routedTokens(t);
                for (TensorId t : op.outputs) routed = routed || cm.routedTokens(t);
                auto isWeightKind = [&](ShardClass k) {
                    return k == ShardClass::Column || k == ShardClass::Row || (k == ShardClass::Expert && !routed);
                };
                if (!weightSplit) {
                    QVERIFY2(!isWeightKind(c.kind), qPrintable(what));
                    QVERIFY2(std::none_of(c.loopClass.begin(), c.loopClass.end(), isWeightKind), qPrintable(what));
                }
            }
        }
        // Transformers show every kind, expert where they route tokens to experts (one op per
        // expert projection with an expert loop); convolutions have no sequence loop to split.
        QVERIFY(seen[size_t(ShardClass::Replicated)] > 0 && seen[size_t(ShardClass::Data)] > 0);
        const bool experts = std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::Dispatch; });
        QCOMPARE(seen[size_t(ShardClass::Expert)] > 0, experts);
        QVERIFY(seen[size_t(ShardClass::Column)] > 0 && seen[size_t(ShardClass::Row)] > 0);
        if (!model.contains("resnet")) QVERIFY(seen[size_t(ShardClass::Sequence)] > 0 && seen[size_t(ShardClass::Mixed)] > 0);
    }

    // Hand count for x[2,4,8] @ w[8,4]: loops b=2, s=4, f=4 (parallel), h=8 (contracted).
    // Mesh 4 (one axis of 4): replicated, s, f or h (b=2 does not split 4 ways) = 4.
    // Mesh 2x2: each axis picks none or one of 4 loops (5 x 5 = 25); both on one loop needs 4
    // pieces, which b=2 cannot give: 25 - 1 = 24.
    // Mesh 8: only h=8 splits 8 ways: replicated or h = 2.
    void enumerationCounts_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<int>("count");
        QTest::newRow("4") << "4" << 4;
        QTest::newRow("2x2") << "2x2" << 24;
        QTest::newRow("8") << "8" << 2;
    }
    void enumerationCounts()
    {
        QFETCH(QString, mesh);
        QFETCH(int, count);
        const Mesh m = ::mesh(mesh.toLatin1().constData());
        const auto all = enumerateStrategies(linearSig(), m);
        QCOMPARE(int(all.size()), count);
        QCOMPARE(all.front(), OpStrategy::replicated(linearSig()));
        for (const auto& st : all) QVERIFY(strategyProblem(st, linearSig(), m).empty());
    }

    // Operand specs: column-parallel (f=y) shards w and the output on f; row-parallel (h=y)
    // shards x and w on h and leaves the output partial; data parallel (b=x) keeps w whole
    // and makes its gradient partial over x (the data-parallel all-reduce).
    void operandSpecs_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<QString>("x");
        QTest::addColumn<QString>("w");
        QTest::addColumn<QString>("out");
        QTest::addColumn<QString>("wGradPartial");
        QTest::addColumn<QString>("xGradPartial");
        QTest::newRow("column") << "f=y"
                                << "[-,-,-]"
                                << "[-,y]"
                                << "[-,-,y]"
                                << "[-,y]"
                                << "[-,-,-]+y";
        QTest::newRow("row") << "h=y"
                             << "[-,-,y]"
                             << "[y,-]"
                             << "[-,-,-]+y"
                             << "[y,-]"
                             << "[-,-,y]";
        QTest::newRow("data+column") << "b=x,f=y"
                                     << "[x,-,-]"
                                     << "[-,y]"
                                     << "[x,-,y]"
                                     << "[-,y]+x"
                                     << "[x,-,-]+y";
        QTest::newRow("replicated") << "-"
                                    << "[-,-,-]"
                                    << "[-,-]"
                                    << "[-,-,-]"
                                    << "[-,-]"
                                    << "[-,-,-]";
    }
    void operandSpecs()
    {
        QFETCH(QString, strategy);
        QFETCH(QString, x);
        QFETCH(QString, w);
        QFETCH(QString, out);
        QFETCH(QString, wGradPartial);
        QFETCH(QString, xGradPartial);
        const Mesh m = mesh("2x2");
        const Signature sig = linearSig();
        const OpStrategy st = parseStrategy(strategy.toStdString(), sig, m);
        QCOMPARE(QString::fromStdString(strategyToString(st, sig, m)), strategy);
        QCOMPARE(QString::fromStdString(specToString(inputSpec(sig, st, 0), m)), x);
        QCOMPARE(QString::fromStdString(specToString(inputSpec(sig, st, 1), m)), w);
        QCOMPARE(QString::fromStdString(specToString(outputSpec(sig, st, 0), m)), out);
        TensorSpec wg = inputSpec(sig, st, 1);
        wg.partial = inputGradientPartial(sig, st, 1);
        QCOMPARE(QString::fromStdString(specToString(wg, m)), wGradPartial);
        TensorSpec xg = inputSpec(sig, st, 0);
        xg.partial = inputGradientPartial(sig, st, 0);
        QCOMPARE(QString::fromStdString(specToString(xg, m)), xGradPartial);
    }

    // A bias is added to the result: in a row-parallel linear (h split) its gradient is the
    // output gradient summed over b and s, not partial over the contracted split.
    void biasGradientNotPartialOverContraction()
    {
        const Mesh m = mesh("2x2");
        const Signature sig = parseSignature("bsh,hf,f->bsf", {{2, 4, 8}, {8, 4}, {4}}, {{2, 4, 4}});
        QCOMPARE(inputGradientPartial(sig, parseStrategy("h=y", sig, m), 2), AxisMask{0});
        QCOMPARE(inputGradientPartial(sig, parseStrategy("b=x,h=y", sig, m), 2), AxisMask{1}); // x: data parallel
    }

    void strategyErrors_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("says");
        QTest::newRow("unknown dim") << "q=x"
                                     << "no dim 'q'";
        QTest::newRow("unknown axis") << "f=z"
                                      << "unknown mesh axis 'z'";
        QTest::newRow("axis twice") << "f=x,h=x"
                                    << "used twice";
        QTest::newRow("not dividing") << "b=x*y"
                                      << "does not divide";
        QTest::newRow("malformed") << "fx"
                                   << "not of the form";
    }
    void strategyErrors()
    {
        QFETCH(QString, text);
        QFETCH(QString, says);
        try {
            parseStrategy(text.toStdString(), linearSig(), mesh("2x2"));
            QFAIL("expected InputError");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains(says), e.what());
        }
    }

    void reducedDimIsNotSplit()
    {
        // Softmax over t: t is reduced-nonlinear, so on mesh 4 only b, n, s may be split.
        Signature sig = parseSignature("bnst->bnst", {{4, 4, 4, 4}}, {{4, 4, 4, 4}});
        sig.loops[3].role = DimRole::ReducedNonlinear;
        QCOMPARE(int(enumerateStrategies(sig, mesh("4")).size()), 4); // -, b, n, s
        QVERIFY_THROWS_EXCEPTION(InputError, parseStrategy("t=x", sig, mesh("4")));
    }
};

QTEST_APPLESS_MAIN(TestSharding)
#include "tst_sharding.moc"
