#include "executor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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
    std::vector<std::int64_t> coef; // per loop

    std::int64_t at(const std::vector<std::int64_t>& idx) const
    {
        std::int64_t off = base;
        for (size_t l = 0; l < idx.size(); ++l) off += idx[l] * coef[l];
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
        for (size_t k = 0; k < group.size(); ++k)
            a.coef[static_cast<size_t>(group[k])] += innerExtent(group, k, sig) * st[d];
    }
    return a;
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
    while (true) {
        f(idx);
        size_t l = ranges.size();
        while (l > 0) {
            --l;
            if (++idx[l] < ranges[l].hi) break;
            idx[l] = ranges[l].lo;
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

// Sum over the non-output loops. Inputs beyond `multiplicands` (a bias) are added once per
// output element: by the device whose slice of every summed loop starts at 0, so that the
// partial sums of a split contraction still add up to the true value.
void evalContract(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                  const std::vector<const Block*>& inputs, Block& out, bool gather)
{
    const auto isOut = outputLoops(sig);
    std::vector<Addressing> in;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
    const Addressing o = addressing(sig.outputs[0], sig, out);
    const double scale = contractionScale(op, sig, isOut);
    const size_t mult = std::min<size_t>(static_cast<size_t>(std::max(sem.multiplicands, 0)), in.size());
    int gatherLoop = -1;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (sig.loops[l].role == DimRole::Gather) gatherLoop = static_cast<int>(l);
    if (gather && (gatherLoop < 0 || in.size() < 2)) throw InputError(context(op) + ": a lookup needs a gather loop and a table");
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

void evalNormalize(const Op& op, const Signature& sig, const OpSemantics& sem, const std::vector<Range>& loops,
                   const std::vector<const Block*>& inputs, Block& out)
{
    int reduced = -1;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (sig.loops[l].role == DimRole::ReducedNonlinear) reduced = static_cast<int>(l);
    if (reduced < 0) throw InputError(context(op) + ": no reduced-nonlinear loop to normalise over");
    const auto r = static_cast<size_t>(reduced);
    const Range full = loops[r];
    if (full.lo != 0 || full.hi != sig.loops[r].size)
        throw InputError(context(op) + ": the normalised loop '" + std::string(1, sig.loops[r].label) + "' is split");
    // The query loop of a causal mask: the loop of input 0's next-to-last dim.
    int query = -1;
    const auto& x = sig.inputs[0].dims;
    if (x.size() >= 2 && !x[x.size() - 2].empty()) query = x[x.size() - 2].back();
    RowContext ctx;
    ctx.causal = op.intAttr("causal").value_or(0) != 0;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (l != r) ctx.rowsTotal *= static_cast<double>(sig.loops[l].size);

    std::vector<Addressing> in;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(addressing(sig.inputs[i], sig, input(inputs, i, op)));
    const Addressing o = addressing(sig.outputs[0], sig, out);
    const bool outRow = indexes(sig.outputs[0], reduced);
    std::vector<std::vector<float>> rows(in.size());
    std::vector<float> result(outRow ? static_cast<size_t>(full.size()) : 1);
    std::vector<Range> rowLoops = loops;
    rowLoops[r] = {0, 1};
    std::vector<double> acc(out.data.size(), 0.0);
    forEachPoint(rowLoops, [&](std::vector<std::int64_t> idx) {
        for (size_t i = 0; i < in.size(); ++i) {
            const bool along = indexes(sig.inputs[i], reduced);
            rows[i].resize(along ? static_cast<size_t>(full.size()) : 1);
            for (size_t j = 0; j < rows[i].size(); ++j) {
                idx[r] = static_cast<std::int64_t>(j);
                rows[i][j] = inputs[i]->data[static_cast<size_t>(in[i].at(idx))];
            }
        }
        ctx.queryIndex = query >= 0 && query != reduced ? idx[static_cast<size_t>(query)] : -1;
        sem.row(rows, result, ctx);
        for (size_t j = 0; j < result.size(); ++j) {
            idx[r] = static_cast<std::int64_t>(j);
            acc[static_cast<size_t>(o.at(idx))] += result[j];
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
void evalJoinOrPart(const Op& op, const Graph& g, const std::vector<const Block*>& inputs, std::vector<Block>& outs,
                    bool join)
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
        forEachPoint(loops, [&](const std::vector<std::int64_t>& idx) {
            std::vector<std::int64_t> window;
            for (int l : kernelLoops) window.push_back(idx[static_cast<size_t>(l)]);
            bool inside = true;
            const auto off = xOffset(idx, window, inside);
            const auto oo = static_cast<size_t>(o.at(idx));
            if (inside) acc[oo] += static_cast<double>(xb.data[static_cast<size_t>(off)]) * inputs[1]->data[static_cast<size_t>(wa.at(idx))];
            bool firstOfSum = true;
            for (size_t l = 0; l < idx.size(); ++l)
                if (!isOut[l] && idx[l] != 0) firstOfSum = false;
            if (firstOfSum)
                for (size_t i = 0; i < extra.size(); ++i) acc[oo] += inputs[i + 2]->data[static_cast<size_t>(extra[i].at(idx))];
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
            acc[static_cast<size_t>(o.at(idx))] = sem.windowMax ? best : sum / std::pow(static_cast<double>(kernel), static_cast<double>(dims));
        });
    }
    for (size_t k = 0; k < acc.size(); ++k) out.data[k] = static_cast<float>(acc[k]);
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
    case EvalRule::Map: evalMap(op, sig, sem, loops, inputs, outs[0]); break;
    case EvalRule::Contract: evalContract(op, sig, sem, loops, inputs, outs[0], false); break;
    case EvalRule::Gather: evalContract(op, sig, sem, loops, inputs, outs[0], true); break;
    case EvalRule::Normalize: evalNormalize(op, sig, sem, loops, inputs, outs[0]); break;
    case EvalRule::Join: evalJoinOrPart(op, graph, inputs, outs, true); break;
    case EvalRule::Part: evalJoinOrPart(op, graph, inputs, outs, false); break;
    case EvalRule::Window: evalWindow(op, sig, sem, graph, loops, inputs, outs[0]); break;
    }
    return outs;
}

} // namespace tp::verify
