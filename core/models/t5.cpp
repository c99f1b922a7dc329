// T5 encoder-decoder and its mixture-of-experts variant (Switch Transformer).
// T5 LayerNorm is an RMS norm with a weight only; there are no biases; attention scores are not
// scaled. The relative position bias is one Embedding per stack, computed before layer 0 from
// bucket ids [s, t] and added to every layer's scores, so all layers of a stack are identical
// (HF keeps the table in layer 0 and passes the bias on; the arithmetic is the same).
#include <cmath>

#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

namespace {

struct EncoderDecoderShape {
    std::int64_t encoderLayers, decoderLayers, hidden, heads, headDim, ffn, vocab, buckets;
    std::int64_t batch, seq, targetSeq;
    bool dropout, tied;
    FeedForwardSpec ffnSpec;
    std::int64_t experts = 0;     ///< 0: dense
    std::int64_t expertEvery = 2; ///< layers 1, 1 + every, ... are sparse (every layer when 1), as in HF
    std::int64_t capacity = 0;
};

// The bias [heads, s, t] from integer bucket ids [s, t]; one table per stack.
TensorId relativePositionBias(GraphBuilder& g, const EncoderDecoderShape& m, std::int64_t s, std::int64_t t)
{
    TensorId buckets = g.input("relative_buckets", {s, t}, DType::I64);
    TensorId table = g.weight("relative_bias.weight", {m.buckets, m.heads});
    return g.op(OpKind::Embedding, "position_bias", {buckets, table}, {m.heads, s, t}, "st,vn->nst");
}

TensorId feedForwardOrExperts(GraphBuilder& g, TensorId x, const EncoderDecoderShape& m, std::int64_t layer)
{
    const bool sparse = m.experts > 0 && (m.expertEvery == 1 || layer % m.expertEvery == 1);
    if (!sparse) return feedForward(g, x, m.ffnSpec);
    MixtureSpec moe;
    moe.experts = m.experts;
    moe.capacity = m.capacity;
    moe.expert = m.ffnSpec;
    return mixtureOfExperts(g, x, moe);
}

Graph buildEncoderDecoder(const ModelConfig& c, const EncoderDecoderShape& m)
{
    GraphBuilder g(configString(c, "name", "t5"), configDType(c));
    TensorId shared = g.weight("shared.weight", {m.vocab, m.hidden});
    AttentionSpec attn;
    attn.heads = m.heads;
    attn.headDim = m.headDim;
    attn.bias = false;
    attn.scaled = false;
    attn.dropout = m.dropout;
    auto residual = [&](const std::string& name, TensorId x, TensorId y) {
        if (m.dropout) y = g.unary(OpKind::Dropout, name + "_dropout", y);
        return g.binary(OpKind::Add, name, x, y);
    };

    TensorId memory;
    {
        auto scope = g.scope("encoder");
        TensorId tokens = g.input("tokens", {m.batch, m.seq}, DType::I64);
        TensorId x = g.op(OpKind::Embedding, "embed", {tokens, shared}, {m.batch, m.seq, m.hidden}, "bs,vh->bsh");
        AttentionSpec self = attn;
        self.scope = "self_attn";
        self.positionBias = relativePositionBias(g, m, m.seq, m.seq);
        for (std::int64_t i = 0; i < m.encoderLayers; ++i) {
            auto layer = g.scope("layers." + std::to_string(i));
            x = residual("residual1", x, attention(g, g.rmsNorm("attn_norm", x), self));
            x = residual("residual2", x, feedForwardOrExperts(g, g.rmsNorm("ffn_norm", x), m, i));
        }
        memory = g.rmsNorm("final_norm", x);
    }
    {
        auto scope = g.scope("decoder");
        TensorId tokens = g.input("tokens", {m.batch, m.targetSeq}, DType::I64);
        TensorId x = g.op(OpKind::Embedding, "embed", {tokens, shared}, {m.batch, m.targetSeq, m.hidden}, "bs,vh->bsh");
        AttentionSpec self = attn;
        self.scope = "self_attn";
        self.causal = true;
        self.positionBias = relativePositionBias(g, m, m.targetSeq, m.targetSeq);
        AttentionSpec cross = attn;
        cross.scope = "cross_attn";
        cross.memory = memory;
        for (std::int64_t i = 0; i < m.decoderLayers; ++i) {
            auto layer = g.scope("layers." + std::to_string(i));
            x = residual("residual1", x, attention(g, g.rmsNorm("self_attn_norm", x), self));
            x = residual("residual2", x, attention(g, g.rmsNorm("cross_attn_norm", x), cross));
            x = residual("residual3", x, feedForwardOrExperts(g, g.rmsNorm("ffn_norm", x), m, i));
        }
        x = g.rmsNorm("final_norm", x);
        auto head = g.scope("head");
        languageModelLoss(g, x, m.tied ? shared : g.weight("lm_head.weight", {m.vocab, m.hidden}));
    }
    return g.take();
}

EncoderDecoderShape readShape(const ModelConfig& c)
{
    EncoderDecoderShape m;
    m.encoderLayers = configInt(c, "layers");
    m.decoderLayers = configInt(c, "decoder_layers", m.encoderLayers);
    m.hidden = configInt(c, "hidden");
    m.heads = configInt(c, "heads");
    if (!c.contains("head_dim")) requireDivisible(c, "hidden", m.hidden, "heads", m.heads);
    m.headDim = configInt(c, "head_dim", m.hidden / m.heads);
    m.ffn = configInt(c, "ffn");
    m.vocab = configVocab(c);
    m.buckets = configInt(c, "buckets", 32);
    m.batch = configInt(c, "batch", 1);
    m.seq = configInt(c, "seq");
    m.targetSeq = configInt(c, "target_seq", m.seq);
    m.dropout = configBool(c, "dropout", false);
    m.tied = configBool(c, "tied_embeddings", true);
    m.ffnSpec.scope = "ffn";
    m.ffnSpec.ffn = m.ffn;
    m.ffnSpec.activation = configActivation(c, "activation", OpKind::ReLU);
    m.ffnSpec.gated = configBool(c, "ffn_gated", false);
    m.ffnSpec.bias = false;
    m.ffnSpec.dropout = m.dropout;
    m.ffnSpec.up = m.ffnSpec.gated ? "wi_1" : "wi";
    m.ffnSpec.gate = "wi_0";
    m.ffnSpec.down = "wo";
    return m;
}

} // namespace

Graph buildT5(const ModelConfig& c) { return buildEncoderDecoder(c, readShape(c)); }

Graph buildMoe(const ModelConfig& c)
{
    EncoderDecoderShape m = readShape(c);
    m.experts = configInt(c, "experts");
    m.expertEvery = configInt(c, "expert_every", 2);
    // Capacity per expert: the tokens of a sequence times the capacity factor, shared out evenly
    // (Fedus et al. 2021, eq. 3), rounded up. Decoder layers see fewer tokens but use the same
    // capacity so that encoder and decoder experts have one shape.
    m.capacity = configInt(c, "capacity", expertCapacity(m.seq, m.experts, 1, configNumber(c, "capacity_factor", 1.25)));
    return buildEncoderDecoder(c, m);
}

} // namespace tp
