#include "price_search.h"

#include <cmath>
#include <functional>
#include <limits>

#include "session_impl.h"

namespace tp {
namespace search {

std::optional<ChordStep> chordStep(const PlanLine& over, const PlanLine& under)
{
    const double dm = over.bytes - under.bytes;
    const double dt = under.seconds - over.seconds;
    if (!(dm > 0)) return std::nullopt;
    const double cross = dt / dm;
    if (!(cross > over.lambda && cross < under.lambda)) return std::nullopt;
    const bool farBelow = over.lambda < under.lambda / 64 && cross < under.lambda / 8;
    return farBelow ? ChordStep{under.lambda / 8, true} : ChordStep{cross, false};
}

bool belowChord(double objective, const PlanLine& under, double price)
{
    const double chord = under.at(price);
    return objective < chord - 1e-12 * std::abs(chord);
}

int bisectLowPricedLayers(int instances, const std::function<bool(int)>& fitsAt, int hint)
{
    int fits = 0, fails = instances;
    if (hint > 0 && hint < instances) {
        if (fitsAt(hint)) {
            fits = hint;
            if (hint + 1 < instances && fitsAt(hint + 1))
                fits = hint + 1;
            else
                fails = hint + 1;
        } else {
            fails = hint;
            if (hint - 1 > 0 && !fitsAt(hint - 1))
                fails = hint - 1;
            else
                fits = hint - 1;
        }
    }
    while (fails - fits > 1) {
        const int k = (fits + fails) / 2;
        if (fitsAt(k))
            fits = k;
        else
            fails = k;
    }
    return fits;
}

} // namespace search

using namespace search;

namespace {

/// A memory price (seconds per byte) at which a byte outweighs any step time: the cheapest plan
/// there is the one that needs least memory, the fastest of those.
constexpr double kTopPrice = 1e6;

/// A cold price search's first price makes the fastest plan's excess memory cost this share of
/// its step time. Only where the search starts: any value gives the same plan (tried 0 to 10%
/// on five built-ins: 3% needed the fewest searches, docs/PERFORMANCE.md).
constexpr double kColdPriceShare = 0.03;

PlanLine lineOf(const Attempt& a)
{
    return PlanLine{a.result.breakdown.stepSeconds, a.result.breakdown.perDeviceBytes, a.result.lambda};
}

/// Weak duality: the cheapest priced plan less the price of the limit bounds every plan that fits.
double dualOf(const Attempt& a, double limit) { return a.result.objective - a.result.lambda * limit; }

/// `a` as the answer of a search stopped at its bar: no plan, the bound it proved.
Attempt stoppedAt(Attempt a, double bound, double unpriced)
{
    a.result.bounded = true;
    a.result.fits = false;
    a.result.lowerBound = bound;
    a.result.unpricedSeconds = unpriced;
    return a;
}

/// Where a cold price search starts: the fastest plan's excess memory costs kColdPriceShare of
/// its time, or the node floor's price, whichever is higher.
double coldStartPrice(double fastestSeconds, double excessBytes, double floorPrice)
{
    return std::max(kColdPriceShare * fastestSeconds / excessBytes, floorPrice);
}

} // namespace

// With a bar to beat and the node costs alone over the limit (so the fastest plan cannot fit
// and a priced search must follow the unpriced one), a cold session first asks the dual at the
// price it would start from, estimated from the node costs (the fastest choices' excess memory
// priced at kColdPriceShare of their time, or the node floor's price): at or over the bar, it
// proves the bar by itself, one solve instead of two (weak duality holds at any price; LLaMA-3
// 8B on 2x8: 30 of the 34 combinations asked). The unpriced plan is then not known.
template <class AttemptAt>
std::optional<PlannerSession::Impl::Attempt> PlannerSession::Impl::boundAtStartPrice(double limit, const CostModel::Floor& floor,
                                                                                     AttemptAt&& attemptAt)
{
    if (!std::isfinite(stopAbove) || lastLambda > 0) return std::nullopt;
    if (!floor.priced || !(floor.price > 0) || !std::isfinite(floor.seconds)) return std::nullopt;
    Attempt first = attemptAt(coldStartPrice(floor.fastestSeconds, floor.fastestBytes - limit, floor.price));
    const double proved = dualOf(first, limit);
    if (!(first.result.lambda > 0 && proved >= stopAbove)) return std::nullopt;
    return stoppedAt(std::move(first), proved, -std::numeric_limits<double>::infinity());
}

// Where the node costs alone hold more than the limit (CostModel::floor: no plan holds less),
// nothing fits and the answer is the plan that needs least memory, the fastest of those, in one
// to three solves instead of the strides from price 0 (DeepSeek-V3 inference on 2x2x2: ten).
// The least memory is found at the top price (a byte outweighs any time there, but the times are
// lost in the rounding of so large an objective); the fastest plan holding it at the first price
// of the strides where one is the cheapest (there any plan of that memory and less time would
// be cheaper). The strides start just past the price where every op's node choice is one of
// least memory, where only the edges' time can keep a plan off it; a plan there holding the
// node floor's memory (no plan holds less) needs no top price at all.
template <class AttemptAt>
PlannerSession::Impl::Attempt PlannerSession::Impl::leastMemoryPlan(double limit, const CostModel::Floor& floor,
                                                                    AttemptAt&& attemptAt)
{
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // Over a bar, the caller has a plan that fits: this combination cannot beat it.
    auto stopped = [&](Attempt a) {
        const double proved = dualOf(a, limit);
        return stoppedAt(std::move(a), proved, -kInf);
    };
    auto answer = [](Attempt a) {
        a.result.fits = false;
        a.result.unpricedSeconds = -kInf; // not solved
        return a;
    };
    const double start = std::max(1e-12, lastLambda > 0 && lastLambda < kTopPrice ? lastLambda : 2 * floor.leastBytesPrice);
    std::optional<Attempt> first;
    if (start < kTopPrice) {
        first = attemptAt(start);
        if (first->stopped) return stopped(std::move(*first));
        if (first->result.breakdown.perDeviceBytes <= floor.bytes * (1 + 1e-12)) return answer(std::move(*first));
    }
    Attempt top = attemptAt(kTopPrice);
    if (top.stopped) return stopped(std::move(top));
    const double least = top.result.breakdown.perDeviceBytes;
    if (first && first->result.breakdown.perDeviceBytes <= least) return answer(std::move(*first));
    for (double price = start * 8; price < kTopPrice; price *= 8) {
        Attempt r = attemptAt(price);
        if (r.stopped) return stopped(std::move(r));
        if (r.result.breakdown.perDeviceBytes <= least) return answer(std::move(r));
    }
    return answer(std::move(top));
}

PlannerSession::Impl::Attempt PlannerSession::Impl::searchPrices(double limit, bool limited, int& pricesTried)
{
    // Each attempt needs only the plan's step time and memory; the full breakdown (every
    // collective of every op) is built once, for the plan finally chosen.
    auto attemptAt = [&](double lambda, const std::optional<PriceSplit>& split = std::nullopt) {
        ++pricesTried;
        if (progress) progress->pricesTried.fetch_add(1, std::memory_order_relaxed);
        throwIfCancelled(); // a cancelled solve throws, as solveAt would, with an attempt at hand too
        const bool unpriced = lambda == 0 && !split;
        const bool known =
            unpriced && lastUnpriced && lastUnpriced->inputs == solveInputs && lastUnpriced->recomputeAllowed == allowRecompute;
        // The top level's elimination may stop as soon as its lower bound settles the search,
        // as boundedOut below would with the attempt's least: at price 0 the least is the
        // fastest plan's time, at a price the least less the price of the limit bounds every
        // plan that fits (weak duality). A stopped attempt's objective is that bound, so
        // boundedOut, asked with the same arithmetic, stops the search.
        std::function<bool(double)> stopWhen;
        if (!split && std::isfinite(stopAbove))
            stopWhen = [this, lambda, limit](double least) { return least - lambda * limit >= stopAbove; };
        Attempt a = known ? lastUnpriced->attempt : solveAt(lambda, allowRecompute, split, stopWhen);
        if (unpriced && !known && !a.stopped) lastUnpriced = UnpricedAttempt{solveInputs, allowRecompute, a};
        attemptsReused += known ? 1 : 0;
        if (!split) pricedObjectives.emplace_back(lambda, a.result.objective);
        return a;
    };
    // The node costs' floor under the limit (CostModel::floor), worked out once for the steps below.
    const CostModel::Floor floor = limited ? model.floor(limit) : CostModel::Floor{};
    if (limited)
        if (std::optional<Attempt> bounded = boundAtStartPrice(limit, floor, attemptAt)) return std::move(*bounded);
    if (limited && floor.bytes > limit) return leastMemoryPlan(limit, floor, attemptAt); // no plan holds less: none fits
    Attempt best = attemptAt(0);
    const double unpriced = best.result.breakdown.stepSeconds;
    best.result.unpricedSeconds = unpriced;
    // Weak duality: at any price, the cheapest priced plan less the price of the limit is a
    // lower bound on every plan that fits; once it reaches stopAbove the caller has a plan at
    // least as fast, and the search stops.
    double dualBound = unpriced;
    auto boundedOut = [&](const Attempt& a) {
        if (a.result.lambda > 0) dualBound = std::max(dualBound, dualOf(a, limit));
        return dualBound >= stopAbove;
    };
    auto stopped = [&](Attempt a) { return stoppedAt(std::move(a), dualBound, unpriced); };
    if (boundedOut(best)) return stopped(std::move(best));
    if (!limited || best.result.breakdown.perDeviceBytes <= limit) return best;
    // Lagrangian relaxation: price memory at lambda seconds per byte. Each plan is a line
    // T + lambda * M in lambda, and the search returns the lowest line at the price asked: the
    // dual g(lambda) is their lower envelope, concave and piecewise linear, and the plan it
    // picks uses less memory as the price rises. The fastest plan on the envelope that fits is
    // the one just past the breakpoint where M crosses the limit.
    //
    // First a price at which the plan fits (from the last solve's price: an edit rarely moves
    // it far; else growing 8x from a tiny price). Then chords (chordStep): the two lines of the
    // tightest plan over the limit and the loosest plan under it cross at one price; the search
    // at that price either finds a lower line (a plan in between, which replaces one end) or
    // proves the two adjacent on the envelope. Exact, and usually two or three searches
    // instead of a bisection's eight.
    Attempt over = best; // M > limit, at the highest price tried below `under`'s
    std::optional<Attempt> under;
    Attempt smallest = best;
    auto fitsLimit = [&](const Attempt& a) { return a.result.breakdown.perDeviceBytes <= limit; };
    auto note = [&](const Attempt& a) {
        if (a.result.breakdown.perDeviceBytes < smallest.result.breakdown.perDeviceBytes) smallest = a;
    };
    // After an edit the previous solve's bracket is usually still one: its low end first, so
    // that the chords start from two close lines instead of striding down from price 0.
    // A cold session starts at a price that makes the fastest plan's excess memory cost a
    // small share of its time (saving memory by recomputing or sharding costs a few percent
    // of a step), or where the node costs alone cross the limit (CostModel::floor), whichever
    // is higher: from there the 8x strides and chords below take a few searches, not ten.
    const double excess = best.result.breakdown.perDeviceBytes - limit;
    const double guess = coldStartPrice(unpriced, excess, floor.price);
    const double start = lastLambda > 0 ? lastLambda : std::max(1e-12, guess);
    if (lastOverLambda > 0 && lastOverLambda < start) {
        Attempt r = attemptAt(lastOverLambda);
        if (boundedOut(r)) return stopped(std::move(r));
        note(r);
        if (fitsLimit(r))
            under = std::move(r);
        else
            over = std::move(r);
    }
    // Growing the price 8x until the plan fits. Memory never rises with the price (the lowest
    // line at a higher price has a smaller slope), so when three prices in a row leave it
    // unchanged, the highest price (the least memory any plan needs) is tried at once: if even
    // that plan does not fit, nothing does.
    int unchanged = 0;
    bool topTried = false;
    // A previous solve that fit nothing left its price at the top: start there (once).
    for (double price = std::min(start, kTopPrice); !under; price = std::min(price * 8, kTopPrice)) {
        Attempt r = attemptAt(price);
        if (boundedOut(r)) return stopped(std::move(r));
        note(r);
        if (fitsLimit(r)) {
            under = std::move(r);
            break;
        }
        if (price >= kTopPrice) break; // the least memory any plan needs does not fit
        unchanged = r.result.breakdown.perDeviceBytes == over.result.breakdown.perDeviceBytes ? unchanged + 1 : 0;
        over = std::move(r);
        if (unchanged >= 2 && !topTried) {
            topTried = true;
            Attempt top = attemptAt(kTopPrice);
            if (boundedOut(top)) return stopped(std::move(top));
            note(top);
            if (!fitsLimit(top)) break;
        }
    }
    if (!under) {
        smallest.result.fits = false;
        smallest.result.unpricedSeconds = unpriced;
        return smallest;
    }
    for (int iteration = 0; iteration < 64; ++iteration) {
        const std::optional<ChordStep> step = chordStep(lineOf(over), lineOf(*under));
        if (!step) break;
        Attempt r = attemptAt(step->price);
        if (boundedOut(r)) return stopped(std::move(r));
        if (!step->stride && !belowChord(r.result.objective, lineOf(*under), step->price)) break;
        note(r);
        if (fitsLimit(r))
            under = std::move(r);
        else
            over = std::move(r);
    }
    best = std::move(*under);
    // The duality gap: identical layers choose alike at one price, so the envelope jumps from
    // `over` (too big) to `under` (fits, slower) with nothing between. Pricing the first k
    // instances of the runs at over's price and the rest at under's mixes the two layouts layer
    // by layer; the most layers at the low price that still fit (k bisected; memory falls as k
    // falls) is usually much faster than `under`. Kept only when it fits and is faster.
    const int instances = splittableInstances();
    if (mixLayers && over.result.lambda < best.result.lambda && instances > 1) {
        const double lowPrice = over.result.lambda, highPrice = best.result.lambda;
        lastLowInstances = bisectLowPricedLayers(
            instances,
            [&](int k) {
                Attempt r = attemptAt(lowPrice, PriceSplit{highPrice, k});
                r.result.lambda = highPrice;
                if (!fitsLimit(r)) return false;
                if (r.result.breakdown.stepSeconds < best.result.breakdown.stepSeconds) best = std::move(r);
                return true;
            },
            lastLowInstances);
    }
    lastOverLambda = over.result.lambda;
    best.result.unpricedSeconds = unpriced;
    return best;
}

} // namespace tp
