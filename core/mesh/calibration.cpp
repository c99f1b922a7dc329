#include "calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "../util/json_reader.h"
#include "builtin_resources.h"

namespace tp {

using nlohmann::json;

namespace {

constexpr const char* kLinks[] = {"intra_node", "inter_node"};
constexpr const char* kCollectives[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
constexpr const char* kGemmKinds[] = {"large", "small_k", "tp", "small_n"};

// A number in [1e-9, max]: within the bounds the hardware reader holds its figures to
// (mesh.cpp), and never so small that an efficiency derived from it rounds to 0.
double positive(const JsonReader& r, const json& object, const std::string& path, const char* key, double max)
{
    const std::string at = path + "/" + key;
    const json& v = r.field(object, path, key);
    if (!v.is_number() || !(v.get<double>() > 0)) r.fail(at, "must be a positive number, not " + v.dump());
    if (v.get<double>() < 1e-9) r.fail(at, "is " + v.dump() + ", below 1e-9: too small to be a measurement");
    if (v.get<double>() > max) r.fail(at, "is " + v.dump() + ", above the largest plausible value " + json(max).dump());
    return v.get<double>();
}

const json& nonEmptyArray(const JsonReader& r, const json& object, const std::string& path, const char* key)
{
    const json& v = r.array(object, path, key);
    if (v.empty()) r.fail(path + "/" + key, "is an empty list");
    return v;
}

std::vector<GemmMeasurement> readGemm(const JsonReader& r, const json& doc)
{
    std::vector<GemmMeasurement> out;
    const json& list = nonEmptyArray(r, doc, "", "gemm");
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string at = "/gemm/" + std::to_string(i);
        if (!list[i].is_object()) r.fail(at, "must be an object, not " + list[i].dump());
        GemmMeasurement g;
        g.kind = r.string(list[i], at, "kind");
        if (std::find(std::begin(kGemmKinds), std::end(kGemmKinds), g.kind) == std::end(kGemmKinds))
            r.fail(at + "/kind", "is '" + g.kind + "', expected large, small_k, tp or small_n");
        g.m = static_cast<double>(r.integer(r.field(list[i], at, "m"), at + "/m", 1));
        g.n = static_cast<double>(r.integer(r.field(list[i], at, "n"), at + "/n", 1));
        g.k = static_cast<double>(r.integer(r.field(list[i], at, "k"), at + "/k", 1));
        g.tflops = positive(r, list[i], at, "tflops", 1e6);
        out.push_back(g);
    }
    if (std::none_of(out.begin(), out.end(), [](const GemmMeasurement& g) { return g.kind == "large"; }))
        r.fail("/gemm", "holds no shape of kind 'large', which the matmul efficiency comes from");
    return out;
}

// A curve of [{bytes, busbw_gbps}, ...] points, sizes increasing; busbw kept in bytes/s.
BandwidthCurve readCurve(const JsonReader& r, const json& link, const std::string& path, const char* kind)
{
    BandwidthCurve curve;
    const json& list = nonEmptyArray(r, link, path, kind);
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string at = path + "/" + kind + "/" + std::to_string(i);
        if (!list[i].is_object()) r.fail(at, "must be an object, not " + list[i].dump());
        const double bytes = positive(r, list[i], at, "bytes", 1e15);
        if (bytes < 1) r.fail(at + "/bytes", "must be at least 1");
        const double busbw = positive(r, list[i], at, "busbw_gbps", 1e6);
        if (!curve.points.empty() && bytes <= curve.points.back().first)
            r.fail(at + "/bytes", "sizes must increase from point to point");
        curve.points.emplace_back(bytes, busbw * 1e9);
    }
    return curve;
}

void readCollectives(const JsonReader& r, const json& doc, CalibrationResults& c)
{
    const json& all = r.object(doc, "", "collectives");
    for (auto it = all.begin(); it != all.end(); ++it)
        if (std::find(std::begin(kLinks), std::end(kLinks), it.key()) == std::end(kLinks))
            r.fail("/collectives/" + jsonPointerEscape(it.key()), "is not a link (intra_node, inter_node)");
    for (const char* name : kLinks) {
        if (!r.optional(all, name)) continue;
        const std::string path = std::string("/collectives/") + name;
        const json& link = r.object(all, "/collectives", name);
        (void)r.integer(r.field(link, path, "group_size"), path + "/group_size", 2);
        auto& curves = c.links[name];
        for (const char* kind : kCollectives)
            if (r.optional(link, kind)) curves[kind] = readCurve(r, link, path, kind);
        if (curves.empty()) r.fail(path, "holds no collective (all-reduce, all-gather, reduce-scatter, all-to-all)");
    }
}

} // namespace

std::string_view calibrationScript()
{
    for (const auto& r : builtinResources())
        if (r.path == "calibrate/calibrate.py") return r.content;
    throw std::logic_error("calibrate/calibrate.py is not among the built-in resources (resources/CMakeLists.txt)");
}

CalibrationResults readCalibrationResults(const std::string& text, const std::string& origin)
{
    const json doc = parseJsonText(text, origin);
    const JsonReader r(origin);
    r.envelope(doc, "calibration results", kCalibrationFormat, kCalibrationFormatVersion);
    CalibrationResults c;
    c.device = r.string(doc, "", "device");
    if (c.device.empty()) r.fail("/device", "is empty");
    c.dryRun = r.boolean(r.field(doc, "", "dry_run"), "/dry_run");
    c.backend = r.string(doc, "", "backend");
    c.worldSize = r.integer(r.field(doc, "", "world_size"), "/world_size", 1);
    c.ranksPerNode = r.integer(r.field(doc, "", "ranks_per_node"), "/ranks_per_node", 1);
    if (c.worldSize % c.ranksPerNode != 0)
        r.fail("/ranks_per_node",
               "is " + std::to_string(c.ranksPerNode) + ", which does not divide world_size " + std::to_string(c.worldSize));
    if (const json* memory = r.optional(doc, "device_memory_bytes")) {
        if (!memory->is_number() || memory->get<double>() < 0)
            r.fail("/device_memory_bytes", "must be a non-negative number, not " + memory->dump());
        c.deviceMemoryBytes = memory->get<double>();
    }
    const std::string dtype = r.string(doc, "", "dtype");
    const auto parsed = parseDType(dtype);
    if (!parsed) r.fail("/dtype", "'" + dtype + "' is not a dtype (bf16, f16, f32, ...)");
    c.dtype = *parsed;
    if (r.optional(doc, "gemm")) c.gemm = readGemm(r, doc);
    if (r.optional(doc, "hbm")) c.hbmGBps = positive(r, r.object(doc, "", "hbm"), "/hbm", "gbps", 1e6);
    if (r.optional(doc, "elementwise"))
        c.kernelSeconds = positive(r, r.object(doc, "", "elementwise"), "/elementwise", "seconds", 1);
    if (r.optional(doc, "collectives")) readCollectives(r, doc, c);
    if (c.gemm.empty() && !c.hbmGBps && !c.kernelSeconds && c.links.empty())
        r.fail("/", "holds no measurement (gemm, hbm, elementwise or collectives)");
    return c;
}

GemmFit fitGemm(const std::vector<GemmMeasurement>& gemm, double fallbackHalfK)
{
    std::vector<const GemmMeasurement*> fitted;
    bool smallK = false;
    for (const auto& g : gemm) {
        if (g.kind != "large" && g.kind != "small_k") continue;
        fitted.push_back(&g);
        smallK = smallK || g.kind == "small_k";
    }
    if (fitted.empty()) return {0, fallbackHalfK};
    // For a given half, the large rate minimizing sum((rate_i - large*x_i) / rate_i)^2 with
    // x_i = K_i / (K_i + half) is sum(u) / sum(u^2), u_i = x_i / rate_i.
    auto solve = [&](double half, double& residual) {
        double su = 0, suu = 0;
        for (const auto* g : fitted) {
            const double u = g->k / (g->k + half) / g->tflops;
            su += u;
            suu += u * u;
        }
        const double large = su / suu;
        residual = 0;
        for (const auto* g : fitted) {
            const double e = large * g->k / (g->k + half) / g->tflops - 1;
            residual += e * e;
        }
        return large;
    };
    double residual = 0;
    if (!smallK) return {solve(fallbackHalfK, residual), fallbackHalfK};
    // The residual against half: a log-spaced scan from 0 to 65536, then a golden-section
    // search in the bracket around the best point of the scan.
    std::vector<double> grid{0};
    for (double h = 0.25; h <= 65536; h *= 1.1) grid.push_back(h);
    size_t best = 0;
    double bestResidual = INFINITY;
    for (size_t i = 0; i < grid.size(); ++i) {
        solve(grid[i], residual);
        if (residual < bestResidual) {
            bestResidual = residual;
            best = i;
        }
    }
    double lo = grid[best == 0 ? 0 : best - 1], hi = grid[std::min(best + 1, grid.size() - 1)];
    const double ratio = (std::sqrt(5.0) - 1) / 2;
    for (int step = 0; step < 100 && hi - lo > 1e-9 * (1 + hi); ++step) {
        const double a = hi - ratio * (hi - lo), b = lo + ratio * (hi - lo);
        double ra = 0, rb = 0;
        solve(a, ra);
        solve(b, rb);
        (ra < rb ? hi : lo) = ra < rb ? b : a;
    }
    const double half = (lo + hi) / 2;
    return {solve(half, residual), half};
}

namespace {

std::string describe(const CalibrationResults& c, const Hardware& base, const std::string& origin, bool capped)
{
    std::string d = "Calibrated from " + origin + " (" + c.device + ", " + std::to_string(c.worldSize) + " ranks, " +
                    std::to_string(c.ranksPerNode) + " per node, " + c.backend + ") on the " + base.name + " preset";
    if (c.dryRun) d += "; a dry run on CPU: its figures are the CPU's, not a GPU cluster's";
    if (capped) d += "; a measured rate exceeds the preset's peak, so its efficiency is capped at 1: check the base preset";
    if (c.ranksPerNode != base.gpusPerNode)
        d += "; measured with " + std::to_string(c.ranksPerNode) + " ranks per node, gpus_per_node stays the preset's " +
             std::to_string(base.gpusPerNode);
    return d;
}

} // namespace

Hardware hardwareFromCalibration(const CalibrationResults& c, const Hardware& base, const std::string& origin)
{
    Hardware hw = base;
    hw.calibrated.clear();
    bool capped = false;
    if (!c.gemm.empty()) {
        const GemmFit fit = fitGemm(c.gemm, base.gemm.halfEfficiencyK);
        const double efficiency = fit.largeTflops * 1e12 / base.peak(c.dtype);
        capped = efficiency > 1;
        hw.matmulEfficiency = std::min(efficiency, 1.0);
        hw.gemm.halfEfficiencyK = fit.halfEfficiencyK;
        hw.calibrated.push_back("matmul");
    }
    if (c.hbmGBps) {
        const double efficiency = *c.hbmGBps * 1e9 / base.hbmBandwidth;
        capped = capped || efficiency > 1;
        hw.hbmEfficiency = std::min(efficiency, 1.0);
        hw.calibrated.push_back("hbm");
    }
    if (c.kernelSeconds) {
        hw.minKernelSeconds = *c.kernelSeconds;
        hw.calibrated.push_back("min_kernel_us");
    }
    for (const char* name : kLinks) {
        auto found = c.links.find(name);
        if (found == c.links.end()) continue;
        LinkSpec& link = std::string(name) == "intra_node" ? hw.intraNode : hw.interNode;
        // The script measures the whole node's group, which a full mesh's per-link figure is
        // not: the measured figure then stands for every group of the node, as a switch's does.
        if (std::string(name) == "intra_node") hw.intraTopology = LinkTopology::Switch;
        for (const char* kind : kCollectives) {
            auto curve = found->second.find(kind);
            if (curve == found->second.end()) continue;
            link.busbw[kind] = curve->second;
            if (std::string(kind) == "all-reduce") link.bandwidth = curve->second.points.back().second;
            hw.calibrated.push_back(std::string(name) + "/" + kind);
        }
    }
    hw.name = base.name + "-calibrated";
    hw.description = describe(c, base, origin, capped);
    hw.sources = "tpplan calibrate --import " + origin + " (" + c.device + (c.dryRun ? ", dry run" : "") +
                 "): the fields in 'calibrated'; the rest from " + base.name + (base.sources.empty() ? "" : ": " + base.sources);
    return hw;
}

Hardware hardwareFromCalibration(const std::string& resultsText, const Hardware& base, const std::string& origin)
{
    return hardwareFromCalibration(readCalibrationResults(resultsText, origin), base, origin);
}

std::optional<std::string> presetForDevice(const std::string& device, double memoryBytes)
{
    std::string name;
    for (char ch : device) name += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
    const double gib = memoryBytes / (1024.0 * 1024.0 * 1024.0);
    if (has("H200")) return "h200-dgx";
    if (has("H100") && has("PCIE")) return "h100-pcie";
    // The 96 GB HBM2e part (Meta's Grand Teton) streams at 2.4 TB/s, not the 80 GB part's 3.35;
    // the 94 GB H100 NVL is another part again.
    if (has("H100") && !has("NVL") && gib > 88) return "h100-96g-hbm2e";
    if (has("H100")) return "h100-dgx";
    if (has("V100")) return "v100-dgx2";
    if (!has("A100")) return std::nullopt;
    if (has("PCIE")) return "a100-pcie";
    if (has("40GB") || (gib > 0 && gib < 60)) return "a100-40g-dgx";
    return "a100-80g-dgx";
}

std::vector<std::string> figuresFromPreset(const Hardware& hw)
{
    auto measured = [&](const std::string& f) {
        return std::find(hw.calibrated.begin(), hw.calibrated.end(), f) != hw.calibrated.end();
    };
    std::vector<std::string> out;
    for (const char* f : {"matmul", "hbm", "min_kernel_us"})
        if (!measured(f)) out.push_back(f);
    for (const char* name : kLinks) {
        std::vector<std::string> missing;
        for (const char* kind : kCollectives)
            if (!measured(std::string(name) + "/" + kind)) missing.push_back(std::string(name) + "/" + kind);
        if (missing.size() == std::size(kCollectives))
            out.push_back(name);
        else
            out.insert(out.end(), missing.begin(), missing.end());
    }
    for (const char* f : {"peak", "hbm_gib", "latency_us"}) out.push_back(f);
    return out;
}

std::string calibrationSummary(const Hardware& hw)
{
    if (hw.calibrated.empty()) return "";
    auto join = [](const std::vector<std::string>& parts) {
        std::string text;
        for (const auto& p : parts) text += (text.empty() ? "" : ", ") + p;
        return text;
    };
    return "calibrated: " + join(hw.calibrated) + "; from the preset: " + join(figuresFromPreset(hw));
}

} // namespace tp
