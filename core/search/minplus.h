#pragma once
// Min-plus matrices for runs of chained identical blocks (docs/ARCHITECTURE.md, "core/search",
// stitching): a run of r instances is the r-th min-plus power of its one-instance transfer matrix
// (entry (i, j): the cheapest instance that enters in state i and leaves in state j), computed by
// repeated squaring and decoded through the product tree that the squaring leaves behind.
#include <cstdint>
#include <vector>

namespace tp::search {

/// A square min-plus matrix and, for a product, the two nodes it multiplies (indices into the
/// product tree; -1 for a leaf).
struct MinPlus {
    int n = 0;
    std::vector<double> v; ///< row-major n x n
    int left = -1, right = -1;
    std::int64_t span = 1; ///< instances the product covers

    double at(int i, int j) const
    {
        return v[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
    }
};

/// The min-plus product: c(i, j) = min over m of a(i, m) + b(m, j). No argmin is kept: the inner
/// loop is a plain min over a row (the compiler vectorises it), and decoding recovers the few
/// argmins it needs (midOf).
MinPlus multiply(const MinPlus& a, const MinPlus& b);

/// The state a product's optimal path from i to j passes between its halves: the first m (in
/// index order) reaching the minimum, the same sums the product took its minimum of.
int midOf(const std::vector<MinPlus>& nodes, int node, int i, int j);

/// a^count (count >= 1) by repeated squaring, appending the product tree to `nodes`; returns the
/// node of the result.
int power(std::vector<MinPlus>& nodes, const MinPlus& a, std::int64_t count);

/// Whether the product's optimal path from state s back to s stays in s at every boundary.
/// O(n log^2 r) on a power's tree (squares share their two halves).
bool staysAt(const std::vector<MinPlus>& nodes, int node, int s);

/// One stretch of a chained run whose instances all enter in state `in` and leave in `out`.
struct StateRun {
    int in = 0, out = 0;
    std::int64_t count = 0;
};

/// The product's optimal path from i to j as stretches of equal (in, out) states, appended to
/// `out`. A stretch that stays in one state is found without visiting its instances, so a run
/// that settles into one layout decodes in O(log^2 r), not O(r).
void expandRuns(const std::vector<MinPlus>& nodes, int node, int i, int j, std::vector<StateRun>& out);

} // namespace tp::search
