#include "substitution.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tp {

void ValueMap::toOriginal(std::vector<int>& assignment) const
{
    for (size_t v = 0; v < valuesOf.size() && v < assignment.size(); ++v)
        if (!valuesOf[v].empty()) assignment[v] = valuesOf[v][static_cast<size_t>(assignment[v])];
}

namespace {

/// One factor seen from one of its variables: the entries of value x are at
/// (o * domain + x) * inner + i for o < outer, i < inner.
struct FactorView {
    Factor* factor;
    std::size_t outer, inner;
    /// Per value x, (o * domain) * inner + i of its least entry (+inf everywhere: any).
    std::vector<std::size_t> leastAt;
    /// Per value x, the same of its greatest entry (+inf counts as greatest).
    std::vector<std::size_t> mostAt;

    double at(std::size_t base, std::size_t x) const { return factor->values[base + x * inner]; }
};

/// Fills view.leastAt and view.mostAt for a variable of `domain` values, in one pass in memory
/// order (the first of equal entries wins). Returns each value's least entry.
void findExtremes(FactorView& view, std::size_t domain, std::vector<double>& least)
{
    view.leastAt.assign(domain, 0);
    view.mostAt.assign(domain, 0);
    least.assign(domain, kInfinity);
    std::vector<double> most(domain, -kInfinity);
    const double* values = view.factor->values.data();
    for (std::size_t o = 0; o < view.outer; ++o)
        for (std::size_t x = 0; x < domain; ++x) {
            const std::size_t base = o * domain * view.inner;
            const double* row = values + base + x * view.inner;
            double low = least[x], high = most[x];
            std::size_t lowAt = view.inner, highAt = view.inner;
            for (std::size_t i = 0; i < view.inner; ++i) {
                if (row[i] < low) low = row[i], lowAt = i;
                if (row[i] > high) high = row[i], highAt = i;
            }
            if (lowAt < view.inner) least[x] = low, view.leastAt[x] = base + lowAt;
            if (highAt < view.inner) most[x] = high, view.mostAt[x] = base + highAt;
        }
}

/// What putting `b` for `a` adds at one entry of `view`'s factor (-inf where `a` is forbidden
/// there: any substitute will do).
double addedAt(const FactorView& view, std::size_t base, std::size_t a, std::size_t b)
{
    const double costA = view.at(base, a);
    return costA == kInfinity ? -kInfinity : view.at(base, b) - costA;
}

/// The most that putting `b` for `a` adds to `view`'s factor, over its other variables; stops
/// early (returning +inf) once it exceeds `allowed`. A forbidden entry at `a` (+inf) allows
/// anything; a forbidden one at `b` where `a` is allowed, nothing.
double mostAdded(const FactorView& view, std::size_t domain, std::size_t a, std::size_t b, double allowed)
{
    double most = -kInfinity;
    const double* values = view.factor->values.data();
    for (std::size_t o = 0; o < view.outer; ++o) {
        const double* rowA = values + (o * domain + a) * view.inner;
        const double* rowB = values + (o * domain + b) * view.inner;
        for (std::size_t i = 0; i < view.inner; ++i) {
            if (rowA[i] == kInfinity) continue;
            const double added = rowB[i] - rowA[i];
            if (added > most) {
                most = added;
                if (most > allowed) return kInfinity;
            }
        }
    }
    return most;
}

/// Whether `b` substitutes `a` over every factor on the variable (views ordered by size, the
/// largest last). First a lower bound from two entries per factor, where `a` costs least and
/// where `b` costs most (the most added over a factor is at least what is added at any entry);
/// then each factor's scan stops once what it adds leaves no room for the lower bounds of the
/// factors after it (`leastAdded`, scratch of one entry per view).
bool substitutes(const std::vector<FactorView>& views, std::size_t domain, std::size_t a, std::size_t b,
                 std::vector<double>& leastAdded)
{
    double bound = 0;
    for (std::size_t k = views.size(); k-- > 0;) {
        const FactorView& view = views[k];
        const double added = addedAt(view, view.leastAt[a], a, b);
        if (added == -kInfinity) return true; // `a` is forbidden outright
        bound += std::max(added, addedAt(view, view.mostAt[b], a, b));
        leastAdded[k] = bound; // the least that factors k.. add together
    }
    if (bound > 0) return false;
    double sum = 0;
    for (size_t k = 0; k < views.size(); ++k) {
        const double rest = k + 1 < views.size() ? leastAdded[k + 1] : 0;
        const double m = mostAdded(views[k], domain, a, b, -sum - rest);
        if (m == kInfinity) return false;
        sum += m;
    }
    return sum <= 0;
}

/// The factor with variable `var` cut to the values `keep` (ascending).
void cutToValues(const FactorView& view, std::size_t domain, const std::vector<int>& keep)
{
    std::vector<double> cut;
    cut.reserve(view.outer * keep.size() * view.inner);
    const std::vector<double>& values = view.factor->values;
    for (std::size_t o = 0; o < view.outer; ++o)
        for (int x : keep) {
            const auto row = values.begin() + static_cast<std::ptrdiff_t>((o * domain + static_cast<std::size_t>(x)) * view.inner);
            cut.insert(cut.end(), row, row + static_cast<std::ptrdiff_t>(view.inner));
        }
    view.factor->values = std::move(cut);
}

/// Each variable's factors, in one array (a table solve calls this thousands of times).
struct Touching {
    std::vector<std::size_t> begin; ///< per variable, where its factors start in `factors`
    std::vector<Factor*> factors;

    Touching(std::vector<Factor>& all, std::size_t variables) : begin(variables + 1, 0)
    {
        for (const Factor& f : all)
            for (int v : f.vars) ++begin[static_cast<size_t>(v) + 1];
        for (std::size_t v = 0; v < variables; ++v) begin[v + 1] += begin[v];
        factors.resize(begin.back());
        std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
        for (Factor& f : all)
            for (int v : f.vars) factors[next[static_cast<size_t>(v)]++] = &f;
    }
};

/// Sets `views` to variable `v`'s factors as seen from it (reusing their buffers) and `leastSum`
/// to the sum of each value's least entries over them; false when
/// testing its values would cost more than eliminating it saves or than `budget` allows.
bool viewsWorthTesting(const Touching& touching, std::size_t v, const std::vector<int>& domainSizes, double work,
                       double worth, double budget, std::vector<FactorView>& views, std::vector<double>& leastSum)
{
    const auto domain = static_cast<std::size_t>(domainSizes[v]);
    const std::size_t count = touching.begin[v + 1] - touching.begin[v];
    if (count == 0) return false;
    views.resize(count);
    double entries = 0;
    for (std::size_t k = 0; k < count; ++k) {
        Factor* f = touching.factors[touching.begin[v] + k];
        std::size_t inner = 1;
        for (auto it = std::upper_bound(f->vars.begin(), f->vars.end(), static_cast<int>(v)); it != f->vars.end(); ++it)
            inner *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(*it)]);
        views[k].factor = f;
        views[k].inner = inner;
        views[k].outer = f->values.size() / (domain * inner);
        entries += static_cast<double>(f->values.size());
    }
    // The test costs one pass over the variable's factors and a pair test per factor; dropped
    // values shrink every elimination step the variable takes part in (`work`). Gated on what
    // the variable's neighbourhood holds before the elimination instead, the test ran where the
    // steps turned out small: `plan llama3-8b --mesh 4x4x8 --pipeline 2` took 16.7 s against
    // 14.1 s untested (docs/PERFORMANCE.md, "Substitutable values: where the test pays").
    const double testCost = entries + static_cast<double>(domain * domain * count);
    if (!(work >= worth * testCost) || entries * static_cast<double>(domain) > budget) return false;
    std::stable_sort(views.begin(), views.end(),
                     [](const FactorView& x, const FactorView& y) { return x.factor->values.size() < y.factor->values.size(); });
    leastSum.assign(domain, 0);
    std::vector<double> least;
    for (FactorView& view : views) {
        findExtremes(view, domain, least);
        for (std::size_t x = 0; x < domain; ++x) leastSum[x] += least[x];
    }
    return true;
}

/// The values of a variable that no other value substitutes, ascending. From the last value
/// down, so that of two values that substitute each other the first stays (the elimination's
/// own choice among equals, core/search/factor.cpp).
std::vector<int> valuesKept(const std::vector<FactorView>& views, std::size_t domain, const std::vector<double>& leastSum)
{
    std::vector<bool> dropped(domain, false);
    std::vector<double> leastAdded(views.size());
    for (std::size_t a = domain; a-- > 0;) {
        // A substitute's least entries cannot sum to more than `a`'s (each factor adds at least
        // the difference of their least entries): a test on one number per value first, with
        // room for rounding (passing a pair on to the full test only ever keeps more values).
        const double most = leastSum[a] + 1e-12 * std::abs(leastSum[a]);
        for (std::size_t b = 0; b < domain; ++b)
            if (b != a && !dropped[b] && (leastSum[b] <= most || leastSum[a] == kInfinity) && substitutes(views, domain, a, b, leastAdded)) {
                dropped[a] = true;
                break;
            }
    }
    std::vector<int> keep;
    for (std::size_t x = 0; x < domain; ++x)
        if (!dropped[x]) keep.push_back(static_cast<int>(x));
    return keep;
}

} // namespace

ValueMap dropSubstitutableValues(std::vector<Factor>& factors, std::vector<int>& domainSizes, const std::vector<bool>& kept,
                                 const std::vector<double>& work, double worth, double budget)
{
    ValueMap map;
    const Touching touching(factors, domainSizes.size());
    std::vector<FactorView> views;
    std::vector<double> leastSum;
    for (size_t v = 0; v < domainSizes.size(); ++v) {
        const auto domain = static_cast<std::size_t>(domainSizes[v]);
        if (kept[v] || domain < 2 || !viewsWorthTesting(touching, v, domainSizes, work[v], worth, budget, views, leastSum)) continue;
        std::vector<int> keep = valuesKept(views, domain, leastSum);
        if (keep.size() == domain) continue;
        for (const FactorView& view : views) cutToValues(view, domain, keep);
        domainSizes[v] = static_cast<int>(keep.size());
        if (map.valuesOf.empty()) map.valuesOf.resize(domainSizes.size());
        map.valuesOf[v] = std::move(keep);
    }
    return map;
}

} // namespace tp
