#pragma once
// Model builders: a model config (a JSON object of hyper-parameters with a "family" key) in,
// a Graph with real per-layer ops and scope names out. Built-in configs live in
// resources/models/*.json; a Hugging Face config.json is mapped onto the same keys (hf_config.h).
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../graph/graph.h"

namespace tp {

using ModelConfig = nlohmann::json;

struct ModelFamily {
    std::string_view name; ///< value of the config's "family" key
    std::string_view description;
    Graph (*build)(const ModelConfig& config);
};

/// Every family, in a stable order.
const std::vector<ModelFamily>& modelFamilies();

/// Builds the graph a config describes. Throws InputError naming the field at fault.
Graph buildModel(const ModelConfig& config);

/// Applies "key=value" overrides (numbers, true/false, or strings) to a config.
/// Throws InputError when an override is not of that form.
void applyOverrides(ModelConfig& config, const std::vector<std::string>& overrides);

// Field access with messages that name the field ("model config 'gpt3-175b': field 'hidden' ...").
std::int64_t configInt(const ModelConfig& config, const std::string& key);
std::int64_t configInt(const ModelConfig& config, const std::string& key, std::int64_t fallback);
bool configBool(const ModelConfig& config, const std::string& key, bool fallback);
std::string configString(const ModelConfig& config, const std::string& key, const std::string& fallback);
DType configDType(const ModelConfig& config);
/// "model config 'NAME'", the prefix of config error messages.
std::string configLabel(const ModelConfig& config);

// Builders, one per family (gpt.cpp, llama.cpp, ...); the built-in configs under resources/models/
// show the keys each reads.
Graph buildGpt(const ModelConfig& config);
Graph buildLlama(const ModelConfig& config);
Graph buildBert(const ModelConfig& config);
Graph buildT5(const ModelConfig& config);
Graph buildMoe(const ModelConfig& config);
Graph buildVit(const ModelConfig& config);
Graph buildResNet(const ModelConfig& config);

} // namespace tp
