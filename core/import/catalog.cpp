#include "catalog.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../graph/validate.h"
#include "graph_json.h"
#include "onnx_import.h"
#include "../util/error.h"
#include "../util/json_limits.h"
#include "builtin_resources.h"
#include "hf_config.h"

namespace tp {

namespace {
constexpr std::string_view kModelsDir = "models/";
constexpr std::string_view kJsonSuffix = ".json";

std::string readWholeFile(const std::string& path)
{
    // Refuse a huge file by its size, before reading it into memory.
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxJsonFileBytes)
        throw InputError(path + ": " + std::to_string(size) + " bytes; JSON files over " +
                         std::to_string(kMaxJsonFileBytes >> 20) + " MiB are not read");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

std::vector<std::string> builtinModelNames()
{
    std::vector<std::string> names;
    for (const auto& r : builtinResources())
        if (r.path.substr(0, kModelsDir.size()) == kModelsDir && endsWith(std::string(r.path), kJsonSuffix))
            names.emplace_back(r.path.substr(kModelsDir.size(), r.path.size() - kModelsDir.size() - kJsonSuffix.size()));
    return names;
}

bool isBuiltinModel(const std::string& name)
{
    for (const auto& n : builtinModelNames())
        if (n == name) return true;
    return false;
}

ModelConfig builtinModelConfig(const std::string& name)
{
    const std::string path = std::string(kModelsDir) + name + std::string(kJsonSuffix);
    for (const auto& r : builtinResources())
        if (r.path == path) {
            ModelConfig config = nlohmann::json::parse(r.content);
            if (!config.contains("name")) config["name"] = name;
            return config;
        }
    std::string known;
    for (const auto& n : builtinModelNames()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown model '" + name + "'; built-in models: " + known +
                     " (or give a .tpgraph.json, .onnx or config.json file)");
}

LoadedModel loadModel(const std::string& source, const ModelOptions& options)
{
    LoadedModel model;
    model.source = source;
    auto buildFrom = [&](ModelConfig config) {
        applyOverrides(config, options.overrides);
        if (options.batch > 0) config["batch"] = options.batch;
        if (options.seq > 0) config["seq"] = options.seq;
        model.graph = buildModel(config);
        // A shape that overflows comes from the config's sizes: say which config.
        try {
            validateGraph(model.graph);
        } catch (const InputError& e) {
            throw InputError(configLabel(config) + ": " + e.what());
        }
        model.name = configString(config, "name", source);
        model.config = std::move(config);
    };
    if (isBuiltinModel(source)) {
        buildFrom(builtinModelConfig(source));
    } else if (endsWith(source, ".tpgraph.json")) {
        if (!options.overrides.empty() || options.batch > 0 || options.seq > 0)
            throw InputError(source + ": --set, --batch and --seq do not apply to a graph file (its shapes are fixed)");
        model.graph = readGraphJson(readWholeFile(source), source);
        model.name = model.graph.name;
    } else if (endsWith(source, ".onnx")) {
        if (!options.overrides.empty()) throw InputError(source + ": --set does not apply to an ONNX file");
        OnnxImportOptions onnx;
        onnx.batch = options.batch;
        onnx.seq = options.seq;
        onnx.opaqueUnsupported = options.onnxOpaqueUnsupported;
        model.graph = importOnnxFile(source, onnx);
        model.name = model.graph.name;
    } else if (endsWith(source, ".json")) {
        if (!std::filesystem::exists(source)) throw InputError(source + ": no such file");
        try {
            buildFrom(modelConfigFromHuggingFace(readWholeFile(source), source));
        } catch (const InputError& e) {
            // Builder messages name the mapped config; say which file it came from.
            const std::string message = e.what();
            if (message.starts_with(source)) throw;
            throw InputError(source + ": " + message);
        }
    } else {
        builtinModelConfig(source); // throws the "unknown model" message
    }
    validateGraph(model.graph);
    return model;
}

} // namespace tp
