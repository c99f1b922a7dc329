#include "mesh.h"

#include <algorithm>
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

std::string_view linkTopologyName(LinkTopology topology)
{
    switch (topology) {
    case LinkTopology::Switch: return "switch";
    case LinkTopology::FullMesh: return "full-mesh";
    case LinkTopology::Torus: return "torus";
    }
    return "switch";
}

namespace {
// The node's link as a group of `members` devices of one node sees it: on a full mesh, its
// members' peer links side by side (bandwidth and measured curves times members - 1).
LinkSpec nodeLinkFor(const Hardware& hw, int members)
{
    LinkSpec link = hw.intraNode;
    if (hw.intraTopology != LinkTopology::FullMesh || members < 2) return link;
    const double peers = members - 1;
    link.bandwidth *= peers;
    for (auto& [kind, curve] : link.busbw)
        for (auto& point : curve.points) point.second *= peers;
    return link;
}
} // namespace

void assignLinks(Mesh& mesh, const Hardware& hw)
{
    // Axis i's groups are devices that differ only in coordinate i: members are `stride` apart
    // (the product of the inner sizes) and a group spans stride * size consecutive ranks.
    std::int64_t stride = 1;
    for (int i = mesh.rank() - 1; i >= 0; --i) {
        auto& axis = mesh.axes[static_cast<size_t>(i)];
        const std::int64_t span = stride * axis.size;
        axis.crossesNodes = span > hw.gpusPerNode;
        axis.membersPerNode =
            stride >= hw.gpusPerNode ? 1 : static_cast<int>(std::min<std::int64_t>(axis.size, hw.gpusPerNode / stride));
        axis.nodeLink = nodeLinkFor(hw, axis.membersPerNode);
        axis.link = axis.crossesNodes ? hw.interNode : axis.nodeLink;
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
        MeshAxis axis;
        axis.name = kNames[i];
        axis.size = sizes[i];
        mesh.axes.push_back(axis);
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

namespace {

// Optional fields read with the same messages as `number`; absent keeps the fallback.
double optionalNumber(const nlohmann::json& doc, const std::string& origin, const std::string& path, double fallback)
{
    const nlohmann::json* v = &doc;
    std::stringstream in(path);
    std::string key;
    while (std::getline(in, key, '/')) {
        if (!v->is_object() || !v->contains(key)) return fallback;
        v = &(*v)[key];
    }
    return number(doc, origin, path);
}

constexpr const char* kCollectiveNames[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};

BandwidthCurve curveFromJson(const nlohmann::json& v, const std::string& origin, const std::string& field)
{
    if (!v.is_array() || v.empty())
        throw InputError(origin + ": field '" + field + "' must be a list of [bytes, GB/s] pairs, not " + v.dump());
    BandwidthCurve curve;
    for (size_t i = 0; i < v.size(); ++i) {
        const auto& p = v[i];
        const std::string at = field + "/" + std::to_string(i);
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
            throw InputError(origin + ": field '" + at + "' must be a [bytes, GB/s] pair, not " + p.dump());
        const double bytes = p[0].get<double>(), gbps = p[1].get<double>();
        if (!(bytes >= 1 && bytes <= 1e15) || !(gbps > 0 && gbps <= 1e6))
            throw InputError(origin + ": field '" + at + "' needs 1 <= bytes <= 1e15 and 0 < GB/s <= 1e6, not " + p.dump());
        if (!curve.points.empty() && bytes <= curve.points.back().first)
            throw InputError(origin + ": field '" + at + "': sizes must increase");
        curve.points.emplace_back(bytes, gbps * 1e9);
    }
    return curve;
}

LinkSpec linkFromJson(const nlohmann::json& doc, const std::string& origin, const std::string& name)
{
    LinkSpec link{number(doc, origin, name + "/bandwidth_gbps") * 1e9, number(doc, origin, name + "/latency_us") * 1e-6, {}};
    if (link.bandwidth <= 0) throw InputError(origin + ": field '" + name + "/bandwidth_gbps' must be positive");
    const auto& node = doc[name];
    if (!node.contains("busbw_gbps")) return link;
    const auto& curves = node["busbw_gbps"];
    if (!curves.is_object())
        throw InputError(origin + ": field '" + name + "/busbw_gbps' must be an object of collective -> [[bytes, GB/s], ...]");
    for (auto it = curves.begin(); it != curves.end(); ++it) {
        if (std::find(std::begin(kCollectiveNames), std::end(kCollectiveNames), it.key()) == std::end(kCollectiveNames))
            throw InputError(origin + ": field '" + name + "/busbw_gbps/" + it.key() +
                             "' is not a collective (all-reduce, all-gather, reduce-scatter, all-to-all)");
        link.busbw[it.key()] = curveFromJson(it.value(), origin, name + "/busbw_gbps/" + it.key());
    }
    return link;
}

GemmModel gemmFromJson(const nlohmann::json& doc, const std::string& origin, double& efficiency)
{
    GemmModel gemm;
    const auto& m = doc["matmul"];
    if (!m.is_object()) throw InputError(origin + ": field 'matmul' must be an object");
    efficiency = number(doc, origin, "matmul/efficiency");
    const double sms = optionalNumber(doc, origin, "matmul/sm_count", 0);
    if (sms > 100000 || sms != std::floor(sms))
        throw InputError(origin + ": field 'matmul/sm_count' must be a whole number up to 100000");
    gemm.smCount = static_cast<int>(sms);
    if (m.contains("tile")) {
        const auto& t = m["tile"];
        if (!t.is_array() || t.size() != 2 || !t[0].is_number_integer() || !t[1].is_number_integer() || t[0].get<long>() < 1 ||
            t[1].get<long>() < 1 || t[0].get<long>() > 4096 || t[1].get<long>() > 4096)
            throw InputError(origin + ": field 'matmul/tile' must be [rows, columns] from 1 to 4096, not " + t.dump());
        gemm.tileM = t[0].get<int>();
        gemm.tileN = t[1].get<int>();
    }
    gemm.halfEfficiencyK = optionalNumber(doc, origin, "matmul/half_efficiency_k", 0);
    return gemm;
}

} // namespace

Hardware hardwareFromJson(const std::string& text, const std::string& origin)
{
    checkJsonLimits(text, origin);
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) throw InputError(origin + ": not a JSON object");
    // json::value() throws the library's type_error for a non-string; say which field instead.
    for (const char* key : {"name", "description", "sources"})
        if (doc.contains(key) && !doc[key].is_string())
            throw InputError(origin + ": field '" + key + "' must be a string, not " + doc[key].dump());
    Hardware hw;
    hw.name = doc.value("name", origin);
    hw.description = doc.value("description", "");
    hw.sources = doc.value("sources", "");
    if (!doc.contains("peak_tflops") || !doc["peak_tflops"].is_object())
        throw InputError(origin + ": field 'peak_tflops' must be an object of dtype -> TFLOP/s");
    for (auto it = doc["peak_tflops"].begin(); it != doc["peak_tflops"].end(); ++it) {
        auto dt = parseDType(it.key());
        if (!dt) throw InputError(origin + ": field 'peak_tflops/" + it.key() + "' is not a dtype");
        hw.peakFlops[*dt] = number(doc, origin, "peak_tflops/" + it.key()) * 1e12;
    }
    // The shape model ("matmul": {...}) or, in older files, one flat efficiency.
    if (doc.contains("matmul")) {
        hw.gemm = gemmFromJson(doc, origin, hw.matmulEfficiency);
        if (hw.matmulEfficiency <= 0 || hw.matmulEfficiency > 1)
            throw InputError(origin + ": field 'matmul/efficiency' must be in (0, 1]");
    } else {
        hw.matmulEfficiency = number(doc, origin, "matmul_efficiency");
        if (hw.matmulEfficiency <= 0 || hw.matmulEfficiency > 1)
            throw InputError(origin + ": field 'matmul_efficiency' must be in (0, 1]");
    }
    hw.hbmBytes = number(doc, origin, "hbm_gib") * 1024.0 * 1024.0 * 1024.0;
    hw.hbmBandwidth = number(doc, origin, "hbm_bandwidth_gbps") * 1e9;
    hw.hbmEfficiency = optionalNumber(doc, origin, "hbm_efficiency", 1);
    if (hw.hbmEfficiency <= 0 || hw.hbmEfficiency > 1) throw InputError(origin + ": field 'hbm_efficiency' must be in (0, 1]");
    hw.minKernelSeconds = number(doc, origin, "min_kernel_us") * 1e-6;
    // Checked before the conversion to int, which is undefined for values beyond int.
    const double gpusPerNode = number(doc, origin, "gpus_per_node");
    if (gpusPerNode < 1 || gpusPerNode > 65536 || gpusPerNode != std::floor(gpusPerNode))
        throw InputError(origin + ": field 'gpus_per_node' must be a whole number from 1 to 65536, not " +
                         doc["gpus_per_node"].dump());
    hw.gpusPerNode = static_cast<int>(gpusPerNode);
    hw.intraNode = linkFromJson(doc, origin, "intra_node");
    if (doc["intra_node"].contains("topology")) {
        const auto& t = doc["intra_node"]["topology"];
        const LinkTopology all[] = {LinkTopology::Switch, LinkTopology::FullMesh, LinkTopology::Torus};
        const auto it = std::find_if(std::begin(all), std::end(all),
                                     [&](LinkTopology k) { return t.is_string() && t.get<std::string>() == linkTopologyName(k); });
        if (it == std::end(all))
            throw InputError(origin + ": field 'intra_node/topology' must be \"switch\", \"full-mesh\" or \"torus\", not " +
                             t.dump().substr(0, 40));
        hw.intraTopology = *it;
    }
    hw.interNode = linkFromJson(doc, origin, "inter_node");
    if (doc.contains("calibrated")) {
        const auto& c = doc["calibrated"];
        if (!c.is_array()) throw InputError(origin + ": field 'calibrated' must be a list of field names");
        for (const auto& f : c) {
            if (!f.is_string()) throw InputError(origin + ": field 'calibrated' must hold strings, not " + f.dump());
            hw.calibrated.push_back(f.get<std::string>());
        }
    }
    return hw;
}

std::string hardwareToJsonText(const Hardware& hw)
{
    using nlohmann::ordered_json;
    ordered_json peak = ordered_json::object();
    for (const auto& [dtype, flops] : hw.peakFlops) peak[std::string(dtypeName(dtype))] = flops / 1e12;
    auto link = [](const LinkSpec& l) {
        ordered_json j = {{"bandwidth_gbps", l.bandwidth / 1e9}, {"latency_us", l.latency * 1e6}};
        for (const auto& [kind, curve] : l.busbw) {
            ordered_json points = ordered_json::array();
            for (const auto& [bytes, bw] : curve.points) points.push_back({bytes, bw / 1e9});
            j["busbw_gbps"][kind] = points;
        }
        return j;
    };
    ordered_json doc;
    doc["name"] = hw.name;
    if (!hw.description.empty()) doc["description"] = hw.description;
    doc["peak_tflops"] = peak;
    if (hw.gemm.smCount > 0 || hw.gemm.halfEfficiencyK > 0)
        doc["matmul"] = {{"efficiency", hw.matmulEfficiency},
                         {"sm_count", hw.gemm.smCount},
                         {"tile", {hw.gemm.tileM, hw.gemm.tileN}},
                         {"half_efficiency_k", hw.gemm.halfEfficiencyK}};
    else
        doc["matmul_efficiency"] = hw.matmulEfficiency;
    doc["hbm_gib"] = hw.hbmBytes / (1024.0 * 1024.0 * 1024.0);
    doc["hbm_bandwidth_gbps"] = hw.hbmBandwidth / 1e9;
    doc["hbm_efficiency"] = hw.hbmEfficiency;
    doc["min_kernel_us"] = hw.minKernelSeconds * 1e6;
    doc["gpus_per_node"] = hw.gpusPerNode;
    doc["intra_node"] = link(hw.intraNode);
    if (hw.intraTopology != LinkTopology::Switch) doc["intra_node"]["topology"] = linkTopologyName(hw.intraTopology);
    doc["inter_node"] = link(hw.interNode);
    if (!hw.calibrated.empty()) doc["calibrated"] = hw.calibrated;
    if (!hw.sources.empty()) doc["sources"] = hw.sources;
    return doc.dump(2) + "\n";
}

double BandwidthCurve::at(double bytes) const
{
    if (points.empty()) return 0;
    if (bytes <= points.front().first) return points.front().second * bytes / points.front().first;
    if (bytes >= points.back().first) return points.back().second;
    size_t i = 1;
    while (points[i].first < bytes) ++i;
    const auto& [x0, y0] = points[i - 1];
    const auto& [x1, y1] = points[i];
    const double f = std::log(bytes / x0) / std::log(x1 / x0);
    return y0 + f * (y1 - y0);
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
