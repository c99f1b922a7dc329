#include "minplus.h"

#include <algorithm>
#include <vector>

#include "factor.h"
#include "kernel_builds.h"

namespace tp::search {

TP_KERNEL_BUILDS MinPlus multiply(const MinPlus& a, const MinPlus& b)
{
    MinPlus c;
    c.n = a.n;
    const size_t n = static_cast<size_t>(a.n);
    c.v.assign(n * n, kInfinity);
    std::vector<size_t> finite; // the m of row i with a finite left (an infinite one adds nothing)
    finite.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        double* out = c.v.data() + i * n;
        const double* row = a.v.data() + i * n;
        finite.clear();
        for (size_t m = 0; m < n; ++m)
            if (row[m] != kInfinity) finite.push_back(m);
        // Four rows of b a pass: each out[j] is read and written once for four sums, not four
        // times (a minimum over the same sums, in any order, is the same).
        size_t f = 0;
        for (; f + 4 <= finite.size(); f += 4) {
            const double l0 = row[finite[f]], l1 = row[finite[f + 1]], l2 = row[finite[f + 2]], l3 = row[finite[f + 3]];
            const double* r0 = b.v.data() + finite[f] * n;
            const double* r1 = b.v.data() + finite[f + 1] * n;
            const double* r2 = b.v.data() + finite[f + 2] * n;
            const double* r3 = b.v.data() + finite[f + 3] * n;
            for (size_t j = 0; j < n; ++j)
                out[j] = std::min(std::min(std::min(out[j], l0 + r0[j]), std::min(l1 + r1[j], l2 + r2[j])), l3 + r3[j]);
        }
        for (; f < finite.size(); ++f) {
            const double left = row[finite[f]];
            const double* right = b.v.data() + finite[f] * n;
            for (size_t j = 0; j < n; ++j) out[j] = std::min(out[j], left + right[j]);
        }
    }
    return c;
}

int midOf(const std::vector<MinPlus>& nodes, int node, int i, int j)
{
    const MinPlus& p = nodes[static_cast<size_t>(node)];
    const MinPlus& a = nodes[static_cast<size_t>(p.left)];
    const MinPlus& b = nodes[static_cast<size_t>(p.right)];
    const size_t n = static_cast<size_t>(p.n);
    double best = kInfinity;
    int mid = 0;
    for (size_t m = 0; m < n; ++m) {
        const double left = a.v[static_cast<size_t>(i) * n + m];
        if (left == kInfinity) continue;
        const double sum = left + b.v[m * n + static_cast<size_t>(j)];
        if (sum < best) {
            best = sum;
            mid = static_cast<int>(m);
        }
    }
    return mid;
}

namespace {

/// Appends the product of two tree nodes, remembering its halves; returns its node.
int pushProduct(std::vector<MinPlus>& nodes, int left, int right)
{
    MinPlus p = multiply(nodes[static_cast<size_t>(left)], nodes[static_cast<size_t>(right)]);
    p.left = left;
    p.right = right;
    p.span = nodes[static_cast<size_t>(left)].span + nodes[static_cast<size_t>(right)].span;
    nodes.push_back(std::move(p));
    return static_cast<int>(nodes.size()) - 1;
}

} // namespace

int power(std::vector<MinPlus>& nodes, const MinPlus& a, std::int64_t count)
{
    nodes.push_back(a);
    int square = static_cast<int>(nodes.size()) - 1;
    int result = -1;
    while (true) {
        if (count & 1) result = result < 0 ? square : pushProduct(nodes, result, square);
        count >>= 1;
        if (!count) break;
        square = pushProduct(nodes, square, square);
    }
    return result;
}

bool staysAt(const std::vector<MinPlus>& nodes, int node, int s)
{
    const MinPlus& m = nodes[static_cast<size_t>(node)];
    if (m.left < 0) return true;
    if (midOf(nodes, node, s, s) != s) return false;
    return staysAt(nodes, m.left, s) && (m.right == m.left || staysAt(nodes, m.right, s));
}

void expandRuns(const std::vector<MinPlus>& nodes, int node, int i, int j, std::vector<StateRun>& out)
{
    const MinPlus& m = nodes[static_cast<size_t>(node)];
    if (m.left < 0 || (i == j && staysAt(nodes, node, i))) {
        if (!out.empty() && out.back().in == i && out.back().out == j && i == j)
            out.back().count += m.span;
        else
            out.push_back(StateRun{i, j, m.span});
        return;
    }
    const int k = midOf(nodes, node, i, j);
    expandRuns(nodes, m.left, i, k, out);
    expandRuns(nodes, m.right, k, j, out);
}

} // namespace tp::search
