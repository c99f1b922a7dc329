#include "models.h"

#include "../util/error.h"

namespace tp {

const std::vector<ModelFamily>& modelFamilies()
{
    static const std::vector<ModelFamily> families = {
        {"gpt", "decoder-only transformer with learned positions, LayerNorm and GeLU (GPT-2, GPT-3, OPT)", &buildGpt},
        {"llama", "decoder-only transformer with RMSNorm, SwiGLU and grouped-query attention (LLaMA-2/3, Mistral)", &buildLlama},
        {"bert", "post-LayerNorm encoder with pooler and masked-LM / next-sentence heads (BERT)", &buildBert},
        {"t5", "encoder-decoder with relative position bias, RMS LayerNorm and cross-attention (T5)", &buildT5},
        {"moe", "T5-shaped encoder-decoder with routed experts on every other FFN (Switch Transformer)", &buildMoe},
        {"vit", "Vision Transformer: Conv2d patches, class token, pre-LayerNorm encoder (ViT)", &buildVit},
        {"resnet", "bottleneck ResNet v1.5 and Wide-ResNet with BatchNorm (torchvision)", &buildResNet},
    };
    return families;
}

std::string configLabel(const ModelConfig& config)
{
    if (config.is_object() && config.contains("name") && config["name"].is_string())
        return "model config '" + config["name"].get<std::string>() + "'";
    return "model config";
}

Graph buildModel(const ModelConfig& config)
{
    if (!config.is_object()) throw InputError("model config: must be a JSON object");
    const std::string family = configString(config, "family", "");
    if (family.empty()) throw InputError(configLabel(config) + ": field 'family' is missing");
    // Repeat counts multiply the graph: refuse absurd ones before building anything (the
    // builder's op limit is the backstop for their products). The benchmark goes to 4,800 layers.
    constexpr std::int64_t kMaxRepeats = 50'000;
    for (const char* key : {"layers", "decoder_layers", "experts"})
        if (config.contains(key) && configInt(config, key) > kMaxRepeats)
            throw InputError(configLabel(config) + ": field '" + key + "' is " + config[key].dump() + "; at most " +
                             std::to_string(kMaxRepeats) + " are supported");
    for (const auto& f : modelFamilies())
        if (f.name == family) return f.build(config);
    std::string known;
    for (const auto& f : modelFamilies()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    throw InputError(configLabel(config) + ": field 'family' is '" + family + "'; known families: " + known);
}

void applyOverrides(ModelConfig& config, const std::vector<std::string>& overrides)
{
    for (const auto& item : overrides) {
        const auto eq = item.find('=');
        if (eq == std::string::npos || eq == 0) throw InputError("--set '" + item + "': expected key=value");
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
        if (parsed.is_discarded() || parsed.is_object() || parsed.is_array()) parsed = value;
        config[key] = parsed;
    }
}

std::int64_t configInt(const ModelConfig& config, const std::string& key)
{
    if (!config.contains(key)) throw InputError(configLabel(config) + ": field '" + key + "' is missing");
    const auto& v = config[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() <= 0)
        throw InputError(configLabel(config) + ": field '" + key + "' must be a positive integer, not " + v.dump());
    if (v.get<std::int64_t>() > (std::int64_t{1} << 40))
        throw InputError(configLabel(config) + ": field '" + key + "' is " + v.dump() + ", beyond any sane size");
    return v.get<std::int64_t>();
}

std::int64_t configInt(const ModelConfig& config, const std::string& key, std::int64_t fallback)
{
    return config.contains(key) ? configInt(config, key) : fallback;
}

bool configBool(const ModelConfig& config, const std::string& key, bool fallback)
{
    if (!config.contains(key)) return fallback;
    if (!config[key].is_boolean())
        throw InputError(configLabel(config) + ": field '" + key + "' must be true or false, not " + config[key].dump());
    return config[key].get<bool>();
}

std::string configString(const ModelConfig& config, const std::string& key, const std::string& fallback)
{
    if (!config.contains(key)) return fallback;
    if (!config[key].is_string())
        throw InputError(configLabel(config) + ": field '" + key + "' must be a string, not " + config[key].dump());
    return config[key].get<std::string>();
}

DType configDType(const ModelConfig& config)
{
    const std::string text = configString(config, "dtype", "bf16");
    auto d = parseDType(text);
    if (!d) throw InputError(configLabel(config) + ": field 'dtype' is '" + text + "'; use bf16, f16, f32 or f8");
    return *d;
}

} // namespace tp
