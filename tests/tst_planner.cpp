// The planner's choice of the settings a request leaves open (micro-batch, ZeRO stage, a
// baseline's recompute mode): exact, and the pruning that makes it fast changes nothing.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "graph/validate.h"
#include "import/graph_json.h"
#include "plan/mesh_fit.h"
#include "plan/planner.h"
#include "search/evaluate.h"
#include "search/factor.h"
#include "search/search.h"
#include "sharding/strategy.h"
#include "util/error.h"

#include "randomgraph.h"
#include "sanitizer.h"

using namespace tp;

namespace {

struct Best {
    double seconds = kInfinity;
    int zero = -1;
    std::int64_t microBatch = -1;
};

/// The least step time and the least memory per device over every plan of one workspace.
struct Extremes {
    double seconds = kInfinity;
    double bytes = kInfinity;
    std::vector<std::pair<double, double>> plans; ///< every plan's (bytes, seconds)
    std::vector<int> lastOpStrategy;              ///< every plan's strategy of the graph's last op
};

/// Every combination of strategies (one per op) and recompute modes (one per block instance)
/// of one workspace, costed by the one evaluation.
Extremes exhaustive(const PlanWorkspace& ws)
{
    const CostModel& model = *ws.costModel;
    const size_t n = model.graph().ops.size();
    std::vector<int> strategies(n, 0);
    std::vector<Recompute> modes(n, Recompute::None);
    std::vector<const BlockInstance*> instances;
    for (const auto& bc : ws.folded.classes)
        for (const auto& inst : bc.instances) instances.push_back(&inst);
    Extremes best;
    std::function<void(size_t)> modesFrom = [&](size_t k) {
        if (k == instances.size()) {
            const Breakdown b = evaluatePlan(model, &ws.folded, strategies, modes, "brute").breakdown;
            best.seconds = std::min(best.seconds, b.stepSeconds);
            best.bytes = std::min(best.bytes, b.perDeviceBytes);
            best.plans.emplace_back(b.perDeviceBytes, b.stepSeconds);
            best.lastOpStrategy.push_back(strategies.back());
            return;
        }
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
            for (OpId op : instances[k]->ops) modes[static_cast<size_t>(op)] = r;
            modesFrom(k + 1);
        }
    };
    std::function<void(size_t)> strategiesFrom = [&](size_t op) {
        if (op == n) return modesFrom(0);
        for (size_t s = 0; s < model.strategies(static_cast<OpId>(op)).size(); ++s) {
            strategies[op] = static_cast<int>(s);
            strategiesFrom(op + 1);
        }
    };
    strategiesFrom(0);
    return best;
}

double combinations(const PlanWorkspace& ws)
{
    double c = 1;
    for (const auto& op : ws.costModel->graph().ops) c *= static_cast<double>(ws.costModel->strategies(op.id).size());
    for (const auto& bc : ws.folded.classes) c *= std::pow(3.0, static_cast<double>(bc.instances.size()));
    return c;
}

PlanRequest requestFor(const std::string& model, const std::string& mesh, const std::string& limit)
{
    PlanRequest r;
    r.model = model;
    r.mesh = mesh;
    r.memoryLimit = limit;
    return r;
}

/// Every combination the planner may choose among, each solved on its own (no pruning): the
/// fastest plan that fits, else the one with the least memory.
SearchResult everyCombinationSolved(const PlanRequest& request, std::int64_t batch, Best& best, bool hybrid = false)
{
    std::vector<std::int64_t> micro;
    for (std::int64_t m = 1; m < batch; ++m)
        if (batch % m == 0) micro.push_back(m);
    micro.push_back(0);
    SearchResult chosen;
    bool any = false;
    for (int z = 0; z <= 3; ++z)
        for (const char* shard : {"all", "node"})
            for (const char* reshard : {"on", "off"})
        for (std::int64_t m : micro) {
            if (std::string(shard) == "node" && !(hybrid && z == 3)) continue;
            if (std::string(reshard) == "off" && z != 3) continue;
            PlanRequest c = request;
            c.zero = z;
            c.zeroShard = shard;
            c.reshardAfterForward = reshard;
            c.microBatch = m;
            const auto ws = preparePlan(c);
            SearchResult r = runPlan(*ws, c);
            const bool better = !any || (r.fits != chosen.fits ? r.fits
                                         : r.fits              ? r.breakdown.stepSeconds < chosen.breakdown.stepSeconds
                                                               : r.breakdown.perDeviceBytes < chosen.breakdown.perDeviceBytes);
            if (better) {
                chosen = std::move(r);
                best = {chosen.breakdown.stepSeconds, z, m};
                any = true;
            }
        }
    return chosen;
}

} // namespace

class TestPlanner : public QObject {
    Q_OBJECT
private slots:
    // Brute force over every (strategy per op, recompute mode per block instance, micro-batch,
    // ZeRO stage) of random small graphs, with no memory limit: the planner's joint choice has
    // the least step time. (Under a binding limit the search is exact on the Lagrangian
    // envelope, not against enumeration: docs/ARCHITECTURE.md; the next test covers the
    // choice among settings there.)
    void jointChoiceEqualsBruteForce_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<int>("seed");
        QTest::addColumn<int>("gpusPerNode"); // 2: the 2x2 mesh's x axis crosses nodes, so HSDP is a choice
        const int seeds = kSanitized ? 3 : 55;
        for (int seed = 0; seed < seeds; ++seed) {
            QTest::newRow(qPrintable(QStringLiteral("mesh4-%1").arg(seed))) << "4" << seed << 8;
            QTest::newRow(qPrintable(QStringLiteral("mesh2x2-%1").arg(seed))) << "2x2" << seed << 8;
            if (seed % 3 == 0)
                QTest::newRow(qPrintable(QStringLiteral("mesh2x2-nodes-%1").arg(seed))) << "2x2" << seed << 2;
        }
    }

    void jointChoiceEqualsBruteForce()
    {
        QFETCH(QString, mesh);
        QFETCH(int, seed);
        QFETCH(int, gpusPerNode);
        std::mt19937 rng(static_cast<unsigned>(seed) * 104729u + 3u);
        QTemporaryDir dir;
        const std::string path = dir.filePath("random.tpgraph.json").toStdString();
        Hardware nodes = loadHardware("a100-80g-dgx");
        nodes.gpusPerNode = gpusPerNode;
        const std::string hardwarePath = dir.filePath("nodes.json").toStdString();
        std::ofstream(hardwarePath) << hardwareToJsonText(nodes);
        const bool hybrid = gpusPerNode < 4;
        for (int ops = 7; ops >= 1; --ops) {
            std::mt19937 attempt(rng());
            const Graph g = randomGraph(attempt, ops);
            validateGraph(g);
            std::ofstream(path) << writeGraphJson(g);
            PlanRequest request = requestFor(path, mesh.toStdString(), "none");
            request.hardware = hardwarePath;
            PlanRequest probe = request;
            probe.zero = 0;
            probe.microBatch = 0;
            const auto first = preparePlan(probe);
            if (combinations(*first) > 2e3) continue; // small enough for the ASan build too
            // The random graphs' batch is 4: micro-batches 1, 2 and the whole local batch.
            QCOMPARE(first->costModel->graphBatch(), std::int64_t{4});
            Best brute;
            for (int z = 0; z <= 3; ++z)
                for (const char* shard : {"all", "node"})
                    for (const char* reshard : {"on", "off"})
                    for (std::int64_t m : {std::int64_t{1}, std::int64_t{2}, std::int64_t{0}}) {
                        if (std::string(shard) == "node" && !(hybrid && z == 3)) continue;
                        if (std::string(reshard) == "off" && z != 3) continue;
                        PlanRequest c = request;
                        c.zero = z;
                        c.zeroShard = shard;
                        c.reshardAfterForward = reshard;
                        c.microBatch = m;
                        const auto ws = preparePlan(c);
                        const Extremes every = exhaustive(*ws);
                        if (every.seconds < brute.seconds) brute = {every.seconds, z, m};
                        // The floor the planner orders and skips combinations by is below
                        // every plan in time and in memory (CostModel::floor), and under a
                        // limit (the median plan's memory) below every plan that fits.
                        const CostModel::Floor floor = ws->costModel->floor();
                        QVERIFY2(floor.seconds <= every.seconds * (1 + 1e-12) && floor.bytes <= every.bytes * (1 + 1e-12),
                                 qPrintable(QStringLiteral("floor %1 s, %2 B vs every plan %3 s, %4 B")
                                                .arg(floor.seconds, 0, 'g', 12)
                                                .arg(floor.bytes, 0, 'g', 12)
                                                .arg(every.seconds, 0, 'g', 12)
                                                .arg(every.bytes, 0, 'g', 12)));
                        std::vector<std::pair<double, double>> plans = every.plans;
                        std::nth_element(plans.begin(), plans.begin() + static_cast<std::ptrdiff_t>(plans.size() / 2), plans.end());
                        const double limit = plans[plans.size() / 2].first;
                        double fitting = kInfinity;
                        for (const auto& [bytes, seconds] : every.plans)
                            if (bytes <= limit) fitting = std::min(fitting, seconds);
                        const double priced = ws->costModel->floor(limit).seconds;
                        QVERIFY2(priced <= fitting * (1 + 1e-12), qPrintable(QStringLiteral("floor under %1 B: %2 s vs %3 s")
                                                                                 .arg(limit, 0, 'g', 12)
                                                                                 .arg(priced, 0, 'g', 12)
                                                                                 .arg(fitting, 0, 'g', 12)));
                        // Under a lock the floor is below every plan that obeys it: the last op
                        // forced to the strategy the fastest plan does not use (it bites).
                        const OpId last = static_cast<OpId>(ws->costModel->graph().ops.size() - 1);
                        const size_t fastest = static_cast<size_t>(
                            std::min_element(every.plans.begin(), every.plans.end(),
                                             [](const auto& a, const auto& b) { return a.second < b.second; }) -
                            every.plans.begin());
                        const int lock = every.lastOpStrategy[fastest] == 0 ? static_cast<int>(ws->costModel->strategies(last).size()) - 1 : 0;
                        double lockedSeconds = kInfinity, lockedBytes = kInfinity, lockedFitting = kInfinity;
                        for (size_t i = 0; i < every.plans.size(); ++i) {
                            if (every.lastOpStrategy[i] != lock) continue;
                            const auto& [bytes, seconds] = every.plans[i];
                            lockedSeconds = std::min(lockedSeconds, seconds);
                            lockedBytes = std::min(lockedBytes, bytes);
                            if (bytes <= limit) lockedFitting = std::min(lockedFitting, seconds);
                        }
                        const CostModel::Floor locked = ws->costModel->floor(kInfinity, {{last, lock}});
                        QVERIFY2(locked.seconds <= lockedSeconds * (1 + 1e-12) && locked.bytes <= lockedBytes * (1 + 1e-12),
                                 qPrintable(QStringLiteral("locked floor %1 s, %2 B vs every locked plan %3 s, %4 B")
                                                .arg(locked.seconds, 0, 'g', 12)
                                                .arg(locked.bytes, 0, 'g', 12)
                                                .arg(lockedSeconds, 0, 'g', 12)
                                                .arg(lockedBytes, 0, 'g', 12)));
                        QVERIFY(locked.seconds >= floor.seconds && locked.bytes >= floor.bytes); // a lock only lifts it
                        const double lockedPriced = ws->costModel->floor(limit, {{last, lock}}).seconds;
                        QVERIFY2(lockedPriced <= lockedFitting * (1 + 1e-12),
                                 qPrintable(QStringLiteral("locked floor under %1 B: %2 s vs %3 s")
                                                .arg(limit, 0, 'g', 12)
                                                .arg(lockedPriced, 0, 'g', 12)
                                                .arg(lockedFitting, 0, 'g', 12)));
                    }
            Planner planner;
            const PlannerResult planned = planner.plan(request);
            QVERIFY(planned.result.fits);
            const double got = planned.result.breakdown.stepSeconds;
            QVERIFY2(std::abs(got - brute.seconds) <= 1e-9 * brute.seconds,
                     qPrintable(QStringLiteral("planner %1 (ZeRO %2, micro-batch %3) vs brute force %4 (ZeRO %5, micro-batch %6)")
                                    .arg(got, 0, 'g', 12)
                                    .arg(planned.workspace->costModel->settings().zeroStage)
                                    .arg(planned.workspace->costModel->settings().microBatch)
                                    .arg(brute.seconds, 0, 'g', 12)
                                    .arg(brute.zero)
                                    .arg(brute.microBatch)));
            // 3 micro-batches x 4 stages considered, stage 3 with its weights resharded after
            // forward or kept gathered (and each with HSDP where x crosses nodes): 3 x (3 + 2)
            // or 3 x (3 + 4).
            QCOMPARE(planned.candidates.size(), size_t{hybrid ? 21u : 15u});
            return;
        }
        QFAIL("no small enough graph generated");
    }

    // Under binding limits, on random graphs and small built-ins: the planner (which skips
    // combinations by lower bounds and stops searches early) chooses what solving every
    // combination on its own chooses, and a second plan on the same planner (bounds and the
    // last winner cached) agrees with the first. (The second pass found a warm-start defect: a
    // session whose last solve fit nothing at the top price skipped the price search next time
    // and reported the unpriced plan as the smallest; core/search/price_search.cpp.)
    void pruningChangesNothing_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<double>("fraction"); ///< of the unlimited plan's memory (ZeRO 0, whole batch)
        for (double f : {0.9, 0.5, 0.25, 0.05}) {
            const QString tag = QString::number(f);
            QTest::newRow(qPrintable("gpt2-2L 2x2 " + tag)) << "gpt2"
                                                            << "2x2" << f;
            // x crosses nodes: HSDP is a choice, and skipped where sharding over both fits nothing.
            if (!kSanitized)
                QTest::newRow(qPrintable("gpt2-2L 2x8 " + tag)) << "gpt2"
                                                                << "2x8" << f;
            if (!kSanitized) {
                QTest::newRow(qPrintable("llama2-7b-2L 4 " + tag)) << "llama2-7b"
                                                                   << "4" << f;
                QTest::newRow(qPrintable("random 2x2 " + tag)) << "random"
                                                               << "2x2" << f;
            }
        }
    }

    void pruningChangesNothing()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        QFETCH(double, fraction);
        QTemporaryDir dir;
        PlanRequest request = requestFor(model.toStdString(), mesh.toStdString(), "none");
        if (model == "random") {
            std::mt19937 rng(7);
            const std::string path = dir.filePath("random.tpgraph.json").toStdString();
            std::ofstream(path) << writeGraphJson(randomGraph(rng, 12));
            request.model = path;
        } else {
            request.modelOptions.overrides = {"layers=2"};
            request.modelOptions.batch = mesh == "2x8" ? 16 : 8;
        }
        PlanRequest probe = request;
        probe.zero = 0;
        probe.microBatch = 0;
        const auto ws = preparePlan(probe);
        const double unlimited = runPlan(*ws, probe).breakdown.perDeviceBytes;
        request.memoryLimit = std::to_string(static_cast<long long>(fraction * unlimited));
        Best expected;
        const bool hybrid = ws->mesh.axes.size() == 2 && ws->mesh.axes[0].crossesNodes;
        const SearchResult every = everyCombinationSolved(request, ws->costModel->graphBatch(), expected, hybrid);
        Planner planner;
        for (int pass = 0; pass < 2; ++pass) {
            const PlannerResult planned = planner.plan(request);
            QCOMPARE(planned.result.fits, every.fits);
            const double a = planned.result.breakdown.stepSeconds, b = every.breakdown.stepSeconds;
            QVERIFY2(std::abs(a - b) <= 1e-9 * b,
                     qPrintable(QStringLiteral("pass %1: planner %2, every combination %3 (ZeRO %4, micro-batch %5)")
                                    .arg(pass)
                                    .arg(a, 0, 'g', 12)
                                    .arg(b, 0, 'g', 12)
                                    .arg(expected.zero)
                                    .arg(expected.microBatch)));
        }
    }

    // A solve of one ZeRO combination at a memory price, plus the least difference of the node
    // costs of another (CostModel::nodeDifferenceFloor), bounds the other's best plan under the
    // limit (weak duality, Planner::State::choose prunes with it): never above it. The bound
    // must also say something (finite) between ZeRO stages, and nothing between micro-batches,
    // whose edges differ.
    // A sequence of edits on one Planner, as the GUI makes them, against a fresh Planner for
    // each: its sessions share the refolds of per-instance locks and the resolved locks
    // (SharedSearchCaches), keyed by the split ops and the lock texts, so an edit must never
    // reuse another's. Same plan, op by op, after each edit.
    void editsOnOnePlannerMatchFreshPlans()
    {
        PlanRequest request = requestFor("llama3-8b", "2x4", "");
        request.modelOptions.overrides = {"layers=4"};
        request.modelOptions.batch = 8;
        Planner planner;
        const PlannerResult free = planner.plan(request);
        const CostModel& model = *free.workspace->costModel;
        auto lockText = [&](const std::string& pattern, const std::string& instance, int offset) {
            OpId op = -1;
            for (const Op& o : model.graph().ops)
                if (o.name == instance) op = o.id;
            if (op < 0) return std::string();
            const int n = static_cast<int>(model.strategies(op).size());
            const int chosen = free.result.strategyOfOp[static_cast<size_t>(op)];
            const int other = (chosen + offset) % n;
            return pattern + "=" + strategyToString(model.strategies(op)[static_cast<size_t>(other)], model.signature(op), model.mesh());
        };
        const std::vector<std::vector<std::string>> edits = {
            {lockText("layers.1/mlp/down", "layers.1/mlp/down", 1)},
            {lockText("layers.2/mlp/down", "layers.2/mlp/down", 1)},
            {lockText("layers.2/mlp/down", "layers.2/mlp/down", 2)},
            {lockText("layers.1/mlp/down", "layers.1/mlp/down", 1), lockText("layers.2/attn/q", "layers.2/attn/q", 1)},
            {lockText("layers.*/mlp/down", "layers.1/mlp/down", 1)},
            {}};
        for (const auto& locks : edits) {
            for (const auto& l : locks) QVERIFY(!l.empty());
            PlanRequest edited = request;
            edited.locks = locks;
            const PlannerResult again = planner.plan(edited);
            const PlannerResult fresh = Planner().plan(edited);
            QCOMPARE(again.result.strategyOfOp, fresh.result.strategyOfOp);
            QCOMPARE(again.result.recomputeOfOp, fresh.result.recomputeOfOp);
            QCOMPARE(again.result.breakdown.stepSeconds, fresh.result.breakdown.stepSeconds);
        }
    }

    // The priced combinations' searches run two at a time on two threads, each started at the
    // bar of the moment the search before it started, and on one thread at their turn with that
    // same bar (core/plan/planner.cpp, Ahead): every candidate's outcome and figures, not only
    // the plan, are the same on any number of threads. Cases with many priced combinations:
    // binding limits, a class lock, and an edit on a warm planner.
    void choicesAreTheSameOnAnyNumberOfThreads_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<double>("fraction"); ///< of the unlimited plan's memory (ZeRO 0, whole batch)
        QTest::addColumn<bool>("lock");
        // Where the bar falls between an early search's start and its turn: the priced
        // combinations' (0.15, 0.25; these rows failed when one thread searched at the turn's
        // bar instead) and those first searched at price 0 (0.9, 0.7; failed when one thread
        // started none of those early).
        for (bool lock : {false, true}) {
            const QString tag = lock ? " lock" : "";
            QTest::newRow(qPrintable("gpt2-2L 2x2 0.15" + tag)) << "gpt2"
                                                               << "2x2" << 0.15 << lock;
            QTest::newRow(qPrintable("gpt2-2L 4 0.25" + tag)) << "gpt2"
                                                             << "4" << 0.25 << lock;
        }
        QTest::newRow("gpt2-2L 2x2 0.9") << "gpt2"
                                         << "2x2" << 0.9 << false;
        QTest::newRow("gpt2-2L 4 0.7 lock") << "gpt2"
                                            << "4" << 0.7 << true;
        // An early search that its turn never takes must leave its session's warm start as it
        // found it (PlannerSession::WarmStart): failed when it did not, the edited plan's
        // candidates then stopping at other bounds.
        if (!kSanitized)
            QTest::newRow("gpt2-2L 2x8 0.25 lock") << "gpt2"
                                                   << "2x8" << 0.25 << true;
        if (!kSanitized)
            QTest::newRow("llama3-8b-4L 2x8 0.15 lock") << "llama3-8b"
                                                        << "2x8" << 0.15 << true;
    }

    void choicesAreTheSameOnAnyNumberOfThreads()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        QFETCH(double, fraction);
        QFETCH(bool, lock);
        PlanRequest request = requestFor(model.toStdString(), mesh.toStdString(), "none");
        request.modelOptions.overrides = {model == "gpt2" ? "layers=2" : "layers=4"};
        request.modelOptions.batch = 32;
        PlanRequest probe = request;
        probe.zero = 0;
        probe.microBatch = 0;
        const auto ws = preparePlan(probe);
        const SearchResult unlimited = runPlan(*ws, probe);
        request.memoryLimit = std::to_string(static_cast<long long>(fraction * unlimited.breakdown.perDeviceBytes));
        PlanRequest edited = request;
        if (lock) { // the down projection of every layer to a strategy the free plan does not take
            const CostModel& m = *ws->costModel;
            OpId down = -1;
            for (const Op& op : m.graph().ops)
                if (op.kind == OpKind::Linear && op.name.rfind("layers.1/", 0) == 0) down = op.id;
            QVERIFY(down >= 0);
            const int other = (unlimited.strategyOfOp[static_cast<size_t>(down)] + 1) % static_cast<int>(m.strategies(down).size());
            edited.locks = {"layers.*" + m.graph().op(down).name.substr(std::strlen("layers.1")) + "=" +
                            strategyToString(m.strategies(down)[static_cast<size_t>(other)], m.signature(down), m.mesh())};
        }
        std::vector<std::vector<PlannerResult>> byThreads;
        for (int threads : {1, 2}) {
            request.threads = edited.threads = threads;
            Planner planner;
            byThreads.push_back({planner.plan(request), planner.plan(edited)});
        }
        int searched = 0;
        for (size_t k = 0; k < 2; ++k) {
            const PlannerResult &one = byThreads[0][k], &two = byThreads[1][k];
            QCOMPARE(two.result.strategyOfOp, one.result.strategyOfOp);
            QCOMPARE(two.result.breakdown.stepSeconds, one.result.breakdown.stepSeconds);
            QCOMPARE(two.candidates.size(), one.candidates.size());
            for (size_t c = 0; c < one.candidates.size(); ++c) {
                const SettingsCandidate &a = one.candidates[c], &b = two.candidates[c];
                const QString what = QString::fromStdString(settingsText(a));
                QVERIFY2(b.zero == a.zero && b.microBatch == a.microBatch && b.hybrid == a.hybrid &&
                             b.reshardAfterForward == a.reshardAfterForward && b.recompute == a.recompute,
                         qPrintable(what));
                QVERIFY2(b.outcome == a.outcome && b.searched == a.searched, qPrintable(what));
                QVERIFY2(b.stepSeconds == a.stepSeconds && b.bytes == a.bytes,
                         qPrintable(what + QStringLiteral(": %1 s on one thread, %2 on two").arg(a.stepSeconds).arg(b.stepSeconds)));
                searched += a.searched;
            }
        }
        QVERIFY(searched > 2);
    }

    void carriedBoundsHold_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<double>("fraction"); ///< of the ZeRO 0 plan's memory
        for (double f : {0.9, 0.5, 0.25}) {
            const QString tag = QString::number(f);
            QTest::newRow(qPrintable("gpt2-2L 2x2 " + tag)) << "gpt2"
                                                            << "2x2" << f;
            QTest::newRow(qPrintable("random 2x2 " + tag)) << "random"
                                                           << "2x2" << f;
            if (!kSanitized)
                QTest::newRow(qPrintable("llama2-7b-2L 4 " + tag)) << "llama2-7b"
                                                                   << "4" << f;
        }
    }

    void carriedBoundsHold()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        QFETCH(double, fraction);
        QTemporaryDir dir;
        PlanRequest request = requestFor(model.toStdString(), mesh.toStdString(), "none");
        if (model == "random") {
            std::mt19937 rng(11);
            const std::string path = dir.filePath("random.tpgraph.json").toStdString();
            std::ofstream(path) << writeGraphJson(randomGraph(rng, 12));
            request.model = path;
        } else {
            request.modelOptions.overrides = {"layers=2"};
            request.modelOptions.batch = 8;
        }
        request.zero = 0;
        request.microBatch = 2;
        const auto ws = preparePlan(request);
        const CostModel& base = *ws->costModel;
        const double limit = fraction * runPlan(*ws, request).breakdown.perDeviceBytes;
        struct Zero {
            int stage;
            bool reshard;
        };
        std::vector<std::unique_ptr<CostModel>> models;
        std::vector<SearchResult> solved;
        for (const Zero z : {Zero{0, true}, Zero{1, true}, Zero{2, true}, Zero{3, true}, Zero{3, false}}) {
            CostSettings settings = base.settings();
            settings.zeroStage = z.stage;
            settings.reshardAfterForward = z.reshard;
            models.push_back(std::make_unique<CostModel>(base, base.graph(), settings));
            PlannerSession session(*models.back(), ws->folded);
            session.setMemoryLimit(limit);
            solved.push_back(session.solve());
        }
        int finite = 0;
        for (size_t a = 0; a < models.size(); ++a)
            for (size_t b = 0; b < models.size(); ++b) {
                if (a == b) continue;
                for (const auto& [price, objective] : solved[a].pricedObjectives) {
                    const double difference = models[b]->nodeDifferenceFloor(*models[a], price);
                    if (std::isfinite(difference)) ++finite;
                    if (!solved[b].fits) continue; // nothing fits: any bound holds
                    const double bound = objective + difference - price * limit;
                    const double best = solved[b].breakdown.stepSeconds;
                    QVERIFY2(bound <= best * (1 + 1e-12),
                             qPrintable(QStringLiteral("ZeRO combination %1 carried to %2 at price %3: bound %4 over the optimum %5")
                                            .arg(a)
                                            .arg(b)
                                            .arg(price, 0, 'g', 6)
                                            .arg(bound, 0, 'g', 12)
                                            .arg(best, 0, 'g', 12)));
                }
            }
        QVERIFY(finite > 0);
        CostSettings other = base.settings();
        other.microBatch = 4;
        const CostModel wholerBatches(base, base.graph(), other);
        QCOMPARE(wholerBatches.nodeDifferenceFloor(*models[0], 0), -std::numeric_limits<double>::infinity());
        QCOMPARE(models[1]->nodeDifferenceFloor(*models[1], 1e-9), 0.0);
    }

    // What a request leaves open is reported: one candidate chosen, the workspace's settings
    // are its; a fixed setting is not a choice.
    void candidatesNameTheChoice()
    {
        PlanRequest request = requestFor("gpt2", "2x2", "");
        request.modelOptions.overrides = {"layers=2"};
        request.modelOptions.batch = 8;
        Planner planner;
        PlannerResult planned = planner.plan(request);
        // batch 8: micro-batches 1, 2, 4 and the whole; ZeRO 0-2 and 3 resharded after forward
        // or kept gathered: 4 x 5.
        QCOMPARE(planned.candidates.size(), size_t{20});
        int chosen = 0;
        for (const auto& c : planned.candidates)
            if (c.outcome == SettingsCandidate::Outcome::Chosen) {
                ++chosen;
                QCOMPARE(c.zero, planned.workspace->costModel->settings().zeroStage);
                QCOMPARE(c.microBatch, planned.workspace->costModel->settings().microBatch);
            }
        QCOMPARE(chosen, 1);
        request.zero = 1;
        request.microBatch = 2;
        planned = planner.plan(request);
        QVERIFY(planned.candidates.empty());
        QCOMPARE(planned.workspace->costModel->settings().zeroStage, 1);
        QCOMPARE(planned.workspace->costModel->settings().microBatch, std::int64_t{2});
    }

    // Where nothing fits, the hint names the first preset mesh with more devices on which the
    // planner's plan fits: the same answer as planning every larger preset mesh in turn. The
    // model-state bound skips meshes unsearched: gpt3-175b cut to 8 layers has 12 h^2 L + (V +
    // s) h = 12 * 12288^2 * 8 + (51200 + 2048) * 12288 = 1.515e10 parameters, 2.42e11 B of
    // model states at 16 B/param; under 5 GiB (5.37e9 B) 16 and 32 devices hold more than that
    // each even evenly spread (1.51e10, 7.6e9 B), 64 hold 3.8e9: 8x8 is the one mesh searched.
    // gpt2's 124M parameters (1.99e9 B) on 2 devices: 1.0e9 B under 1 GiB, searched at once; under
    // 1 MiB no preset mesh (512 devices: 3.9e6 B) passes the bound.
    void smallestFittingMeshIsTheFirstThatFits_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("overrides");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QString>("limit");
        QTest::addColumn<QString>("expected"); // "" none fits
        QTest::addColumn<int>("searched");
        QTest::newRow("gpt3-175b 8 layers on 8, 5 GiB") << "gpt3-175b" << QStringList{"layers=8"} << "8" << "5GiB" << "8x8" << 1;
        QTest::newRow("gpt2 on 1, 1 GiB") << "gpt2" << QStringList{} << "1" << "1GiB" << "2" << 1;
        QTest::newRow("gpt2 on 1, 1 MiB") << "gpt2" << QStringList{} << "1" << "1MiB" << "" << 0;
    }

    void smallestFittingMeshIsTheFirstThatFits()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, overrides);
        QFETCH(QString, mesh);
        QFETCH(QString, limit);
        QFETCH(QString, expected);
        QFETCH(int, searched);
        PlanRequest request = requestFor(model.toStdString(), mesh.toStdString(), limit.toStdString());
        for (const auto& o : overrides) request.modelOptions.overrides.push_back(o.toStdString());
        Planner planner;
        const PlannerResult here = planner.plan(request);
        QVERIFY(!here.result.fits);
        const auto fit = smallestFittingMesh(request, *here.workspace);
        QCOMPARE(fit ? QString::fromStdString(fit->mesh) : QString(), expected);
        if (!fit) return;
        QCOMPARE(fit->meshesSearched, searched);
        // Every larger preset mesh planned in turn: the first that fits is the hint's, with its plan.
        for (const auto& candidate : presetMeshes(here.workspace->hardware.gpusPerNode)) {
            PlanRequest wider = request;
            wider.mesh = candidate;
            const int devices = parseMesh(candidate, here.workspace->hardware).devices();
            if (devices <= here.workspace->mesh.devices()) continue;
            Planner fresh;
            const PlannerResult there = fresh.plan(wider);
            if (!there.result.fits) continue;
            QCOMPARE(QString::fromStdString(candidate), expected);
            QCOMPARE(fit->devices, devices);
            QCOMPARE(fit->stepSeconds, there.result.breakdown.stepSeconds);
            QCOMPARE(fit->bytes, there.result.breakdown.perDeviceBytes);
            QVERIFY(QString::fromStdString(meshFitText(*fit)).startsWith("fits on " + expected + " ("));
            return;
        }
        QFAIL("no larger preset mesh fits, yet the hint named one");
    }

    // The ladder the hint climbs: powers of two inside a node, the node, then 2-64 nodes.
    void presetMeshesClimbByNodes()
    {
        QCOMPARE(presetMeshes(8), (std::vector<std::string>{"1", "2", "4", "8", "2x8", "4x8", "8x8", "16x8", "32x8", "64x8"}));
        QCOMPARE(presetMeshes(16).front(), std::string("1"));
        QCOMPARE(presetMeshes(16)[4], std::string("16"));
        QCOMPARE(presetMeshes(16)[5], std::string("2x16"));
    }

    // A fixed micro-batch that does not divide the batch, and out-of-range values, are refused
    // naming the setting.
    void badSettingsAreNamed_data()
    {
        QTest::addColumn<int>("zero");
        QTest::addColumn<qint64>("microBatch");
        QTest::addColumn<QString>("message");
        QTest::newRow("micro-batch 3 of 8") << kAuto << qint64(3) << "micro-batch 3 does not divide the batch of 8 samples";
        QTest::newRow("micro-batch 16 of 8") << kAuto << qint64(16) << "micro-batch 16 does not divide the batch of 8 samples";
        QTest::newRow("micro-batch -2") << kAuto << qint64(-2) << "micro-batch -2: use auto or a positive number";
        QTest::newRow("zero 4") << 4 << qint64(kAuto) << "ZeRO stage 4: use auto, 0, 1, 2 or 3";
    }

    void badSettingsAreNamed()
    {
        QFETCH(int, zero);
        QFETCH(qint64, microBatch);
        QFETCH(QString, message);
        PlanRequest request = requestFor("gpt2", "2x2", "");
        request.modelOptions.overrides = {"layers=1"};
        request.modelOptions.batch = 8;
        request.zero = zero;
        request.microBatch = microBatch;
        Planner planner;
        try {
            planner.plan(request);
            QFAIL("accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromStdString(e.what()), message);
        }
    }
};

QTEST_GUILESS_MAIN(TestPlanner)
#include "tst_planner.moc"
