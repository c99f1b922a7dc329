#pragma once
// Data files of resources/ compiled into the binary (see resources/CMakeLists.txt).
#include <string_view>
#include <vector>

namespace tp {

struct BuiltinResource {
    std::string_view path;    ///< relative to resources/, e.g. "models/gpt3-175b.json"
    std::string_view content; ///< the file's bytes
};

/// Every built-in resource, sorted by path.
const std::vector<BuiltinResource>& builtinResources();

} // namespace tp
