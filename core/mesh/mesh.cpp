#include "mesh.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../util/error.h"
#include "../util/json_limits.h"
#include "builtin_resources.h"

namespace tp {

double Hardware::peak(DType dtype) const
{
    auto it = peakFlops.find(dtype);
    if (it != peakFlops.end()) return it->second;
    it = peakFlops.find(DType::BF16);
    return it != peakFlops.end() ? it->second : 1e12;
}

int Mesh::devices() const
{
    int n = 1;
    for (const auto& a : axes) n *= a.size;
    return n;
}

std::string Mesh::shapeText() const
{
    std::string s;
    for (size_t i = 0; i < axes.size(); ++i) s += (i ? "x" : "") + std::to_string(axes[i].size);
    return s;
}

int Mesh::axisIndex(const std::string& name) const
{
    for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i].name == name) return static_cast<int>(i);
    return -1;
}

void assignLinks(Mesh& mesh, const Hardware& hw)
{
    // Axis i's groups are devices that differ only in coordinate i: members are `stride` apart
    // (the product of the inner sizes) and a group spans stride * size consecutive ranks.
    std::int64_t stride = 1;
    for (int i = mesh.rank() - 1; i >= 0; --i) {
        auto& axis = mesh.axes[static_cast<size_t>(i)];
        const std::int64_t span = stride * axis.size;
        axis.crossesNodes = span > hw.gpusPerNode;
        axis.link = axis.crossesNodes ? hw.interNode : hw.intraNode;
        stride = span;
    }
}

Mesh parseMesh(const std::string& text, const Hardware& hw)
{
    static const char* kNames[] = {"x", "y", "z", "w"};
    Mesh mesh;
    std::vector<int> sizes;
    // Spaces and the other ways people write "by" (X, the multiplication sign) are accepted;
    // messages quote what was typed.
    std::string normalized;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == ' ' || text[i] == '\t') continue;
        if (text[i] == 'X') {
            normalized += 'x';
        } else if (text.compare(i, 2, "\xc3\x97") == 0) { // U+00D7 in UTF-8
            normalized += 'x';
            ++i;
        } else {
            normalized += text[i];
        }
    }
    std::string part;
    std::stringstream in(normalized);
    while (std::getline(in, part, 'x')) {
        int size = 0;
        try {
            size_t used = 0;
            size = std::stoi(part, &used);
            if (used != part.size()) size = 0;
        } catch (const std::exception&) {}
        if (size > 65536) throw InputError("mesh '" + text + "': axis size " + part + " is over 65536 devices");
        if (size <= 0) throw InputError("mesh '" + text + "': '" + part + "' is not an axis size (use e.g. 8, 2x8 or 4x4x8)");
        sizes.push_back(size);
    }
    if (sizes.empty() || normalized.back() == 'x')
        throw InputError("mesh '" + text + "': expected axis sizes separated by 'x', e.g. 2x8");
    if (sizes.size() > 4) throw InputError("mesh '" + text + "': at most 4 axes");
    std::int64_t devices = 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
        devices *= sizes[i];
        mesh.axes.push_back({kNames[i], sizes[i], {}, false});
    }
    if (devices > 65536) throw InputError("mesh '" + text + "': more than 65536 devices");
    assignLinks(mesh, hw);
    return mesh;
}

namespace {
constexpr std::string_view kHardwareDir = "hardware/";
constexpr std::string_view kJson = ".json";

double number(const nlohmann::json& doc, const std::string& origin, const std::string& path)
{
    const nlohmann::json* v = &doc;
    std::string walked;
    std::stringstream in(path);
    std::string key;
    while (std::getline(in, key, '/')) {
        walked += "/" + key;
        if (!v->is_object() || !v->contains(key)) throw InputError(origin + ": field '" + walked + "' is missing");
        v = &(*v)[key];
    }
    if (!v->is_number() || v->get<double>() < 0)
        throw InputError(origin + ": field '" + walked + "' must be a non-negative number, not " + v->dump());
    return v->get<double>();
}
} // namespace

Hardware hardwareFromJson(const std::string& text, const std::string& origin)
{
    checkJsonLimits(text, origin);
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) throw InputError(origin + ": not a JSON object");
    // json::value() throws the library's type_error for a non-string; say which field instead.
    for (const char* key : {"name", "description"})
        if (doc.contains(key) && !doc[key].is_string())
            throw InputError(origin + ": field '" + key + "' must be a string, not " + doc[key].dump());
    Hardware hw;
    hw.name = doc.value("name", origin);
    hw.description = doc.value("description", "");
    if (!doc.contains("peak_tflops") || !doc["peak_tflops"].is_object())
        throw InputError(origin + ": field 'peak_tflops' must be an object of dtype -> TFLOP/s");
    for (auto it = doc["peak_tflops"].begin(); it != doc["peak_tflops"].end(); ++it) {
        auto dt = parseDType(it.key());
        if (!dt) throw InputError(origin + ": field 'peak_tflops/" + it.key() + "' is not a dtype");
        hw.peakFlops[*dt] = number(doc, origin, "peak_tflops/" + it.key()) * 1e12;
    }
    hw.matmulEfficiency = number(doc, origin, "matmul_efficiency");
    if (hw.matmulEfficiency <= 0 || hw.matmulEfficiency > 1)
        throw InputError(origin + ": field 'matmul_efficiency' must be in (0, 1]");
    hw.hbmBytes = number(doc, origin, "hbm_gib") * 1024.0 * 1024.0 * 1024.0;
    hw.hbmBandwidth = number(doc, origin, "hbm_bandwidth_gbps") * 1e9;
    hw.minKernelSeconds = number(doc, origin, "min_kernel_us") * 1e-6;
    // Checked before the conversion to int, which is undefined for values beyond int.
    const double gpusPerNode = number(doc, origin, "gpus_per_node");
    if (gpusPerNode < 1 || gpusPerNode > 65536 || gpusPerNode != std::floor(gpusPerNode))
        throw InputError(origin + ": field 'gpus_per_node' must be a whole number from 1 to 65536, not " +
                         doc["gpus_per_node"].dump());
    hw.gpusPerNode = static_cast<int>(gpusPerNode);
    hw.intraNode = {number(doc, origin, "intra_node/bandwidth_gbps") * 1e9, number(doc, origin, "intra_node/latency_us") * 1e-6};
    hw.interNode = {number(doc, origin, "inter_node/bandwidth_gbps") * 1e9, number(doc, origin, "inter_node/latency_us") * 1e-6};
    if (hw.intraNode.bandwidth <= 0 || hw.interNode.bandwidth <= 0)
        throw InputError(origin + ": link bandwidths must be positive");
    return hw;
}

std::vector<std::string> hardwarePresetNames()
{
    std::vector<std::string> names;
    for (const auto& r : builtinResources()) {
        const std::string path(r.path);
        if (path.rfind(kHardwareDir, 0) == 0 && path.size() > kJson.size())
            names.push_back(path.substr(kHardwareDir.size(), path.size() - kHardwareDir.size() - kJson.size()));
    }
    return names;
}

Hardware loadHardware(const std::string& nameOrPath)
{
    const std::string path = std::string(kHardwareDir) + nameOrPath + std::string(kJson);
    for (const auto& r : builtinResources())
        if (r.path == path) return hardwareFromJson(std::string(r.content), nameOrPath);
    std::ifstream file(nameOrPath, std::ios::binary);
    if (!file) {
        std::string known;
        for (const auto& n : hardwarePresetNames()) known += (known.empty() ? "" : ", ") + n;
        throw InputError("hardware '" + nameOrPath + "': neither a preset (" + known + ") nor a readable file");
    }
    std::ostringstream text;
    text << file.rdbuf();
    return hardwareFromJson(text.str(), nameOrPath);
}

} // namespace tp
