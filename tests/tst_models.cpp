// Model builders: parameter counts against published figures, FLOPs against closed forms.
#include <QtTest>

#include "graph/stats.h"
#include "graph/validate.h"
#include "models/catalog.h"
#include "util/error.h"

using namespace tp;

class TestModels : public QObject {
    Q_OBJECT
private slots:
    void parameterCounts_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("expected");
        QTest::addColumn<double>("tolerance"); // relative
        // GPT-2 small, exact: wte 50257*768 + wpe 1024*768 + 12*(12*768^2 + 13*768) + 2*768
        // = 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808 (reference.md).
        QTest::newRow("gpt2") << "gpt2" << 124439808.0 << 0.0;
        // GPT-3 175B: 12*l*h^2 + 13*l*h + V*h + 2048*h + 2h ~ 174.6B (Narayanan et al.).
        QTest::newRow("gpt3-175b") << "gpt3-175b" << 174.6e9 << 0.01;
        QTest::newRow("gpt3-6.7b") << "gpt3-6.7b" << 6.7e9 << 0.01;
        QTest::newRow("gpt3-1.3b") << "gpt3-1.3b" << 1.3e9 << 0.02;
    }

    void parameterCounts()
    {
        QFETCH(QString, model);
        QFETCH(double, expected);
        QFETCH(double, tolerance);
        const auto m = loadModel(model.toStdString());
        const double params = static_cast<double>(m.graph.parameterCount());
        QVERIFY2(std::abs(params - expected) <= tolerance * expected,
                 qPrintable(QStringLiteral("%1 params, expected %2").arg(params, 0, 'f', 0).arg(expected, 0, 'f', 0)));
    }

    void gpt3FlopsMatchNarayanan()
    {
        // Model FLOPs of one training step, no recomputation:
        // 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) (Narayanan et al. 2021 with 3 passes instead of 4).
        ModelOptions options;
        options.batch = 1536;
        const auto m = loadModel("gpt3-175b", options);
        const double B = 1536, s = 2048, l = 96, h = 12288, V = 50257;
        const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
        const double flops = computeStats(m.graph).trainStepFlops;
        QVERIFY2(std::abs(flops / expected - 1) < 0.02,
                 qPrintable(QStringLiteral("%1 vs %2").arg(flops, 0, 'e', 4).arg(expected, 0, 'e', 4)));
    }

    void everyBuiltinBuildsAndValidates()
    {
        for (const auto& name : builtinModelNames()) {
            ModelOptions small;
            small.batch = 2;
            const auto m = loadModel(name, small);
            validateGraph(m.graph);
            QVERIFY2(m.graph.ops.size() > 10, name.c_str());
        }
    }

    void gptLayerScopes()
    {
        ModelOptions o;
        o.overrides = {"layers=3"};
        const auto m = loadModel("gpt2", o);
        QStringList names;
        for (const auto& op : m.graph.ops) names << QString::fromStdString(op.name);
        QVERIFY(names.contains("layers.2/mlp/fc1"));
        QVERIFY(names.contains("layers.0/attn/scores"));
        QVERIFY(!names.contains("layers.3/mlp/fc1"));
    }

    void overridesAndErrors()
    {
        ModelOptions o;
        o.overrides = {"hidden=100", "heads=3"};
        try {
            loadModel("gpt2", o);
            QFAIL("indivisible heads accepted");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("'hidden' (100) is not divisible by 'heads' (3)"), e.what());
        }
        try {
            loadModel("no-such-model");
            QFAIL("unknown model accepted");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("unknown model 'no-such-model'"), e.what());
        }
        o.overrides = {"layers=-4"};
        try {
            loadModel("gpt2", o);
            QFAIL("negative layers accepted");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("field 'layers' must be a positive integer"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestModels)
#include "tst_models.moc"
