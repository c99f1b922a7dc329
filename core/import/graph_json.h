#pragma once
// The graph file format v1 (.tpgraph.json): a versioned envelope around tensors and ops.
// See docs/formats.md.
#include <string>

#include <nlohmann/json.hpp>

#include "../graph/graph.h"

namespace tp {

inline constexpr int kGraphFormatVersion = 1;

nlohmann::json graphToJson(const Graph& graph);
/// Serialises with two-space indentation and a trailing newline; deterministic.
std::string writeGraphJson(const Graph& graph);

/// Parses and validates a graph document. `origin` (usually the file name) prefixes messages,
/// which also carry the JSON path of the offending field. Throws InputError.
Graph graphFromJson(const nlohmann::json& document, const std::string& origin);
Graph readGraphJson(const std::string& text, const std::string& origin);

} // namespace tp
