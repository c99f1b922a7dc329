#pragma once
// The one JSON reader of TP Studio's own file formats (graph, plan and project files; see
// docs/formats.md): parsing within the limits of json_limits.h, and typed field access whose
// every failure is one InputError line "<origin>: <JSON pointer>: <reason>", e.g.
// "gpt2.tpplan.json: /ops/3/strategy: must be a string, not 7".
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "error.h"

namespace tp {

/// Parses `text` after checkJsonLimits. A syntax error becomes "<origin>: not valid JSON: line L,
/// column C: <reason>"; a number beyond double "<origin>: not valid JSON: number overflow ...".
nlohmann::json parseJsonText(std::string_view text, const std::string& origin);

/// Typed getters over one document; `path` is the JSON pointer of the object or value read
/// ("" for the root), and `key` the field within it.
class JsonReader {
public:
    explicit JsonReader(std::string origin) : origin_(std::move(origin)) {}

    [[noreturn]] void fail(const std::string& path, const std::string& reason) const
    {
        throw InputError(origin_ + ": " + path + ": " + reason);
    }

    /// The field `key` of `object`; fails when `object` is not an object or lacks it.
    const nlohmann::json& field(const nlohmann::json& object, const std::string& path, const char* key) const;
    /// The field `key` of `object` when present (and `object` is an object), else null.
    const nlohmann::json* optional(const nlohmann::json& object, const char* key) const;
    std::string string(const nlohmann::json& object, const std::string& path, const char* key) const;
    const nlohmann::json& object(const nlohmann::json& parent, const std::string& path, const char* key) const;
    const nlohmann::json& array(const nlohmann::json& parent, const std::string& path, const char* key) const;
    /// An integer of at least `min`; integers beyond int64 are refused, not wrapped.
    std::int64_t integer(const nlohmann::json& v, const std::string& path,
                         std::int64_t min = std::numeric_limits<std::int64_t>::min()) const;
    std::vector<std::int64_t> intList(const nlohmann::json& object, const std::string& path, const char* key) const;
    double number(const nlohmann::json& v, const std::string& path) const;
    bool boolean(const nlohmann::json& v, const std::string& path) const;

    /// Checks the versioned envelope of TP Studio's files: an object whose "format" is `format`
    /// and whose "version" is from 1 to `current` (newer ones are refused, older ones migrate).
    /// `kind` names the file in the message for a non-object ("a plan file must hold ...").
    /// Returns the version.
    std::int64_t envelope(const nlohmann::json& doc, const std::string& kind, const std::string& format,
                          std::int64_t current) const;

    /// Runs a core call whose InputError lacks the file context and adds it: "<origin>: <path>:
    /// <context><the call's message>".
    template <typename F>
    auto within(const std::string& path, const std::string& context, F&& f) const
    {
        try {
            return f();
        } catch (const InputError& e) {
            fail(path, context + e.what());
        }
    }

    const std::string& origin() const { return origin_; }

private:
    std::string origin_;
};

/// `key` escaped for use in a JSON pointer ('~' -> "~0", '/' -> "~1").
std::string jsonPointerEscape(const std::string& key);

} // namespace tp
