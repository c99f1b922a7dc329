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

constexpr double kLeastTest = 1e7 / kSubstituteWorth;

/// One factor seen from one of its variables: the entries of value x are at
/// (o * domain + x) * inner + i for o < outer, i < inner.
struct FactorView {
    Factor* factor;
    std::size_t outer, inner;
    /// Per value x, (o * domain) * inner + i of its least entry (+inf everywhere: any).
    std::vector<std::size_t> leastAt;

    double at(std::size_t base, std::size_t x) const { return factor->values[base + x * inner]; }
};

/// Fills view.leastAt for a variable of `domain` values.
void findLeast(FactorView& view, std::size_t domain)
{
    view.leastAt.assign(domain, 0);
    const double* values = view.factor->values.data();
    for (std::size_t x = 0; x < domain; ++x) {
        double least = kInfinity;
        for (std::size_t o = 0; o < view.outer; ++o)
            for (std::size_t i = 0; i < view.inner; ++i)
                if (const std::size_t base = o * domain * view.inner + i; values[base + x * view.inner] < least) {
                    least = values[base + x * view.inner];
                    view.leastAt[x] = base;
                }
    }
}

/// A lower bound of what putting `b` for `a` adds over every factor, from each factor's entry
/// where `a` costs least (the most added there is at least what is added at that entry): a
/// cheap test that rules out most pairs before the full one.
double addedAtLeast(const std::vector<FactorView>& views, std::size_t a, std::size_t b)
{
    double sum = 0;
    for (const FactorView& view : views) {
        const double costA = view.at(view.leastAt[a], a);
        if (costA == kInfinity) return -kInfinity; // `a` is forbidden outright
        sum += view.at(view.leastAt[a], b) - costA;
    }
    return sum;
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
/// largest last, which is scanned against what the smaller ones leave).
bool substitutes(const std::vector<FactorView>& views, std::size_t domain, std::size_t a, std::size_t b)
{
    if (addedAtLeast(views, a, b) > 0) return false;
    double sum = 0;
    for (size_t k = 0; k + 1 < views.size(); ++k) {
        const double m = mostAdded(views[k], domain, a, b, kInfinity);
        if (m == kInfinity) return false;
        if (m == -kInfinity) return true; // `a` is forbidden outright
        sum += m;
    }
    const double last = mostAdded(views.back(), domain, a, b, -sum);
    return last == -kInfinity || sum + last <= 0;
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

/// Sets `views` to variable `v`'s factors as seen from it (reusing their buffers); false when
/// testing its values would cost more than eliminating it saves or than `budget` allows.
bool viewsWorthTesting(const Touching& touching, std::size_t v, const std::vector<int>& domainSizes, double worth,
                       double budget, std::vector<FactorView>& views)
{
    const auto domain = static_cast<std::size_t>(domainSizes[v]);
    const std::size_t count = touching.begin[v + 1] - touching.begin[v];
    if (count == 0) return false;
    views.resize(count);
    double entries = 0, weight = static_cast<double>(domain);
    for (std::size_t k = 0; k < count; ++k) {
        Factor* f = touching.factors[touching.begin[v] + k];
        std::size_t inner = 1;
        for (auto it = std::upper_bound(f->vars.begin(), f->vars.end(), static_cast<int>(v)); it != f->vars.end(); ++it)
            inner *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(*it)]);
        views[k].factor = f;
        views[k].inner = inner;
        views[k].outer = f->values.size() / (domain * inner);
        entries += static_cast<double>(f->values.size());
        weight *= static_cast<double>(f->values.size() / domain); // its neighbours' domains (shared ones again)
    }
    // Eliminating the variable costs about the product of its and its neighbours' domains; the
    // test one pass over its factors and a pair test per factor (kSubstituteWorth), counted as
    // at least kLeastTest: below steps of about 1e7 (a few ms) the dropped values did not pay
    // for the tests (callgrind, `plan llama3-8b --mesh 2x8 --threads 1`: 739 M instructions
    // untested, 749 M tested at every variable worth 64 times its test, 739 M with this floor;
    // T5-base on 2x2x2, one combination: 32.2 G, 20.7 G, 20.7 G; a floor of 1e8 / 64: 28.8 G).
    const double testCost = std::max(kLeastTest, entries + static_cast<double>(domain * domain * count));
    if (!(weight >= worth * testCost) || entries * static_cast<double>(domain) > budget) return false;
    std::stable_sort(views.begin(), views.end(),
                     [](const FactorView& x, const FactorView& y) { return x.factor->values.size() < y.factor->values.size(); });
    for (FactorView& view : views) findLeast(view, domain);
    return true;
}

/// The values of a variable that no other value substitutes, ascending. From the last value
/// down, so that of two values that substitute each other the first stays (the elimination's
/// own choice among equals, core/search/factor.cpp).
std::vector<int> valuesKept(const std::vector<FactorView>& views, std::size_t domain)
{
    std::vector<bool> dropped(domain, false);
    for (std::size_t a = domain; a-- > 0;)
        for (std::size_t b = 0; b < domain; ++b)
            if (b != a && !dropped[b] && substitutes(views, domain, a, b)) {
                dropped[a] = true;
                break;
            }
    std::vector<int> keep;
    for (std::size_t x = 0; x < domain; ++x)
        if (!dropped[x]) keep.push_back(static_cast<int>(x));
    return keep;
}

} // namespace

ValueMap dropSubstitutableValues(std::vector<Factor>& factors, std::vector<int>& domainSizes, const std::vector<bool>& kept,
                                 double worth, double budget)
{
    ValueMap map;
    const Touching touching(factors, domainSizes.size());
    std::vector<FactorView> views;
    for (size_t v = 0; v < domainSizes.size(); ++v) {
        const auto domain = static_cast<std::size_t>(domainSizes[v]);
        if (kept[v] || domain < 2 || !viewsWorthTesting(touching, v, domainSizes, worth, budget, views)) continue;
        std::vector<int> keep = valuesKept(views, domain);
        if (keep.size() == domain) continue;
        for (const FactorView& view : views) cutToValues(view, domain, keep);
        domainSizes[v] = static_cast<int>(keep.size());
        if (map.valuesOf.empty()) map.valuesOf.resize(domainSizes.size());
        map.valuesOf[v] = std::move(keep);
    }
    return map;
}

} // namespace tp
