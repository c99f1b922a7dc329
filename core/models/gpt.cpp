// GPT-2 / GPT-3 / OPT style decoder: learned positions, pre-LayerNorm, GeLU (OPT: ReLU) MLP,
// tied head. Dropout sits exactly where Korthikanti et al. (2022) count its masks as saved.
#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

Graph buildGpt(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t ffn = configInt(c, "ffn", 4 * h), vocab = configVocab(c);
    const std::int64_t seq = configInt(c, "seq"), batch = configInt(c, "batch", 1);
    const std::int64_t positions = configInt(c, "positions", seq);
    const bool dropout = configBool(c, "dropout", true), tied = configBool(c, "tied_embeddings", true);
    requireDivisible(c, "hidden", h, "heads", heads);
    if (seq > positions)
        throw InputError(configLabel(c) + ": field 'seq' (" + std::to_string(seq) + ") exceeds 'positions' (" +
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
    AttentionSpec attn;
    attn.heads = heads;
    attn.causal = true;
    attn.dropout = dropout;
    FeedForwardSpec mlp;
    mlp.ffn = ffn;
    mlp.activation = configActivation(c, "activation", OpKind::GeLU);
    mlp.dropout = dropout;
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        x = g.binary(OpKind::Add, "residual1", x, attention(g, g.layerNorm("ln1", x), attn));
        x = g.binary(OpKind::Add, "residual2", x, feedForward(g, g.layerNorm("ln2", x), mlp));
    }
    {
        auto scope = g.scope("head");
        x = g.layerNorm("ln_f", x);
        languageModelLoss(g, x, tied ? wte : g.weight("lm_head.weight", {vocab, h}));
    }
    return g.take();
}

} // namespace tp
