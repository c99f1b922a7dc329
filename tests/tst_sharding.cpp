// Tensor specs (text form round trip and errors) and op strategies (enumeration counts,
// operand specs, gradient partial axes), on small hand-checkable signatures.
#include <QtTest>

#include "graph/signature.h"
#include "mesh/mesh.h"
#include "sharding/spec.h"
#include "sharding/strategy.h"
#include "util/error.h"

using namespace tp;

namespace {
Mesh mesh(const char* text) { return parseMesh(text, loadHardware("a100-80g-dgx")); }
// Linear x[b,s,h] @ w[h,f] with b=2, s=4, h=8, f=4.
Signature linearSig() { return parseSignature("bsh,hf->bsf", {{2, 4, 8}, {8, 4}}, {{2, 4, 4}}); }
} // namespace

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
        QTest::newRow("unknown axis") << "[-,z,-]" << "unknown mesh axis 'z'";
        QTest::newRow("axis twice") << "[x,x,-]" << "used twice";
        QTest::newRow("split and partial on one axis") << "[x,-,-]+x" << "used twice";
        QTest::newRow("rank") << "[-,-]" << "rank 3";
        QTest::newRow("no brackets") << "-,-,-" << "expected the form";
        QTest::newRow("junk after") << "[-,-,-]x" << "unexpected";
        QTest::newRow("not dividing") << "[-,-,-]" << ""; // placeholder replaced below
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
        QTest::newRow("column") << "f=y" << "[-,-,-]" << "[-,y]" << "[-,-,y]" << "[-,y]" << "[-,-,-]+y";
        QTest::newRow("row") << "h=y" << "[-,-,y]" << "[y,-]" << "[-,-,-]+y" << "[y,-]" << "[-,-,y]";
        QTest::newRow("data+column") << "b=x,f=y" << "[x,-,-]" << "[-,y]" << "[x,-,y]" << "[-,y]+x" << "[x,-,-]+y";
        QTest::newRow("replicated") << "-" << "[-,-,-]" << "[-,-]" << "[-,-,-]" << "[-,-]" << "[-,-,-]";
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
        QTest::newRow("unknown dim") << "q=x" << "no dim 'q'";
        QTest::newRow("unknown axis") << "f=z" << "unknown mesh axis 'z'";
        QTest::newRow("axis twice") << "f=x,h=x" << "used twice";
        QTest::newRow("not dividing") << "b=x*y" << "does not divide";
        QTest::newRow("malformed") << "fx" << "not of the form";
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
