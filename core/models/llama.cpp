// LLaMA-2/3 and Mistral: RMSNorm, SwiGLU MLP, grouped-query attention, no biases, untied head.
// Rotary position embeddings have no parameters but stream q and k once more each way (20 bytes
// per element eager, core/graph/opkinds.cpp): a Rotary op on each, reading one angle table of
// [seq, head_dim] that every layer shares (config "rotary", default true).
#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

Graph buildLlama(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t kvHeads = configInt(c, "kv_heads", heads), ffn = configInt(c, "ffn");
    const std::int64_t vocab = configVocab(c), seq = configInt(c, "seq"), batch = configInt(c, "batch", 1);
    const std::int64_t positions = configInt(c, "positions", seq);
    if (!c.contains("head_dim")) requireDivisible(c, "hidden", h, "heads", heads);
    const std::int64_t headDim = configInt(c, "head_dim", h / heads);
    requireDivisible(c, "heads", heads, "kv_heads", kvHeads);
    if (seq > positions)
        throw InputError(configLabel(c) + ": field 'seq' (" + std::to_string(seq) + ") exceeds 'positions' (" +
                         std::to_string(positions) + ")");
    const bool dropout = configBool(c, "dropout", false), tied = configBool(c, "tied_embeddings", false);

    GraphBuilder g(configString(c, "name", "llama"), configDType(c));
    TensorId tokens = g.input("tokens", {batch, seq}, DType::I64);
    // After the tokens: the batch is dim 0 of the first graph input (core/cost/cost_model.cpp).
    std::optional<TensorId> angles;
    if (configBool(c, "rotary", true)) angles = g.input("rotary/angles", {seq, headDim}, DType::F32);
    TensorId table = g.weight("embed/tokens.weight", {vocab, h});
    TensorId x = g.op(OpKind::Embedding, "embed/tokens", {tokens, table}, {batch, seq, h}, "bs,vh->bsh");

    AttentionSpec attn;
    attn.heads = heads;
    attn.kvHeads = kvHeads;
    attn.headDim = headDim;
    attn.bias = false;
    attn.causal = true;
    attn.dropout = dropout;
    attn.rotary = angles;
    FeedForwardSpec mlp;
    mlp.ffn = ffn;
    mlp.activation = configActivation(c, "activation", OpKind::SiLU);
    mlp.gated = true;
    mlp.bias = false;
    mlp.dropout = dropout;
    mlp.up = "up";
    mlp.down = "down";
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        x = g.binary(OpKind::Add, "residual1", x, attention(g, g.rmsNorm("attn_norm", x), attn));
        x = g.binary(OpKind::Add, "residual2", x, feedForward(g, g.rmsNorm("mlp_norm", x), mlp));
    }
    {
        auto scope = g.scope("head");
        x = g.rmsNorm("norm", x);
        languageModelLoss(g, x, tied ? table : g.weight("lm_head.weight", {vocab, h}));
    }
    return g.take();
}

} // namespace tp
