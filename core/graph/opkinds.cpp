#include "opkinds.h"

#include <type_traits>
#include <variant>

#include <algorithm>
#include <limits>
#include <string>

#include "../util/error.h"
#include "../util/key_builder.h"

namespace tp {

namespace {

// clang-format off
const std::vector<OpKindInfo> kOpKinds = {
//   kind                  name            in    out   roles                       flops bwd  saved out  mask elementwise
    {OpKind::Linear,       "Linear",       2, 3, 1, 1, RoleRule::None,             2.0, 2.0, 0b01, false, 0, false},
    {OpKind::BatchMatMul,  "BatchMatMul",  2, 2, 1, 1, RoleRule::None,             2.0, 2.0, 0b11, false, 0, false},
    {OpKind::Conv2d,       "Conv2d",       2, 3, 1, 1, RoleRule::SpatialHW,        2.0, 2.0, 0b01, false, 0, false},
    {OpKind::Embedding,    "Embedding",    2, 2, 1, 1, RoleRule::GatherContracted, 0.0, 1.0, 0b00, false, 0, false},
    {OpKind::LayerNorm,    "LayerNorm",    1, 3, 1, 1, RoleRule::NormalizedLast,   8.0, 1.0, 0b01, false, 0, false},
    {OpKind::RMSNorm,      "RMSNorm",      1, 2, 1, 1, RoleRule::NormalizedLast,   5.0, 1.0, 0b01, false, 0, false},
    {OpKind::BatchNorm,    "BatchNorm",    1, 3, 1, 1, RoleRule::None,             4.0, 1.0, 0b01, false, 0, false},
    {OpKind::Softmax,      "Softmax",      1, 1, 1, 1, RoleRule::NormalizedLast,   5.0, 1.0, 0b00, true,  0, true},
    {OpKind::GeLU,         "GeLU",         1, 1, 1, 1, RoleRule::None,             8.0, 1.0, 0b01, false, 0, true},
    {OpKind::SiLU,         "SiLU",         1, 1, 1, 1, RoleRule::None,             5.0, 1.0, 0b01, false, 0, true},
    {OpKind::ReLU,         "ReLU",         1, 1, 1, 1, RoleRule::None,             1.0, 1.0, 0b00, true,  0, true},
    {OpKind::Tanh,         "Tanh",         1, 1, 1, 1, RoleRule::None,             4.0, 1.0, 0b00, true,  0, true},
    {OpKind::Sigmoid,      "Sigmoid",      1, 1, 1, 1, RoleRule::None,             4.0, 1.0, 0b00, true,  0, true},
    {OpKind::Add,          "Add",          2, 2, 1, 1, RoleRule::None,             1.0, 1.0, 0b00, false, 0, true},
    {OpKind::Mul,          "Mul",          2, 2, 1, 1, RoleRule::None,             1.0, 1.0, 0b11, false, 0, true},
    {OpKind::Dropout,      "Dropout",      1, 1, 1, 1, RoleRule::None,             1.0, 1.0, 0b00, false, 1, true},
    {OpKind::Reshape,      "Reshape",      1, 1, 1, 1, RoleRule::None,             0.0, 1.0, 0b00, false, 0, false},
    {OpKind::Transpose,    "Transpose",    1, 1, 1, 1, RoleRule::None,             0.0, 1.0, 0b00, false, 0, false},
    {OpKind::Concat,       "Concat",       1,-1, 1, 1, RoleRule::AxisFixed,        0.0, 1.0, 0b00, false, 0, false},
    {OpKind::Split,        "Split",        1, 1, 1,-1, RoleRule::AxisFixed,        0.0, 1.0, 0b00, false, 0, false},
    {OpKind::Reduce,       "Reduce",       1, 1, 1, 1, RoleRule::None,             1.0, 1.0, 0b00, false, 0, false},
    {OpKind::MaxPool,      "MaxPool",      1, 1, 1, 1, RoleRule::SpatialHW,        1.0, 1.0, 0b01, false, 0, false},
    {OpKind::AvgPool,      "AvgPool",      1, 1, 1, 1, RoleRule::SpatialHW,        1.0, 1.0, 0b00, false, 0, false},
    {OpKind::CrossEntropy, "CrossEntropy", 2, 2, 1, 1, RoleRule::NormalizedLast,   5.0, 1.0, 0b01, false, 0, false},
    // Routed experts (core/models/blocks.h): Dispatch "bsh,bse->bech" copies each token into its
    // top-k experts' slots (a third input [e] may bias the choice), Combine "bech,bse->bsh" sums the copies weighted by their router
    // probability. Both are gathers and scatters that run at memory speed (no FLOPs per point of
    // the one-hot einsum); Combine's backward needs the expert outputs and the probabilities.
    {OpKind::Dispatch,     "Dispatch",     2, 3, 1,-1, RoleRule::Routed,           0.0, 1.0, 0b00, false, 0, false},
    {OpKind::Combine,      "Combine",      2,-1, 1, 1, RoleRule::Routed,           0.0, 1.0, 0b11, false, 0, false},
    // Rotary position embedding: input 0 [..., s, d] rotated pair by pair by the angles of
    // input 1 [s, d] (a graph input, no weight): x*cos + pair(x)*sin, 3 FLOPs per element. The
    // pairs lie along the head dim, which therefore stays whole; backward rotates back by the
    // angles, which it needs and which are resident anyway (no activation is kept).
    {OpKind::Rotary,       "Rotary",       2, 2, 1, 1, RoleRule::NormalizedLast,   3.0, 1.0, 0b00, false, 0, false},
    // Elementwise arithmetic without a row of its own (Sub, Div, Pow, Sqrt, Erf, Where, Expand,
    // arithmetic with a constant, ...), as imported from ONNX; attr "op" names the operation.
    {OpKind::Pointwise,    "Pointwise",    1, 3, 1, 1, RoleRule::None,             1.0, 1.0, 0b01, false, 0, true},
    {OpKind::Opaque,       "Opaque",       0,-1, 1,-1, RoleRule::None,             0.0, 1.0, 0b00, false, 0, false},
};
// clang-format on

constexpr std::string_view kLetters = "bstuvwxyzqrmngpijcdeaolfhkABCDEFGHIJKLMNOPQRSTUVWXYZ";

std::string opContext(const Op& op) { return "op '" + op.name + "' (" + std::string(opKindName(op.kind)) + ")"; }

const std::vector<std::int64_t>& shapeOf(const Graph& g, TensorId id) { return g.tensor(id).shape; }

// Letters for `count` leading (batch-like) dims, avoiding the ones the caller reserves.
std::string batchLetters(size_t count, std::string_view reserved)
{
    std::string out;
    for (char c : kLetters) {
        if (out.size() == count) break;
        if (reserved.find(c) == std::string_view::npos) out.push_back(c);
    }
    return out;
}

std::string elementwiseEquation(const Op& op, const Graph& g)
{
    const auto& outShape = shapeOf(g, op.outputs.at(0));
    const std::string letters = batchLetters(outShape.size(), "");
    std::string eq;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
        const auto& shape = shapeOf(g, op.inputs[i]);
        if (shape.size() > outShape.size())
            throw InputError(opContext(op) + ": input " + std::to_string(i) + " has a higher rank than the output");
        const size_t offset = outShape.size() - shape.size();
        if (i) eq += ',';
        for (size_t d = 0; d < shape.size(); ++d) eq += (shape[d] == 1 && outShape[offset + d] != 1) ? '1' : letters[offset + d];
    }
    eq += "->" + letters;
    return eq;
}

// Groups input and output dims whose products agree, e.g. [b,s,h] -> [b,s,n,d] gives bs(nd)->bsnd.
std::string reshapeEquation(const Op& op, const Graph& g)
{
    const auto& in = shapeOf(g, op.inputs.at(0));
    const auto& out = shapeOf(g, op.outputs.at(0));
    std::string lhs, rhs;
    size_t i = 0, o = 0, next = 0;
    auto fresh = [&] {
        if (next >= kLetters.size()) throw InputError(opContext(op) + ": too many dims for an equation");
        return kLetters[next++];
    };
    while (i < in.size() || o < out.size()) {
        if (i < in.size() && in[i] == 1) {
            lhs += '1';
            ++i;
            continue;
        }
        if (o < out.size() && out[o] == 1) {
            rhs += '1';
            ++o;
            continue;
        }
        if (i >= in.size() || o >= out.size()) throw InputError(opContext(op) + ": reshape changes the number of elements");
        std::int64_t pin = in[i], pout = out[o];
        size_t i2 = i + 1, o2 = o + 1;
        // Operands may not be validated yet (the ONNX importer asks before validateGraph), so a
        // product that would overflow int64 is refused rather than computed.
        auto grow = [&](std::int64_t& product, std::int64_t dim) {
            if (dim > 0 && product > std::numeric_limits<std::int64_t>::max() / dim)
                throw InputError(opContext(op) + ": reshape operand has more elements than fit in 64 bits");
            product *= dim;
        };
        while (pin != pout) {
            if (pin < pout) {
                if (i2 >= in.size()) throw InputError(opContext(op) + ": reshape changes the number of elements");
                grow(pin, in[i2++]);
            } else {
                if (o2 >= out.size()) throw InputError(opContext(op) + ": reshape changes the number of elements");
                grow(pout, out[o2++]);
            }
        }
        if (i2 - i == 1) {
            std::string group;
            for (size_t k = o; k < o2; ++k) group += fresh();
            lhs += group.size() == 1 ? group : "(" + group + ")";
            rhs += group;
        } else if (o2 - o == 1) {
            std::string group;
            for (size_t k = i; k < i2; ++k) group += fresh();
            lhs += group;
            rhs += "(" + group + ")";
        } else {
            throw InputError(opContext(op) + ": this reshape regroups dims in a way no equation expresses; give "
                                             "an explicit einsum");
        }
        i = i2;
        o = o2;
    }
    return lhs + "->" + rhs;
}

std::string opaqueEquation(const Op& op, const Graph& g)
{
    std::string eq;
    size_t next = 0;
    auto side = [&](const std::vector<TensorId>& ids) {
        std::string s;
        for (size_t k = 0; k < ids.size(); ++k) {
            if (k) s += ',';
            for (auto d : shapeOf(g, ids[k])) {
                if (d == 1) {
                    s += '1';
                    continue;
                }
                if (next >= kLetters.size()) throw InputError(opContext(op) + ": too many dims for an equation");
                s += kLetters[next++];
            }
        }
        return s;
    };
    eq = side(op.inputs);
    eq += "->";
    eq += side(op.outputs);
    return eq;
}

std::int64_t axisAttr(const Op& op, size_t rank)
{
    std::int64_t axis = op.intAttr("axis").value_or(-1);
    if (axis < 0) axis += static_cast<std::int64_t>(rank);
    if (axis < 0 || axis >= static_cast<std::int64_t>(rank))
        throw InputError(opContext(op) + ": attr 'axis' is out of range for rank " + std::to_string(rank));
    return axis;
}

std::string joinEquation(const Op& op, const Graph& g, const std::vector<TensorId>& parts, TensorId whole, bool partsAreInputs)
{
    const size_t rank = shapeOf(g, whole).size();
    const auto axis = static_cast<size_t>(axisAttr(op, rank));
    const std::string base = batchLetters(rank, "");
    std::string axisLetters = batchLetters(parts.size() + 1 + rank, base);
    auto operand = [&](char axisLetter) {
        std::string s = base;
        s[axis] = axisLetter;
        return s;
    };
    std::string partSide;
    for (size_t k = 0; k < parts.size(); ++k) {
        if (shapeOf(g, parts[k]).size() != rank)
            throw InputError(opContext(op) + ": operands of a concat/split must have equal rank");
        partSide += (k ? "," : "") + operand(axisLetters[k]);
    }
    const std::string wholeSide = operand(axisLetters[parts.size()]);
    return partsAreInputs ? partSide + "->" + wholeSide : wholeSide + "->" + partSide;
}

} // namespace

const std::vector<OpKindInfo>& allOpKinds() { return kOpKinds; }

const OpKindInfo& opKindInfo(OpKind kind) { return kOpKinds.at(static_cast<size_t>(kind)); }

const UnfusedPasses* unfusedPasses(OpKind kind, bool fusedKernels, bool fusedCrossEntropy)
{
    // The loss as Megatron-LM (megatron/core/tensor_parallel/cross_entropy.py), torchtitan and
    // Transformers run it: the logits cast to fp32 (read 2, write 4), their max (read 4),
    // shifted (4 + 4), exponentiated (4 + 4), summed (4) and divided into the softmax (4 + 4):
    // 38 bytes per logit forward; backward scales the kept fp32 softmax (4 + 4) and casts the
    // gradient back (4 + 2): 14 bytes; the softmax (4 bytes) is what backward keeps.
    static const UnfusedPasses crossEntropy{38, 14, 4};
    // RMSNorm as eager PyTorch runs torch.nn.RMSNorm (aten rms_norm, a composite of kernels):
    // the input cast to fp32 (read 2, write 4), squared (4 + 4), its mean (4), the product
    // with the reciprocal root (4 + 4), the cast back (4 + 2) and the weight's product
    // (2 + 2): 36 bytes per element forward. Autograd keeps the fp32 input and the bf16
    // normalised tensor (4 + 2 = 6 bytes); its backward runs each step's gradient in turn: the
    // weight product (2 + 2, and 2 + 2 for the weight's gradient), the casts (2 + 4, 4 + 2),
    // the product (4 + 4 + 4) and its reduction (4 + 4), the square (4 + 4) and the sum of the
    // two input gradients (4 + 4 + 4): 60 bytes. Fused (Megatron, Transformer Engine,
    // torch.compile) it is one kernel each way.
    static const UnfusedPasses eagerRmsNorm{36, 60, 6};
    // Rotary embeddings as eager PyTorch runs Meta's and torchtitan's apply_rotary_emb: the
    // input cast to fp32 (read 2, write 4) and viewed as complex pairs, multiplied by the
    // complex angles (4 + 4), and cast back (4 + 2): 20 bytes per element forward; backward
    // runs the same three passes on the gradient (the conjugate angles): 20. Only the angles,
    // resident anyway, are kept. Fused (Megatron's and Transformer Engine's RoPE kernels,
    // torch.compile) it is one kernel each way.
    static const UnfusedPasses eagerRotary{20, 20, 0};
    if (kind == OpKind::CrossEntropy && !fusedCrossEntropy) return &crossEntropy;
    if (kind == OpKind::RMSNorm && !fusedKernels) return &eagerRmsNorm;
    if (kind == OpKind::Rotary && !fusedKernels) return &eagerRotary;
    return nullptr;
}

std::optional<OpKind> parseOpKind(std::string_view name)
{
    for (const auto& row : kOpKinds)
        if (row.name == name) return row.kind;
    return std::nullopt;
}

std::string_view opKindName(OpKind kind) { return opKindInfo(kind).name; }

std::string defaultEquation(const Op& op, const Graph& g)
{
    const auto& info = opKindInfo(op.kind);
    if (info.elementwise) return elementwiseEquation(op, g);
    auto rank = [&](size_t i) { return shapeOf(g, op.inputs.at(i)).size(); };
    switch (op.kind) {
    case OpKind::Linear: { // x[..., k] @ w[k, f] (+ b[f])
        const std::string batch = batchLetters(rank(0) - 1, "kf");
        std::string eq = batch + "k,kf";
        if (op.inputs.size() > 2) eq += ",f";
        return eq + "->" + batch + "f";
    }
    case OpKind::BatchMatMul: {
        if (rank(0) != rank(1) || rank(0) < 2)
            throw InputError(opContext(op) + ": batch matmul operands need equal rank >= 2 (or an explicit einsum)");
        const std::string batch = batchLetters(rank(0) - 2, "mkn");
        return batch + "mk," + batch + "kn->" + batch + "mn";
    }
    case OpKind::Conv2d:
        return op.inputs.size() > 2 ? "nchw,ockl,o->nohw" : "nchw,ockl->nohw";
    case OpKind::Embedding: {
        const std::string batch = batchLetters(rank(0), "vh");
        return batch + ",vh->" + batch + "h";
    }
    case OpKind::LayerNorm:
    case OpKind::RMSNorm: {
        const std::string batch = batchLetters(rank(0) - 1, "h");
        std::string eq = batch + "h";
        for (size_t i = 1; i < op.inputs.size(); ++i) eq += ",h";
        return eq + "->" + batch + "h";
    }
    case OpKind::BatchNorm: {
        std::string eq = "nchw";
        for (size_t i = 1; i < op.inputs.size(); ++i) eq += ",c";
        return eq + "->nchw";
    }
    case OpKind::Reshape:
        return reshapeEquation(op, g);
    case OpKind::Transpose: {
        const std::string in = batchLetters(rank(0), "");
        auto it = op.attrs.find("perm");
        const auto* perm = it == op.attrs.end() ? nullptr : std::get_if<std::vector<std::int64_t>>(&it->second);
        if (!perm || perm->size() != in.size())
            throw InputError(opContext(op) + ": attr 'perm' must list one entry per input dim");
        std::string out;
        for (auto p : *perm) {
            if (p < 0 || p >= static_cast<std::int64_t>(in.size()) || out.find(in[static_cast<size_t>(p)]) != std::string::npos)
                throw InputError(opContext(op) + ": attr 'perm' is not a permutation");
            out += in[static_cast<size_t>(p)];
        }
        return in + "->" + out;
    }
    case OpKind::Concat:
        return joinEquation(op, g, op.inputs, op.outputs.at(0), true);
    case OpKind::Split:
        return joinEquation(op, g, op.outputs, op.inputs.at(0), false);
    case OpKind::Reduce: {
        const std::string in = batchLetters(rank(0), "");
        auto it = op.attrs.find("axes");
        const auto* axes = it == op.attrs.end() ? nullptr : std::get_if<std::vector<std::int64_t>>(&it->second);
        if (!axes) throw InputError(opContext(op) + ": attr 'axes' is required");
        const bool keep = op.intAttr("keepdims").value_or(0) != 0;
        std::string out;
        for (size_t d = 0; d < in.size(); ++d) {
            bool reduced = std::any_of(axes->begin(), axes->end(), [&](std::int64_t a) {
                return (a < 0 ? a + static_cast<std::int64_t>(in.size()) : a) == static_cast<std::int64_t>(d);
            });
            if (!reduced)
                out += in[d];
            else if (keep)
                out += '1';
        }
        return in + "->" + out;
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool:
        return "nchw->nchw";
    case OpKind::CrossEntropy: {
        const std::string batch = batchLetters(rank(0) - 1, "v");
        return batch + "v," + batch + "->";
    }
    default:
        return opaqueEquation(op, g);
    }
}

namespace {

// Labels of the given dims of the first output operand in the equation text.
std::string outputLabelsAt(const std::string& equation, std::initializer_list<size_t> dims)
{
    auto arrow = equation.find("->");
    if (arrow == std::string::npos) return {};
    std::string out = equation.substr(arrow + 2);
    out = out.substr(0, out.find(','));
    std::vector<std::string> terms;
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == '(') {
            auto close = out.find(')', i);
            if (close == std::string::npos) return {};
            terms.push_back(out.substr(i + 1, close - i - 1));
            i = close;
        } else {
            terms.emplace_back(1, out[i]);
        }
    }
    std::string labels;
    for (size_t d : dims)
        if (d < terms.size() && terms[d] != "1") labels += terms[d];
    return labels;
}

} // namespace

namespace {
// A sliding-window attention op (attrs "window" and "window_dim", core/models/blocks.cpp) computes
// only the band of its key loop that each query sees: min(window, keys) of the keys, as a
// windowed FlashAttention kernel does. Causal masks are not discounted (Megatron-LM's and
// Narayanan et al.'s FLOP counts charge the whole square too), so a window wider than the
// sequence costs what a global layer does.
void applyWindow(const Op& op, Signature& sig)
{
    const auto window = op.intAttr("window");
    if (!window) return;
    if (*window <= 0) throw InputError("attr 'window' must be a positive number of keys, not " + std::to_string(*window));
    const auto it = op.attrs.find("window_dim");
    const auto* dim = it == op.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
    const int loop = dim && dim->size() == 1 ? sig.loopIndex((*dim)[0]) : -1;
    if (loop < 0) throw InputError("attr 'window_dim' must name one loop letter of the equation '" + sig.equation + "'");
    const double keys = static_cast<double>(sig.loops[static_cast<size_t>(loop)].size);
    sig.density = std::min(static_cast<double>(*window), keys) / keys;
}
} // namespace

Signature opSignature(const Op& op, const Graph& g)
{
    const auto& info = opKindInfo(op.kind);
    std::vector<std::vector<std::int64_t>> inShapes, outShapes;
    for (auto t : op.inputs) inShapes.push_back(shapeOf(g, t));
    for (auto t : op.outputs) outShapes.push_back(shapeOf(g, t));
    try {
        const std::string equation = op.einsum.empty() ? defaultEquation(op, g) : op.einsum;
        const std::string spatial = info.roles == RoleRule::SpatialHW ? outputLabelsAt(equation, {2, 3}) : "";
        Signature sig = parseSignature(equation, inShapes, outShapes, spatial);
        switch (info.roles) {
        case RoleRule::NormalizedLast:
            if (!sig.inputs.empty() && !sig.inputs[0].dims.empty())
                for (int l : sig.inputs[0].dims.back()) sig.loops[static_cast<size_t>(l)].role = DimRole::ReducedNonlinear;
            break;
        case RoleRule::GatherContracted:
            for (auto& l : sig.loops)
                if (l.role == DimRole::Contracted) l.role = DimRole::Gather;
            break;
        case RoleRule::AxisFixed: {
            const bool partsAreInputs = op.kind == OpKind::Concat;
            const auto& whole = partsAreInputs ? sig.outputs[0] : sig.inputs[0];
            const auto axis = static_cast<size_t>(axisAttr(op, whole.dims.size()));
            for (const auto* side : {&sig.inputs, &sig.outputs})
                for (const auto& operand : *side)
                    if (axis < operand.dims.size())
                        for (int l : operand.dims[axis]) sig.loops[static_cast<size_t>(l)].role = DimRole::Spatial;
            break;
        }
        case RoleRule::Routed: {
            std::vector<bool> splittable(sig.loops.size(), false);
            const auto& out = sig.outputs.at(0).dims;
            for (const auto* dim : {&out.front(), &out.back()})
                for (int l : *dim) splittable[static_cast<size_t>(l)] = true;
            for (size_t l = 0; l < sig.loops.size(); ++l)
                if (!splittable[l]) sig.loops[l].role = DimRole::Spatial;
            break;
        }
        case RoleRule::None:
        case RoleRule::SpatialHW:
            break;
        }
        if (op.kind == OpKind::Opaque)
            for (auto& l : sig.loops) l.role = DimRole::Spatial;
        applyWindow(op, sig);
        return sig;
    } catch (const InputError& e) {
        // defaultEquation's messages already start with the op context; don't repeat it.
        const std::string context = opContext(op);
        if (std::string_view(e.what()).starts_with(context)) throw;
        throw InputError(context + ": " + e.what());
    }
}

const Signature& SignatureCache::of(const Op& op, const Graph& graph)
{
    // Every op of every graph a plan builds is keyed: built in place (KeyBuilder), numbers in
    // their exact shortest form.
    KeyBuilder k;
    k << static_cast<int>(op.kind) << '|' << op.einsum << '|';
    for (const auto& [name, value] : op.attrs) {
        k << name << '=';
        std::visit(
            [&](const auto& v) {
                using V = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<V, std::string>) k << v;
                else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>)
                    for (auto x : v) k << x << ',';
                else k << v;
            },
            value);
        k << ';';
    }
    for (const auto* side : {&op.inputs, &op.outputs}) {
        k << '|';
        for (TensorId t : *side) {
            for (auto d : graph.tensor(t).shape) k << d << 'x';
            k << ',';
        }
    }
    std::string key = std::move(k.text);
    auto it = byKey_.find(key);
    if (it == byKey_.end()) it = byKey_.emplace(std::move(key), opSignature(op, graph)).first;
    return it->second;
}

double forwardFlops(const Signature& sig, const OpKindInfo& info) { return info.flopsPerPoint * sig.points(); }

} // namespace tp
