#include "collectives.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <array>
#include <stdexcept>

namespace tp {

std::string_view collectiveName(CollectiveKind kind)
{
    static constexpr std::array<std::string_view, 4> names{"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
    return names[static_cast<size_t>(kind)];
}

std::string_view phaseName(Phase phase)
{
    static constexpr std::array<std::string_view, 3> names{"forward", "backward", "gradient"};
    return names[static_cast<size_t>(phase)];
}

// The message size n of every collective is one quantity: the bytes one device holds of the
// tensor when THIS axis does not split it (other axes may still split it).
//   all-reduce:     the buffer each device holds before and after;
//   all-gather:     the gathered output per device (each device starts with n/g);
//   reduce-scatter: the partial-sum input per device (each device ends with n/g);
//   all-to-all:     g times the shard each device holds before and after (the tensor as the
//                   group holds it along this axis); each device sends (g-1)/g of its shard.
// nccl-tests name the same n "size" and report bus bandwidth B = algbw * f, with f the factor
// below, so a measured curve B(n) applies directly: time = f n / B(n).
namespace {

double busFactor(CollectiveKind kind, double g)
{
    switch (kind) {
    case CollectiveKind::AllReduce:
        return 2 * (g - 1) / g;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
        return (g - 1) / g;
    case CollectiveKind::AllToAll:
        return (g - 1) / (g * g);
    }
    return 0;
}

// Latency steps of the ring algorithm, and of NCCL's tree (all-reduce only: down and up a
// binary tree of depth log2 g), which NCCL picks when the ring's 2(g-1) steps dominate.
double ringSteps(CollectiveKind kind, double g) { return kind == CollectiveKind::AllReduce ? 2 * (g - 1) : g - 1; }
double treeSteps(double g) { return 2 * std::ceil(std::log2(g)); }

// One flat collective over g devices on one link: with a measured curve its bus bandwidth at
// this size (latency included: the curve was measured end to end); else the alpha-beta model,
// with the tree's latency where it is shorter (groups spanning nodes; inside a node NCCL runs
// rings over NVLink).
double flatSeconds(CollectiveKind kind, double bytes, double g, const LinkSpec& link, bool treeAllowed)
{
    if (g <= 1 || bytes <= 0) return 0;
    auto curve = link.busbw.find(collectiveName(kind));
    if (curve == link.busbw.end()) curve = link.busbw.find(collectiveName(CollectiveKind::AllReduce));
    if (curve != link.busbw.end() && !curve->second.empty()) return busFactor(kind, g) * bytes / curve->second.at(bytes);
    double steps = ringSteps(kind, g);
    if (treeAllowed && kind == CollectiveKind::AllReduce) steps = std::min(steps, treeSteps(g));
    return busFactor(kind, g) * bytes / link.bandwidth + steps * link.latency;
}

} // namespace

double collectiveSeconds(CollectiveKind kind, double bytes, const MeshAxis& axis)
{
    if (axis.size <= 1 || bytes <= 0) return 0;
    const double g = axis.size, inner = axis.membersPerNode;
    if (!axis.crossesNodes || inner <= 1 || kind == CollectiveKind::AllToAll || g <= inner)
        return flatSeconds(kind, bytes, g, axis.link, axis.crossesNodes);
    // Hierarchical (NCCL across nodes): inside each node over NVLink, then across nodes on the
    // 1/inner of the message each GPU is responsible for, over its own share of the network.
    const double outer = g / inner;
    switch (kind) {
    case CollectiveKind::AllReduce:
        return flatSeconds(CollectiveKind::ReduceScatter, bytes, inner, axis.nodeLink, false) +
               flatSeconds(CollectiveKind::AllReduce, bytes / inner, outer, axis.link, true) +
               flatSeconds(CollectiveKind::AllGather, bytes, inner, axis.nodeLink, false);
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
        return flatSeconds(kind, bytes / inner, outer, axis.link, true) + flatSeconds(kind, bytes, inner, axis.nodeLink, false);
    case CollectiveKind::AllToAll:
        break;
    }
    return 0;
}

namespace {

constexpr AxisMask bit(int a) { return AxisMask{1} << a; }

bool isPrefix(const std::vector<int>& p, const std::vector<int>& of)
{
    return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin());
}

// Length of the common prefix of two axis lists.
size_t commonPrefix(const std::vector<int>& a, const std::vector<int>& b)
{
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    return k;
}

// Per mesh axis, the dim of a spec that it splits, or -1 (AxisMask holds at most 32 axes).
using AxisDims = std::array<int, 32>;

AxisDims axisDims(const TensorSpec& spec)
{
    AxisDims dims;
    dims.fill(-1);
    for (size_t d = 0; d < spec.dims.size(); ++d)
        for (int a : spec.dims[d]) dims[static_cast<size_t>(a)] = static_cast<int>(d);
    return dims;
}

// Whether axis a may be appended (as the new minor axis) to dim d of `cur` on the way to `to`:
// cur's axes on d are a prefix of to's and a is the next one.
bool appendable(const TensorSpec& cur, const TensorSpec& to, size_t d, int a)
{
    const auto& c = cur.dims[d];
    const auto& t = to.dims[d];
    return isPrefix(c, t) && c.size() < t.size() && t[c.size()] == a;
}

struct Planner {
    const std::vector<std::int64_t>& shape;
    int elementBytes;
    const Mesh& mesh;
    Phase phase;
    bool deferPartials; // variant: gather misplaced axes before resolving partial sums
    AxisDims toDim;     // the dim of `to` each axis splits
    AxisDims curDim;    // the same of the current spec, kept up to date by addAxis/dropMinorAxis
    std::vector<std::int64_t> splits; // per dim, the pieces the current spec cuts it into
    bool reducedEarly = false; // an all-reduce came before the gathers (step 4)

    Planner(const std::vector<std::int64_t>& shape, int elementBytes, const Mesh& mesh, Phase phase, bool deferPartials,
            const TensorSpec& from, const TensorSpec& to)
        : shape(shape), elementBytes(elementBytes), mesh(mesh), phase(phase), deferPartials(deferPartials), toDim(axisDims(to)),
          curDim(axisDims(from)), splits(from.dims.size())
    {
        for (size_t d = 0; d < splits.size(); ++d) splits[d] = from.splitsOf(d, mesh);
    }

    // The current spec's bytes per device (TensorSpec::shardNumel, from the kept splits).
    double bytesNow() const
    {
        std::int64_t n = 1;
        for (size_t d = 0; d < shape.size(); ++d) n *= shape[d] / splits[d];
        return static_cast<double>(n) * elementBytes;
    }
    double axisSize(int a) const { return mesh.axes[static_cast<size_t>(a)].size; }
    void addAxis(TensorSpec& cur, size_t d, int a)
    {
        cur.dims[d].push_back(a);
        curDim[static_cast<size_t>(a)] = static_cast<int>(d);
        splits[d] *= mesh.axes[static_cast<size_t>(a)].size;
    }
    int dropMinorAxis(TensorSpec& cur, size_t d)
    {
        const int a = cur.dims[d].back();
        cur.dims[d].pop_back();
        curDim[static_cast<size_t>(a)] = -1;
        splits[d] /= mesh.axes[static_cast<size_t>(a)].size;
        return a;
    }

    void emit(std::vector<CollectiveCall>& out, CollectiveKind kind, int axis, double bytes) const
    {
        if (mesh.axes[static_cast<size_t>(axis)].size <= 1) return; // a size-1 axis moves nothing
        out.push_back({kind, axis, bytes, collectiveSeconds(kind, bytes, mesh.axes[static_cast<size_t>(axis)]), phase});
    }

    // One step towards `to`; false when cur == to.
    bool step(TensorSpec& cur, const TensorSpec& to, std::vector<CollectiveCall>& out)
    {
        const size_t rank = cur.dims.size();
        // 1. Free local slices first: they shrink everything that follows.
        for (size_t d = 0; d < rank; ++d) {
            if (!isPrefix(cur.dims[d], to.dims[d]) || cur.dims[d].size() == to.dims[d].size()) continue;
            const int a = to.dims[d][cur.dims[d].size()];
            if (curDim[static_cast<size_t>(a)] >= 0 || (cur.partial & bit(a))) continue;
            addAxis(cur, d, a);
            return true;
        }
        // 2. Reduce-scatters: a partial axis that `to` splits a dim with, and that dim is ready.
        for (int a = 0; a < mesh.rank(); ++a) {
            if (!(cur.partial & bit(a)) || (to.partial & bit(a))) continue;
            const int d = toDim[static_cast<size_t>(a)];
            if (d < 0 || !appendable(cur, to, static_cast<size_t>(d), a)) continue;
            emit(out, CollectiveKind::ReduceScatter, a, bytesNow());
            cur.partial &= ~bit(a);
            addAxis(cur, static_cast<size_t>(d), a);
            return true;
        }
        // 3. All-to-alls: the minor axis of a dim that is misplaced there but is the next axis
        //    `to` wants on another, ready dim.
        for (size_t d = 0; d < rank; ++d) {
            const auto& c = cur.dims[d];
            if (c.empty() || commonPrefix(c, to.dims[d]) == c.size()) continue;
            const int a = c.back();
            const int e = toDim[static_cast<size_t>(a)];
            if (e < 0 || static_cast<size_t>(e) == d || !appendable(cur, to, static_cast<size_t>(e), a)) continue;
            emit(out, CollectiveKind::AllToAll, a, bytesNow() * axisSize(a));
            dropMinorAxis(cur, d);
            addAxis(cur, static_cast<size_t>(e), a);
            return true;
        }
        // 4. All-reduces of the remaining partial sums (before gathers grow the data), unless
        //    this variant waits until a reduce-scatter becomes possible.
        auto allReduce = [&]() {
            for (int a = 0; a < mesh.rank(); ++a) {
                if (!(cur.partial & bit(a)) || (to.partial & bit(a))) continue;
                emit(out, CollectiveKind::AllReduce, a, bytesNow());
                cur.partial &= ~bit(a);
                return true;
            }
            return false;
        };
        if (!deferPartials && allReduce()) {
            reducedEarly = true;
            return true;
        }
        // 5. All-gathers of misplaced axes, minor first (a major axis can only go once the
        //    axes inside it are gone).
        for (size_t d = 0; d < rank; ++d) {
            const auto& c = cur.dims[d];
            if (c.empty() || commonPrefix(c, to.dims[d]) == c.size()) continue;
            emit(out, CollectiveKind::AllGather, c.back(), bytesNow() * axisSize(c.back()));
            dropMinorAxis(cur, d);
            return true;
        }
        if (allReduce()) return true;
        // 6. Becoming partial is free (all devices but one contribute zeros).
        if ((to.partial & ~cur.partial) != 0) {
            cur.partial |= to.partial;
            return true;
        }
        return false;
    }
};

} // namespace

std::vector<CollectiveCall> planReshard(const TensorSpec& from, const TensorSpec& to, const std::vector<std::int64_t>& shape,
                                        int elementBytes, const Mesh& mesh, Phase phase)
{
    if (from == to) return {};
    if (from.dims.size() != shape.size() || to.dims.size() != shape.size())
        throw std::logic_error("planReshard: spec rank does not match the tensor rank");
    if (mesh.rank() > static_cast<int>(AxisDims{}.size())) throw std::logic_error("planReshard: more mesh axes than an AxisMask holds");
    for (const auto* s : {&from, &to}) {
        AxisMask seen = s->partial;
        for (const auto& d : s->dims)
            for (int a : d) {
                if (a < 0 || a >= mesh.rank()) throw std::logic_error("planReshard: axis out of range");
                if (seen & bit(a)) throw std::logic_error("planReshard: an axis is used twice in a spec");
                seen |= bit(a);
            }
        if (s->partial >> mesh.rank()) throw std::logic_error("planReshard: partial axis out of range");
    }
    // Two greedy orders (resolve partial sums as soon as possible, or gather first so that a
    // reduce-scatter replaces an all-reduce); each step of either is a collective on one axis.
    // The cheaper plan wins; ties go to the first (deterministic).
    // The variants differ only where the first all-reduces a partial sum before gathering
    // (step 4); where it did not, the second would take the same steps.
    std::vector<CollectiveCall> best;
    double bestSeconds = -1;
    bool reducedEarly = false;
    for (bool defer : {false, true}) {
        if (defer && !reducedEarly) break;
        Planner planner(shape, elementBytes, mesh, phase, defer, from, to);
        TensorSpec cur = from;
        std::vector<CollectiveCall> calls;
        // Every step removes a misplaced axis, a partial axis, or adds a wanted one, so the
        // number of steps is bounded by a few times the number of axes.
        for (int guard = 0; cur != to; ++guard) {
            if (guard > 8 * (mesh.rank() + 1) || !planner.step(cur, to, calls))
                throw std::logic_error("planReshard: no plan found");
        }
        reducedEarly = planner.reducedEarly;
        double seconds = 0;
        for (const auto& c : calls) seconds += c.seconds;
        if (bestSeconds < 0 || seconds < bestSeconds) {
            bestSeconds = seconds;
            best = std::move(calls);
        }
    }
    return best;
}

} // namespace tp
