// The units of the search (docs/ARCHITECTURE.md, "core/search") on their own, with numbers
// worked out by hand: min-plus products and powers, the product tree's decoding of a run, the
// chord step and the layer-mix bisection of the memory-price search, runs split at a price,
// domains, recompute modes, the table cache, the refold for per-instance locks, a locked
// variable fixed in the elimination and substitutable values dropped before it.
#include <QtTest>

#include <random>

#include "search/class_table.h"
#include "search/factor.h"
#include "search/domains.h"
#include "search/locks.h"
#include "search/minplus.h"
#include "search/price_search.h"
#include "search/stitch.h"
#include "search/substitution.h"

using namespace tp;
using namespace tp::search;

namespace {

constexpr double inf = kInfinity;

/// A factor over `vars` (deduplicated) with costs 0-7, one entry in twenty forbidden.
Factor randomCosts(std::mt19937& rng, const std::vector<int>& domains, std::vector<int> vars)
{
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    size_t size = 1;
    for (int v : vars) size *= static_cast<size_t>(domains[static_cast<size_t>(v)]);
    Factor f{vars, std::vector<double>(size)};
    for (double& x : f.values) x = rng() % 20 == 0 ? inf : static_cast<double>(rng() % 8);
    return f;
}

MinPlus matrix(int n, std::vector<double> v)
{
    MinPlus m;
    m.n = n;
    m.v = std::move(v);
    return m;
}

TensorSpec splitOn(int dim, int axis)
{
    TensorSpec s = TensorSpec::replicated(2);
    s.dims[static_cast<size_t>(dim)] = {axis};
    return s;
}

} // namespace

class TestSearchUnits : public QObject {
    Q_OBJECT
private slots:
    // A = [[0 1 4] [2 0 1] [inf 3 0]]; (A*A)(i,j) = min_m A(i,m) + A(m,j):
    //   row 0: min(0+0, 1+2, 4+inf) = 0, min(0+1, 1+0, 4+3) = 1, min(0+4, 1+1, 4+0) = 2
    //   row 1: min(2+0, 0+2, 1+inf) = 2, min(2+1, 0+0, 1+3) = 0, min(2+4, 0+1, 1+0) = 1
    //   row 2: min(inf, 3+2, 0+inf) = 5, min(inf, 3+0, 0+3) = 3, min(inf, 3+1, 0+0) = 0
    void minPlusProductOfThreeStates()
    {
        const MinPlus a = matrix(3, {0, 1, 4, 2, 0, 1, inf, 3, 0});
        const MinPlus c = multiply(a, a);
        const std::vector<double> expected{0, 1, 2, 2, 0, 1, 5, 3, 0};
        QCOMPARE(c.n, 3);
        QCOMPARE(c.v, expected);
    }

    // multiply takes four rows of B a pass over the finite entries of a row of A, then the rest
    // one by one: on random matrices of 1 to 13 states (every remainder of four), a fifth of the
    // entries infinite, it equals the min-plus product written out.
    void minPlusProductEqualsTheDefinition()
    {
        std::mt19937 rng(5);
        for (int n = 1; n <= 13; ++n) {
            auto randomMatrix = [&] {
                std::vector<double> v;
                for (int i = 0; i < n * n; ++i) v.push_back(rng() % 5 == 0 ? inf : static_cast<double>(rng() % 50) / 4);
                return matrix(n, v);
            };
            const MinPlus a = randomMatrix(), b = randomMatrix();
            const MinPlus c = multiply(a, b);
            const auto at = [n](const MinPlus& m, int i, int j) { return m.v[static_cast<size_t>(i * n + j)]; };
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j) {
                    double least = inf;
                    for (int m = 0; m < n; ++m) least = std::min(least, at(a, i, m) + at(b, m, j));
                    QCOMPARE(at(c, i, j), least);
                }
        }
    }

    // M = [[2 5] [1 4]] (a step's cost from state i to j).
    //   M^2 = [[min(2+2, 5+1), min(2+5, 5+4)] [min(1+2, 4+1), min(1+5, 4+4)]] = [[4 7] [3 6]]
    //   M^3 = M * M^2 = [[min(2+4, 5+3), min(2+7, 5+6)] [min(1+4, 4+3), min(1+7, 4+6)]] = [[6 9] [5 8]]
    // Repeated squaring for 3 = 0b11: the leaf M, the square M^2, the product M * M^2.
    void powerByRepeatedSquaring()
    {
        std::vector<MinPlus> nodes;
        const int root = power(nodes, matrix(2, {2, 5, 1, 4}), 3);
        QCOMPARE(nodes.size(), size_t(3));
        const MinPlus& r = nodes[static_cast<size_t>(root)];
        QCOMPARE(r.v, (std::vector<double>{6, 9, 5, 8}));
        QCOMPARE(r.span, std::int64_t(3));
        QCOMPARE(r.left, 0);
        QCOMPARE(r.right, 1);
        QCOMPARE(nodes[1].v, (std::vector<double>{4, 7, 3, 6}));
    }

    // A run of 4 instances over states {0, 1}: staying in 0 costs 1, switching 0 -> 1 costs 3,
    // back costs 10, staying in 1 costs 2. From 0 to 1 the cheapest path switches at the last
    // instance: 1 + 1 + 1 + 3 = 6 (switching at instance t costs t + 3 + 2 (3 - t), more for
    // t < 3). The tree of M^4 is M, M^2 = [[2 4] [11 4]], M^4 (both halves M^2); decoding
    // splits M^4 at midOf = 0 (2 + 4 = 6 against 4 + 4 = 8), finds that M^2 stays in 0 without
    // visiting its instances, then splits the second M^2 at 0 (1 + 3 = 4 against 3 + 2 = 5):
    // three instances 0 -> 0, then one 0 -> 1.
    void productTreeDecodesAFourInstanceRun()
    {
        std::vector<MinPlus> nodes;
        const int root = power(nodes, matrix(2, {1, 3, 10, 2}), 4);
        QCOMPARE(nodes[static_cast<size_t>(root)].at(0, 1), 6.0);
        QCOMPARE(nodes[1].v, (std::vector<double>{2, 4, 11, 4}));
        QCOMPARE(midOf(nodes, root, 0, 1), 0);
        QVERIFY(staysAt(nodes, root, 0));
        QVERIFY(staysAt(nodes, root, 1)); // 1 -> 1: 2 a step against 10 + ... to leave
        std::vector<StateRun> stretches;
        expandRuns(nodes, root, 0, 1, stretches);
        QCOMPARE(stretches.size(), size_t(2));
        QCOMPARE(stretches[0].in, 0);
        QCOMPARE(stretches[0].out, 0);
        QCOMPARE(stretches[0].count, std::int64_t(3));
        QCOMPARE(stretches[1].in, 0);
        QCOMPARE(stretches[1].out, 1);
        QCOMPARE(stretches[1].count, std::int64_t(1));
    }

    // M = [[5 1] [1 5]]: from 0 back to 0 in two instances, 0 -> 1 -> 0 costs 2 against 10 for
    // staying, so the path does not stay in 0 and decodes instance by instance.
    void aPathThatLeavesIsNotAStay()
    {
        std::vector<MinPlus> nodes;
        const int root = power(nodes, matrix(2, {5, 1, 1, 5}), 2);
        QVERIFY(!staysAt(nodes, root, 0));
        std::vector<StateRun> stretches;
        expandRuns(nodes, root, 0, 0, stretches);
        QCOMPARE(stretches.size(), size_t(2));
        QCOMPARE(stretches[0].out, 1);
        QCOMPARE(stretches[1].in, 1);
    }

    // Plan lines T + lambda M. over: T = 1 s, M = 100 B, found at 0.001; under: T = 2 s,
    // M = 50 B, at 0.1. They cross where 1 + 100 l = 2 + 50 l: l = 1/50 = 0.02, inside
    // (0.001, 0.1). Not far below (0.02 >= 0.1 / 8 = 0.0125), so the step is the crossing.
    // The chord through under at 0.02 is 2 + 50 * 0.02 = 3: a search there returning 2.9 found
    // a plan between the two; returning 3 proves them adjacent.
    void chordStepBetweenTwoPlanLines()
    {
        const PlanLine over{1.0, 100.0, 0.001}, under{2.0, 50.0, 0.1};
        const auto step = chordStep(over, under);
        QVERIFY(step.has_value());
        QCOMPARE(step->price, 0.02);
        QVERIFY(!step->stride);
        QVERIFY(belowChord(2.9, under, 0.02));
        QVERIFY(!belowChord(3.0, under, 0.02));
        // over found at 0.05, above the crossing: the lines cross outside the prices (adjacent).
        QVERIFY(!chordStep(PlanLine{1.0, 100.0, 0.05}, under).has_value());
        // No memory between them: nothing to step to.
        QVERIFY(!chordStep(PlanLine{1.0, 50.0, 0.001}, under).has_value());
    }

    // over is the unpriced plan (T = 1 s, M = 1000 B at 0), under fits at 1 (T = 3 s, M = 10 B).
    // Crossing: (3 - 1) / (1000 - 10) = 0.00202, far below 1 / 8 with over below 1 / 64: the
    // step strides down from the fitting side to 1 / 8 = 0.125.
    void chordStridesDownFromAFarLowerPlan()
    {
        const auto step = chordStep(PlanLine{1.0, 1000.0, 0.0}, PlanLine{3.0, 10.0, 1.0});
        QVERIFY(step.has_value());
        QCOMPARE(step->price, 0.125);
        QVERIFY(step->stride);
    }

    // Memory with k of 10 layers at the low price: 10 + 3k bytes, limit 31, so k <= 7 fits.
    // Bisection from (fits 0, fails 10): 5 (25 B, fits), 7 (31 B, fits), 8 (34 B, fails): 7.
    void layerMixBisection()
    {
        std::vector<int> probes;
        const int k = bisectLowPricedLayers(10, [&](int k) {
            probes.push_back(k);
            return 10 + 3 * k <= 31;
        });
        QCOMPARE(k, 7);
        QCOMPARE(probes, (std::vector<int>{5, 7, 8}));
        // Nothing fits but k = 0: every probe fails, down to 1.
        probes.clear();
        QCOMPARE(bisectLowPricedLayers(4,
                                       [&](int k) {
                                           probes.push_back(k);
                                           return false;
                                       }),
                 0);
        QCOMPARE(probes, (std::vector<int>{2, 1}));
        // From the previous answer: hint 7 is confirmed by 7 (fits) and 8 (fails); hint 9
        // fails with 8, then the bisection of (0, 8): 4, 6, 7. The same answer either way.
        const auto fits31 = [&](int k) {
            probes.push_back(k);
            return 10 + 3 * k <= 31;
        };
        probes.clear();
        QCOMPARE(bisectLowPricedLayers(10, fits31, 7), 7);
        QCOMPARE(probes, (std::vector<int>{7, 8}));
        probes.clear();
        QCOMPARE(bisectLowPricedLayers(10, fits31, 9), 7);
        QCOMPARE(probes, (std::vector<int>{9, 8, 4, 6, 7}));
        // A hint of 1 that fails leaves 0 without probing it.
        probes.clear();
        QCOMPARE(bisectLowPricedLayers(10, [&](int k) { probes.push_back(k); return false; }, 1), 0);
        QCOMPARE(probes, (std::vector<int>{1}));
    }

    // Table runs A (class 0, 3 instances) and B (class 1, 2 instances), then a sibling run S of
    // an inlined parent (not a table run). Split at 4: A's 3 instances and B's first at the low
    // price (slot 0), B's second at the high one; S stays at the base price.
    void runsSplitAtAPrice()
    {
        const std::vector<Run> runs{{0, 0, 3}, {1, 0, 2}, {2, 1, 1}};
        const auto priced = splitRunsAtPrice(runs, 2, PriceSplit{1.0, 4});
        QCOMPARE(priced.size(), size_t(4));
        auto is = [&](size_t i, int cls, int first, int count, int slot) {
            return priced[i].first.classId == cls && priced[i].first.firstInstance == first && priced[i].first.count == count &&
                   priced[i].second == slot;
        };
        QVERIFY(is(0, 0, 0, 3, 0));
        QVERIFY(is(1, 1, 0, 1, 0));
        QVERIFY(is(2, 1, 1, 1, 1));
        QVERIFY(is(3, 2, 1, 1, 0));
        // Without a split every run is one item at the base price.
        const auto plain = splitRunsAtPrice(runs, 2, std::nullopt);
        QCOMPARE(plain.size(), size_t(3));
        QCOMPARE(plain[1].first.count, 2);
        QCOMPARE(plain[1].second, 0);
    }

    void globEdgeCases_data()
    {
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<QString>("name");
        QTest::addColumn<bool>("matches");
        QTest::newRow("empty matches empty") << ""
                                             << "" << true;
        QTest::newRow("empty pattern") << ""
                                       << "a" << false;
        QTest::newRow("star matches empty") << "*"
                                            << "" << true;
        QTest::newRow("stars only") << "***"
                                    << "abc" << true;
        QTest::newRow("backtrack to the last star") << "*ab"
                                                    << "aab" << true;
        QTest::newRow("star then suffix missing") << "*ab"
                                                  << "aba" << false;
        QTest::newRow("stars between each") << "a*b*c"
                                            << "abc" << true;
        QTest::newRow("one char for two") << "a*a"
                                          << "a" << false;
        QTest::newRow("star runs over slashes") << "layers.*"
                                                << "layers.1/attn/q" << true;
        QTest::newRow("case matters") << "Layers.*"
                                      << "layers.1" << false;
    }

    void globEdgeCases()
    {
        QFETCH(QString, pattern);
        QFETCH(QString, name);
        QFETCH(bool, matches);
        QCOMPARE(globMatch(pattern.toStdString(), name.toStdString()), matches);
    }

    // Class 0 has two instances, ops {0, 1} and {2, 3} (op 1 and op 3 at the same position).
    void locksSplitOnlyDifferingInstances()
    {
        FoldedGraph base;
        BlockClass bc;
        bc.id = 0;
        bc.instances = {BlockInstance{{0, 1}, {}, {}}, BlockInstance{{2, 3}, {}, {}}};
        base.classes = {bc};
        base.classOfOp = {0, 0, 0, 0};
        base.instanceOfOp = {0, 0, 1, 1};
        // Both instances locked alike: a constraint on the class, no refold.
        QVERIFY(opsSplitByLocks(base, {-1, 2, -1, 2}, {{1, 2}, {3, 2}}).empty());
        // One instance locked: it splits out.
        QCOMPARE(opsSplitByLocks(base, {-1, 2, -1, -1}, {{1, 2}}), (std::set<OpId>{1}));
        // Different strategies: both are distinct.
        QCOMPARE(opsSplitByLocks(base, {-1, 2, -1, 1}, {{1, 2}, {3, 1}}), (std::set<OpId>{1, 3}));
    }

    // Producers give {a, b} and {b, c} at one input position: the domain is their union, plus
    // the free spec when some instance reads a graph input there (4 specs, sorted). With no
    // producer at all there is no variable, free or not.
    void unionDomainOfAnInputPosition()
    {
        const TensorSpec a = splitOn(0, 0), b = splitOn(1, 0), c = TensorSpec::replicated(2);
        const std::vector<TensorSpec> first{a, b}, second{b, c};
        std::vector<TensorSpec> domain = unionDomain({&first, &second}, true);
        QCOMPARE(domain.size(), size_t(4));
        QVERIFY(std::is_sorted(domain.begin(), domain.end()));
        QVERIFY(specIndex(domain, freeSpec()) >= 0);
        QVERIFY(specIndex(domain, a) >= 0 && specIndex(domain, b) >= 0 && specIndex(domain, c) >= 0);
        QCOMPARE(unionDomain({&first, &second}, false).size(), size_t(3));
        QVERIFY(unionDomain({}, true).empty());
        QCOMPARE(specIndex(first, c), -1);
    }

    void recomputeModesOnlyWhenMemoryHasAPrice()
    {
        QCOMPARE(recomputeModes(0.0, true, true).size(), size_t(1));
        QCOMPARE(recomputeModes(1e-9, true, true).size(), size_t(3));
        QCOMPARE(recomputeModes(1e-9, false, true).size(), size_t(1));
        QCOMPARE(recomputeModes(1e-9, true, false).size(), size_t(1)); // inference keeps nothing to recompute
    }

    // Mode tables [3 1 inf 5] and [2 4 inf 5]: per entry min 2 (mode 1), 1 (mode 0), inf, and
    // 5 on a tie, which the first mode keeps.
    void classTableTakesTheMinOverModes()
    {
        ClassTable ct;
        ct.dims = {4};
        for (const auto& values : {std::vector<double>{3, 1, inf, 5}, std::vector<double>{2, 4, inf, 5}}) {
            auto m = std::make_shared<ModeSolve>();
            m->table = values;
            ct.modes.push_back(m);
        }
        takeMinOverModes(ct);
        QCOMPARE(ct.table, (std::vector<double>{2, 1, inf, 5}));
        QCOMPARE(ct.modeOfEntry, (std::vector<std::uint8_t>{1, 0, 0, 0}));
    }

    // Three solves of 800 bytes each (100 doubles) under a 2000-byte bound: the third pushes
    // the total to 2400, so the oldest goes and 1600 bytes stay.
    void modeCacheDropsTheOldestOverItsBound()
    {
        ModeCache cache(2000);
        for (const char* key : {"a", "b", "c"}) {
            auto m = std::make_shared<ModeSolve>();
            m->table.assign(100, 0.0);
            cache.remember(key, m);
        }
        QVERIFY(!cache.find("a"));
        QVERIFY(cache.find("b") && cache.find("c"));
        QCOMPARE(cache.bytes(), 1600.0);
        QCOMPARE(cache.size(), size_t(2));
    }

    // Eliminating a variable takes, for each neighbour value, the least sum and the FIRST value
    // reaching it (core/search/factor.cpp keeps minima in two sets of four lanes: a tie across
    // lanes, inside one, in the tail after the lanes, and a row of infinities must all give the
    // first index, as a strict left-to-right scan does). Variable 0 (domain 2) is the neighbour;
    // variable 1 (the domain below) is eliminated; the unary factor over 1 is zero.
    void eliminationTakesTheFirstLeast_data()
    {
        QTest::addColumn<std::vector<double>>("row0");
        QTest::addColumn<std::vector<double>>("row1");
        QTest::addColumn<double>("least0");
        QTest::addColumn<int>("first0");
        QTest::addColumn<int>("first1");
        QTest::newRow("tie across lanes") << std::vector<double>{5, 3, 9, 3, 3, 1, 7, 1, 2} // 1 at 5 and 7
                                          << std::vector<double>{2, 2, 2, 2, 2, 2, 2, 2, 2} << 1.0 << 5 << 0;
        QTest::newRow("tie inside a lane") << std::vector<double>{4, 4, 0, 4, 4, 4, 0, 4} // 0 at 2 and 6
                                           << std::vector<double>{9, 9, 9, 9, 9, 9, 9, 3} << 0.0 << 2 << 7;
        QTest::newRow("least in the tail") << std::vector<double>{6, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5}
                                           << std::vector<double>{1, 6, 6, 6, 6, 6, 6, 6, 6, 6, 1} << 5.0 << 8 << 0;
        QTest::newRow("tail ties the lanes") << std::vector<double>{3, 6, 6, 6, 3}
                                             << std::vector<double>{6, 6, 6, 6, 3} << 3.0 << 0 << 4;
        QTest::newRow("infinite row") << std::vector<double>{inf, inf, inf, inf, inf, inf}
                                      << std::vector<double>{inf, inf, inf, inf, inf, 8} << inf << 0 << 5;
        QTest::newRow("shorter than a lane") << std::vector<double>{2, 1, 1} << std::vector<double>{0, 0, 0} << 1.0 << 1 << 0;
        // Two sets of four lanes take eight entries a round (x..x+3, x+4..x+7): 5 (the second
        // set, lane 1) and 9 (the first set, lane 1, next round) tie in one lane of each set;
        // 1 and 13 the other way round; 4 (the second set) and 8 (the first set's extra four
        // after the rounds, n = 12).
        QTest::newRow("tie across the sets, second first")
            << std::vector<double>{7, 7, 7, 7, 7, 2, 7, 7, 7, 2, 7, 7, 7, 7, 7, 7}
            << std::vector<double>{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7} << 2.0 << 5 << 0;
        QTest::newRow("tie across the sets, first first")
            << std::vector<double>{7, 2, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2, 7, 7}
            << std::vector<double>{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0} << 2.0 << 1 << 15;
        QTest::newRow("tie with the extra four") << std::vector<double>{9, 9, 9, 9, 1, 9, 9, 9, 1, 9, 9, 9}
                                                 << std::vector<double>{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 4, 4} << 1.0 << 4 << 10;
    }
    void eliminationTakesTheFirstLeast()
    {
        QFETCH(std::vector<double>, row0);
        QFETCH(std::vector<double>, row1);
        QFETCH(double, least0);
        QFETCH(int, first0);
        QFETCH(int, first1);
        const int n = static_cast<int>(row0.size());
        Factor pair{{0, 1}, row0};
        pair.values.insert(pair.values.end(), row1.begin(), row1.end());
        const Factor unary{{1}, std::vector<double>(row0.size(), 0.0)};
        const EliminationResult r = eliminate({pair, unary}, {2, n}, {0});
        QCOMPARE(r.steps.size(), size_t(1));
        QCOMPARE(r.steps[0].argmin, (std::vector<int>{first0, first1}));
        QCOMPARE(r.remaining.values[0], least0);
        std::vector<int> assignment{1, -1};
        decode(r, {2, n}, assignment);
        QCOMPARE(assignment[1], first1);
    }
    // The same on random rows of every length from 1 to 40, with values from 0 to 3 and some
    // infinite (many ties, in every lane and the tail): each step's least and first value is
    // the one a strict left-to-right scan finds.
    void eliminationTakesTheFirstLeastOnRandomRows()
    {
        std::mt19937 rng(11);
        for (int n = 1; n <= 40; ++n)
            for (int trial = 0; trial < 20; ++trial) {
                Factor pair{{0, 1}, {}};
                for (int i = 0; i < 2 * n; ++i) pair.values.push_back(rng() % 6 == 0 ? inf : static_cast<double>(rng() % 4));
                Factor unary{{1}, {}};
                for (int i = 0; i < n; ++i) unary.values.push_back(static_cast<double>(rng() % 2));
                const EliminationResult r = eliminate({pair, unary}, {2, n}, {0});
                for (size_t row = 0; row < 2; ++row) {
                    double least = inf;
                    int first = 0;
                    for (int x = 0; x < n; ++x)
                        if (const double v = pair.values[row * static_cast<size_t>(n) + static_cast<size_t>(x)] +
                                             unary.values[static_cast<size_t>(x)];
                            v < least) {
                            least = v;
                            first = x;
                        }
                    QCOMPARE(r.remaining.values[row], least);
                    QCOMPARE(r.steps[0].argmin[row], first);
                }
            }
    }

    // Factors over the same variables (an edge and its recomputed copy) are summed before
    // elimination (core/search/factor.cpp mergeSameScopes): the sum, not either one, is
    // minimised. Keep 0, eliminate 1 (both domain 2); by hand: f + g = {9, 5, 5, 9} and the unary
    // factors {1, 0} + {0, 2} = {1, 2}, so row 0 is {10, 7} (least 7 at 1) and row 1 is
    // {6, 11} (least 6 at 0). Dropping g would give 0 at 0 and 2 at 1 instead.
    void sameScopeFactorsAreSummed()
    {
        const Factor f{{0, 1}, {0, 5, 5, 0}};
        const Factor g{{0, 1}, {9, 0, 0, 9}};
        const Factor u{{1}, {1, 0}};
        const Factor v{{1}, {0, 2}};
        const EliminationResult r = eliminate({f, u, g, v}, {2, 2}, {0});
        QCOMPARE(r.remaining.values, (std::vector<double>{7, 6}));
        QCOMPARE(r.steps.back().argmin, (std::vector<int>{1, 0}));
    }

    // A locked variable (one finite value in its unary factors) is fixed, not eliminated.
    // Variable 0 is kept (domain 2); 1 is locked to value 1 (domain 3); 2 is eliminated.
    //   f01 = [[1 5 0] [2 0 7]], f12 = [[0 9] [3 1] [2 2]], u1 = [inf 4 inf], u2 = [1 0]
    //   with 1 = 1: min over 2 of f12(1, .) + u2 = min(3+1, 1+0) = 1 (at 2 = 1), so
    //   remaining(0) = 5 + 4 + 1 = 10, remaining(1) = 0 + 4 + 1 = 5.
    // Fixed, 1 joins nothing: every step has no neighbours (eliminated, 2 would neighbour 1).
    void aLockedVariableIsFixed()
    {
        const Factor f01{{0, 1}, {1, 5, 0, 2, 0, 7}};
        const Factor f12{{1, 2}, {0, 9, 3, 1, 2, 2}};
        const Factor u1{{1}, {inf, 4, inf}};
        const Factor u2{{2}, {1, 0}};
        const std::vector<int> domains{2, 3, 2};
        const EliminationResult r = eliminate({f01, f12, u1, u2}, domains, {0});
        QCOMPARE(r.remaining.values, (std::vector<double>{10, 5}));
        QCOMPARE(r.steps.size(), size_t(2));
        for (const EliminationStep& step : r.steps) QVERIFY(step.neighbours.empty());
        std::vector<int> assignment{1, -1, -1};
        decode(r, domains, assignment);
        QCOMPARE(assignment, (std::vector<int>{1, 1, 1}));
    }

    // A value that another value of its variable replaces at no greater cost over all its
    // factors together is dropped (core/search/substitution.cpp). Variable 0 (domain 3) is
    // eliminated, 1 (domain 2) kept; u0 = [9 2 5], f01 = [[0 4] [3 0] [0 4]].
    //   1 for 2: u adds 2 - 5 = -3, f01 at most max(3 - 0, 0 - 4) = 3: -3 + 3 = 0 <= 0, dropped
    //     (the edge alone is worse by 3, so only the sum over both factors drops it);
    //   1 for 0: u adds 2 - 9 = -7, f01 at most max(3 - 0, 0 - 4) = 3: -4, dropped;
    //   nothing replaces 1 (0 or 2 for 1: u adds 7 or 3). So 0 keeps value 1 alone.
    // By hand, every value kept: remaining(1 = 0) = min(9+0, 2+3, 5+0) = 5 (first least at 1),
    // remaining(1 = 1) = min(9+4, 2+0, 5+4) = 2 (at 1): the same with value 1 alone.
    // "no substitute": u0 = [1 2 3], f01 = [[0 9] [9 0] [4 4]]: every replacement adds at least
    // 3 (0 for 2: -2 + max(0 - 4, 9 - 4)); remaining = [min(1, 11, 7), min(10, 2, 7)] = [1 2].
    // Two equal values ("equal"): the first stays, as the elimination itself takes the first least.
    // A value forbidden outright (+inf, "forbidden") goes; the other two do not replace each other.
    void substitutedValuesAreDropped_data()
    {
        QTest::addColumn<std::vector<double>>("u0");
        QTest::addColumn<std::vector<double>>("f01");
        QTest::addColumn<std::vector<int>>("kept");
        QTest::addColumn<std::vector<double>>("remaining");
        QTest::newRow("slack across factors") << std::vector<double>{9, 2, 5} << std::vector<double>{0, 4, 3, 0, 0, 4}
                                              << std::vector<int>{1} << std::vector<double>{5, 2};
        QTest::newRow("no substitute") << std::vector<double>{1, 2, 3} << std::vector<double>{0, 9, 9, 0, 4, 4}
                                       << std::vector<int>{0, 1, 2} << std::vector<double>{1, 2};
        QTest::newRow("equal") << std::vector<double>{1, 1} << std::vector<double>{0, 2, 0, 2} << std::vector<int>{0}
                               << std::vector<double>{1, 3};
        QTest::newRow("forbidden") << std::vector<double>{inf, 3, 4} << std::vector<double>{0, 0, 5, 1, 0, 9}
                                   << std::vector<int>{1, 2} << std::vector<double>{4, 4};
    }
    void substitutedValuesAreDropped()
    {
        QFETCH(std::vector<double>, u0);
        QFETCH(std::vector<double>, f01);
        QFETCH(std::vector<int>, kept);
        QFETCH(std::vector<double>, remaining);
        const std::vector<int> domains{static_cast<int>(u0.size()), 2};
        const std::vector<Factor> factors{Factor{{0}, u0}, Factor{{0, 1}, f01}};
        const EliminationResult reduced = eliminate(factors, domains, {1}, 1, 0.0);
        const EliminationResult whole = eliminate(factors, domains, {1}, 1, inf);
        QCOMPARE(reduced.reducedDomains[0], static_cast<int>(kept.size()));
        if (kept.size() < u0.size()) QCOMPARE(reduced.values.valuesOf[0], kept);
        QCOMPARE(reduced.remaining.values, remaining);
        QCOMPARE(whole.reducedDomains, domains);
        QCOMPARE(whole.remaining.values, remaining);
        // Decoded back to the original values: the least of each row, and a kept value.
        for (int x1 = 0; x1 < 2; ++x1) {
            std::vector<int> assignment{-1, x1};
            decode(reduced, domains, assignment);
            QVERIFY(std::find(kept.begin(), kept.end(), assignment[0]) != kept.end());
            QCOMPARE(u0[static_cast<size_t>(assignment[0])] + f01[static_cast<size_t>(assignment[0] * 2 + x1)],
                     remaining[static_cast<size_t>(x1)]);
        }
    }

    // Where the test runs (kSubstituteWorth, core/search/factor.h): a variable is tested when
    // the elimination work its domain multiplies, every step it takes part in, is worth the
    // test; the other variables' steps count, the size of its neighbourhood before the
    // elimination does not. Variable 0 (domain `d0`) has u0 = [0 1 ..]; its pair factors do not
    // depend on it, so every value but 0 is substitutable. The others form the rest of the graph.
    //   "clique": 0 and three variables of 30 values, a factor on every pair. The greedy order
    //     eliminates 1 first (neighbours 2 x 30 x 30 = 1,800 against 0's 30^3 = 27,000): a step
    //     of 30 x 1,800 = 54,000 with 0 among its neighbours, then 2 (30 x 60), 3 (30 x 2) and 0
    //     (2): work 55,862. 0's test: 2 + 3 x 60 entries + 2^2 x 4 pairs = 198, x 64 = 12,672.
    //     Tested: 0 keeps one value (its own last step alone, 2, would not have been worth it).
    //   "star": 0 (4 values) and eight leaves of 10 values, each on a pair factor with 0. Before
    //     the elimination 0's neighbourhood is 4 x 10^8 = 4e9, but each leaf goes first in a step
    //     of 10 x 4 = 40 and 0 in one of 4: work 324, against a test of (4 + 8 x 40 entries +
    //     4^2 x 9 pairs) x 64 = 29,952. Untested: 0 keeps 4.
    void substitutesTestedWhereTheWorkPays_data()
    {
        QTest::addColumn<int>("d0");
        QTest::addColumn<std::vector<int>>("others");
        QTest::addColumn<bool>("clique");
        QTest::addColumn<int>("keptByDefault");
        QTest::newRow("clique") << 2 << std::vector<int>{30, 30, 30} << true << 1;
        QTest::newRow("star") << 4 << std::vector<int>(8, 10) << false << 4;
    }
    void substitutesTestedWhereTheWorkPays()
    {
        QFETCH(int, d0);
        QFETCH(std::vector<int>, others);
        QFETCH(bool, clique);
        QFETCH(int, keptByDefault);
        std::vector<int> domains{d0};
        domains.insert(domains.end(), others.begin(), others.end());
        const int n = static_cast<int>(domains.size());
        auto pairFactor = [&](int a, int b) { // the same for every value of variable 0
            const auto da = static_cast<size_t>(domains[static_cast<size_t>(a)]), db = static_cast<size_t>(domains[static_cast<size_t>(b)]);
            Factor f{{a, b}, std::vector<double>(da * db)};
            for (size_t i = 0; i < da; ++i)
                for (size_t j = 0; j < db; ++j) f.values[i * db + j] = a == 0 ? static_cast<double>(j % 3) : static_cast<double>((i * 7 + j * 3) % 11);
            return f;
        };
        std::vector<Factor> factors{Factor{{0}, std::vector<double>(static_cast<size_t>(d0))}};
        for (int x = 0; x < d0; ++x) factors[0].values[static_cast<size_t>(x)] = x;
        for (int a = 0; a < n; ++a)
            for (int b = a + 1; b < n; ++b)
                if (clique || a == 0) factors.push_back(pairFactor(a, b));
        const EliminationResult byDefault = eliminate(factors, domains, {});
        const EliminationResult everywhere = eliminate(factors, domains, {}, 1, 0.0);
        const EliminationResult nowhere = eliminate(factors, domains, {}, 1, inf);
        QCOMPARE(byDefault.reducedDomains[0], keptByDefault);
        QCOMPARE(everywhere.reducedDomains[0], 1);
        QCOMPARE(byDefault.remaining.values, nowhere.remaining.values);
        QCOMPARE(everywhere.remaining.values, nowhere.remaining.values);
    }

    // On random factor graphs with small integer costs (many ties and near-substitutes) and
    // some forbidden entries: the elimination with every variable tested for substitutes gives
    // the same least cost as without, for every assignment of the kept variables, and decodes
    // to an assignment that costs exactly that. Values must actually be dropped on the way. The
    // same holds in the least-fill order, which must differ from the least-weight one on many.
    void substitutionKeepsTheLeast()
    {
        std::mt19937 rng(11);
        size_t dropped = 0, otherOrders = 0;
        auto orderDiffers = [](const EliminationResult& a, const EliminationResult& b) {
            if (a.steps.size() != b.steps.size()) return true;
            for (size_t k = 0; k < a.steps.size(); ++k)
                if (a.steps[k].var != b.steps[k].var) return true;
            return false;
        };
        for (int problem = 0; problem < 300; ++problem) {
            const int n = 4 + static_cast<int>(rng() % 4);
            std::vector<int> domains(static_cast<size_t>(n));
            for (int& d : domains) d = 2 + static_cast<int>(rng() % 4);
            auto randomFactor = [&](std::vector<int> vars) { return randomCosts(rng, domains, std::move(vars)); };
            std::vector<Factor> factors;
            for (int v = 0; v < n; ++v) factors.push_back(randomFactor({v}));
            for (int k = 0; k < n + 2; ++k) {
                std::vector<int> vars{static_cast<int>(rng() % n), static_cast<int>(rng() % n)};
                if (rng() % 3 == 0) vars.push_back(static_cast<int>(rng() % n));
                factors.push_back(randomFactor(vars));
            }
            const std::vector<int> keep = problem % 3 == 0 ? std::vector<int>{} : std::vector<int>{static_cast<int>(rng() % n)};
            // Every finite least decodes to an assignment whose factors add up to exactly it.
            auto checkDecodedCosts = [&](const EliminationResult& result) {
                for (size_t row = 0; row < result.remaining.values.size(); ++row) {
                    if (!(result.remaining.values[row] < inf)) continue;
                    std::vector<int> assignment(static_cast<size_t>(n), -1);
                    if (!keep.empty()) assignment[static_cast<size_t>(keep[0])] = static_cast<int>(row);
                    decode(result, domains, assignment);
                    double cost = 0;
                    for (const Factor& f : factors) cost += f.values[factorIndex(f, domains, assignment)];
                    QCOMPARE(cost, result.remaining.values[row]);
                }
            };
            const EliminationResult reduced = eliminate(factors, domains, keep, 1, 0.0);
            const EliminationResult whole = eliminate(factors, domains, keep, 1, inf);
            QCOMPARE(reduced.remaining.values, whole.remaining.values);
            // The least-fill order (core/search/factor.cpp) gives the same least, reduced or not.
            for (double worth : {0.0, inf}) {
                const EliminationResult fill = eliminate(factors, domains, keep, 1, worth, EliminationOrderRule::LeastFill);
                QCOMPARE(fill.remaining.values, whole.remaining.values);
                checkDecodedCosts(fill);
                if (QTest::currentTestFailed()) return;
                if (orderDiffers(fill, whole)) ++otherOrders;
            }
            for (int v = 0; v < n; ++v) dropped += static_cast<size_t>(domains[static_cast<size_t>(v)] - reduced.reducedDomains[static_cast<size_t>(v)]);
            checkDecodedCosts(reduced);
            if (QTest::currentTestFailed()) return;
        }
        // The plain rule, each pair tested in full (commit 60226da), dropped 1,130 values here:
        // the cheap tests before the full one (core/search/substitution.cpp) must not lose any.
        QCOMPARE(dropped, size_t{1130});
        qInfo("least-fill orders that differ from the least-weight one: %zu", otherOrders);
        QVERIFY(otherOrders >= 40); // 25 of the 300 graphs, at both worths: 50
    }

    // eliminate()'s `stopWhen` sees a lower bound on the least that never falls, and stops
    // only where asked: on 300 random graphs (one in twenty entries forbidden) the bounds seen
    // rise step by step and stay at or under the least a full elimination finds; asked to stop
    // at a share of that least, it stops with a bound at least that high, mostly before its
    // last step; asked for the least or more, it never stops (the bound stays a relative 1e-12
    // under what the elimination would add up) and finds the least. Below kStopWorth additions
    // (all of these graphs) it is not asked at all unless the caller lowers the worth.
    void eliminationStopsOnlyAtABoundOnTheLeast()
    {
        std::mt19937 rng(5);
        int stoppedEarly = 0, asked = 0;
        for (int problem = 0; problem < 300; ++problem) {
            const int n = 4 + static_cast<int>(rng() % 5);
            std::vector<int> domains(static_cast<size_t>(n));
            for (int& d : domains) d = 2 + static_cast<int>(rng() % 4);
            std::vector<Factor> factors;
            auto addFactor = [&](std::vector<int> vars) { factors.push_back(randomCosts(rng, domains, std::move(vars))); };
            for (int v = 0; v < n; ++v) addFactor({v});
            for (int k = 0; k < n + 2; ++k) addFactor({static_cast<int>(rng() % n), static_cast<int>(rng() % n)});
            const EliminationResult whole = eliminate(factors, domains, {});
            const double least = whole.remaining.values[0];
            if (!(least < inf) || least <= 0) continue;
            for (double share : {0.5, 0.9, 1.0, 1.5}) {
                std::vector<double> seen;
                const EliminationResult r = eliminate(
                    factors, domains, {}, 1, kSubstituteWorth, EliminationOrderRule::Auto,
                    [&](double bound) {
                        seen.push_back(bound);
                        return bound >= share * least;
                    },
                    0);
                if (share == 0.5) { // at the default worth these small graphs are never stopped
                    bool asked = false;
                    const EliminationResult small = eliminate(factors, domains, {}, 1, kSubstituteWorth,
                                                              EliminationOrderRule::Auto, [&](double) { return asked = true; });
                    QVERIFY(!asked && !small.stopped);
                    QCOMPARE(small.remaining.values, whole.remaining.values);
                }
                QVERIFY(!seen.empty());
                QVERIFY(std::is_sorted(seen.begin(), seen.end()));
                QVERIFY2(seen.back() <= least, qPrintable(QString("bound %1 over the least %2").arg(seen.back()).arg(least)));
                if (share >= 1) { // the bound keeps a rounding margin under the least
                    QVERIFY(!r.stopped);
                    QCOMPARE(r.remaining.values, whole.remaining.values);
                    continue;
                }
                ++asked;
                QVERIFY(r.stopped); // at the last step the bound is the least, less its margin
                QVERIFY(r.lowerBound >= share * least && r.lowerBound <= least);
                QVERIFY(r.remaining.values.empty());
                if (r.steps.size() < whole.steps.size()) ++stoppedEarly;
            }
        }
        qInfo("stopped before the last step: %d of %d", stoppedEarly, asked);
        QVERIFY(stoppedEarly > asked / 3);
    }
};

QTEST_GUILESS_MAIN(TestSearchUnits)
#include "tst_searchunits.moc"
