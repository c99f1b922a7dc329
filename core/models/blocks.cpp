#include "blocks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "../graph/opkinds.h"
#include "../util/error.h"

namespace tp {

TensorId latentAttention(GraphBuilder& g, TensorId x, const AttentionSpec& spec)
{
    auto scope = g.scope(spec.scope);
    const auto xs = g.shape(x);
    const std::int64_t b = xs[0], s = xs[1], h = xs[2], n = spec.heads;
    const auto& l = *spec.latent;
    const std::int64_t qk = l.nopeDim + l.ropeDim;
    TensorId q = l.qRank > 0 ? g.linear("q_b", g.rmsNorm("q_a_norm", g.linear("q_a", x, h, l.qRank, spec.bias)), l.qRank, n * qk,
                                        false)
                             : g.linear("q", x, h, n * qk, false);
    q = g.op(OpKind::Reshape, "q_heads", {q}, {b, n, s, qk}, "bs(nd)->bnsd");
    const Attrs lastAxis{{"axis", std::int64_t{3}}};
    auto qParts = g.multiOutputOp(OpKind::Split, "q_split", {q}, {{b, n, s, l.nopeDim}, {b, n, s, l.ropeDim}}, {"nope", "rope"},
                                  {}, lastAxis);
    auto kvParts = g.multiOutputOp(OpKind::Split, "kv_a_split", {g.linear("kv_a", x, h, l.kvRank + l.ropeDim, spec.bias)},
                                   {{b, s, l.kvRank}, {b, s, l.ropeDim}}, {"compressed", "rope"}, {},
                                   {{"axis", std::int64_t{2}}});
    TensorId kv = g.linear("kv_b", g.rmsNorm("kv_a_norm", kvParts[0]), l.kvRank, n * (l.nopeDim + l.valueDim), false);
    kv = g.op(OpKind::Reshape, "kv_heads", {kv}, {b, n, s, l.nopeDim + l.valueDim}, "bs(nd)->bnsd");
    auto kvHeads = g.multiOutputOp(OpKind::Split, "kv_split", {kv}, {{b, n, s, l.nopeDim}, {b, n, s, l.valueDim}},
                                   {"k_nope", "v"}, {}, lastAxis);
    TensorId qRope = qParts[1], kRope = kvParts[1];
    if (spec.rotary) {
        qRope = g.op(OpKind::Rotary, "q_rotary", {qRope, *spec.rotary}, g.shape(qRope), "bnsd,sd->bnsd");
        kRope = g.op(OpKind::Rotary, "k_rotary", {kRope, *spec.rotary}, g.shape(kRope), "bsd,sd->bsd");
    }
    Attrs scoreAttrs;
    if (spec.scaled) scoreAttrs["scale_by_head_dim"] = std::int64_t{1};
    TensorId scores =
        g.op(OpKind::BatchMatMul, "scores", {qParts[0], kvHeads[0]}, {b, n, s, s}, "bnsd,bntd->bnst", scoreAttrs);
    TensorId ropeScores = g.op(OpKind::BatchMatMul, "rope_scores", {qRope, kRope}, {b, n, s, s}, "bnsd,btd->bnst", scoreAttrs);
    scores = g.binary(OpKind::Add, "scores_sum", scores, ropeScores);
    Attrs softmaxAttrs;
    if (spec.causal) softmaxAttrs["causal"] = std::int64_t{1};
    TensorId probs = g.op(OpKind::Softmax, "softmax", {scores}, g.shape(scores), "", softmaxAttrs);
    if (spec.dropout) probs = g.unary(OpKind::Dropout, "attn_dropout", probs);
    TensorId ctx = g.op(OpKind::BatchMatMul, "context", {probs, kvHeads[1]}, {b, n, s, l.valueDim}, "bnst,bntd->bnsd");
    TensorId merged = g.op(OpKind::Reshape, "merge_heads", {ctx}, {b, s, n * l.valueDim}, "bnsd->bs(nd)");
    TensorId out = g.linear("out", merged, n * l.valueDim, h, spec.outBias.value_or(spec.bias));
    if (spec.dropout) out = g.unary(OpKind::Dropout, "out_dropout", out);
    return out;
}

TensorId attention(GraphBuilder& g, TensorId x, const AttentionSpec& spec)
{
    if (spec.latent) return latentAttention(g, x, spec);
    auto scope = g.scope(spec.scope);
    const auto xs = g.shape(x);
    const std::int64_t b = xs[0], s = xs[1], h = xs[2];
    const std::int64_t n = spec.heads, kv = spec.kvHeads > 0 ? spec.kvHeads : n;
    const std::int64_t d = spec.headDim > 0 ? spec.headDim : h / n;
    const TensorId source = spec.memory.value_or(x);
    const std::int64_t t = g.shape(source)[1], hm = g.shape(source)[2];
    const bool grouped = kv != n;
    const std::int64_t groups = n / kv;

    TensorId q = g.linear("q", x, h, n * d, spec.bias);
    TensorId k = g.linear("k", source, hm, kv * d, spec.bias);
    TensorId v = g.linear("v", source, hm, kv * d, spec.bias);
    using QkNorm = AttentionSpec::QkNorm;
    if (spec.qkNorm == QkNorm::Full) {
        q = g.rmsNorm("q_norm", q);
        k = g.rmsNorm("k_norm", k);
    }
    TensorId qh, kh, vh, scores;
    // The window's attrs ride on every op that spans the keys t (applyWindow, core/graph/opkinds.cpp).
    Attrs windowAttrs;
    if (spec.window > 0) windowAttrs = {{"window", spec.window}, {"window_dim", std::string("t")}};
    Attrs scoreAttrs = windowAttrs;
    if (spec.scaled) scoreAttrs["scale_by_head_dim"] = std::int64_t{1};
    if (grouped) {
        qh = g.op(OpKind::Reshape, "q_heads", {q}, {b, kv, groups, s, d}, "bs(kgd)->bkgsd");
        kh = g.op(OpKind::Reshape, "k_heads", {k}, {b, kv, t, d}, "bs(kd)->bksd");
        vh = g.op(OpKind::Reshape, "v_heads", {v}, {b, kv, t, d}, "bs(kd)->bksd");
        if (spec.qkNorm == QkNorm::PerHead) {
            qh = g.rmsNorm("q_norm", qh);
            kh = g.rmsNorm("k_norm", kh);
        }
        if (spec.rotary) {
            qh = g.op(OpKind::Rotary, "q_rotary", {qh, *spec.rotary}, g.shape(qh), "bkgsd,sd->bkgsd");
            kh = g.op(OpKind::Rotary, "k_rotary", {kh, *spec.rotary}, g.shape(kh), "bksd,sd->bksd");
        }
        scores = g.op(OpKind::BatchMatMul, "scores", {qh, kh}, {b, kv, groups, s, t}, "bkgsd,bktd->bkgst", scoreAttrs);
    } else {
        qh = g.op(OpKind::Reshape, "q_heads", {q}, {b, n, s, d}, "bs(nd)->bnsd");
        kh = g.op(OpKind::Reshape, "k_heads", {k}, {b, n, t, d}, "bs(nd)->bnsd");
        vh = g.op(OpKind::Reshape, "v_heads", {v}, {b, n, t, d}, "bs(nd)->bnsd");
        if (spec.qkNorm == QkNorm::PerHead) {
            qh = g.rmsNorm("q_norm", qh);
            kh = g.rmsNorm("k_norm", kh);
        }
        if (spec.rotary) {
            qh = g.op(OpKind::Rotary, "q_rotary", {qh, *spec.rotary}, g.shape(qh), "bnsd,sd->bnsd");
            kh = g.op(OpKind::Rotary, "k_rotary", {kh, *spec.rotary}, g.shape(kh), "bnsd,sd->bnsd");
        }
        scores = g.op(OpKind::BatchMatMul, "scores", {qh, kh}, {b, n, s, t}, "bnsd,bntd->bnst", scoreAttrs);
    }
    if (spec.positionBias)
        scores = g.op(OpKind::Add, "position_bias", {scores, *spec.positionBias}, g.shape(scores),
                      grouped ? "bkgst,(kg)st->bkgst" : "bnst,nst->bnst");
    Attrs softmaxAttrs = windowAttrs;
    if (spec.causal) softmaxAttrs["causal"] = std::int64_t{1};
    // A windowed softmax names its loops so that its window can name the keys.
    const std::string softmaxEquation = spec.window > 0 ? (grouped ? "bkgst->bkgst" : "bnst->bnst") : "";
    TensorId probs = g.op(OpKind::Softmax, "softmax", {scores}, g.shape(scores), softmaxEquation, softmaxAttrs);
    if (spec.dropout) probs = g.unary(OpKind::Dropout, "attn_dropout", probs);
    TensorId merged;
    if (grouped) {
        TensorId ctx =
            g.op(OpKind::BatchMatMul, "context", {probs, vh}, {b, kv, groups, s, d}, "bkgst,bktd->bkgsd", windowAttrs);
        merged = g.op(OpKind::Reshape, "merge_heads", {ctx}, {b, s, n * d}, "bkgsd->bs(kgd)");
    } else {
        TensorId ctx = g.op(OpKind::BatchMatMul, "context", {probs, vh}, {b, n, s, d}, "bnst,bntd->bnsd", windowAttrs);
        merged = g.op(OpKind::Reshape, "merge_heads", {ctx}, {b, s, n * d}, "bnsd->bs(nd)");
    }
    TensorId out = g.linear("out", merged, n * d, h, spec.outBias.value_or(spec.bias));
    if (spec.dropout) out = g.unary(OpKind::Dropout, "out_dropout", out);
    return out;
}

namespace {
std::string lowercase(std::string_view text)
{
    std::string s(text);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}
} // namespace

TensorId feedForward(GraphBuilder& g, TensorId x, const FeedForwardSpec& spec)
{
    auto scope = g.scope(spec.scope);
    const std::int64_t h = g.shape(x).back();
    const std::string activationName = lowercase(opKindName(spec.activation));
    TensorId hidden;
    if (spec.gated) {
        TensorId gate = g.linear(spec.gate, x, h, spec.ffn, spec.bias);
        TensorId up = g.linear(spec.up, x, h, spec.ffn, spec.bias);
        hidden = g.binary(OpKind::Mul, "mul", g.unary(spec.activation, activationName, gate), up);
    } else {
        hidden = g.unary(spec.activation, activationName, g.linear(spec.up, x, h, spec.ffn, spec.bias));
    }
    TensorId down = g.linear(spec.down, hidden, spec.ffn, h, spec.bias);
    if (spec.dropout) down = g.unary(OpKind::Dropout, "dropout", down);
    return down;
}

std::int64_t expertCapacity(std::int64_t seq, std::int64_t experts, std::int64_t topK, double capacityFactor)
{
    const double routed = static_cast<double>(seq) * static_cast<double>(topK) * capacityFactor;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(routed / static_cast<double>(experts))));
}

namespace {

// The expert FFN over dispatched tokens x [b, e, c, h]: every Linear holds one weight per expert.
// A gated FFN's gate and up projections are one Linear with a weight [e, h, 2, f] (Megatron's
// grouped fc1; HF's w1 and w3 hold the same numbers), cut into its two halves along the size-2
// dim: the dispatched tokens then have one reader, so expert parallelism moves them once each
// way (core/cost/cost_model.cpp charges a layout change per reader), and f stays splittable for
// tensor parallelism inside the experts.
TensorId expertFeedForward(GraphBuilder& g, TensorId x, const FeedForwardSpec& spec)
{
    auto scope = g.scope("experts");
    const auto xs = g.shape(x);
    const std::int64_t b = xs[0], e = xs[1], c = xs[2], h = xs[3], f = spec.ffn;
    auto withBias = [&](const std::string& name, std::vector<TensorId> inputs, std::string eq,
                        std::vector<std::int64_t> biasShape, const std::string& biasLoops) {
        if (spec.bias) {
            inputs.push_back(g.weight(name + ".bias", std::move(biasShape)));
            eq += "," + biasLoops;
        }
        return std::make_pair(std::move(inputs), std::move(eq));
    };
    const std::string activationName = lowercase(opKindName(spec.activation));
    TensorId hidden;
    std::string hiddenLoops = "becf";
    if (spec.gated) {
        auto [in, eq] = withBias(spec.gate + "_" + spec.up, {x, g.weight(spec.gate + "_" + spec.up + ".weight", {e, h, 2, f})},
                                 "bech,ehgf", {e, 2, f}, "egf");
        TensorId both = g.op(OpKind::Linear, spec.gate + "_" + spec.up, std::move(in), {b, e, c, 2, f}, eq + "->becgf");
        // Named loops, so that a split of the experts reads "e=x" all along the expert FFN.
        auto halves = g.multiOutputOp(OpKind::Split, "split", {both}, {{b, e, c, 1, f}, {b, e, c, 1, f}}, {"gate", "up"},
                                      "becgf->becuf,becvf", {{"axis", std::int64_t{3}}});
        TensorId act = g.op(spec.activation, activationName, {halves[0]}, g.shape(halves[0]), "becgf->becgf");
        hidden = g.op(OpKind::Mul, "mul", {act, halves[1]}, g.shape(act), "becgf,becgf->becgf");
        hiddenLoops = "becgf";
    } else {
        auto [in, eq] = withBias(spec.up, {x, g.weight(spec.up + ".weight", {e, h, f})}, "bech,ehf", {e, f}, "ef");
        TensorId up = g.op(OpKind::Linear, spec.up, std::move(in), {b, e, c, f}, eq + "->becf");
        hidden = g.op(spec.activation, activationName, {up}, g.shape(up), "becf->becf");
    }
    auto [in, eq] = withBias(spec.down, {hidden, g.weight(spec.down + ".weight", {e, f, h})}, hiddenLoops + ",efh", {e, h}, "eh");
    TensorId down = g.op(OpKind::Linear, spec.down, std::move(in), {b, e, c, h}, eq + "->bech");
    if (spec.dropout) down = g.op(OpKind::Dropout, "dropout", {down}, g.shape(down), "bech->bech");
    return down;
}

} // namespace

TensorId mixtureOfExperts(GraphBuilder& g, TensorId x, const MixtureSpec& spec)
{
    auto scope = g.scope(spec.scope);
    const auto xs = g.shape(x);
    const std::int64_t b = xs[0], s = xs[1], h = xs[2], e = spec.experts, c = spec.capacity;
    TensorId logits = g.linear("router", x, h, e, false);
    TensorId probs = g.op(spec.scoring, spec.scoring == OpKind::Sigmoid ? "router_sigmoid" : "router_softmax", {logits},
                          {b, s, e});
    Attrs routing{{"experts", e}, {"capacity", c}, {"top_k", spec.topK}};
    // The selection bias picks the experts, so dispatch and combine both read it.
    const std::optional<TensorId> bias =
        spec.selectionBias ? std::optional<TensorId>(g.weight("router.selection_bias", {e})) : std::nullopt;
    std::vector<TensorId> dispatchInputs{x, probs};
    if (bias) dispatchInputs.push_back(*bias);
    TensorId dispatched = g.op(OpKind::Dispatch, "dispatch", std::move(dispatchInputs), {b, e, c, h},
                               bias ? "bsh,bse,e->bech" : "bsh,bse->bech", routing);
    TensorId expertOut = expertFeedForward(g, dispatched, spec.expert);
    std::vector<TensorId> combineInputs{expertOut, probs};
    if (bias) combineInputs.push_back(*bias);
    TensorId out =
        g.op(OpKind::Combine, "combine", std::move(combineInputs), {b, s, h}, bias ? "bech,bse,e->bsh" : "bech,bse->bsh", routing);
    if (!spec.shared) return out;
    TensorId shared = feedForward(g, x, *spec.shared);
    if (spec.sharedGate) {
        TensorId gate = g.unary(OpKind::Sigmoid, "shared_gate_sigmoid", g.linear("shared_gate", x, h, 1, false));
        shared = g.op(OpKind::Mul, "shared_gated", {shared, gate}, {b, s, h}, "bsh,bsu->bsh");
    }
    return g.binary(OpKind::Add, "shared_add", out, shared);
}

TensorId firstToken(GraphBuilder& g, TensorId x)
{
    const auto xs = g.shape(x);
    const std::int64_t b = xs[0], s = xs[1], h = xs[2];
    auto parts = g.multiOutputOp(OpKind::Split, "select_first", {x}, {{b, 1, h}, {b, s - 1, h}}, {"first", "rest"}, {},
                                 {{"axis", std::int64_t{1}}});
    return g.op(OpKind::Reshape, "first_token", {parts[0]}, {b, h});
}

TensorId crossEntropy(GraphBuilder& g, TensorId logits, const std::string& name, const std::string& labelsName)
{
    auto labelShape = g.shape(logits);
    labelShape.pop_back();
    TensorId labels = g.input(labelsName, labelShape, DType::I64);
    return g.op(OpKind::CrossEntropy, name, {logits, labels}, {});
}

TensorId languageModelLoss(GraphBuilder& g, TensorId x, TensorId headWeight)
{
    const auto xs = g.shape(x);
    const std::int64_t vocab = g.shape(headWeight)[0];
    TensorId logits = g.op(OpKind::Linear, "lm_head", {x, headWeight}, {xs[0], xs[1], vocab}, "bsh,vh->bsv");
    TensorId loss = crossEntropy(g, logits);
    g.markOutput(loss);
    return loss;
}

OpKind configActivation(const ModelConfig& config, const std::string& key, OpKind fallback)
{
    if (!config.contains(key)) return fallback;
    const std::string text = configString(config, key, "");
    static const std::pair<std::string_view, OpKind> kActivations[] = {
        {"gelu", OpKind::GeLU}, {"relu", OpKind::ReLU}, {"silu", OpKind::SiLU}, {"tanh", OpKind::Tanh}};
    for (const auto& [name, kind] : kActivations)
        if (text == name) return kind;
    throw InputError(configLabel(config) + ": field '" + key + "' is '" + text + "'; use gelu, relu, silu or tanh");
}

std::int64_t configVocab(const ModelConfig& config)
{
    const std::int64_t vocab = configInt(config, "vocab"), multiple = configInt(config, "vocab_multiple", 1);
    if (multiple < 1 || multiple > (std::int64_t{1} << 20))
        throw InputError(configLabel(config) + ": field 'vocab_multiple' must be from 1 to 1048576, not " +
                         std::to_string(multiple));
    return (vocab + multiple - 1) / multiple * multiple;
}

double configNumber(const ModelConfig& config, const std::string& key, double fallback)
{
    if (!config.contains(key)) return fallback;
    const auto& v = config[key];
    if (!v.is_number() || v.get<double>() <= 0)
        throw InputError(configLabel(config) + ": field '" + key + "' must be a positive number, not " + v.dump());
    return v.get<double>();
}

void requireDivisible(const ModelConfig& config, const std::string& field, std::int64_t value, const std::string& divisorField,
                      std::int64_t divisor)
{
    if (value % divisor != 0)
        throw InputError(configLabel(config) + ": field '" + field + "' (" + std::to_string(value) + ") is not divisible by '" +
                         divisorField + "' (" + std::to_string(divisor) + ")");
}

} // namespace tp
