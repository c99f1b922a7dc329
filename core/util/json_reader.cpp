#include "json_reader.h"

#include "json_limits.h"

namespace tp {

using nlohmann::json;

json parseJsonText(std::string_view text, const std::string& origin)
{
    checkJsonLimits(text, origin);
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: reason";
        // keep the position and the reason, drop the library's prefix.
        std::string detail = e.what();
        const auto at = detail.find(" at line ");
        detail = at == std::string::npos ? "byte " + std::to_string(e.byte) : detail.substr(at + 4);
        throw InputError(origin + ": not valid JSON: " + detail);
    } catch (const json::exception& e) {
        // Not a syntax error but, e.g., a number beyond double ("1e309", out_of_range.406):
        // keep the reason, drop the library's prefix.
        std::string detail = e.what();
        const auto prefixEnd = detail.find("] ");
        throw InputError(origin +
                         ": not valid JSON: " + (prefixEnd == std::string::npos ? detail : detail.substr(prefixEnd + 2)));
    }
}

const json& JsonReader::field(const json& object, const std::string& path, const char* key) const
{
    if (!object.is_object()) fail(path.empty() ? "/" : path, "must be an object, not " + std::string(object.type_name()));
    auto it = object.find(key);
    if (it == object.end()) fail(path + "/" + key, "is missing");
    return *it;
}

const json* JsonReader::optional(const json& object, const char* key) const
{
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

std::string JsonReader::string(const json& object, const std::string& path, const char* key) const
{
    const json& v = field(object, path, key);
    if (!v.is_string()) fail(path + "/" + key, "must be a string, not " + std::string(v.type_name()));
    return v.get<std::string>();
}

const json& JsonReader::object(const json& parent, const std::string& path, const char* key) const
{
    const json& v = field(parent, path, key);
    if (!v.is_object()) fail(path + "/" + key, "must be an object, not " + std::string(v.type_name()));
    return v;
}

const json& JsonReader::array(const json& parent, const std::string& path, const char* key) const
{
    const json& v = field(parent, path, key);
    if (!v.is_array()) fail(path + "/" + key, "must be an array, not " + std::string(v.type_name()));
    return v;
}

std::int64_t JsonReader::integer(const json& v, const std::string& path, std::int64_t min) const
{
    if (!v.is_number_integer()) fail(path, "must be an integer, not " + v.dump());
    // nlohmann keeps integers above INT64_MAX as unsigned; get<int64_t> would wrap them.
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        fail(path, "is " + v.dump() + ", too large for a 64-bit integer");
    const auto value = v.get<std::int64_t>();
    if (value < min) fail(path, "is " + v.dump() + ", must be at least " + std::to_string(min));
    return value;
}

std::vector<std::int64_t> JsonReader::intList(const json& object, const std::string& path, const char* key) const
{
    const json& v = array(object, path, key);
    const std::string p = path + "/" + key;
    std::vector<std::int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(integer(v[i], p + "/" + std::to_string(i)));
    return out;
}

double JsonReader::number(const json& v, const std::string& path) const
{
    if (!v.is_number()) fail(path, "must be a number, not " + v.dump());
    return v.get<double>();
}

bool JsonReader::boolean(const json& v, const std::string& path) const
{
    if (!v.is_boolean()) fail(path, "must be true or false, not " + v.dump());
    return v.get<bool>();
}

std::int64_t JsonReader::envelope(const json& doc, const std::string& kind, const std::string& format, std::int64_t current) const
{
    if (!doc.is_object()) fail("/", "a " + kind + " file must hold a JSON object, not " + std::string(doc.type_name()));
    const std::string found = string(doc, "", "format");
    if (found != format) fail("/format", "is '" + found + "', expected '" + format + "'");
    const std::int64_t version = integer(field(doc, "", "version"), "/version");
    if (version > current)
        fail("/version", "is " + std::to_string(version) + ", newer than this TP Studio reads (" + std::to_string(current) +
                             "); update TP Studio");
    if (version < 1) fail("/version", "is " + std::to_string(version) + "; versions start at 1");
    return version;
}

std::string jsonPointerEscape(const std::string& key)
{
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

} // namespace tp
