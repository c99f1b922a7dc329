#include "executor.h"

#include <numeric>
#include <variant>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "../graph/opkinds.h"
#include "../util/error.h"

namespace tp::verify {

// ---- Block -------------------------------------------------------------------------------

Block Block::zeros(const std::vector<Range>& ranges)
{
    Block b;
    for (const auto& r : ranges) {
        b.start.push_back(r.lo);
        b.size.push_back(r.size());
    }
    b.data.assign(static_cast<size_t>(b.numel()), 0.0f);
    return b;
}

std::int64_t Block::numel() const
{
    std::int64_t n = 1;
    for (auto s : size) n *= s;
    return n;
}

std::vector<std::int64_t> Block::strides() const
{
    std::vector<std::int64_t> st(size.size(), 1);
    for (size_t d = size.size(); d-- > 1;) st[d - 1] = st[d] * size[d];
    return st;
}

bool Block::covers(const std::vector<Range>& ranges) const
{
    if (ranges.size() != size.size()) return false;
    for (size_t d = 0; d < ranges.size(); ++d)
        if (ranges[d].lo < start[d] || ranges[d].hi > start[d] + size[d]) return false;
    return true;
}

float Block::at(const std::vector<std::int64_t>& index) const
{
    const auto st = strides();
    std::int64_t off = 0;
    for (size_t d = 0; d < index.size(); ++d) off += (index[d] - start[d]) * st[d];
    return data[static_cast<size_t>(off)];
}

Block Block::slice(const std::vector<Range>& ranges) const
{
    Block out = zeros(ranges);
    out.partial = partial;
    const auto st = strides();
    const auto ost = out.strides();
    std::vector<std::int64_t> idx(ranges.size());
    for (std::int64_t k = 0; k < out.numel(); ++k) {
        std::int64_t rest = k, off = 0;
        for (size_t d = 0; d < ranges.size(); ++d) {
            idx[d] = rest / ost[d];
            rest %= ost[d];
            off += (idx[d] + ranges[d].lo - start[d]) * st[d];
        }
        out.data[static_cast<size_t>(k)] = data[static_cast<size_t>(off)];
    }
    return out;
}

// ---- Operand indexing ----------------------------------------------------------------------

namespace {

// Inner extent of each loop within its merged dim: the product of the sizes of the loops after it.
std::int64_t innerExtent(const std::vector<int>& group, size_t position, const Signature& sig)
{
    std::int64_t inner = 1;
    for (size_t k = position + 1; k < group.size(); ++k) inner *= sig.loops[static_cast<size_t>(group[k])].size;
    return inner;
}

bool spatialGroup(const std::vector<int>& group, const Signature& sig)
{
    return std::any_of(group.begin(), group.end(),
                       [&](int l) { return sig.loops[static_cast<size_t>(l)].role == DimRole::Spatial; });
}

// Offsets of an operand's elements in a block, linear in the loop indices: base + sum idx*coef.
struct Addressing {
    std::int64_t base = 0;
    std::vector<std::int64_t> coef;                     // per loop
    std::vector<std::pair<size_t, std::int64_t>> terms; // the loops with a nonzero coefficient

    // Raw pointers: this runs once per point and operand, and unoptimised (Debug, sanitizer)
    // builds would otherwise call an iterator function per term.
    std::int64_t at(const std::vector<std::int64_t>& idx) const
    {
        std::int64_t off = base;
        const std::int64_t* ip = idx.data();
        for (const auto *t = terms.data(), *end = t + terms.size(); t != end; ++t) off += ip[t->first] * t->second;
        return off;
    }
};

Addressing addressing(const OperandIndexing& operand, const Signature& sig, const Block& block)
{
    Addressing a;
    a.coef.assign(sig.loops.size(), 0);
    const auto st = block.strides();
    for (size_t d = 0; d < operand.dims.size(); ++d) {
        a.base -= block.start[d] * st[d];
        const auto& group = operand.dims[d];
        for (size_t k = 0; k < group.size(); ++k) a.coef[static_cast<size_t>(group[k])] += innerExtent(group, k, sig) * st[d];
    }
    for (size_t l = 0; l < a.coef.size(); ++l)
        if (a.coef[l] != 0) a.terms.emplace_back(l, a.coef[l]);
    return a;
}

// A convolution's input offset, linear in the loops: spatial dim d (slid by output loop
// spatial[d] with the stride, shifted by the weight's kernel loop paired with it and by the
// padding) and the other dims as addressing() has them. Only valid where every spatial index
// lies inside the input (convolutionInside).
Addressing convolutionAddressing(const OperandIndexing& x, const Signature& sig, const Block& block,
                                 const std::vector<int>& spatial, const std::vector<int>& kernelLoops, std::int64_t stride,
                                 std::int64_t pad)
{
    Addressing a;
    a.coef.assign(sig.loops.size(), 0);
    const auto st = block.strides();
    size_t w = 0;
    for (size_t d = 0; d < x.dims.size(); ++d) {
        a.base -= block.start[d] * st[d];
        if (spatial[d] >= 0) {
            a.coef[static_cast<size_t>(spatial[d])] += stride * st[d];
            a.coef[static_cast<size_t>(kernelLoops.at(w++))] += st[d];
            a.base -= pad * st[d];
            continue;
        }
        const auto& group = x.dims[d];
        for (size_t k = 0; k < group.size(); ++k) a.coef[static_cast<size_t>(group[k])] += innerExtent(group, k, sig) * st[d];
    }
    for (size_t l = 0; l < a.coef.size(); ++l)
        if (a.coef[l] != 0) a.terms.emplace_back(l, a.coef[l]);
    return a;
}

// Per spatial dim of a convolution's input: (output loop, kernel loop, input extent).
struct SpatialBound {
    size_t loop, kernel;
    std::int64_t extent;
};

std::vector<SpatialBound> convolutionBounds(const std::vector<int>& spatial, const std::vector<int>& kernelLoops,
                                            const std::vector<std::int64_t>& shape)
{
    std::vector<SpatialBound> b;
    size_t w = 0;
    for (size_t d = 0; d < spatial.size(); ++d)
        if (spatial[d] >= 0) b.push_back({static_cast<size_t>(spatial[d]), static_cast<size_t>(kernelLoops.at(w++)), shape[d]});
    return b;
}

bool convolutionInside(const std::vector<SpatialBound>& bounds, const std::vector<std::int64_t>& idx, std::int64_t stride,
                       std::int64_t pad)
{
    const std::int64_t* ip = idx.data();
    for (const auto *b = bounds.data(), *end = b + bounds.size(); b != end; ++b) {
        const std::int64_t gi = ip[b->loop] * stride + ip[b->kernel] - pad;
        if (gi < 0 || gi >= b->extent) return false;
    }
    return true;
}

// Calls f(idx) for every point of the box of loop ranges, last loop fastest.
template <class F>
void forEachPoint(const std::vector<Range>& ranges, F&& f)
{
    std::vector<std::int64_t> idx(ranges.size());
    for (size_t l = 0; l < ranges.size(); ++l) {
        if (ranges[l].size() <= 0) return;
        idx[l] = ranges[l].lo;
    }
    std::int64_t* ip = idx.data();
    const Range* rp = ranges.data();
    while (true) {
        f(idx);
        size_t l = ranges.size();
        while (l > 0) {
            --l;
            if (++ip[l] < rp[l].hi) break;
            ip[l] = rp[l].lo;
            if (l == 0) return;
        }
        if (ranges.empty()) return;
    }
}

std::string context(const Op& op) { return "op '" + op.name + "'"; }

const Block& input(const std::vector<const Block*>& inputs, size_t i, const Op& op)
{
    if (i >= inputs.size() || !inputs[i]) throw std::logic_error(context(op) + ": input block missing");
    return *inputs[i];
}

std::vector<bool> outputLoops(const Signature& sig)
{
    std::vector<bool> in(sig.loops.size(), false);
    for (const auto& out : sig.outputs)
        for (const auto& g : out.dims)
            for (int l : g) in[static_cast<size_t>(l)] = true;
    return in;
}

bool indexes(const OperandIndexing& operand, int loop)
{
    for (const auto& g : operand.dims)
        if (std::find(g.begin(), g.end(), loop) != g.end()) return true;
    return false;
}

// Attr-driven scale of a contraction: a mean reduction, or attention scores scaled by the head dim.
double contractionScale(const Op& op, const Signature& sig, const std::vector<bool>& isOutputLoop)
{
    double contracted = 1;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (!isOutputLoop[l]) contracted *= static_cast<double>(sig.loops[l].size);
    double scale = 1;
    if (op.intAttr("scale_by_head_dim").value_or(0) != 0) scale /= std::sqrt(contracted);
    if (auto it = op.attrs.find("reduction"); it != op.attrs.end())
        if (const auto* s = std::get_if<std::string>(&it->second); s && *s == "mean") scale /= contracted;
    return scale;
}

std::vector<Block> outputBlocks(const Op& op, const Signature& sig, const Graph& g, const std::vector<Range>& loops)
{
    std::vector<Block> out;
    for (size_t o = 0; o < op.outputs.size(); ++o)
        out.push_back(Block::zeros(operandRanges(sig.outputs[o], sig, loops, g.tensor(op.outputs[o]).shape)));
    return out;
}

void evalMap(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
             const std::vector<const Block*>& inputs, Block& out)
{
    std::vector<Addressing> in;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
    const Addressing o = addressing(sig.outputs[0], sig, out);
    std::vector<float> values(op.inputs.size());
    forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
        for (size_t i = 0; i < in.size(); ++i) values[i] = inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
        out.data[static_cast<size_t>(o.at(idx))] = sem.pointwise(values);
    });
}

/// What a contraction's forward and backward both read: which loops the output has, each
/// input's and the output's addressing, the scale, how many inputs multiply, and the gather
/// loop of a lookup (-1 for none; `gather` requires one and a table).
struct ContractionFrame {
    std::vector<bool> isOut;
    std::vector<Addressing> in;
    Addressing o;
    double scale = 1;
    size_t mult = 0;
    int gatherLoop = -1;
};

ContractionFrame contractionFrame(const Op& op, const Signature& sig, const OpSemantics& sem,
                                  const std::vector<const Block*>& inputs, const Block& out, bool gather)
{
    ContractionFrame f{outputLoops(sig), {}, addressing(sig.outputs[0], sig, out)};
    for (size_t i = 0; i < op.inputs.size(); ++i) f.in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
    f.scale = contractionScale(op, sig, f.isOut);
    f.mult = std::min<size_t>(static_cast<size_t>(std::max(sem.multiplicands, 0)), f.in.size());
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (sig.loops[l].role == DimRole::Gather) f.gatherLoop = static_cast<int>(l);
    if (gather && (f.gatherLoop < 0 || f.in.size() < 2))
        throw InputError(context(op) + ": a lookup needs a gather loop and a table");
    return f;
}

// Sum over the non-output loops. Inputs beyond `multiplicands` (a bias) are added once per
// output element: by the device whose slice of every summed loop starts at 0, so that the
// partial sums of a split contraction still add up to the true value.
void evalContract(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                  const std::vector<const Block*>& inputs, Block& out, bool gather)
{
    const auto [isOut, in, o, scale, mult, gatherLoop] = contractionFrame(op, sig, sem, inputs, out, gather);
    std::vector<double> acc(out.data.size(), 0.0);
    forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
        const auto off = static_cast<size_t>(o.at(idx));
        if (gather) {
            const float id = inputs[0]->data[static_cast<size_t>(in[0].at(idx))];
            if (std::lround(id) == idx[static_cast<size_t>(gatherLoop)])
                acc[off] += inputs[1]->data[static_cast<size_t>(in[1].at(idx))];
            return;
        }
        double p = scale;
        for (size_t i = 0; i < mult; ++i) p *= inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
        acc[off] += p;
        if (mult < in.size()) {
            bool firstOfSum = true;
            for (size_t l = 0; l < idx.size(); ++l)
                if (!isOut[l] && idx[l] != 0) firstOfSum = false;
            if (firstOfSum)
                for (size_t i = mult; i < in.size(); ++i) acc[off] += inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
        }
    });
    for (size_t k = 0; k < acc.size(); ++k) out.data[k] = static_cast<float>(acc[k]);
}

/// What a Normalize op's forward and backward share: the row loop (the reduced-nonlinear one,
/// which must be whole on this device), the causal-mask context, the addressing of the inputs
/// and of the output (or its gradient), and the loops that enumerate the rows.
struct NormalizeRows {
    int reduced = -1;
    size_t r = 0;
    Range full;
    int query = -1; ///< the loop of input 0's next-to-last dim (a causal mask's query)
    RowContext ctx;
    std::vector<Addressing> in;
    Addressing out;
    bool outRow = false;
    std::vector<Range> rowLoops;

    NormalizeRows(const Op& op, const Signature& sig, const std::vector<Range>& loops, const std::vector<const Block*>& inputs,
                  const Block& outBlock)
    {
        for (size_t l = 0; l < sig.loops.size(); ++l)
            if (sig.loops[l].role == DimRole::ReducedNonlinear) reduced = static_cast<int>(l);
        if (reduced < 0) throw InputError(context(op) + ": no reduced-nonlinear loop to normalise over");
        r = static_cast<size_t>(reduced);
        full = loops[r];
        if (full.lo != 0 || full.hi != sig.loops[r].size)
            throw InputError(context(op) + ": the normalised loop '" + std::string(1, sig.loops[r].label) + "' is split");
        const auto& x = sig.inputs[0].dims;
        if (x.size() >= 2 && !x[x.size() - 2].empty()) query = x[x.size() - 2].back();
        ctx.causal = op.intAttr("causal").value_or(0) != 0;
        for (size_t l = 0; l < sig.loops.size(); ++l)
            if (l != r) ctx.rowsTotal *= static_cast<double>(sig.loops[l].size);
        for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
        out = addressing(sig.outputs[0], sig, outBlock);
        outRow = indexes(sig.outputs[0], reduced);
        rowLoops = loops;
        rowLoops[r] = {0, 1};
    }

    /// Reads every input's row at `idx` (its length 1 when the input does not run along the row)
    /// and sets the row's causal query index.
    void gather(const Signature& sig, const std::vector<const Block*>& inputs, std::vector<std::int64_t>& idx,
                std::vector<std::vector<float>>& rows)
    {
        for (size_t i = 0; i < in.size(); ++i) {
            const bool along = indexes(sig.inputs[i], reduced);
            rows[i].resize(along ? static_cast<size_t>(full.size()) : 1);
            for (size_t j = 0; j < rows[i].size(); ++j) {
                idx[r] = static_cast<std::int64_t>(j);
                rows[i][j] = inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
            }
        }
        idx[r] = 0;
        ctx.queryIndex = query >= 0 && query != reduced ? idx[static_cast<size_t>(query)] : -1;
    }
};

void evalNormalize(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                   const std::vector<const Block*>& inputs, Block& out)
{
    NormalizeRows nr(op, sig, loops, inputs, out);
    std::vector<std::vector<float>> rows(nr.in.size());
    std::vector<float> result(nr.outRow ? static_cast<size_t>(nr.full.size()) : 1);
    std::vector<double> acc(out.data.size(), 0.0);
    forEachPoint(nr.rowLoops, [&](std::vector<std::int64_t> idx) {
        nr.gather(sig, inputs, idx, rows);
        sem.row(rows, result, nr.ctx);
        for (size_t j = 0; j < result.size(); ++j) {
            idx[nr.r] = static_cast<std::int64_t>(j);
            acc[static_cast<size_t>(nr.out.at(idx))] += result[j];
        }
    });
    for (size_t k = 0; k < acc.size(); ++k) out.data[k] = static_cast<float>(acc[k]);
}

std::int64_t axisOf(const Op& op, size_t rank)
{
    std::int64_t axis = op.intAttr("axis").value_or(-1);
    if (axis < 0) axis += static_cast<std::int64_t>(rank);
    return axis;
}

// Concat (join) and Split (part): the parts lie one after another along the axis dim of the
// whole; a part's size-1 dims broadcast over the whole's.
void evalJoinOrPart(const Op& op, const Graph& g, const std::vector<const Block*>& inputs, std::vector<Block>& outs, bool join)
{
    const auto& wholeShape = g.tensor(join ? op.outputs[0] : op.inputs[0]).shape;
    const auto axis = static_cast<size_t>(axisOf(op, wholeShape.size()));
    const auto& parts = join ? op.inputs : op.outputs;
    std::int64_t offset = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
        const auto& partShape = g.tensor(parts[k]).shape;
        const std::int64_t len = partShape[axis];
        if (join) {
            Block& out = outs[0];
            const Block& part = input(inputs, k, op);
            std::vector<Range> box;
            for (size_t d = 0; d < out.size.size(); ++d) box.push_back({out.start[d], out.start[d] + out.size[d]});
            box[axis] = {std::max(box[axis].lo, offset), std::min(box[axis].hi, offset + len)};
            if (box[axis].size() > 0)
                forEachPoint(box, [&](const std::vector<std::int64_t>& idx) {
                    std::vector<std::int64_t> pi = idx;
                    pi[axis] -= offset;
                    for (size_t d = 0; d < pi.size(); ++d)
                        if (partShape[d] == 1 && d != axis) pi[d] = 0;
                    std::vector<std::int64_t> oi = idx;
                    const auto ost = out.strides();
                    std::int64_t off = 0;
                    for (size_t d = 0; d < oi.size(); ++d) off += (oi[d] - out.start[d]) * ost[d];
                    out.data[static_cast<size_t>(off)] = part.at(pi);
                });
        } else {
            Block& out = outs[k];
            const Block& whole = input(inputs, 0, op);
            std::vector<Range> box;
            for (size_t d = 0; d < out.size.size(); ++d) box.push_back({out.start[d], out.start[d] + out.size[d]});
            const auto ost = out.strides();
            forEachPoint(box, [&](const std::vector<std::int64_t>& idx) {
                std::vector<std::int64_t> wi = idx;
                wi[axis] += offset;
                std::int64_t off = 0;
                for (size_t d = 0; d < idx.size(); ++d) off += (idx[d] - out.start[d]) * ost[d];
                out.data[static_cast<size_t>(off)] = whole.at(wi);
            });
        }
        offset += len;
    }
}

// Convolutions and pools: the output's spatial loops slide windows over input 0. A convolution
// pairs each spatial loop with a kernel loop of its weight (the loops that index only the weight).
void evalWindow(const Op& op, const Signature& sig, const OpSemantics& sem, const Graph& g, const std::vector<Range>& loops,
                const std::vector<const Block*>& inputs, Block& out)
{
    const std::int64_t stride = op.intAttr("stride").value_or(1), pad = op.intAttr("padding").value_or(0);
    const auto& x = sig.inputs[0];
    const auto& xShape = g.tensor(op.inputs[0]).shape;
    std::vector<int> spatial; // per input-0 dim: the spatial loop indexing it, or -1
    for (const auto& grp : x.dims)
        spatial.push_back(grp.size() == 1 && sig.loops[static_cast<size_t>(grp[0])].role == DimRole::Spatial ? grp[0] : -1);
    const Block& xb = input(inputs, 0, op);
    const Addressing o = addressing(sig.outputs[0], sig, out);
    const auto xst = xb.strides();
    const bool convolution = sem.multiplicands >= 2 && op.inputs.size() >= 2;
    std::vector<int> kernelLoops; // conv: per spatial dim in order, the weight's window loop
    if (convolution) {
        for (const auto& grp : sig.inputs[1].dims)
            for (int l : grp)
                if (!indexes(x, l) && !indexes(sig.outputs[0], l)) kernelLoops.push_back(l);
    }
    const std::int64_t kernel = op.intAttr("kernel").value_or(1);
    auto xOffset = [&](const std::vector<std::int64_t>& idx, const std::vector<std::int64_t>& window, bool& inside) {
        std::int64_t off = 0;
        size_t w = 0;
        inside = true;
        for (size_t d = 0; d < x.dims.size(); ++d) {
            std::int64_t gi = 0;
            if (spatial[d] >= 0) {
                gi = idx[static_cast<size_t>(spatial[d])] * stride + window[w++] - pad;
                if (gi < 0 || gi >= xShape[d]) inside = false;
            } else {
                for (size_t k = 0; k < x.dims[d].size(); ++k)
                    gi += idx[static_cast<size_t>(x.dims[d][k])] * innerExtent(x.dims[d], k, sig);
            }
            off += (gi - xb.start[d]) * xst[d];
        }
        return off;
    };
    std::vector<double> acc(out.data.size(), 0.0);
    if (convolution) {
        const auto isOut = outputLoops(sig);
        const Addressing wa = addressing(sig.inputs[1], sig, input(inputs, 1, op));
        std::vector<Addressing> extra;
        for (size_t i = 2; i < op.inputs.size(); ++i) extra.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
        const Addressing xa = convolutionAddressing(x, sig, xb, spatial, kernelLoops, stride, pad);
        const auto bounds = convolutionBounds(spatial, kernelLoops, xShape);
        const float* xp = xb.data.data();
        const float* wp = inputs[1]->data.data();
        double* accp = acc.data();
        forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
            const bool inside = convolutionInside(bounds, idx, stride, pad);
            const auto oo = o.at(idx);
            if (inside) accp[oo] += static_cast<double>(xp[xa.at(idx)]) * wp[wa.at(idx)];
            if (extra.empty()) return;
            bool firstOfSum = true;
            for (size_t l = 0; l < idx.size(); ++l)
                if (!isOut[l] && idx[l] != 0) firstOfSum = false;
            if (firstOfSum)
                for (size_t i = 0; i < extra.size(); ++i)
                    acc[static_cast<size_t>(oo)] += inputs[i + 2]->data[static_cast<size_t>(extra[i].at(idx))];
        });
    } else {
        const size_t dims = static_cast<size_t>(std::count_if(spatial.begin(), spatial.end(), [](int l) { return l >= 0; }));
        forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
            double best = -INFINITY, sum = 0;
            std::vector<Range> windowBox(dims, Range{0, kernel});
            forEachPoint(windowBox, [&](const std::vector<std::int64_t>& window) {
                bool inside = true;
                const auto off = xOffset(idx, window, inside);
                if (!inside) return;
                const double v = xb.data[static_cast<size_t>(off)];
                best = std::max(best, v);
                sum += v;
            });
            acc[static_cast<size_t>(o.at(idx))] =
                sem.windowMax ? best : sum / std::pow(static_cast<double>(kernel), static_cast<double>(dims));
        });
    }
    for (size_t k = 0; k < acc.size(); ++k) out.data[k] = static_cast<float>(acc[k]);
}

// ---- Backward -------------------------------------------------------------------------------
// Each rule's backward walks the same points as its forward and sends the output gradient back
// along the same addressing: d(input) += d(output) x d(output)/d(input) at each point.

// Gradient accumulators, one per input, over the input's operandRanges (sums in double).
struct Grads {
    std::vector<Block> blocks;
    std::vector<std::vector<double>> acc;
    std::vector<Addressing> at; ///< per input, into blocks[i] (not for a window's input 0)

    std::vector<Block> take()
    {
        for (size_t i = 0; i < blocks.size(); ++i)
            for (size_t k = 0; k < acc[i].size(); ++k) blocks[i].data[k] = static_cast<float>(acc[i][k]);
        return std::move(blocks);
    }
};

Grads gradBlocks(const Op& op, const Signature& sig, const Graph& g, const std::vector<Range>& loops)
{
    Grads gr;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
        gr.blocks.push_back(Block::zeros(operandRanges(sig.inputs[i], sig, loops, g.tensor(op.inputs[i]).shape)));
        gr.acc.emplace_back(gr.blocks.back().data.size(), 0.0);
        gr.at.push_back(addressing(sig.inputs[i], sig, gr.blocks.back()));
    }
    return gr;
}

std::int64_t offsetOf(const Block& b, const std::vector<std::int64_t>& index)
{
    const auto st = b.strides();
    std::int64_t off = 0;
    for (size_t d = 0; d < index.size(); ++d) off += (index[d] - b.start[d]) * st[d];
    return off;
}

// Routed experts (core/models/blocks.h). Dispatch "bsh,bse(,e)->bech" and Combine
// "bech,bse(,e)->bsh" route each sequence alike: every token goes to the top_k experts of its
// router scores (plus the selection bias [e] when given; ties to the lower expert), taking the
// next free slot of each in token order; a token finding an expert's capacity c full is dropped
// there. Tokens, experts and slots are whole on every device (RoleRule::Routed), so each device
// routes its sequences exactly as the reference does.
struct RouteSlot {
    std::int64_t token, expert, slot;
};

std::vector<RouteSlot> routeSequence(const Op& op, const Block& probs, const Block* bias, std::int64_t b, std::int64_t tokens,
                                     std::int64_t experts, std::int64_t capacity)
{
    std::int64_t topK = 1;
    if (auto it = op.attrs.find("top_k"); it != op.attrs.end() && std::holds_alternative<std::int64_t>(it->second))
        topK = std::clamp<std::int64_t>(std::get<std::int64_t>(it->second), 1, experts);
    std::vector<std::int64_t> used(static_cast<size_t>(experts), 0), order(static_cast<size_t>(experts));
    std::vector<RouteSlot> out;
    for (std::int64_t s = 0; s < tokens; ++s) {
        std::vector<double> score(static_cast<size_t>(experts));
        for (std::int64_t e = 0; e < experts; ++e)
            score[static_cast<size_t>(e)] = probs.at({b, s, e}) + (bias ? bias->at({e}) : 0.0f);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](std::int64_t x, std::int64_t y) { return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)]; });
        for (std::int64_t k = 0; k < topK; ++k) {
            const std::int64_t e = order[static_cast<size_t>(k)];
            if (used[static_cast<size_t>(e)] < capacity) out.push_back({s, e, used[static_cast<size_t>(e)]++});
        }
    }
    return out;
}

// The batch and feature loops of a routing op: dims 0 and last of its output.
std::pair<int, int> routedLoops(const Signature& sig)
{
    const auto& out = sig.outputs.at(0).dims;
    return {out.front().at(0), out.back().at(0)};
}

// Calls f(b, slot, h) for every routed copy of this box's sequences and features.
template <typename F>
void forEachRoute(const Op& op, const Signature& sig, const Graph& g, const std::vector<Range>& loops,
                  const std::vector<const Block*>& inputs, F&& f)
{
    const auto [bLoop, hLoop] = routedLoops(sig);
    const auto& routed = g.tensor(op.kind == OpKind::Dispatch ? op.outputs[0] : op.inputs[0]).shape; // [b, e, c, h]
    const std::int64_t tokens = g.tensor(op.inputs[1]).shape[1], experts = routed[1], capacity = routed[2];
    const Block* bias = inputs.size() > 2 ? inputs[2] : nullptr;
    const Range bs = loops[static_cast<size_t>(bLoop)], hs = loops[static_cast<size_t>(hLoop)];
    for (std::int64_t b = bs.lo; b < bs.hi; ++b)
        for (const RouteSlot& r : routeSequence(op, input(inputs, 1, op), bias, b, tokens, experts, capacity))
            for (std::int64_t h = hs.lo; h < hs.hi; ++h) f(b, r, h);
}

// Dispatch or Combine forward over the box's sequences and features.
void evalRoute(const Op& op, const Signature& sig, const Graph& g, const std::vector<Range>& loops,
               const std::vector<const Block*>& inputs, Block& out)
{
    const Block &x = input(inputs, 0, op), &probs = input(inputs, 1, op);
    const bool dispatch = op.kind == OpKind::Dispatch;
    forEachRoute(op, sig, g, loops, inputs, [&](std::int64_t b, const RouteSlot& r, std::int64_t h) {
        if (dispatch)
            out.data[static_cast<size_t>(offsetOf(out, {b, r.expert, r.slot, h}))] = x.at({b, r.token, h});
        else
            out.data[static_cast<size_t>(offsetOf(out, {b, r.token, h}))] += probs.at({b, r.token, r.expert}) * x.at({b, r.expert, r.slot, h});
    });
}

// Their backward: Dispatch hands each slot's gradient back to its token (the routing itself is
// piecewise constant: no gradient to the scores or the bias); Combine to the expert outputs,
// weighted, and to the router probabilities (summed over this box's features).
void backRoute(const Op& op, const Signature& sig, const Graph& g, const std::vector<Range>& loops,
               const std::vector<const Block*>& inputs, const Block& dOut, Grads& gr)
{
    const Block &x = input(inputs, 0, op), &probs = input(inputs, 1, op);
    const bool dispatch = op.kind == OpKind::Dispatch;
    forEachRoute(op, sig, g, loops, inputs, [&](std::int64_t b, const RouteSlot& r, std::int64_t h) {
        if (dispatch) {
            gr.acc[0][static_cast<size_t>(offsetOf(gr.blocks[0], {b, r.token, h}))] += dOut.at({b, r.expert, r.slot, h});
            return;
        }
        const double dy = dOut.at({b, r.token, h});
        gr.acc[0][static_cast<size_t>(offsetOf(gr.blocks[0], {b, r.expert, r.slot, h}))] += dy * probs.at({b, r.token, r.expert});
        gr.acc[1][static_cast<size_t>(offsetOf(gr.blocks[1], {b, r.token, r.expert}))] += dy * x.at({b, r.expert, r.slot, h});
    });
}

// Whether idx is the first point of this box along every loop the output lacks: a term added
// once per output element (a bias) is differentiated there, once per device.
bool firstOfBox(const std::vector<std::int64_t>& idx, const std::vector<Range>& loops, const std::vector<bool>& isOut)
{
    for (size_t l = 0; l < idx.size(); ++l)
        if (!isOut[l] && idx[l] != loops[l].lo) return false;
    return true;
}

void backMap(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
             const std::vector<const Block*>& inputs, const Block& dOut, Grads& gr)
{
    std::vector<Addressing> in;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
    const Addressing o = addressing(sig.outputs[0], sig, dOut);
    std::vector<float> values(in.size()), d(in.size());
    forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
        for (size_t i = 0; i < in.size(); ++i) values[i] = inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
        std::fill(d.begin(), d.end(), 0.0f);
        sem.pointwiseGrad(values, dOut.data[static_cast<size_t>(o.at(idx))], d);
        for (size_t i = 0; i < in.size(); ++i) gr.acc[i][static_cast<size_t>(gr.at[i].at(idx))] += d[i];
    });
}

void backContract(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                  const std::vector<const Block*>& inputs, const Block& dOut, Grads& gr, bool gather)
{
    const auto [isOut, in, o, scale, mult, gatherLoop] = contractionFrame(op, sig, sem, inputs, dOut, gather);
    forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
        const double dy = dOut.data[static_cast<size_t>(o.at(idx))];
        if (gather) {
            const float id = inputs[0]->data[static_cast<size_t>(in[0].at(idx))];
            if (std::lround(id) == idx[static_cast<size_t>(gatherLoop)]) gr.acc[1][static_cast<size_t>(gr.at[1].at(idx))] += dy;
            return;
        }
        for (size_t i = 0; i < mult; ++i) {
            double p = scale * dy;
            for (size_t j = 0; j < mult; ++j)
                if (j != i) p *= inputs[j]->data[static_cast<size_t>(in[j].at(idx))];
            gr.acc[i][static_cast<size_t>(gr.at[i].at(idx))] += p;
        }
        if (mult < in.size() && firstOfBox(idx, loops, isOut))
            for (size_t i = mult; i < in.size(); ++i) gr.acc[i][static_cast<size_t>(gr.at[i].at(idx))] += dy;
    });
}

void backNormalize(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                   const std::vector<const Block*>& inputs, const Block& dOut, Grads& gr)
{
    NormalizeRows nr(op, sig, loops, inputs, dOut);
    std::vector<std::vector<float>> rows(nr.in.size()), dRows(nr.in.size());
    std::vector<float> dRow(nr.outRow ? static_cast<size_t>(nr.full.size()) : 1);
    forEachPoint(nr.rowLoops, [&](std::vector<std::int64_t> idx) {
        nr.gather(sig, inputs, idx, rows);
        for (size_t i = 0; i < rows.size(); ++i) dRows[i].assign(rows[i].size(), 0.0f);
        for (size_t j = 0; j < dRow.size(); ++j) {
            idx[nr.r] = static_cast<std::int64_t>(j);
            dRow[j] = dOut.data[static_cast<size_t>(nr.out.at(idx))];
        }
        idx[nr.r] = 0;
        sem.rowGrad(rows, dRow, dRows, nr.ctx);
        for (size_t i = 0; i < nr.in.size(); ++i)
            for (size_t j = 0; j < dRows[i].size(); ++j) {
                idx[nr.r] = static_cast<std::int64_t>(j);
                gr.acc[i][static_cast<size_t>(gr.at[i].at(idx))] += dRows[i][j];
            }
    });
}

// Concat's parts take their slices of the whole's gradient (a broadcast size-1 dim sums);
// Split's whole gathers its parts' gradients.
void backJoinOrPart(const Op& op, const Graph& g, const std::vector<const Block*>& outputGrads, Grads& gr, bool join)
{
    const auto& wholeShape = g.tensor(join ? op.outputs[0] : op.inputs[0]).shape;
    const auto axis = static_cast<size_t>(axisOf(op, wholeShape.size()));
    const auto& parts = join ? op.inputs : op.outputs;
    std::int64_t offset = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
        const auto& partShape = g.tensor(parts[k]).shape;
        const std::int64_t len = partShape[axis];
        const Block& dWhole = join ? *outputGrads.at(0) : gr.blocks[0];
        const Block& dPart = join ? gr.blocks[k] : *outputGrads.at(k);
        std::vector<Range> box;
        for (size_t d = 0; d < dPart.size.size(); ++d) box.push_back({dPart.start[d], dPart.start[d] + dPart.size[d]});
        if (join) {
            // Walk the whole's box within this part's stretch of the axis.
            box.clear();
            for (size_t d = 0; d < dWhole.size.size(); ++d) box.push_back({dWhole.start[d], dWhole.start[d] + dWhole.size[d]});
            box[axis] = {std::max(box[axis].lo, offset), std::min(box[axis].hi, offset + len)};
            if (box[axis].size() > 0)
                forEachPoint(box, [&](const std::vector<std::int64_t>& idx) {
                    std::vector<std::int64_t> pi = idx;
                    pi[axis] -= offset;
                    for (size_t d = 0; d < pi.size(); ++d)
                        if (partShape[d] == 1 && d != axis) pi[d] = 0;
                    gr.acc[k][static_cast<size_t>(offsetOf(dPart, pi))] +=
                        dWhole.data[static_cast<size_t>(offsetOf(dWhole, idx))];
                });
        } else {
            forEachPoint(box, [&](const std::vector<std::int64_t>& idx) {
                std::vector<std::int64_t> wi = idx;
                wi[axis] += offset;
                gr.acc[0][static_cast<size_t>(offsetOf(dWhole, wi))] += dPart.data[static_cast<size_t>(offsetOf(dPart, idx))];
            });
        }
        offset += len;
    }
}

void backWindow(const Op& op, const Signature& sig, const OpSemantics& sem, const Graph& g, const std::vector<Range>& loops,
                const std::vector<const Block*>& inputs, const Block& dOut, Grads& gr)
{
    const std::int64_t stride = op.intAttr("stride").value_or(1), pad = op.intAttr("padding").value_or(0);
    const auto& x = sig.inputs[0];
    const auto& xShape = g.tensor(op.inputs[0]).shape;
    std::vector<int> spatial;
    for (const auto& grp : x.dims)
        spatial.push_back(grp.size() == 1 && sig.loops[static_cast<size_t>(grp[0])].role == DimRole::Spatial ? grp[0] : -1);
    const Block& xb = input(inputs, 0, op);
    const Block& dx = gr.blocks[0];
    const Addressing o = addressing(sig.outputs[0], sig, dOut);
    const auto xst = xb.strides(), dxst = dx.strides();
    const bool convolution = sem.multiplicands >= 2 && op.inputs.size() >= 2;
    std::vector<int> kernelLoops;
    if (convolution) {
        for (const auto& grp : sig.inputs[1].dims)
            for (int l : grp)
                if (!indexes(x, l) && !indexes(sig.outputs[0], l)) kernelLoops.push_back(l);
    }
    const std::int64_t kernel = op.intAttr("kernel").value_or(1);
    // Offsets of the window element in the forward's input block and in the gradient block.
    auto offsets = [&](const std::vector<std::int64_t>& idx, const std::vector<std::int64_t>& window, std::int64_t& xo,
                       std::int64_t& dxo) {
        xo = dxo = 0;
        size_t w = 0;
        for (size_t d = 0; d < x.dims.size(); ++d) {
            std::int64_t gi = 0;
            if (spatial[d] >= 0) {
                gi = idx[static_cast<size_t>(spatial[d])] * stride + window[w++] - pad;
                if (gi < 0 || gi >= xShape[d]) return false;
            } else {
                for (size_t k = 0; k < x.dims[d].size(); ++k)
                    gi += idx[static_cast<size_t>(x.dims[d][k])] * innerExtent(x.dims[d], k, sig);
            }
            xo += (gi - xb.start[d]) * xst[d];
            dxo += (gi - dx.start[d]) * dxst[d];
        }
        return true;
    };
    if (convolution) {
        const auto isOut = outputLoops(sig);
        const Block& wb = input(inputs, 1, op);
        const Addressing wa = addressing(sig.inputs[1], sig, wb);
        const Addressing xa = convolutionAddressing(x, sig, xb, spatial, kernelLoops, stride, pad);
        const Addressing dxa = convolutionAddressing(x, sig, dx, spatial, kernelLoops, stride, pad);
        const auto bounds = convolutionBounds(spatial, kernelLoops, xShape);
        const float* xp = xb.data.data();
        const float* wp = wb.data.data();
        const float* dyp = dOut.data.data();
        double* dxp = gr.acc[0].data();
        double* dwp = gr.acc[1].data();
        const Addressing& dwa = gr.at[1];
        forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
            const double dy = dyp[o.at(idx)];
            if (convolutionInside(bounds, idx, stride, pad)) {
                dxp[dxa.at(idx)] += dy * wp[wa.at(idx)];
                dwp[dwa.at(idx)] += dy * xp[xa.at(idx)];
            }
            if (op.inputs.size() > 2 && firstOfBox(idx, loops, isOut))
                for (size_t i = 2; i < op.inputs.size(); ++i) gr.acc[i][static_cast<size_t>(gr.at[i].at(idx))] += dy;
        });
    } else {
        const size_t dims = static_cast<size_t>(std::count_if(spatial.begin(), spatial.end(), [](int l) { return l >= 0; }));
        const double area = std::pow(static_cast<double>(kernel), static_cast<double>(dims));
        forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
            const double dy = dOut.data[static_cast<size_t>(o.at(idx))];
            double best = -INFINITY;
            std::int64_t bestAt = -1;
            std::vector<Range> windowBox(dims, Range{0, kernel});
            forEachPoint(windowBox, [&](const std::vector<std::int64_t>& window) {
                std::int64_t xo = 0, dxo = 0;
                if (!offsets(idx, window, xo, dxo)) return;
                if (!sem.windowMax) {
                    gr.acc[0][static_cast<size_t>(dxo)] += dy / area;
                    return;
                }
                const double v = xb.data[static_cast<size_t>(xo)];
                if (v > best) {
                    best = v;
                    bestAt = dxo;
                }
            });
            if (sem.windowMax && bestAt >= 0) gr.acc[0][static_cast<size_t>(bestAt)] += dy;
        });
    }
}

} // namespace

std::vector<Range> operandRanges(const OperandIndexing& operand, const Signature& sig, const std::vector<Range>& loops,
                                 const std::vector<std::int64_t>& shape)
{
    std::vector<Range> out;
    for (size_t d = 0; d < operand.dims.size(); ++d) {
        const auto& group = operand.dims[d];
        if (group.empty() || spatialGroup(group, sig)) {
            out.push_back({0, shape.at(d)});
            continue;
        }
        std::int64_t lo = 0, last = 0, count = 1;
        for (size_t k = 0; k < group.size(); ++k) {
            const auto& r = loops[static_cast<size_t>(group[k])];
            const std::int64_t inner = innerExtent(group, k, sig);
            lo += r.lo * inner;
            last += (r.hi - 1) * inner;
            count *= r.size();
        }
        if (last + 1 - lo != count)
            throw InputError("einsum '" + sig.equation + "': a split of an inner part of a merged dim gives a strided slice");
        out.push_back({lo, last + 1});
    }
    return out;
}

std::vector<Block> evaluateOp(const Op& op, const Signature& sig, const OpSemantics& sem, const Graph& graph,
                              const std::vector<Range>& loops, const std::vector<const Block*>& inputs)
{
    std::vector<Block> outs = outputBlocks(op, sig, graph, loops);
    switch (sem.rule) {
    case EvalRule::Map:
        evalMap(op, sig, sem, loops, inputs, outs[0]);
        break;
    case EvalRule::Contract:
        evalContract(op, sig, sem, loops, inputs, outs[0], false);
        break;
    case EvalRule::Gather:
        evalContract(op, sig, sem, loops, inputs, outs[0], true);
        break;
    case EvalRule::Normalize:
        evalNormalize(op, sig, sem, loops, inputs, outs[0]);
        break;
    case EvalRule::Join:
        evalJoinOrPart(op, graph, inputs, outs, true);
        break;
    case EvalRule::Part:
        evalJoinOrPart(op, graph, inputs, outs, false);
        break;
    case EvalRule::Window:
        evalWindow(op, sig, sem, graph, loops, inputs, outs[0]);
        break;
    case EvalRule::Route:
        evalRoute(op, sig, graph, loops, inputs, outs[0]);
        break;
    }
    return outs;
}

std::vector<Block> backwardOp(const Op& op, const Signature& sig, const OpSemantics& sem, const Graph& graph,
                              const std::vector<Range>& loops, const std::vector<const Block*>& inputs,
                              const std::vector<const Block*>& outputGrads)
{
    if (!sem.differentiable())
        throw InputError(context(op) + ": verify has no derivative for " + std::string(opKindName(op.kind)) +
                         " ops, so it cannot run the backward pass");
    if (outputGrads.size() != op.outputs.size() ||
        std::any_of(outputGrads.begin(), outputGrads.end(), [](const Block* b) { return !b; }))
        throw std::logic_error(context(op) + ": output gradient missing");
    Grads gr = gradBlocks(op, sig, graph, loops);
    switch (sem.rule) {
    case EvalRule::Map:
        backMap(op, sig, sem, loops, inputs, *outputGrads[0], gr);
        break;
    case EvalRule::Contract:
        backContract(op, sig, sem, loops, inputs, *outputGrads[0], gr, false);
        break;
    case EvalRule::Gather:
        backContract(op, sig, sem, loops, inputs, *outputGrads[0], gr, true);
        break;
    case EvalRule::Normalize:
        backNormalize(op, sig, sem, loops, inputs, *outputGrads[0], gr);
        break;
    case EvalRule::Join:
        backJoinOrPart(op, graph, outputGrads, gr, true);
        break;
    case EvalRule::Part:
        backJoinOrPart(op, graph, outputGrads, gr, false);
        break;
    case EvalRule::Window:
        backWindow(op, sig, sem, graph, loops, inputs, *outputGrads[0], gr);
        break;
    case EvalRule::Route:
        backRoute(op, sig, graph, loops, inputs, *outputGrads[0], gr);
        break;
    }
    return gr.take();
}

std::vector<bool> gradientSummedLoops(const Signature& sig, const OpSemantics& sem, const Op& op, size_t input)
{
    const auto isOut = outputLoops(sig);
    const bool added = (sem.rule == EvalRule::Contract && input >= static_cast<size_t>(std::max(sem.multiplicands, 0))) ||
                       (sem.rule == EvalRule::Window && sem.multiplicands >= 2 && op.inputs.size() >= 2 && input >= 2);
    std::vector<bool> summed(sig.loops.size(), false);
    for (size_t l = 0; l < sig.loops.size(); ++l)
        summed[l] = !indexes(sig.inputs.at(input), static_cast<int>(l)) && (!added || isOut[l]);
    return summed;
}

} // namespace tp::verify
