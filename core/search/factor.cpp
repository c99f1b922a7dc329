#include "factor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "kernel_builds.h"
#include "substitution.h"

namespace tp {

std::size_t factorIndex(const Factor& f, const std::vector<int>& domainSizes, const std::vector<int>& assignment)
{
    std::size_t index = 0;
    for (int v : f.vars)
        index = index * static_cast<std::size_t>(domainSizes[static_cast<size_t>(v)]) +
                static_cast<std::size_t>(assignment[static_cast<size_t>(v)]);
    return index;
}

namespace {

/// The variables of `factors` but `excluded`, ascending, written over `vars` (a buffer the
/// caller may reuse).
void unionInto(std::vector<int>& vars, const std::vector<const Factor*>& factors, int excluded)
{
    vars.clear();
    for (const auto* f : factors)
        for (int v : f->vars)
            if (v != excluded) vars.push_back(v);
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
}

std::vector<int> unionOf(const std::vector<const Factor*>& factors, int excluded)
{
    std::vector<int> vars;
    unionInto(vars, factors, excluded);
    return vars;
}

double weightOf(const std::vector<int>& vars, const std::vector<int>& domainSizes)
{
    double w = 1;
    for (int v : vars) w *= domainSizes[static_cast<size_t>(v)];
    return w;
}

/// How the elimination kernel reads one factor: its stride for every neighbour position and for
/// the eliminated variable, so an index can be kept incrementally while the neighbour assignment
/// advances like an odometer.
struct Access {
    const double* values;
    std::size_t arity;
    std::size_t* strideOfNeighbour; ///< one per neighbour position, in a buffer of the step's
    std::size_t varStride;
};

/// Buffers an elimination reuses from step to step: a step is often a few thousand additions,
/// and allocating its dozen buffers afresh cost as much again (eliminate).
struct StepScratch {
    std::vector<std::vector<double>> reordered; ///< copies with the eliminated variable last; `used` in use
    size_t used = 0;
    std::vector<std::size_t> stride, rowStride;
    std::vector<int> rowDomain, digit;
    std::vector<Access> access;
    std::vector<std::size_t> strides;
    std::vector<double> unary;
    std::vector<size_t> sliced;
    std::vector<std::vector<size_t>> atLevel;
};

/// A kernel slice's running sums (runSlice), kept by the thread that runs it.
struct SliceScratch {
    std::vector<std::vector<double>> partial;
    std::vector<double> sum;
    std::vector<int> digit;
    std::vector<std::size_t> base;
};

/// The access to factor `f` when `var` is eliminated next to `neighbours` (ascending), its
/// neighbour strides written to `strides` (one per neighbour, zeroed). A factor whose slice over
/// `var` is strided is copied into the scratch's next `reordered` buffer with `var` last.
Access accessOf(const Factor* f, int var, const std::vector<int>& neighbours, const std::vector<int>& domainSizes,
                std::size_t* strides, StepScratch& scratch)
{
    const std::size_t varSize = static_cast<std::size_t>(domainSizes[static_cast<size_t>(var)]);
    const size_t arity = f->vars.size();
    std::vector<std::size_t>& stride = scratch.stride;
    stride.assign(arity, 0);
    std::size_t size = 1;
    size_t varPos = 0;
    for (size_t k = arity; k-- > 0;) {
        stride[k] = size;
        size *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(f->vars[k])]);
        if (f->vars[k] == var) varPos = k;
    }
    Access a{f->values.data(), arity, strides, stride[varPos]};
    auto positionOf = [&](int v) {
        return static_cast<size_t>(std::lower_bound(neighbours.begin(), neighbours.end(), v) - neighbours.begin());
    };
    if (a.varStride != 1) {
        // The kernel (eliminateOne) sums, for every neighbour assignment, the factor's slice over
        // `var`; a strided slice defeats vectorisation, so the factor is copied once with
        // `var` last (one pass over it, against a loop that reads each entry at least once).
        if (scratch.used == scratch.reordered.size()) scratch.reordered.emplace_back();
        std::vector<double>& copy = scratch.reordered[scratch.used++];
        copy.resize(f->values.size());
        const std::size_t rows = f->values.size() / varSize;
        std::vector<std::size_t>& rowStride = scratch.rowStride; // source stride of each other var, in f's order
        rowStride.assign(arity, 0);
        std::vector<int>& rowDomain = scratch.rowDomain;
        rowDomain.assign(arity, 1);
        for (size_t k = 0; k < arity; ++k)
            if (k != varPos) {
                rowStride[k] = stride[k];
                rowDomain[k] = domainSizes[static_cast<size_t>(f->vars[k])];
            }
        std::vector<int>& digit = scratch.digit;
        digit.assign(arity, 0);
        std::size_t source = 0;
        for (std::size_t row = 0; row < rows; ++row) {
            double* out = copy.data() + row * varSize;
            for (std::size_t x = 0; x < varSize; ++x) out[x] = f->values[source + x * a.varStride];
            for (size_t k = arity; k-- > 0;) { // odometer over the other vars, f's order
                if (k == varPos) continue;
                if (++digit[k] < rowDomain[k]) {
                    source += rowStride[k];
                    break;
                }
                source -= rowStride[k] * static_cast<std::size_t>(rowDomain[k] - 1);
                digit[k] = 0;
            }
        }
        std::size_t newStride = varSize;
        for (size_t k = arity; k-- > 0;) {
            if (k == varPos) continue;
            a.strideOfNeighbour[positionOf(f->vars[k])] = newStride;
            newStride *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(f->vars[k])]);
        }
        a.varStride = 1;
        a.values = copy.data();
    } else {
        for (size_t k = 0; k < arity; ++k)
            if (k != varPos) a.strideOfNeighbour[positionOf(f->vars[k])] = stride[k];
    }
    return a;
}

// The kernel's helpers are always inlined, so that each build of runSlice (kernel_builds.h)
// compiles them for its own instruction set.

/// Adds a factor's contiguous slice over the eliminated variable to `sum`.
[[gnu::always_inline]] inline void addSlice(std::vector<double>& sum, const double* slice)
{
    for (size_t x = 0; x < sum.size(); ++x) sum[x] += slice[x];
}

/// Four doubles side by side (GCC vector extensions: one AVX2 register, or two SSE2 ones), and
/// four indices beside them.
using Lanes = double __attribute__((vector_size(32)));
using LaneIndex = std::int64_t __attribute__((vector_size(32)));

/// The least of a[x] + b[x] (kWithB false: a[x]) and its first x (0 when every one is infinite,
/// as a strict scan gives). Each lane keeps its least and the first x that reached it (a strict
/// comparison keeps the earlier of equals); the least of the lanes, on a tie the smallest x, is
/// then the first x of the least: the same sums and the same x as a strict scan, in one pass (a
/// second scan for the x, docs/PERFORMANCE.md, "The kernel's least in one pass", cost more).
template <bool kWithB>
[[gnu::always_inline]] inline std::pair<double, int> leastOfLanes(const double* a, const double* b, size_t n)
{
    auto at = [&](size_t x) { return kWithB ? a[x] + b[x] : a[x]; };
    // Vectors are passed by reference: the plain build has no AVX registers to pass them in.
    auto load = [&](size_t x, Lanes& v) {
        std::memcpy(&v, a + x, sizeof v);
        if constexpr (kWithB) {
            Lanes w;
            std::memcpy(&w, b + x, sizeof w);
            v += w;
        }
    };
    struct Running {
        Lanes least = {kInfinity, kInfinity, kInfinity, kInfinity};
        LaneIndex where = {0, 0, 0, 0};
        void take(const Lanes& v, const LaneIndex& index)
        {
            const LaneIndex lower = v < least;
            least = lower ? v : least;
            where = lower ? index : where;
        }
    };
    // Two running sets, eight entries a round: one set's compare-and-blend waits on its last
    // round, so two in flight keep the vector units busy.
    Running even, odd;
    LaneIndex index = {0, 1, 2, 3};
    size_t x = 0;
    Lanes v, w;
    for (; x + 8 <= n; x += 8, index += 8) {
        load(x, v);
        load(x + 4, w);
        even.take(v, index);
        odd.take(w, index + 4);
    }
    if (x + 4 <= n) {
        load(x, v);
        even.take(v, index);
        x += 4;
    }
    // The odd set into the even lane by lane, then the upper two lanes into the lower two and
    // the second into the first, all in registers; on a tie the earlier x.
    auto foldIn = [&](const Lanes& least, const LaneIndex& where) {
        const LaneIndex take = (least < even.least) | ((least == even.least) & (where < even.where));
        even.least = take ? least : even.least;
        even.where = take ? where : even.where;
    };
    foldIn(odd.least, odd.where);
    const LaneIndex halves = {2, 3, 0, 1}, neighbours = {1, 0, 3, 2};
    foldIn(__builtin_shuffle(even.least, halves), __builtin_shuffle(even.where, halves));
    foldIn(__builtin_shuffle(even.least, neighbours), __builtin_shuffle(even.where, neighbours));
    double best = even.least[0];
    std::int64_t first = even.where[0];
    for (; x < n; ++x)
        if (const double v = at(x); v < best) {
            best = v;
            first = static_cast<std::int64_t>(x);
        }
    return {best, static_cast<int>(first)};
}

[[gnu::always_inline]] inline std::pair<double, int> leastOf(const double* a, const double* b, size_t n)
{
    return b ? leastOfLanes<true>(a, b, n) : leastOfLanes<false>(a, b, n);
}

/// What one elimination step's kernel reads and writes (eliminateOne).
struct StepKernel {
    const std::vector<int>& neighbours;
    const std::vector<int>& domainSizes;
    const std::vector<Access>& access;
    /// The sliced factors by the deepest neighbour position they read (see eliminateOne).
    const std::vector<std::vector<size_t>>& atLevel;
    const std::vector<double>& unary; ///< the factors over the variable alone, summed
    Factor& out;
    EliminationStep& step;
};

/// The kernel over the neighbour assignments [begin, end): per assignment, the least over the
/// eliminated variable of the sum of the factors, and its first value.
TP_KERNEL_BUILDS void runSlice(const StepKernel& k, std::size_t begin, std::size_t end, SliceScratch& scratch)
{
    const std::vector<int>& neighbours = k.neighbours;
    const std::vector<Access>& access = k.access;
    const size_t n = neighbours.size();
    const size_t last = n == 0 ? 0 : n - 1;
    const size_t domain = k.unary.size();
    std::vector<std::vector<double>>& partial = scratch.partial; // unary + levels 0..p
    if (partial.size() < last) partial.resize(last);
    for (size_t p = 0; p < last; ++p) partial[p].resize(domain);
    std::vector<double>& sum = scratch.sum;
    sum.resize(domain);
    std::vector<int>& digit = scratch.digit;
    digit.assign(n, 0);
    std::vector<std::size_t>& base = scratch.base;
    base.assign(access.size(), 0);
    std::size_t rest = begin;
    for (size_t p = n; p-- > 0;) {
        const auto dom = static_cast<std::size_t>(k.domainSizes[static_cast<size_t>(neighbours[p])]);
        digit[p] = static_cast<int>(rest % dom);
        rest /= dom;
        for (size_t f = 0; f < access.size(); ++f) base[f] += access[f].strideOfNeighbour[p] * static_cast<std::size_t>(digit[p]);
    }
    auto refresh = [&](size_t from) {
        for (size_t p = from; p < last; ++p) {
            const std::vector<double>& below = p == 0 ? k.unary : partial[p - 1];
            std::copy(below.begin(), below.end(), partial[p].begin());
            for (size_t f : k.atLevel[p]) addSlice(partial[p], access[f].values + base[f]);
        }
    };
    refresh(0);
    const std::vector<double>& upper = last == 0 ? k.unary : partial[last - 1];
    const std::vector<size_t>& lastFactors = k.atLevel[last];
    for (std::size_t idx = begin; idx < end; ++idx) {
        const double* summed = upper.data();
        if (lastFactors.size() > 1) {
            std::copy(upper.begin(), upper.end(), sum.begin());
            for (size_t i = 0; i + 1 < lastFactors.size(); ++i) addSlice(sum, access[lastFactors[i]].values + base[lastFactors[i]]);
            summed = sum.data();
        }
        const auto [best, bestValue] =
            lastFactors.empty() ? leastOf(summed, nullptr, domain)
                                : leastOf(summed, access[lastFactors.back()].values + base[lastFactors.back()], domain);
        k.out.values[idx] = best;
        k.step.argmin[idx] = bestValue;
        // Advance the odometer (last neighbour fastest) and the factor indices with it.
        for (size_t p = n; p-- > 0;) {
            const int dom = k.domainSizes[static_cast<size_t>(neighbours[p])];
            if (++digit[p] < dom) {
                for (size_t f = 0; f < access.size(); ++f) base[f] += access[f].strideOfNeighbour[p];
                if (p < last) refresh(p);
                break;
            }
            for (size_t f = 0; f < access.size(); ++f) base[f] -= access[f].strideOfNeighbour[p] * static_cast<std::size_t>(dom - 1);
            digit[p] = 0;
        }
    }
}

// Combines `factors` (all mentioning `var`) and minimises `var` out.
Factor eliminateOne(const std::vector<const Factor*>& factors, int var, const std::vector<int>& domainSizes,
                    EliminationStep& step, int threads, StepScratch& scratch, SliceScratch& slice)
{
    const std::vector<int> neighbours = unionOf(factors, var);
    const size_t n = neighbours.size();
    std::size_t total = 1;
    for (int v : neighbours) total *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(v)]);
    if (total > (std::size_t{1} << 28)) throw std::length_error("factor too large to eliminate");
    const int varDomain = domainSizes[static_cast<size_t>(var)];

    scratch.used = 0; // the copies with `var` last (see accessOf)
    std::vector<Access>& access = scratch.access;
    access.clear();
    // Every factor's neighbour strides in one buffer (a step has a few factors; a table, tens of
    // steps).
    std::vector<std::size_t>& strides = scratch.strides;
    strides.assign(factors.size() * n, 0);
    for (size_t k = 0; k < factors.size(); ++k)
        access.push_back(accessOf(factors[k], var, neighbours, domainSizes, strides.data() + k * n, scratch));

    Factor out;
    out.vars = neighbours;
    out.values.assign(total, kInfinity);
    step.var = var;
    step.neighbours = neighbours;
    step.argmin.assign(total, 0);
    // Factors over `var` alone (an op's own cost) are the same for every neighbour assignment:
    // summed once. The others are summed slice by slice into `sum`, a loop over `var` that the
    // compiler vectorises when the slice is contiguous (var last in the factor).
    const size_t domain = static_cast<size_t>(varDomain);
    std::vector<double>& unary = scratch.unary;
    unary.assign(domain, 0.0);
    std::vector<size_t>& sliced = scratch.sliced;
    sliced.clear();
    for (size_t k = 0; k < access.size(); ++k) {
        if (access[k].arity == 1) {
            const double* v = access[k].values;
            for (size_t x = 0; x < domain; ++x) unary[x] += v[x];
        } else {
            sliced.push_back(k);
        }
    }
    // The sliced factors by the deepest neighbour they read (the fastest odometer position they
    // depend on). Those of the positions before the last are summed into one partial sum per
    // position, redone only when that position's digit moves; the last position's are added in
    // the minimum itself. Most steps eliminate an op between two others (two edge factors):
    // one of them is added once per row instead of once per entry.
    const size_t last = n == 0 ? 0 : n - 1;
    std::vector<std::vector<size_t>>& atLevel = scratch.atLevel;
    if (atLevel.size() < last + 1) atLevel.resize(last + 1);
    for (size_t p = 0; p <= last; ++p) atLevel[p].clear();
    for (size_t k : sliced) {
        size_t depth = 0;
        for (size_t p = 0; p < n; ++p)
            if (access[k].strideOfNeighbour[p] != 0) depth = p;
        atLevel[depth].push_back(k);
    }
    // Every neighbour assignment is independent: the range is cut into contiguous slices, one
    // per thread, each writing only its own entries (so the result does not depend on threads).
    const StepKernel kernel{neighbours, domainSizes, access, atLevel, unary, out, step};
    auto run = [&](std::size_t begin, std::size_t end) {
        SliceScratch own; // another thread's slice
        runSlice(kernel, begin, end, own);
    };
    // Threads only pay off on big tables (starting one costs tens of microseconds): one per
    // kParallelWork additions, at most `threads`.
    constexpr double kParallelWork = 1 << 22;
    const double work = static_cast<double>(total) * static_cast<double>(domain) * static_cast<double>(sliced.size() + 1);
    const auto parts = static_cast<std::size_t>(std::clamp(work / kParallelWork, 1.0, static_cast<double>(std::max(threads, 1))));
    if (parts <= 1 || total < parts) {
        runSlice(kernel, 0, total, slice);
    } else {
        std::vector<std::thread> workers;
        workers.reserve(parts - 1);
        const std::size_t chunk = (total + parts - 1) / parts;
        for (std::size_t t = 1; t < parts; ++t)
            workers.emplace_back(run, std::min(total, t * chunk), std::min(total, (t + 1) * chunk));
        runSlice(kernel, 0, std::min(total, chunk), slice);
        for (auto& w : workers) w.join();
    }
    return out;
}

Factor combineKept(const std::vector<Factor>& factors, const std::vector<int>& keep, const std::vector<int>& domainSizes)
{
    Factor out;
    out.vars = keep;
    std::size_t total = 1;
    for (int v : keep) total *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(v)]);
    out.values.assign(total, 0.0);
    std::vector<int> assignment(domainSizes.size(), 0);
    std::vector<int> digit(keep.size(), 0);
    for (std::size_t idx = 0; idx < total; ++idx) {
        for (size_t p = 0; p < keep.size(); ++p) assignment[static_cast<size_t>(keep[p])] = digit[p];
        double sum = 0;
        for (const auto& f : factors) sum += f.values[factorIndex(f, domainSizes, assignment)];
        out.values[idx] = sum;
        for (size_t p = keep.size(); p-- > 0;) {
            if (++digit[p] < domainSizes[static_cast<size_t>(keep[p])]) break;
            digit[p] = 0;
        }
    }
    return out;
}

/// The value of `var` at which the factor is cut: the factor over the other variables.
Factor sliceAt(const Factor& f, int var, int value, const std::vector<int>& domainSizes)
{
    Factor out;
    std::size_t inner = 1;
    const auto at = std::find(f.vars.begin(), f.vars.end(), var);
    for (auto it = at + 1; it != f.vars.end(); ++it) inner *= static_cast<std::size_t>(domainSizes[static_cast<size_t>(*it)]);
    const auto n = static_cast<std::size_t>(domainSizes[static_cast<size_t>(var)]);
    const std::size_t outer = f.values.size() / (n * inner);
    for (int v : f.vars)
        if (v != var) out.vars.push_back(v);
    out.values.reserve(outer * inner);
    for (std::size_t o = 0; o < outer; ++o) {
        const double* row = f.values.data() + (o * n + static_cast<std::size_t>(value)) * inner;
        out.values.insert(out.values.end(), row, row + inner);
    }
    return out;
}

/// Variables whose unary factors leave one finite value (a locked op: +inf at every other
/// strategy, core/search/class_table.cpp nodeFactors) are fixed, not eliminated: each factor on
/// one is cut at its value, so its neighbours stay apart instead of being joined over its
/// domain. The same minimum (any other value costs +inf); decoding sets the value.
void fixLockedVariables(std::vector<Factor>& factors, const std::vector<int>& domainSizes, const std::vector<bool>& kept,
                        std::vector<EliminationStep>& steps)
{
    std::vector<std::vector<double>> unary(domainSizes.size());
    for (const Factor& f : factors) {
        if (f.vars.size() != 1 || kept[static_cast<size_t>(f.vars[0])]) continue;
        std::vector<double>& u = unary[static_cast<size_t>(f.vars[0])];
        if (u.empty()) u.assign(f.values.size(), 0.0);
        for (size_t x = 0; x < u.size(); ++x) u[x] += f.values[x];
    }
    auto finite = [](double c) { return std::isfinite(c); };
    for (size_t v = 0; v < unary.size(); ++v) {
        const std::vector<double>& u = unary[v];
        const auto first = std::find_if(u.begin(), u.end(), finite);
        if (u.size() < 2 || first == u.end() || std::find_if(first + 1, u.end(), finite) != u.end()) continue;
        const int value = static_cast<int>(first - u.begin());
        for (Factor& f : factors)
            if (std::binary_search(f.vars.begin(), f.vars.end(), static_cast<int>(v)))
                f = sliceAt(f, static_cast<int>(v), value, domainSizes);
        steps.push_back(EliminationStep{static_cast<int>(v), {}, {value}});
    }
}

/// Factors over the same variables (an edge and its recomputed copy under full recomputation,
/// an op's cost and its kept bytes) are summed into the first of them: the elimination kernel
/// then reads one slice per scope instead of several. Factors are found by scope through an
/// order of their indices (no map of scopes to build per table).
void mergeSameScopes(std::vector<Factor>& factors)
{
    std::vector<size_t> order(factors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return factors[a].vars < factors[b].vars; });
    std::vector<bool> absorbed(factors.size(), false);
    for (size_t k = 0; k < order.size();) {
        size_t end = k + 1;
        while (end < order.size() && factors[order[end]].vars == factors[order[k]].vars) ++end;
        // `order` is stable: order[k] is the first of its scope in the list.
        std::vector<double>& into = factors[order[k]].values;
        for (size_t j = k + 1; j < end; ++j) {
            const std::vector<double>& from = factors[order[j]].values;
            for (size_t x = 0; x < into.size(); ++x) into[x] += from[x];
            absorbed[order[j]] = true;
        }
        k = end;
    }
    size_t kept = 0;
    for (size_t i = 0; i < factors.size(); ++i)
        if (!absorbed[i]) {
            if (kept != i) factors[kept] = std::move(factors[i]);
            ++kept;
        }
    factors.resize(kept);
}

/// A greedy elimination order and, per variable, the elimination work its domain multiplies.
struct EliminationOrder {
    std::vector<int> vars;
    std::vector<double> work; ///< per variable, the sizes of the steps it takes part in, summed
    double total = 0;         ///< the sizes of all its steps
};

/// Adds a step over `var` and its `neighbours` to `order`.
void addStep(EliminationOrder& order, int var, const std::vector<int>& neighbours, const std::vector<int>& domainSizes)
{
    const double stepSize = weightOf(neighbours, domainSizes) * domainSizes[static_cast<size_t>(var)];
    order.vars.push_back(var);
    order.work[static_cast<size_t>(var)] += stepSize;
    for (int v : neighbours) order.work[static_cast<size_t>(v)] += stepSize;
    order.total += stepSize;
}

/// The min-weight elimination order of the variables not `kept` (smallest product of neighbour
/// domains first, ties by variable id), worked out on the factors' scopes alone.
EliminationOrder leastWeightOrder(const std::vector<Factor>& factors, const std::vector<int>& domainSizes,
                                  const std::vector<bool>& kept)
{
    std::vector<const Factor*> scopes; // the factors, then the scopes of the merged ones
    for (const Factor& f : factors) scopes.push_back(&f);
    std::deque<Factor> merged; // scopes only, values left empty; a deque keeps their addresses
    std::vector<std::vector<size_t>> touching(domainSizes.size());
    for (size_t i = 0; i < scopes.size(); ++i)
        for (int v : scopes[i]->vars) touching[static_cast<size_t>(v)].push_back(i);
    std::vector<bool> alive(scopes.size(), true);

    // Asked for every variable of each new scope: the same two buffers for all of them.
    std::vector<const Factor*> aliveTouching;
    std::vector<int> neighbourVars;
    auto gatherNeighbours = [&](int v) {
        aliveTouching.clear();
        for (size_t i : touching[static_cast<size_t>(v)])
            if (alive[i]) aliveTouching.push_back(scopes[i]);
        unionInto(neighbourVars, aliveTouching, v);
    };
    std::vector<int> pending;
    std::vector<double> weight(domainSizes.size(), 0);
    for (size_t v = 0; v < domainSizes.size(); ++v)
        if (!kept[v] && !touching[v].empty()) {
            pending.push_back(static_cast<int>(v));
            gatherNeighbours(static_cast<int>(v));
            weight[v] = weightOf(neighbourVars, domainSizes);
        }
    EliminationOrder order;
    order.work.assign(domainSizes.size(), 0);
    while (!pending.empty()) {
        auto best = std::min_element(pending.begin(), pending.end(), [&](int a, int b) {
            return weight[static_cast<size_t>(a)] < weight[static_cast<size_t>(b)] ||
                   (weight[static_cast<size_t>(a)] == weight[static_cast<size_t>(b)] && a < b);
        });
        const int var = *best;
        pending.erase(best);
        gatherNeighbours(var);
        addStep(order, var, neighbourVars, domainSizes);
        for (size_t i : touching[static_cast<size_t>(var)]) alive[i] = false;
        merged.emplace_back().vars = neighbourVars;
        scopes.push_back(&merged.back());
        alive.push_back(true);
        const size_t newId = scopes.size() - 1;
        for (int v : scopes[newId]->vars) touching[static_cast<size_t>(v)].push_back(newId);
        for (int v : scopes[newId]->vars)
            if (!kept[static_cast<size_t>(v)]) {
                gatherNeighbours(v);
                weight[static_cast<size_t>(v)] = weightOf(neighbourVars, domainSizes);
            }
    }
    return order;
}

/// The graph of the variables (two are adjacent when a factor holds both) as an elimination
/// goes: eliminating a variable makes its neighbours a clique. Scores each variable left for
/// weighted min-fill: the pairs of its neighbours that are not adjacent yet, each weighted by
/// the product of their domains (the size of the factor the step adds); ties by the product of
/// its neighbours' domains, then by variable id.
class FillGraph {
public:
    FillGraph(const std::vector<Factor>& factors, const std::vector<int>& domainSizes, const std::vector<bool>& kept)
        : domains_(&domainSizes), adjacent_(domainSizes.size()), pending_(domainSizes.size(), false),
          score_(domainSizes.size(), Score{0, 0})
    {
        for (const Factor& f : factors)
            for (int u : f.vars) {
                if (!kept[static_cast<size_t>(u)]) pending_[static_cast<size_t>(u)] = true;
                for (int w : f.vars)
                    if (w != u) adjacent_[static_cast<size_t>(u)].push_back(w);
            }
        for (auto& a : adjacent_) {
            std::sort(a.begin(), a.end());
            a.erase(std::unique(a.begin(), a.end()), a.end());
        }
        for (size_t v = 0; v < pending_.size(); ++v)
            if (pending_[v]) {
                left_.push_back(static_cast<int>(v));
                score_[v] = scoreOf(static_cast<int>(v));
            }
    }

    bool done() const { return left_.empty(); }
    /// The variable left with the least score.
    int greedy() const
    {
        return *std::min_element(left_.begin(), left_.end(), [&](int a, int b) { return before(a, b); });
    }
    /// Whether `a` scores less than `b`.
    bool before(int a, int b) const
    {
        const Score &x = score_[static_cast<size_t>(a)], &y = score_[static_cast<size_t>(b)];
        return x.fill != y.fill ? x.fill < y.fill : x.weight != y.weight ? x.weight < y.weight : a < b;
    }
    /// Eliminates `var` (one of the variables left), recording its step in `order`.
    void eliminate(int var, EliminationOrder& order)
    {
        left_.erase(std::find(left_.begin(), left_.end(), var));
        pending_[static_cast<size_t>(var)] = false;
        const std::vector<int> neighbours = std::move(adjacent_[static_cast<size_t>(var)]);
        adjacent_[static_cast<size_t>(var)].clear();
        addStep(order, var, neighbours, *domains_);
        std::vector<int> joined;
        for (int u : neighbours) {
            auto& a = adjacent_[static_cast<size_t>(u)];
            joined.clear();
            std::set_union(a.begin(), a.end(), neighbours.begin(), neighbours.end(), std::back_inserter(joined));
            joined.erase(std::remove_if(joined.begin(), joined.end(), [&](int w) { return w == var || w == u; }), joined.end());
            a.swap(joined);
        }
        // The neighbours' scores change, and those of the variables next to them (two of whose
        // neighbours may have been joined).
        std::vector<int> affected;
        for (int u : neighbours) {
            affected.push_back(u);
            affected.insert(affected.end(), adjacent_[static_cast<size_t>(u)].begin(), adjacent_[static_cast<size_t>(u)].end());
        }
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        for (int u : affected)
            if (pending_[static_cast<size_t>(u)]) score_[static_cast<size_t>(u)] = scoreOf(u);
    }

private:
    struct Score {
        double fill, weight;
    };
    Score scoreOf(int v) const
    {
        const auto& a = adjacent_[static_cast<size_t>(v)];
        Score score{0, weightOf(a, *domains_)};
        for (size_t i = 0; i < a.size(); ++i)
            for (size_t j = i + 1; j < a.size(); ++j) {
                const auto& ai = adjacent_[static_cast<size_t>(a[i])];
                if (!std::binary_search(ai.begin(), ai.end(), a[j]))
                    score.fill += static_cast<double>((*domains_)[static_cast<size_t>(a[i])]) * (*domains_)[static_cast<size_t>(a[j])];
            }
        return score;
    }

    const std::vector<int>* domains_;
    std::vector<std::vector<int>> adjacent_; ///< ascending
    std::vector<bool> pending_;
    std::vector<Score> score_;
    std::vector<int> left_;
};

/// The weighted min-fill order (FillGraph). (Rollout, each step taking of the few best-scored
/// variables the one after which the greedy order adds up to least, saved 4% more on
/// DeepSeek-V3's layer tables on 2x2x2 for its cost: not done.)
EliminationOrder leastFillOrder(const std::vector<Factor>& factors, const std::vector<int>& domainSizes,
                                const std::vector<bool>& kept)
{
    FillGraph graph(factors, domainSizes, kept);
    EliminationOrder order;
    order.work.assign(domainSizes.size(), 0);
    while (!graph.done()) graph.eliminate(graph.greedy(), order);
    return order;
}

/// What eliminating `vars` in that order costs over `domainSizes`: per step, its size times
/// the factors it adds up (the elimination kernel reads one entry of each per entry).
double orderCost(const std::vector<Factor>& factors, const std::vector<int>& vars, const std::vector<int>& domainSizes)
{
    std::vector<std::vector<int>> scopes;
    for (const Factor& f : factors) scopes.push_back(f.vars);
    std::vector<std::vector<size_t>> touching(domainSizes.size());
    for (size_t i = 0; i < scopes.size(); ++i)
        for (int v : scopes[i]) touching[static_cast<size_t>(v)].push_back(i);
    std::vector<bool> alive(scopes.size(), true);
    double total = 0;
    std::vector<int> neighbours;
    for (int var : vars) {
        neighbours.clear();
        double count = 0;
        for (size_t i : touching[static_cast<size_t>(var)])
            if (alive[i]) {
                alive[i] = false;
                ++count;
                for (int v : scopes[i])
                    if (v != var) neighbours.push_back(v);
            }
        std::sort(neighbours.begin(), neighbours.end());
        neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
        total += weightOf(neighbours, domainSizes) * domainSizes[static_cast<size_t>(var)] * count;
        scopes.push_back(neighbours);
        alive.push_back(true);
        for (int v : neighbours) touching[static_cast<size_t>(v)].push_back(scopes.size() - 1);
    }
    return total;
}

/// The lower bound eliminate() offers its `stopWhen`: each factor's least entry, added up over
/// the factors left. Eliminating v replaces the factors f_i over v by min_v sum_i f_i, whose
/// least is at least the sum of theirs, so the bound never falls. Summed afresh at each step
/// (the factors left are few) and lowered by a relative 1e-12, so that rounding in another
/// order of additions than the elimination's never puts it above the least the elimination
/// would compute.
class RunningBound {
public:
    RunningBound(const std::function<bool(double)>& stopWhen, const std::vector<Factor>& factors) : stopWhen_(stopWhen)
    {
        if (!stopWhen_) return;
        for (const Factor& f : factors) least_.push_back(leastOf(f));
        alive_.assign(factors.size(), true);
    }
    void replace(const std::vector<size_t>& consumed, const Factor& merged)
    {
        if (!stopWhen_) return;
        for (size_t i : consumed) alive_[i] = false;
        least_.push_back(leastOf(merged));
        alive_.push_back(true);
    }
    /// Whether to stop; if so, `result` says so with the bound.
    bool stops(EliminationResult& result) const
    {
        if (!stopWhen_) return false;
        double sum = 0;
        for (size_t i = 0; i < least_.size(); ++i)
            if (alive_[i]) sum += least_[i];
        if (!std::isfinite(sum)) return false; // nothing fits: the caller reports that in full
        const double bound = roundedDownBound(sum);
        if (!stopWhen_(bound)) return false;
        result.stopped = true;
        result.lowerBound = bound;
        return true;
    }

private:
    static double leastOf(const Factor& f)
    {
        double least = std::numeric_limits<double>::infinity();
        for (double v : f.values) least = std::min(least, v);
        return f.values.empty() ? 0.0 : least;
    }
    const std::function<bool(double)>& stopWhen_;
    std::vector<double> least_;
    std::vector<bool> alive_;
};

/// Below this many additions in all (a few milliseconds) the least-weight order is kept as it
/// is: trying another costs more than it could save.
constexpr double kTryAnotherOrder = 1e8;
/// orderCost is only a promise: the kernel's speed per entry differs between steps. Measured
/// (2026-12-07, one thread): the least-fill order of DeepSeek-V3's layer tables on 2x2x2 promised
/// 0.52 of the least-weight order's cost and took 0.73 of its time; on T5-3B's top level it
/// promised 0.82 and took 1.07. So it must promise to save a third.
constexpr double kFillMustPromise = 2.0 / 3.0;

} // namespace

EliminationResult eliminate(std::vector<Factor> factors, const std::vector<int>& originalDomains, const std::vector<int>& keep,
                            int threads, double substituteWorth, EliminationOrderRule rule,
                            const std::function<bool(double)>& stopWhen, double stopWorth)
{
    EliminationResult result;
    std::vector<bool> kept(originalDomains.size(), false);
    for (int v : keep) kept[static_cast<size_t>(v)] = true;
    fixLockedVariables(factors, originalDomains, kept, result.steps);
    mergeSameScopes(factors);
    // The order is chosen on the domains before the reduction, so that no step costs more than
    // it did without it (chosen on the reduced domains, the greedy order can be far worse:
    // DeepSeek-V3 on 2x2x2, inference, 12 s became 30 s). Where the least-weight order adds up to
    // much work, the least-fill order is its rival, taken where it promises at most
    // kFillMustPromise of the work on the reduced domains.
    EliminationOrder order = rule == EliminationOrderRule::LeastFill ? leastFillOrder(factors, originalDomains, kept)
                                                                      : leastWeightOrder(factors, originalDomains, kept);
    result.reducedDomains = originalDomains;
    result.values = dropSubstitutableValues(factors, result.reducedDomains, kept, order.work, substituteWorth);
    const std::vector<int>& domainSizes = result.reducedDomains;
    if (rule == EliminationOrderRule::Auto && order.total >= kTryAnotherOrder) {
        EliminationOrder fill = leastFillOrder(factors, originalDomains, kept);
        if (orderCost(factors, fill.vars, domainSizes) <= kFillMustPromise * orderCost(factors, order.vars, domainSizes))
            order = std::move(fill);
    }

    std::vector<std::vector<size_t>> touching(domainSizes.size());
    for (size_t i = 0; i < factors.size(); ++i)
        for (int v : factors[i].vars) touching[static_cast<size_t>(v)].push_back(i);
    std::vector<bool> alive(factors.size(), true);
    std::vector<const Factor*> fs;
    std::vector<size_t> ids;
    StepScratch scratch;
    SliceScratch slice;
    const std::function<bool(double)> noStop;
    RunningBound bound(order.total >= stopWorth ? stopWhen : noStop, factors);
    if (bound.stops(result)) return result;
    for (int var : order.vars) {
        fs.clear();
        ids.clear();
        for (size_t i : touching[static_cast<size_t>(var)])
            if (alive[i]) {
                fs.push_back(&factors[i]);
                ids.push_back(i);
            }
        EliminationStep step;
        Factor merged = eliminateOne(fs, var, domainSizes, step, threads, scratch, slice);
        for (size_t i : ids) alive[i] = false;
        bound.replace(ids, merged);
        factors.push_back(std::move(merged));
        alive.push_back(true);
        const size_t newId = factors.size() - 1;
        for (int v : factors[newId].vars) touching[static_cast<size_t>(v)].push_back(newId);
        result.steps.push_back(std::move(step));
        if (bound.stops(result)) return result;
    }
    std::vector<Factor> rest;
    for (size_t i = 0; i < factors.size(); ++i)
        if (alive[i]) rest.push_back(std::move(factors[i]));
    std::vector<int> keepSorted = keep;
    std::sort(keepSorted.begin(), keepSorted.end());
    result.remaining = combineKept(rest, keepSorted, domainSizes);
    return result;
}

void decode(const EliminationResult& result, const std::vector<int>& originalDomains, std::vector<int>& assignment)
{
    const std::vector<int>& domainSizes = result.reducedDomains.empty() ? originalDomains : result.reducedDomains;
    for (auto it = result.steps.rbegin(); it != result.steps.rend(); ++it) {
        std::size_t index = 0;
        for (int v : it->neighbours)
            index = index * static_cast<std::size_t>(domainSizes[static_cast<size_t>(v)]) +
                    static_cast<std::size_t>(assignment[static_cast<size_t>(v)]);
        assignment[static_cast<size_t>(it->var)] = it->argmin[index];
    }
    result.values.toOriginal(assignment);
}

} // namespace tp
