#include "hf_config.h"

#include "../util/error.h"

namespace tp {

using nlohmann::json;

namespace {

struct HfField { const char* hf; const char* ours; };

std::int64_t hfInt(const json& doc, const std::string& origin, const char* key)
{
    auto it = doc.find(key);
    if (it == doc.end()) throw InputError(origin + ": field '" + key + "' is missing");
    if (!it->is_number_integer()) throw InputError(origin + ": field '" + key + "' must be an integer, not " + it->dump());
    return it->get<std::int64_t>();
}

ModelConfig fromGpt2(const json& doc, const std::string& origin)
{
    ModelConfig c;
    c["family"] = "gpt";
    c["layers"] = hfInt(doc, origin, "n_layer");
    c["hidden"] = hfInt(doc, origin, "n_embd");
    c["heads"] = hfInt(doc, origin, "n_head");
    c["vocab"] = hfInt(doc, origin, "vocab_size");
    c["positions"] = hfInt(doc, origin, "n_positions");
    c["seq"] = c["positions"];
    if (doc.contains("n_inner") && doc["n_inner"].is_number_integer()) c["ffn"] = doc["n_inner"];
    return c;
}

struct Architecture {
    const char* modelType;
    ModelConfig (*map)(const json&, const std::string&);
};

const Architecture kArchitectures[] = {
    {"gpt2", &fromGpt2},
};

} // namespace

ModelConfig modelConfigFromHuggingFace(const std::string& text, const std::string& origin)
{
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) throw InputError(origin + ": not valid JSON");
    if (!doc.is_object()) throw InputError(origin + ": a config.json must hold a JSON object");
    auto it = doc.find("model_type");
    if (it == doc.end() || !it->is_string())
        throw InputError(origin + ": field 'model_type' is missing; cannot tell the architecture");
    const std::string type = it->get<std::string>();
    std::string known;
    for (const auto& a : kArchitectures) {
        if (type == a.modelType) {
            ModelConfig c = a.map(doc, origin);
            if (!c.contains("name")) c["name"] = doc.value("_name_or_path", type);
            if (!c.contains("batch")) c["batch"] = 8;
            return c;
        }
        known += (known.empty() ? "" : ", ") + std::string(a.modelType);
    }
    throw InputError(origin + ": field 'model_type' is '" + type + "', an architecture TP Studio does not know; supported: " + known);
}

} // namespace tp
