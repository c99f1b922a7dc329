// The decoder-only family with rotary positions: LLaMA-2/3 and Mistral by default (RMSNorm,
// SwiGLU MLP, grouped-query attention, no biases, untied head), and by its config fields the
// variants the Hugging Face reader maps onto it (core/import/hf_config.cpp): biases on q/k/v
// (Qwen2), on the output projection and the MLP (GPT-NeoX, StarCoder2); LayerNorm instead of
// RMSNorm; q/k norms per head (Qwen3, Gemma-3) or over the projection (OLMo-2); norms after
// each sublayer as well as before it (Gemma-2/3: "sandwich") or only after it (OLMo-2: "post");
// attention and MLP side by side on the same input (GPT-NeoX, Falcon: "parallel_residual");
// sliding-window layers (Mistral, StarCoder2, Gemma-2/3), every `global_every`-th layer global.
// Rotary position embeddings have no parameters but stream q and k once more each way (20 bytes
// per element eager, core/graph/opkinds.cpp): a Rotary op on each, reading one angle table of
// [seq, head_dim] that every layer shares (config "rotary", default true).
#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

namespace {

/// A config string that must be one of `choices` (the first is the default).
std::string configChoice(const ModelConfig& c, const std::string& key, std::initializer_list<const char*> choices)
{
    const std::string value = configString(c, key, *choices.begin());
    std::string known;
    for (const char* choice : choices) {
        if (value == choice) return value;
        known += (known.empty() ? "" : ", ") + std::string(choice);
    }
    throw InputError(configLabel(c) + ": field '" + key + "' is '" + value + "'; use " + known);
}

struct DecoderLayout {
    bool layerNorm = false;    ///< LayerNorm with a bias; else RMSNorm
    std::string placement;     ///< "pre", "sandwich", "post"
    std::string parallel;      ///< "none", "separate" (a norm each), "shared" (one norm feeds both)
    std::int64_t window = 0;   ///< sliding window in keys (0: every layer global)
    std::int64_t globalEvery = 0; ///< with a window: layer i is global when (i + 1) % globalEvery == 0
};

TensorId norm(GraphBuilder& g, const DecoderLayout& layout, const std::string& name, TensorId x)
{
    return layout.layerNorm ? g.layerNorm(name, x) : g.rmsNorm(name, x);
}

/// A layer's feed-forward part: the dense MLP, or routed experts when `moe` is set.
struct LayerMlp {
    FeedForwardSpec dense;
    std::optional<MixtureSpec> moe;
};

TensorId feedForward(GraphBuilder& g, TensorId x, const LayerMlp& mlp)
{
    return mlp.moe ? mixtureOfExperts(g, x, *mlp.moe) : feedForward(g, x, mlp.dense);
}

/// Routed experts from the config (absent without "experts"): `experts` of `expert_ffn` each,
/// `experts_per_token` per token, `shared_expert_ffn` wide shared experts (optionally gated),
/// `router` softmax or sigmoid, and a capacity of `capacity_factor` (default 1: dropless routing
/// with balanced load, as Mixtral, Qwen-MoE and DeepSeek-V3 train) times the routed tokens, or
/// `capacity` slots per expert when given.
std::optional<MixtureSpec> readExperts(const ModelConfig& c, const FeedForwardSpec& dense, std::int64_t seq)
{
    if (!c.contains("experts")) return std::nullopt;
    MixtureSpec moe;
    moe.experts = configInt(c, "experts");
    moe.topK = configInt(c, "experts_per_token", 1);
    if (moe.topK > moe.experts)
        throw InputError(configLabel(c) + ": field 'experts_per_token' (" + std::to_string(moe.topK) + ") exceeds 'experts' (" +
                         std::to_string(moe.experts) + ")");
    moe.capacity = configInt(c, "capacity", expertCapacity(seq, moe.experts, moe.topK, configNumber(c, "capacity_factor", 1.0)));
    moe.expert = dense;
    moe.expert.ffn = configInt(c, "expert_ffn", dense.ffn);
    moe.scoring = configChoice(c, "router", {"softmax", "sigmoid"}) == "sigmoid" ? OpKind::Sigmoid : OpKind::Softmax;
    if (c.contains("shared_expert_ffn")) {
        FeedForwardSpec shared = dense;
        shared.scope = "shared_expert";
        shared.ffn = configInt(c, "shared_expert_ffn");
        moe.shared = shared;
        moe.sharedGate = configBool(c, "shared_expert_gate", false);
    }
    moe.selectionBias = configBool(c, "router_selection_bias", false);
    return moe;
}

/// Multi-head latent attention from the config (absent without "kv_lora_rank"): ranks
/// `q_lora_rank` (absent: q projected directly) and `kv_lora_rank`, per-head dims
/// `qk_nope_head_dim` + `qk_rope_head_dim` for q and k and `v_head_dim` for v.
std::optional<AttentionSpec::Latent> readLatent(const ModelConfig& c)
{
    if (!c.contains("kv_lora_rank")) return std::nullopt;
    AttentionSpec::Latent l;
    l.qRank = configInt(c, "q_lora_rank", 0);
    l.kvRank = configInt(c, "kv_lora_rank");
    l.nopeDim = configInt(c, "qk_nope_head_dim");
    l.ropeDim = configInt(c, "qk_rope_head_dim");
    l.valueDim = configInt(c, "v_head_dim");
    return l;
}

/// One decoder layer under the layout's norm placement and residual form.
TensorId decoderLayer(GraphBuilder& g, const DecoderLayout& layout, TensorId x, const AttentionSpec& attn,
                      const LayerMlp& mlp)
{
    if (layout.parallel != "none") {
        const TensorId attnIn = norm(g, layout, "attn_norm", x);
        const TensorId mlpIn = layout.parallel == "shared" ? attnIn : norm(g, layout, "mlp_norm", x);
        const TensorId a = attention(g, attnIn, attn);
        const TensorId m = feedForward(g, mlpIn, mlp);
        return g.binary(OpKind::Add, "residual2", g.binary(OpKind::Add, "residual1", x, a), m);
    }
    if (layout.placement == "post") {
        x = g.binary(OpKind::Add, "residual1", x, norm(g, layout, "post_attn_norm", attention(g, x, attn)));
        return g.binary(OpKind::Add, "residual2", x, norm(g, layout, "post_mlp_norm", feedForward(g, x, mlp)));
    }
    TensorId a = attention(g, norm(g, layout, "attn_norm", x), attn);
    if (layout.placement == "sandwich") a = norm(g, layout, "post_attn_norm", a);
    x = g.binary(OpKind::Add, "residual1", x, a);
    TensorId m = feedForward(g, norm(g, layout, "mlp_norm", x), mlp);
    if (layout.placement == "sandwich") m = norm(g, layout, "post_mlp_norm", m);
    return g.binary(OpKind::Add, "residual2", x, m);
}

} // namespace

Graph buildLlama(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t kvHeads = configInt(c, "kv_heads", heads), ffn = configInt(c, "ffn");
    const std::int64_t vocab = configVocab(c), seq = configInt(c, "seq"), batch = configInt(c, "batch", 1);
    const std::int64_t positions = configInt(c, "positions", seq);
    const std::optional<AttentionSpec::Latent> latent = readLatent(c);
    if (!c.contains("head_dim") && !latent) requireDivisible(c, "hidden", h, "heads", heads);
    const std::int64_t headDim = configInt(c, "head_dim", h / heads);
    requireDivisible(c, "heads", heads, "kv_heads", kvHeads);
    if (seq > positions)
        throw InputError(configLabel(c) + ": field 'seq' (" + std::to_string(seq) + ") exceeds 'positions' (" +
                         std::to_string(positions) + ")");
    const bool dropout = configBool(c, "dropout", false), tied = configBool(c, "tied_embeddings", false);
    DecoderLayout layout;
    layout.layerNorm = configChoice(c, "norm", {"rms", "layer"}) == "layer";
    layout.placement = configChoice(c, "norm_placement", {"pre", "sandwich", "post"});
    layout.parallel = configChoice(c, "parallel_residual", {"none", "separate", "shared"});
    if (layout.parallel != "none" && layout.placement != "pre")
        throw InputError(configLabel(c) + ": field 'parallel_residual' needs 'norm_placement' pre, not '" + layout.placement + "'");
    if (c.contains("sliding_window")) layout.window = configInt(c, "sliding_window");
    if (c.contains("global_every")) layout.globalEvery = configInt(c, "global_every");
    const std::string qkNorm = configChoice(c, "qk_norm", {"none", "head", "full"});

    GraphBuilder g(configString(c, "name", "llama"), configDType(c));
    TensorId tokens = g.input("tokens", {batch, seq}, DType::I64);
    // After the tokens: the batch is dim 0 of the first graph input (core/cost/cost_model.cpp).
    std::optional<TensorId> angles;
    if (configBool(c, "rotary", true)) angles = g.input("rotary/angles", {seq, latent ? latent->ropeDim : headDim}, DType::F32);
    TensorId table = g.weight("embed/tokens.weight", {vocab, h});
    TensorId x = g.op(OpKind::Embedding, "embed/tokens", {tokens, table}, {batch, seq, h}, "bs,vh->bsh");

    AttentionSpec attn;
    attn.heads = heads;
    attn.kvHeads = kvHeads;
    attn.headDim = headDim;
    attn.bias = configBool(c, "qkv_bias", false);
    attn.outBias = configBool(c, "out_bias", false);
    attn.qkNorm = qkNorm == "head" ? AttentionSpec::QkNorm::PerHead
                  : qkNorm == "full" ? AttentionSpec::QkNorm::Full
                                     : AttentionSpec::QkNorm::None;
    attn.causal = true;
    attn.dropout = dropout;
    attn.rotary = angles;
    attn.latent = latent;
    FeedForwardSpec mlp;
    mlp.ffn = ffn;
    mlp.activation = configActivation(c, "activation", OpKind::SiLU);
    mlp.gated = configBool(c, "ffn_gated", true);
    mlp.bias = configBool(c, "mlp_bias", false);
    mlp.dropout = dropout;
    mlp.up = "up";
    mlp.down = "down";
    const std::optional<MixtureSpec> experts = readExperts(c, mlp, seq);
    // Layers before `dense_layers` keep the dense MLP (DeepSeek's first_k_dense_replace); after
    // them every `moe_every`-th layer routes (Qwen-MoE's decoder_sparse_step).
    const std::int64_t denseLayers = configInt(c, "dense_layers", 0), moeEvery = configInt(c, "moe_every", 1);
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        const bool global = layout.window == 0 || (layout.globalEvery > 0 && (i + 1) % layout.globalEvery == 0);
        attn.window = global ? 0 : layout.window;
        const bool routed = experts && i >= denseLayers && (i + 1) % moeEvery == 0;
        x = decoderLayer(g, layout, x, attn, LayerMlp{mlp, routed ? experts : std::nullopt});
    }
    {
        auto scope = g.scope("head");
        x = norm(g, layout, "norm", x);
        languageModelLoss(g, x, tied ? table : g.weight("lm_head.weight", {vocab, h}));
    }
    return g.take();
}

} // namespace tp
