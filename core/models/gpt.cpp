// GPT-2 / GPT-3 / OPT style decoder: learned positions, pre-LayerNorm, GeLU MLP, tied head.
// The attention block is built from its parts so heads are visible to the search, and with
// exactly the tensors Korthikanti et al. (2022) count as saved for backward.
#include "../util/error.h"
#include "builder.h"
#include "models.h"

namespace tp {

namespace {

// Causal self-attention over x [b, s, h] with n heads of size d (n * d == h).
TensorId selfAttention(GraphBuilder& g, TensorId x, std::int64_t heads, bool dropout)
{
    auto scope = g.scope("attn");
    const auto s = g.shape(x);
    const std::int64_t b = s[0], seq = s[1], h = s[2], d = h / heads;
    auto projectHeads = [&](const std::string& name) {
        TensorId p = g.linear(name, x, h, h, true);
        return g.op(OpKind::Reshape, name + "_heads", {p}, {b, heads, seq, d}, "bs(nd)->bnsd");
    };
    TensorId q = projectHeads("q"), k = projectHeads("k"), v = projectHeads("v");
    TensorId scores = g.op(OpKind::BatchMatMul, "scores", {q, k}, {b, heads, seq, seq}, "bnsd,bntd->bnst",
                           {{"scale_by_head_dim", std::int64_t{1}}});
    TensorId probs = g.op(OpKind::Softmax, "softmax", {scores}, {b, heads, seq, seq}, {}, {{"causal", std::int64_t{1}}});
    if (dropout) probs = g.unary(OpKind::Dropout, "attn_dropout", probs);
    TensorId ctx = g.op(OpKind::BatchMatMul, "context", {probs, v}, {b, heads, seq, d}, "bnst,bntd->bnsd");
    TensorId merged = g.op(OpKind::Reshape, "merge_heads", {ctx}, {b, seq, h}, "bnsd->bs(nd)");
    TensorId out = g.linear("out", merged, h, h, true);
    if (dropout) out = g.unary(OpKind::Dropout, "out_dropout", out);
    return out;
}

TensorId mlp(GraphBuilder& g, TensorId x, std::int64_t ffn, bool dropout)
{
    auto scope = g.scope("mlp");
    const std::int64_t h = g.shape(x).back();
    TensorId up = g.linear("fc1", x, h, ffn, true);
    TensorId act = g.unary(OpKind::GeLU, "gelu", up);
    TensorId down = g.linear("fc2", act, ffn, h, true);
    if (dropout) down = g.unary(OpKind::Dropout, "dropout", down);
    return down;
}

} // namespace

Graph buildGpt(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t ffn = configInt(c, "ffn", 4 * h), vocab = configInt(c, "vocab");
    const std::int64_t seq = configInt(c, "seq"), batch = configInt(c, "batch", 1);
    const std::int64_t positions = configInt(c, "positions", seq);
    const bool dropout = configBool(c, "dropout", true), tied = configBool(c, "tied_embeddings", true);
    if (h % heads != 0)
        throw InputError("model config: field 'hidden' (" + std::to_string(h) + ") is not divisible by 'heads' (" +
                         std::to_string(heads) + ")");
    if (seq > positions)
        throw InputError("model config: field 'seq' (" + std::to_string(seq) + ") exceeds 'positions' (" +
                         std::to_string(positions) + ")");

    GraphBuilder g(configString(c, "name", "gpt"), configDType(c));
    TensorId tokens = g.input("tokens", {batch, seq}, DType::I64);
    TensorId positionIds = g.input("positions", {seq}, DType::I64);
    TensorId x, wte;
    {
        auto scope = g.scope("embed");
        wte = g.weight("wte.weight", {vocab, h});
        TensorId wpe = g.weight("wpe.weight", {positions, h});
        TensorId tok = g.op(OpKind::Embedding, "wte", {tokens, wte}, {batch, seq, h}, "bs,vh->bsh");
        TensorId pos = g.op(OpKind::Embedding, "wpe", {positionIds, wpe}, {seq, h}, "s,vh->sh");
        x = g.op(OpKind::Add, "add", {tok, pos}, {batch, seq, h}, "bsh,sh->bsh");
        if (dropout) x = g.unary(OpKind::Dropout, "dropout", x);
    }
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        TensorId a = selfAttention(g, g.layerNorm("ln1", x), heads, dropout);
        x = g.binary(OpKind::Add, "residual1", x, a);
        TensorId m = mlp(g, g.layerNorm("ln2", x), ffn, dropout);
        x = g.binary(OpKind::Add, "residual2", x, m);
    }
    {
        auto scope = g.scope("head");
        x = g.layerNorm("ln_f", x);
        TensorId headWeight = tied ? wte : g.weight("lm_head.weight", {vocab, h});
        TensorId logits = g.op(OpKind::Linear, "lm_head", {x, headWeight}, {batch, seq, vocab}, "bsh,vh->bsv");
        TensorId labels = g.input("labels", {batch, seq}, DType::I64);
        TensorId loss = g.op(OpKind::CrossEntropy, "loss", {logits, labels}, {}, "bsv,bs->");
        g.markOutput(loss);
    }
    return g.take();
}

} // namespace tp
