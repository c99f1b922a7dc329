#include "hf_config.h"

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

ModelConfig fromOpt(const HfFields& f)
{
    ModelConfig c;
    c["family"] = "gpt";
    c["layers"] = f.integer("num_hidden_layers");
    c["hidden"] = f.integer("hidden_size");
    c["heads"] = f.integer("num_attention_heads");
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

ModelConfig fromLlama(const HfFields& f)
{
    ModelConfig c;
    c["family"] = "llama";
    c["layers"] = f.integer("num_hidden_layers");
    c["hidden"] = f.integer("hidden_size");
    c["heads"] = f.integer("num_attention_heads");
    c["kv_heads"] = f.integer("num_key_value_heads", f.integer("num_attention_heads"));
    if (f.has("head_dim")) c["head_dim"] = f.integer("head_dim");
    c["ffn"] = f.integer("intermediate_size");
    c["vocab"] = f.integer("vocab_size");
    c["positions"] = f.integer("max_position_embeddings");
    c["seq"] = c["positions"];
    c["activation"] = f.activation("hidden_act", "silu");
    c["tied_embeddings"] = f.flag("tie_word_embeddings", false);
    return c;
}

ModelConfig fromBert(const HfFields& f)
{
    ModelConfig c;
    c["family"] = "bert";
    c["layers"] = f.integer("num_hidden_layers");
    c["hidden"] = f.integer("hidden_size");
    c["heads"] = f.integer("num_attention_heads");
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
    ModelConfig c;
    c["family"] = "vit";
    c["layers"] = f.integer("num_hidden_layers");
    c["hidden"] = f.integer("hidden_size");
    c["heads"] = f.integer("num_attention_heads");
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
    {"gpt2", &fromGpt2}, {"opt", &fromOpt}, {"llama", &fromLlama}, {"mistral", &fromLlama},
    {"bert", &fromBert}, {"t5", &fromT5},   {"vit", &fromVit},     {"switch_transformers", &fromSwitch},
};

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
    const HfFields fields(doc, origin);
    std::string known;
    for (const auto& a : kArchitectures) {
        if (type == a.modelType) {
            ModelConfig c = a.map(fields);
            c["name"] = fields.text("_name_or_path", type);
            if (c["name"].get<std::string>().empty()) c["name"] = type;
            c["batch"] = 8;
            return c;
        }
        known += (known.empty() ? "" : ", ") + std::string(a.modelType);
    }
    throw InputError(origin + ": field 'model_type' is '" + type +
                     "', an architecture TP Studio does not know; supported: " + known);
}

} // namespace tp
