#pragma once
// Built-in model configs (resources/models/*.json, compiled in) and loading a model from any
// source the CLI and GUI accept: a built-in name, a .tpgraph.json, or a Hugging Face config.json.
#include <string>
#include <vector>

#include "../graph/graph.h"
#include "../models/models.h"

namespace tp {

/// Names of the built-in models, sorted.
std::vector<std::string> builtinModelNames();
/// The config of a built-in model; throws InputError listing the known names when unknown.
ModelConfig builtinModelConfig(const std::string& name);
bool isBuiltinModel(const std::string& name);

struct ModelOptions {
    std::vector<std::string> overrides; ///< "key=value", applied to configs
    std::int64_t batch = 0;             ///< global batch; 0 keeps the source's
    std::int64_t seq = 0;               ///< sequence length; 0 keeps the source's
    bool onnxOpaqueUnsupported = false; ///< .onnx: keep unsupported operators as Opaque ops
};

struct LoadedModel {
    std::string source; ///< what the user named
    std::string name;
    ModelConfig config; ///< the effective config (null for graph files)
    Graph graph;
};

/// Loads and validates a model. Throws InputError naming the file or field at fault.
LoadedModel loadModel(const std::string& source, const ModelOptions& options = {});

} // namespace tp
