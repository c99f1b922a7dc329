// BERT: word + position + token-type embeddings, post-LayerNorm encoder layers, pooler, and the
// pre-training heads (masked-LM decoder tied to the word embeddings, next-sentence classifier)
// so that a training step has a loss. Everything outside "mlm/" and "nsp/" is BertModel.
#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

Graph buildBert(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t ffn = configInt(c, "ffn", 4 * h), vocab = configVocab(c);
    const std::int64_t seq = configInt(c, "seq"), batch = configInt(c, "batch", 1);
    const std::int64_t positions = configInt(c, "positions", 512), typeVocab = configInt(c, "type_vocab", 2);
    const bool dropout = configBool(c, "dropout", true);
    requireDivisible(c, "hidden", h, "heads", heads);
    if (seq > positions)
        throw InputError(configLabel(c) + ": field 'seq' (" + std::to_string(seq) + ") exceeds 'positions' (" +
                         std::to_string(positions) + ")");
    const OpKind activation = configActivation(c, "activation", OpKind::GeLU);

    GraphBuilder g(configString(c, "name", "bert"), configDType(c));
    TensorId tokens = g.input("tokens", {batch, seq}, DType::I64);
    TensorId tokenTypes = g.input("token_types", {batch, seq}, DType::I64);
    TensorId positionIds = g.input("positions", {seq}, DType::I64);
    TensorId x, words;
    {
        auto scope = g.scope("embed");
        words = g.weight("word.weight", {vocab, h});
        TensorId tok = g.op(OpKind::Embedding, "word", {tokens, words}, {batch, seq, h}, "bs,vh->bsh");
        TensorId pos =
            g.op(OpKind::Embedding, "position", {positionIds, g.weight("position.weight", {positions, h})}, {seq, h}, "s,vh->sh");
        TensorId type = g.op(OpKind::Embedding, "token_type", {tokenTypes, g.weight("token_type.weight", {typeVocab, h})},
                             {batch, seq, h}, "bs,vh->bsh");
        x = g.op(OpKind::Add, "add_position", {tok, pos}, {batch, seq, h}, "bsh,sh->bsh");
        x = g.binary(OpKind::Add, "add_token_type", x, type);
        x = g.layerNorm("ln", x);
        if (dropout) x = g.unary(OpKind::Dropout, "dropout", x);
    }
    AttentionSpec attn;
    attn.heads = heads;
    attn.dropout = dropout;
    FeedForwardSpec mlp;
    mlp.ffn = ffn;
    mlp.activation = activation;
    mlp.dropout = dropout;
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        x = g.layerNorm("ln1", g.binary(OpKind::Add, "residual1", x, attention(g, x, attn)));
        x = g.layerNorm("ln2", g.binary(OpKind::Add, "residual2", x, feedForward(g, x, mlp)));
    }
    TensorId pooled;
    {
        auto scope = g.scope("pooler");
        pooled = g.unary(OpKind::Tanh, "tanh", g.linear("dense", firstToken(g, x), h, h, true));
    }
    TensorId mlmLoss, nspLoss;
    {
        auto scope = g.scope("mlm");
        TensorId t = g.layerNorm("ln", g.unary(activation, "act", g.linear("transform", x, h, h, true)));
        TensorId logits =
            g.op(OpKind::Linear, "decoder", {t, words, g.weight("decoder.bias", {vocab})}, {batch, seq, vocab}, "bsh,vh,v->bsv");
        mlmLoss = crossEntropy(g, logits);
    }
    {
        auto scope = g.scope("nsp");
        nspLoss = crossEntropy(g, g.linear("classifier", pooled, h, 2, true));
    }
    g.markOutput(g.op(OpKind::Add, "loss", {mlmLoss, nspLoss}, {}, ",->"));
    return g.take();
}

} // namespace tp
