#include "hf_config.h"

#include <algorithm>
#include <optional>

#include "../util/error.h"
#include "../util/json_limits.h"

namespace tp {

using nlohmann::json;

namespace {

// Reads fields of one config.json; every message names the file and the Hugging Face key.
class HfFields {
public:
    HfFields(const json& doc, const std::string& origin) : doc_(doc), origin_(origin) {}

    [[noreturn]] void fail(const std::string& key, const std::string& why) const
    {
        throw InputError(origin_ + ": field '" + key + "' " + why);
    }

    // HF writes null for "use the default" (e.g. gpt2's n_inner), so null counts as absent.
    bool has(const std::string& key) const { return doc_.contains(key) && !doc_[key].is_null(); }

    std::int64_t integer(const std::string& key) const
    {
        if (!has(key)) fail(key, "is missing");
        const auto& v = doc_[key];
        if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) fail(key, "must be a positive integer, not " + v.dump());
        return v.get<std::int64_t>();
    }
    std::int64_t integer(const std::string& key, std::int64_t fallback) const { return has(key) ? integer(key) : fallback; }

    std::string text(const std::string& key, const std::string& fallback) const
    {
        if (!has(key)) return fallback;
        if (!doc_[key].is_string()) fail(key, "must be a string, not " + doc_[key].dump());
        return doc_[key].get<std::string>();
    }

    bool flag(const std::string& key, bool fallback) const
    {
        if (!has(key)) return fallback;
        if (!doc_[key].is_boolean()) fail(key, "must be true or false, not " + doc_[key].dump());
        return doc_[key].get<bool>();
    }

    // HF activation names onto ours ("gelu_new", "gelu_pytorch_tanh" are GeLU approximations).
    std::string activation(const std::string& key, const std::string& fallback) const
    {
        const std::string name = text(key, fallback);
        if (name == "gelu" || name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return "gelu";
        if (name == "relu") return "relu";
        if (name == "silu" || name == "swish") return "silu";
        if (name == "tanh") return "tanh";
        fail(key, "is '" + name + "'; supported activations: gelu (and its tanh approximations), relu, silu, tanh");
    }

    const json& doc() const { return doc_; }

private:
    const json& doc_;
    const std::string& origin_;
};

ModelConfig fromGpt2(const HfFields& f)
{
    ModelConfig c;
    c["family"] = "gpt";
    c["layers"] = f.integer("n_layer");
    c["hidden"] = f.integer("n_embd");
    c["heads"] = f.integer("n_head");
    c["vocab"] = f.integer("vocab_size");
    c["positions"] = f.integer("n_positions");
    c["seq"] = c["positions"];
    if (f.has("n_inner")) c["ffn"] = f.integer("n_inner");
    c["activation"] = f.activation("activation_function", "gelu_new");
    c["tied_embeddings"] = f.flag("tie_word_embeddings", true);
    return c;
}

/// A config of `family` with the stack's size under the names BertConfig gave them
/// (num_hidden_layers, hidden_size, num_attention_heads), which most configs since share.
ModelConfig stackOf(const HfFields& f, const char* family)
{
    ModelConfig c;
    c["family"] = family;
    c["layers"] = f.integer("num_hidden_layers");
    c["hidden"] = f.integer("hidden_size");
    c["heads"] = f.integer("num_attention_heads");
    return c;
}

ModelConfig fromOpt(const HfFields& f)
{
    ModelConfig c = stackOf(f, "gpt");
    c["ffn"] = f.integer("ffn_dim");
    c["vocab"] = f.integer("vocab_size");
    // OPT's learned position table has two rows more than its context (a padding offset).
    const std::int64_t context = f.integer("max_position_embeddings");
    c["positions"] = context + 2;
    c["seq"] = context;
    c["activation"] = f.activation("activation_function", "relu");
    c["tied_embeddings"] = f.flag("tie_word_embeddings", true);
    if (!f.flag("do_layer_norm_before", true))
        f.fail("do_layer_norm_before", "is false (post-LayerNorm OPT, e.g. opt-350m); only pre-LayerNorm OPT is supported");
    if (f.integer("word_embed_proj_dim", f.integer("hidden_size")) != f.integer("hidden_size"))
        f.fail("word_embed_proj_dim", "differs from 'hidden_size'; OPT with embedding projections is not supported");
    if (!f.flag("enable_bias", true)) f.fail("enable_bias", "is false; OPT without biases is not supported");
    return c;
}

// Transformers' defaults for keys a family's released files leave out (Gemma-3's text_config
// has no vocab_size or max_position_embeddings); 0: the key is required.
struct DecoderDefaults {
    std::int64_t vocab = 0;
    std::int64_t positions = 0;
};

std::int64_t integerOr(const HfFields& f, const std::string& key, std::int64_t fallback)
{
    return fallback > 0 ? f.integer(key, fallback) : f.integer(key);
}

// The keys every rotary decoder shares (LlamaConfig's names; Qwen, Gemma, Phi-3, OLMo-2 and
// StarCoder2 use them too). `tiedByDefault`: the family's tie_word_embeddings default.
ModelConfig rotaryDecoder(const HfFields& f, bool tiedByDefault, const DecoderDefaults& defaults = {})
{
    ModelConfig c = stackOf(f, "llama");
    c["kv_heads"] = f.integer("num_key_value_heads", f.integer("num_attention_heads"));
    if (f.has("head_dim")) c["head_dim"] = f.integer("head_dim");
    c["ffn"] = f.integer("intermediate_size");
    c["vocab"] = integerOr(f, "vocab_size", defaults.vocab);
    c["positions"] = integerOr(f, "max_position_embeddings", defaults.positions);
    c["seq"] = c["positions"];
    c["activation"] = f.activation("hidden_act", "silu");
    c["tied_embeddings"] = f.flag("tie_word_embeddings", tiedByDefault);
    return c;
}

// Which layers attend within a window: HF's `layer_types` ("sliding_attention" /
// "full_attention" per layer) when given, else the family's rule (`fallbackEvery`: every n-th
// layer global, 0 every layer local). TP Studio's builder takes a period, so an irregular list
// is refused by name.
void slidingLayers(const HfFields& f, ModelConfig& c, std::int64_t fallbackEvery)
{
    if (!f.has("sliding_window")) return;
    c["sliding_window"] = f.integer("sliding_window");
    std::int64_t every = fallbackEvery;
    if (f.has("layer_types")) {
        const json& types = f.doc()["layer_types"];
        if (!types.is_array() || static_cast<std::int64_t>(types.size()) != c["layers"].get<std::int64_t>())
            f.fail("layer_types", "must list one of \"sliding_attention\" or \"full_attention\" per layer");
        std::vector<bool> global;
        for (const auto& t : types) {
            if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
                f.fail("layer_types", "must list one of \"sliding_attention\" or \"full_attention\" per layer, not " + t.dump());
            global.push_back(t == "full_attention");
        }
        const auto first = std::find(global.begin(), global.end(), true);
        every = first == global.end() ? 0 : (first - global.begin()) + 1;
        for (size_t i = 0; i < global.size(); ++i)
            if (global[i] != (every > 0 && (static_cast<std::int64_t>(i) + 1) % every == 0))
                f.fail("layer_types", "is not periodic (a global layer every n layers); TP Studio cannot lay it out");
        if (every == 1) {
            c.erase("sliding_window"); // every layer global
            return;
        }
    }
    if (every > 0) c["global_every"] = every;
}

ModelConfig fromLlama(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", false);
    c["mlp_bias"] = f.flag("mlp_bias", false);
    slidingLayers(f, c, 0); // Mistral: every layer within its window
    return c;
}

// Qwen2 and Qwen3 use a window only with use_sliding_window, and then only from layer
// max_window_layers on; the released models leave it off.
void qwenWindow(const HfFields& f)
{
    if (f.flag("use_sliding_window", false))
        f.fail("use_sliding_window", "is true; TP Studio lays out Qwen's sliding window only when it is off");
}

ModelConfig fromQwen2(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["qkv_bias"] = true; // Qwen2Attention: q, k and v with biases, o without
    qwenWindow(f);
    return c;
}

ModelConfig fromQwen3(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", false);
    c["qk_norm"] = "head";
    qwenWindow(f);
    return c;
}

// Routed experts on the rotary decoder: `expertsKey` experts of `ffnKey` each, top-k per token.
// Transformers' MoE families that route every layer leave the rest to these keys; the layers
// that stay dense are the first k (DeepSeek's first_k_dense_replace, a Qwen-MoE mlp_only_layers
// of 0..k-1) and, after them, all but every decoder_sparse_step-th.
void routedExperts(const HfFields& f, ModelConfig& c, const char* expertsKey, const char* ffnKey)
{
    c["experts"] = f.integer(expertsKey);
    c["experts_per_token"] = f.integer("num_experts_per_tok", 2);
    if (c["experts_per_token"].get<std::int64_t>() > c["experts"].get<std::int64_t>())
        f.fail("num_experts_per_tok", "exceeds '" + std::string(expertsKey) + "'");
    c["expert_ffn"] = f.integer(ffnKey);
    if (f.has("decoder_sparse_step")) c["moe_every"] = f.integer("decoder_sparse_step");
    if (f.has("mlp_only_layers")) {
        const json& dense = f.doc()["mlp_only_layers"];
        if (!dense.is_array()) f.fail("mlp_only_layers", "must be a list of layer indices");
        for (size_t i = 0; i < dense.size(); ++i)
            if (!dense[i].is_number_integer() || dense[i].get<std::int64_t>() != static_cast<std::int64_t>(i))
                f.fail("mlp_only_layers", "lists " + dense.dump().substr(0, 60) +
                                              "; TP Studio lays out dense layers only as the first k (0, 1, ..., k-1)");
        if (!dense.empty()) c["dense_layers"] = static_cast<std::int64_t>(dense.size());
    }
}

ModelConfig fromMixtral(const HfFields& f)
{
    ModelConfig c = fromLlama(f);
    routedExperts(f, c, "num_local_experts", "intermediate_size");
    return c;
}

// Qwen2-MoE (Qwen1.5-MoE): Qwen2's attention; routed experts of moe_intermediate_size plus a
// shared expert of shared_expert_intermediate_size scaled by a sigmoid gate.
ModelConfig fromQwen2Moe(const HfFields& f)
{
    ModelConfig c = fromQwen2(f);
    routedExperts(f, c, "num_experts", "moe_intermediate_size");
    if (f.has("shared_expert_intermediate_size")) {
        c["shared_expert_ffn"] = f.integer("shared_expert_intermediate_size");
        c["shared_expert_gate"] = true;
    }
    return c;
}

ModelConfig fromQwen3Moe(const HfFields& f)
{
    ModelConfig c = fromQwen3(f);
    routedExperts(f, c, "num_experts", "moe_intermediate_size");
    return c;
}

// DeepSeek-V3: multi-head latent attention, the first first_k_dense_replace layers dense, then
// routed experts (sigmoid scores with a selection bias, noaux_tc) and n_shared_experts shared
// ones of moe_intermediate_size each. The multi-token-prediction module
// (num_nextn_predict_layers) is a training add-on outside the model's layers; it is not laid out.
ModelConfig fromDeepseekV3(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", false);
    if (f.has("q_lora_rank")) c["q_lora_rank"] = f.integer("q_lora_rank");
    for (const char* key : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) c[key] = f.integer(key);
    c["experts"] = f.integer("n_routed_experts");
    c["experts_per_token"] = f.integer("num_experts_per_tok");
    if (c["experts_per_token"].get<std::int64_t>() > c["experts"].get<std::int64_t>())
        f.fail("num_experts_per_tok", "exceeds 'n_routed_experts'");
    c["expert_ffn"] = f.integer("moe_intermediate_size");
    if (f.has("n_shared_experts")) c["shared_expert_ffn"] = f.integer("n_shared_experts") * f.integer("moe_intermediate_size");
    if (f.has("first_k_dense_replace") && f.doc()["first_k_dense_replace"] != 0)
        c["dense_layers"] = f.integer("first_k_dense_replace");
    if (f.integer("moe_layer_freq", 1) != 1)
        f.fail("moe_layer_freq", "is not 1; TP Studio lays out experts on every layer after the first_k_dense_replace dense ones");
    const std::string scoring = f.text("scoring_func", "softmax");
    if (scoring != "softmax" && scoring != "sigmoid") f.fail("scoring_func", "is '" + scoring + "'; supported: softmax, sigmoid");
    c["router"] = scoring;
    c["router_selection_bias"] = f.text("topk_method", "greedy") == "noaux_tc";
    return c;
}

// Gemma: GeGLU (hidden_activation, older files hidden_act), head_dim 256 by default, tied head.
// Gemma-2 adds norms after attention and MLP and a window on every other layer (layer 0 local);
// Gemma-3 also q/k norms and one global layer in six.
ModelConfig gemmaDecoder(const HfFields& f, int generation)
{
    // Gemma3TextConfig's defaults: a 262,208-token vocabulary and 131,072 positions.
    ModelConfig c = rotaryDecoder(f, true, generation >= 3 ? DecoderDefaults{262208, 131072} : DecoderDefaults{});
    if (!f.has("head_dim")) c["head_dim"] = 256;
    c["activation"] = f.activation(f.has("hidden_activation") ? "hidden_activation" : "hidden_act", "gelu_pytorch_tanh");
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", false);
    if (generation >= 2) {
        c["norm_placement"] = "sandwich";
        slidingLayers(f, c, generation == 2 ? 2 : f.integer("sliding_window_pattern", 6));
    }
    if (generation >= 3) c["qk_norm"] = "head";
    return c;
}

ModelConfig fromGemma(const HfFields& f) { return gemmaDecoder(f, 1); }
ModelConfig fromGemma2(const HfFields& f) { return gemmaDecoder(f, 2); }
ModelConfig fromGemma3Text(const HfFields& f) { return gemmaDecoder(f, 3); }

// Phi-3: fused qkv_proj and gate_up_proj hold exactly the separate projections' weights; they are
// laid out as separate ops so that each can be split by heads and by the FFN dim, as tensor
// parallelism splits the fused ones (docs/formats.md).
ModelConfig fromPhi3(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    slidingLayers(f, c, 0);
    return c;
}

ModelConfig fromOlmo2(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", false);
    c["qk_norm"] = "full";
    c["norm_placement"] = "post";
    return c;
}

ModelConfig fromStarcoder2(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, true);
    c["activation"] = f.activation("hidden_act", "gelu_pytorch_tanh");
    c["norm"] = "layer";
    c["ffn_gated"] = false;
    const bool bias = f.flag("use_bias", true);
    c["qkv_bias"] = c["out_bias"] = c["mlp_bias"] = bias;
    slidingLayers(f, c, 0);
    return c;
}

// GPT-NeoX (Pythia): LayerNorm, biases everywhere, GeLU MLP, attention and MLP in parallel on
// the layer's input by default. Rotary on rotary_pct of each head is laid out on all of it (the
// angles have no parameters; the extra streamed bytes are a few percent of a layer's).
ModelConfig fromGptNeox(const HfFields& f)
{
    ModelConfig c = rotaryDecoder(f, false);
    c["activation"] = f.activation("hidden_act", "gelu");
    c["norm"] = "layer";
    c["ffn_gated"] = false;
    c["qkv_bias"] = c["out_bias"] = f.flag("attention_bias", true);
    c["mlp_bias"] = true;
    c["parallel_residual"] = f.flag("use_parallel_residual", true) ? "separate" : "none";
    return c;
}

// Falcon: multi-query attention (one kv head) unless new_decoder_architecture, which has
// num_kv_heads and a norm each for attention and MLP; ALiBi models have no rotary angles.
ModelConfig fromFalcon(const HfFields& f)
{
    ModelConfig c = stackOf(f, "llama");
    const bool newArchitecture = f.flag("new_decoder_architecture", false);
    c["kv_heads"] = newArchitecture ? f.integer("num_kv_heads", f.integer("num_attention_heads"))
                    : f.flag("multi_query", true) ? 1
                                                   : f.integer("num_attention_heads");
    if (f.has("head_dim")) c["head_dim"] = f.integer("head_dim");
    c["ffn"] = f.integer("ffn_hidden_size", 4 * f.integer("hidden_size"));
    c["vocab"] = f.integer("vocab_size");
    c["positions"] = f.integer("max_position_embeddings", 2048);
    c["seq"] = c["positions"];
    c["activation"] = f.activation("activation", "gelu");
    c["tied_embeddings"] = f.flag("tie_word_embeddings", true);
    c["norm"] = "layer";
    c["ffn_gated"] = false;
    const bool bias = f.flag("bias", false);
    c["qkv_bias"] = c["out_bias"] = c["mlp_bias"] = bias;
    c["rotary"] = !f.flag("alibi", false);
    c["parallel_residual"] = newArchitecture ? "separate" : f.flag("parallel_attn", true) ? "shared" : "none";
    return c;
}

ModelConfig fromBert(const HfFields& f)
{
    ModelConfig c = stackOf(f, "bert");
    c["ffn"] = f.integer("intermediate_size");
    c["vocab"] = f.integer("vocab_size");
    c["positions"] = f.integer("max_position_embeddings");
    c["seq"] = c["positions"];
    c["type_vocab"] = f.integer("type_vocab_size", 2);
    c["activation"] = f.activation("hidden_act", "gelu");
    return c;
}

// T5 and Switch share the stack keys. feed_forward_proj is "relu" (v1.0) or "gated-gelu" (v1.1).
ModelConfig encoderDecoderStacks(const HfFields& f, const char* family)
{
    ModelConfig c;
    c["family"] = family;
    c["layers"] = f.integer("num_layers");
    c["decoder_layers"] = f.integer("num_decoder_layers", f.integer("num_layers"));
    c["hidden"] = f.integer("d_model");
    c["heads"] = f.integer("num_heads");
    c["head_dim"] = f.integer("d_kv");
    c["ffn"] = f.integer("d_ff");
    c["vocab"] = f.integer("vocab_size");
    c["buckets"] = f.integer("relative_attention_num_buckets", 32);
    c["seq"] = f.integer("n_positions", 512);
    c["tied_embeddings"] = f.flag("tie_word_embeddings", true);
    std::string projection = f.text("feed_forward_proj", "relu");
    const std::string gatedPrefix = "gated-";
    const bool gated = projection.starts_with(gatedPrefix);
    if (gated) projection = projection.substr(gatedPrefix.size());
    if (projection != "relu" && projection != "gelu" && projection != "gelu_new" && projection != "silu")
        f.fail("feed_forward_proj",
               "is '" + f.text("feed_forward_proj", "") + "'; supported: relu, gelu, silu, optionally with a 'gated-' prefix");
    c["activation"] = projection == "gelu_new" ? "gelu" : projection;
    c["ffn_gated"] = gated;
    return c;
}

ModelConfig fromT5(const HfFields& f) { return encoderDecoderStacks(f, "t5"); }

ModelConfig fromSwitch(const HfFields& f)
{
    ModelConfig c = encoderDecoderStacks(f, "moe");
    c["experts"] = f.integer("num_experts");
    const std::int64_t every = f.integer("encoder_sparse_step", 1);
    if (f.integer("decoder_sparse_step", 1) != every)
        f.fail("decoder_sparse_step", "differs from 'encoder_sparse_step'; TP Studio uses one expert frequency");
    c["expert_every"] = every;
    if (f.has("expert_capacity")) c["capacity"] = f.integer("expert_capacity");
    return c;
}

ModelConfig fromVit(const HfFields& f)
{
    ModelConfig c = stackOf(f, "vit");
    c["ffn"] = f.integer("intermediate_size");
    c["image"] = f.integer("image_size");
    c["patch"] = f.integer("patch_size");
    c["channels"] = f.integer("num_channels", 3);
    if (!f.flag("qkv_bias", true)) f.fail("qkv_bias", "is false; ViT without q/k/v biases is not supported");
    // The classifier has one row per label; HF derives the count from id2label (default 2).
    std::int64_t classes = 2;
    if (f.has("id2label")) {
        if (!f.doc()["id2label"].is_object() || f.doc()["id2label"].empty())
            f.fail("id2label", "must be a non-empty object mapping class ids to names");
        classes = static_cast<std::int64_t>(f.doc()["id2label"].size());
    } else if (f.has("num_labels")) {
        classes = f.integer("num_labels");
    }
    c["classes"] = classes;
    return c;
}

struct Architecture {
    const char* modelType;
    ModelConfig (*map)(const HfFields&);
};

const Architecture kArchitectures[] = {
    {"gpt2", &fromGpt2},
    {"opt", &fromOpt},
    {"llama", &fromLlama},
    {"mistral", &fromLlama},
    {"qwen2", &fromQwen2},
    {"qwen3", &fromQwen3},
    {"mixtral", &fromMixtral},
    {"qwen2_moe", &fromQwen2Moe},
    {"qwen3_moe", &fromQwen3Moe},
    {"deepseek_v3", &fromDeepseekV3},
    {"gemma", &fromGemma},
    {"gemma2", &fromGemma2},
    {"gemma3", &fromGemma3Text}, // without text_config: its fields at the top level
    {"gemma3_text", &fromGemma3Text},
    {"phi3", &fromPhi3},
    {"olmo2", &fromOlmo2},
    {"starcoder2", &fromStarcoder2},
    {"gpt_neox", &fromGptNeox},
    {"falcon", &fromFalcon},
    {"bert", &fromBert},
    {"t5", &fromT5},
    {"vit", &fromVit},
    {"switch_transformers", &fromSwitch},
};

// Hub files rarely carry _name_or_path; the download says more than the architecture:
// ".../Qwen2.5-7B/config.json" is "Qwen2.5-7B", "qwen3-8b.json" "qwen3-8b". A nested text_config
// is named like its file ("path: text_config").
std::string nameFromPath(const std::string& origin, const std::string& type)
{
    std::string path = origin.substr(0, origin.find(": "));
    const auto slash = path.find_last_of("/\\");
    std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string folder;
    if (slash != std::string::npos) {
        const std::string parent = path.substr(0, slash);
        const auto before = parent.find_last_of("/\\");
        folder = before == std::string::npos ? parent : parent.substr(before + 1);
    }
    for (const char* suffix : {".hf.json", ".json"})
        if (stem.size() > std::string(suffix).size() && stem.ends_with(suffix)) {
            stem.resize(stem.size() - std::string(suffix).size());
            break;
        }
    if (stem == "config") stem = folder == "." || folder == ".." ? "" : folder;
    return stem.empty() ? type : stem;
}

} // namespace

ModelConfig modelConfigFromHuggingFace(const std::string& text, const std::string& origin)
{
    checkJsonLimits(text, origin);
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) throw InputError(origin + ": not valid JSON");
    if (!doc.is_object()) throw InputError(origin + ": a config.json must hold a JSON object");
    auto it = doc.find("model_type");
    if (it == doc.end() || it->is_null())
        throw InputError(origin + ": field 'model_type' is missing; cannot tell the architecture");
    if (!it->is_string())
        throw InputError(origin + ": field 'model_type' must be a string naming the architecture, not " + it->dump());
    const std::string type = it->get<std::string>();
    // A multimodal config (Gemma-3) holds its language model under text_config: that is the model
    // planned, its vision tower left out.
    if (type == "gemma3" && doc.contains("text_config")) {
        if (!doc["text_config"].is_object())
            throw InputError(origin + ": field 'text_config' must be an object holding the language model's config, not " +
                             doc["text_config"].dump().substr(0, 40));
        json text = doc["text_config"];
        if (!text.contains("model_type") || text["model_type"].is_null()) text["model_type"] = type + "_text";
        if (!text.contains("_name_or_path") && doc.contains("_name_or_path")) text["_name_or_path"] = doc["_name_or_path"];
        return modelConfigFromHuggingFace(text.dump(), origin + ": text_config");
    }
    const HfFields fields(doc, origin);
    std::string known;
    for (const auto& a : kArchitectures) {
        if (type == a.modelType) {
            ModelConfig c = a.map(fields);
            c["name"] = fields.text("_name_or_path", "");
            if (c["name"].get<std::string>().empty()) c["name"] = nameFromPath(origin, type);
            c["batch"] = 8;
            return c;
        }
        known += (known.empty() ? "" : ", ") + std::string(a.modelType);
    }
    throw InputError(origin + ": field 'model_type' is '" + type +
                     "', an architecture TP Studio does not know; supported: " + known);
}

} // namespace tp
