// The Alpa-style ILP peer: on small models its optimum equals the search's (same cost model),
// in both formulations; memory limits, locks and starting plans are honoured.
#include <QtTest>

#include <random>

#include "fold/fold.h"
#include "graph/validate.h"
#include "ilp/ilp.h"
#include "models/builder.h"
#include "import/catalog.h"
#include "search/search.h"
#include "search/evaluate.h"
#include "util/error.h"

#include "sanitizer.h"

using namespace tp;

namespace {

Hardware testHardware() { return loadHardware("a100-80g-dgx"); }

bool closeRelative(double a, double b, double tolerance = 1e-6)
{
    return std::abs(a - b) <= tolerance * std::max({1e-30, std::abs(a), std::abs(b)});
}

QString mismatch(const char* what, double ilp, double search)
{
    return QStringLiteral("%1: ilp %2 vs search %3").arg(what).arg(ilp, 0, 'g', 12).arg(search, 0, 'g', 12);
}

Graph gpt2Small()
{
    ModelOptions options;
    options.batch = 8;
    options.overrides = {"layers=2"};
    return loadModel("gpt2", options).graph;
}

/// A random DAG of transformer-like ops (linears, norms, elementwise, residual adds) over
/// [4, 4, 8] activations, with fan-out: several ops may read one tensor.
Graph randomGraph(std::mt19937& rng, int opCount)
{
    GraphBuilder b("random-ilp", DType::BF16);
    std::vector<TensorId> pool{b.input("x", {4, 4, 8}, DType::BF16)};
    for (int i = 0; i < opCount; ++i) {
        const std::string name = "op" + std::to_string(i);
        const TensorId x = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
        const std::int64_t h = b.shape(x).back();
        TensorId y = -1;
        switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
        case 0:
        case 1:
            y = b.linear(name, x, h, h == 8 ? 16 : 8, i % 2 == 0);
            break;
        case 2:
            y = b.unary(OpKind::GeLU, name, x);
            break;
        case 3:
            y = b.layerNorm(name, x);
            break;
        case 4:
            y = b.unary(OpKind::Softmax, name, x);
            break;
        default: {
            std::vector<TensorId> same;
            for (TensorId t : pool)
                if (b.shape(t) == b.shape(x)) same.push_back(t);
            const TensorId other = same[std::uniform_int_distribution<size_t>(0, same.size() - 1)(rng)];
            y = b.binary(OpKind::Add, name, x, other);
        }
        }
        pool.push_back(y);
    }
    return b.take();
}

SearchResult searchUnlimited(const CostModel& model, const Graph& graph, std::vector<ResolvedLock> locks = {})
{
    SearchOptions options;
    options.memoryLimitBytes = -1;
    options.locks = std::move(locks);
    return searchPlan(model, foldGraph(graph), options);
}

} // namespace

class TestIlp : public QObject {
    Q_OBJECT
private slots:
    // GPT-2 with 2 layers, batch 8: the ILP's optimum is the search's, on a 1D and a 2D mesh.
    void gpt2EqualsSearch_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<bool>("linearized");
        QTest::newRow("mesh4 marginal") << "4" << false;
        QTest::newRow("mesh2x2 marginal") << "2x2" << false;
        // The linearised formulation only on the 1D mesh: on 2x2 its weak relaxation keeps CBC
        // branching for over a minute (docs/PERFORMANCE.md), the marginal one closes at the root.
        QTest::newRow("mesh4 linearized") << "4" << true;
    }

    void gpt2EqualsSearch()
    {
        QFETCH(QString, mesh);
        QFETCH(bool, linearized);
        const Graph g = gpt2Small();
        const Hardware hw = testHardware();
        const CostModel model(g, parseMesh(mesh.toStdString(), hw), hw);
        const SearchResult search = searchUnlimited(model, g);
        IlpOptions options;
        options.formulation = linearized ? IlpFormulation::Linearized : IlpFormulation::Marginal;
        const IlpResult ilp = solveIlp(model, options);
        QCOMPARE(ilp.status, IlpStatus::Optimal);
        QCOMPARE(ilp.strategyOfOp.size(), g.ops.size());
        QVERIFY2(closeRelative(ilp.objective, search.objective),
                 qPrintable(mismatch("objective", ilp.objective, search.objective)));
        // The objective is the model's own evaluation of the plan, and the bound is below it.
        QVERIFY(closeRelative(ilp.objective, model.evaluate(ilp.strategyOfOp).stepSeconds, 1e-9));
        QVERIFY(ilp.bestBound <= ilp.objective * (1 + 1e-9));
        QVERIFY(ilp.variables > 0 && ilp.constraints > 0 && ilp.pairFactors > 0);
    }

    // Random small DAGs with fan-out and residual joins, meshes 4 and 2x2, both formulations.
    void randomGraphsEqualSearch_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<int>("seed");
        const int seeds = kSanitized ? 4 : 12; // under ASan (10-20x slower) a third
        for (int seed = 0; seed < seeds; ++seed) {
            QTest::newRow(qPrintable(QStringLiteral("mesh4-%1").arg(seed))) << "4" << seed;
            QTest::newRow(qPrintable(QStringLiteral("mesh2x2-%1").arg(seed))) << "2x2" << seed;
        }
    }

    void randomGraphsEqualSearch()
    {
        QFETCH(QString, mesh);
        QFETCH(int, seed);
        // Debian's CBC 2.10 aborts on this one program (ClpNonLinearCost.cpp:1064, `lowerValue <=
        // upperValue`, inside branch and bound) since the cost model's kernel terms changed its
        // costs; with preprocessing or scaling off it still does. A solver abort cannot be caught,
        // so the row is skipped, not run.
        if (mesh == "2x2" && seed == 7) QSKIP("CBC 2.10 aborts on this program (see the comment)");
        std::mt19937 rng(static_cast<unsigned>(seed) * 104729u + 3u);
        const Graph g = randomGraph(rng, 6 + seed % 9);
        validateGraph(g);
        const Hardware hw = testHardware();
        const CostModel model(g, parseMesh(mesh.toStdString(), hw), hw);
        const SearchResult search = searchUnlimited(model, g);
        for (IlpFormulation formulation : {IlpFormulation::Marginal, IlpFormulation::Linearized}) {
            IlpOptions options;
            options.formulation = formulation;
            const IlpResult ilp = solveIlp(model, options);
            QCOMPARE(ilp.status, IlpStatus::Optimal);
            QVERIFY2(closeRelative(ilp.objective, search.objective),
                     qPrintable(mismatch("objective", ilp.objective, search.objective)));
            QVERIFY(closeRelative(ilp.objective, evaluatePlan(model, nullptr, ilp.strategyOfOp, {}, "ilp").breakdown.stepSeconds,
                                  1e-12));
        }
    }

    // A memory limit below the unconstrained plan's memory: the ILP's plan fits, costs no less
    // than the unconstrained optimum, and no more than the search's Lagrangian plan that fits
    // the same limit (the ILP is exact for the constrained problem; bisection on lambda is not).
    void memoryLimitIsHonoured()
    {
        const Graph g = gpt2Small();
        const Hardware hw = testHardware();
        const CostModel model(g, parseMesh("4", hw), hw);
        const IlpResult free = solveIlp(model);
        QCOMPARE(free.status, IlpStatus::Optimal);
        double smallest = 0;
        for (const Op& op : g.ops) {
            double m = 1e300;
            for (size_t s = 0; s < model.strategies(op.id).size(); ++s)
                m = std::min(m, model.opCost(op.id, static_cast<int>(s)).memoryBytes());
            smallest += m;
        }
        QVERIFY(smallest < free.memoryBytes);
        const double limit = smallest + 0.5 * (free.memoryBytes - smallest);
        IlpOptions options;
        options.memoryLimitBytes = limit;
        const IlpResult tight = solveIlp(model, options);
        QCOMPARE(tight.status, IlpStatus::Optimal);
        QVERIFY(tight.memoryBytes <= limit);
        QVERIFY(tight.objective >= free.objective * (1 - 1e-9));
        QVERIFY(closeRelative(tight.memoryBytes, model.evaluate(tight.strategyOfOp).perDeviceBytes, 1e-9));

        SearchOptions searchOptions;
        searchOptions.memoryLimitBytes = limit;
        searchOptions.allowRecompute = false; // the ILP has no recomputation variables
        const SearchResult search = searchPlan(model, foldGraph(g), searchOptions);
        if (search.fits)
            QVERIFY2(tight.objective <= search.breakdown.stepSeconds * (1 + 1e-9),
                     qPrintable(mismatch("constrained", tight.objective, search.breakdown.stepSeconds)));

        options.memoryLimitBytes = smallest * 0.5; // below every plan
        QCOMPARE(solveIlp(model, options).status, IlpStatus::Infeasible);
    }

    // A lock pins the op; the rest re-optimises exactly as the search does around the same lock.
    void locksAreHonoured()
    {
        const Graph g = gpt2Small();
        const Hardware hw = testHardware();
        const CostModel model(g, parseMesh("2x2", hw), hw);
        const IlpResult free = solveIlp(model);
        // Lock the first multi-candidate linear to a strategy the free optimum does not use.
        ResolvedLock lock;
        for (const Op& op : g.ops) {
            if (op.kind != OpKind::Linear || model.strategies(op.id).size() < 2) continue;
            lock.op = op.id;
            lock.strategy = free.strategyOfOp[static_cast<size_t>(op.id)] == 0 ? 1 : 0;
            break;
        }
        QVERIFY(lock.op >= 0);
        IlpOptions options;
        options.locks = {lock};
        const IlpResult locked = solveIlp(model, options);
        QCOMPARE(locked.status, IlpStatus::Optimal);
        QCOMPARE(locked.strategyOfOp[static_cast<size_t>(lock.op)], lock.strategy);
        QVERIFY(locked.objective >= free.objective * (1 - 1e-9));
        const SearchResult search = searchUnlimited(model, g, {lock});
        QVERIFY2(closeRelative(locked.objective, search.objective),
                 qPrintable(mismatch("locked", locked.objective, search.objective)));

        ResolvedLock bad{lock.op, static_cast<int>(model.strategies(lock.op).size())};
        options.locks = {bad};
        QVERIFY_THROWS_EXCEPTION(InputError, solveIlp(model, options));
    }

    // Starting CBC from a plan (here the all-replicated one) changes nothing about the optimum.
    void startingPlanKeepsTheOptimum()
    {
        const Graph g = gpt2Small();
        const Hardware hw = testHardware();
        const CostModel model(g, parseMesh("4", hw), hw);
        IlpOptions options;
        options.initialStrategyOfOp.assign(g.ops.size(), 0);
        const IlpResult started = solveIlp(model, options);
        QCOMPARE(started.status, IlpStatus::Optimal);
        const SearchResult search = searchUnlimited(model, g);
        QVERIFY2(closeRelative(started.objective, search.objective),
                 qPrintable(mismatch("started", started.objective, search.objective)));
    }
};

QTEST_GUILESS_MAIN(TestIlp)
#include "tst_ilp.moc"
