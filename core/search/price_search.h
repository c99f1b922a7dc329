#pragma once
// The memory-price search (docs/ARCHITECTURE.md, "core/search", memory limit): the pure steps
// of the Lagrangian search. A plan at price lambda is the line T + lambda * M; the search at a
// price returns the lowest line, so the dual is their concave lower envelope. Internal to
// core/search.
#include <functional>
#include <optional>

namespace tp::search {

/// A searched plan as a line: step seconds T, bytes M, and the price it was found at.
struct PlanLine {
    double seconds = 0;
    double bytes = 0;
    double lambda = 0;

    double at(double price) const { return seconds + price * bytes; }
};

/// The next price to search between `over` (bytes over the limit, found at a lower price) and
/// `under` (fits), or nothing when the two are adjacent on the envelope (their lines cross
/// outside the two prices, which happens only through rounding). Normally the price where the
/// lines cross; but when `over` was found far lower (typically the unpriced plan, orders of
/// magnitude over) the chord would crawl up the envelope one vertex at a time, so it strides
/// down from the fitting side 8x instead (`stride`; such a step proves nothing).
struct ChordStep {
    double price = 0;
    bool stride = false;
};
std::optional<ChordStep> chordStep(const PlanLine& over, const PlanLine& under);

/// Whether a search at `price` that returned `objective` found a line below the chord through
/// `under` (a plan between the two ends); if not, the ends are adjacent on the envelope.
bool belowChord(double objective, const PlanLine& under, double price);

/// The largest k in [0, instances) for which fitsAt(k) holds, by bisection, given that it holds
/// at 0 and fails at `instances` and is monotone (memory falls as k falls). fitsAt is called
/// for each probe, in bisection order. A `hint` in (0, instances), the answer of the previous
/// solve, is probed first with its neighbour: an edit that leaves the answer there costs two
/// probes instead of log2(instances); the answer is the same for a monotone fitsAt.
int bisectLowPricedLayers(int instances, const std::function<bool(int)>& fitsAt, int hint = -1);

} // namespace tp::search
