// tpplan bench sweep: every built-in model on a spread of meshes, training and inference, with
// the default options, each planned in a child process of its own (bench_child.h) under a time
// limit; the slowest cases first (issue "No slow searches", docs/PERFORMANCE.md).
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench_child.h"
#include "cli.h"
#include "mesh/mesh.h"
#include "import/catalog.h"
#include "plan/planner.h"
#include "util/error.h"
#include "util/format.h"

namespace tp::cli {

namespace {

using Json = nlohmann::json;

/// The meshes of the issue: 1D of every small size (primes included), 2D and 3D, one of 128.
const std::vector<std::string> kSweepMeshes = {"1", "3", "5", "6", "7", "16", "2x3", "3x5", "1x8", "2x2x2", "2x2x4", "4x4x8"};
constexpr unsigned kDefaultCaseTimeoutS = 60;

std::vector<std::string> commaList(const std::string& text)
{
    std::vector<std::string> items;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) items.push_back(item);
    return items;
}

/// One case in the child: plans MODEL as `tpplan plan MODEL --mesh M --mode MODE` does and
/// prints what it took and what it found. Bad input is an outcome of the case, not a failure.
int runSweepCase(const Options& o, std::ostream& out)
{
    Json j = {{"model", o.positional.at(2)}, {"mesh", o.mesh}, {"mode", o.mode}};
    try {
        Planner planner;
        const auto start = std::chrono::steady_clock::now();
        const PlannerResult planned = planner.plan(planRequest(o, o.positional.at(2)));
        j["plan_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        j["fits"] = planned.result.fits;
        j["step_time_s"] = planned.pipeline ? planned.pipeline->stepSeconds : planned.result.breakdown.stepSeconds;
        j["per_device_bytes"] = planned.result.breakdown.perDeviceBytes;
        j["combinations"] = planned.candidates.size();
        if (planned.pipeline) j["stages"] = planned.pipeline->layersOfStage.size();
        j["prices_tried"] = planned.result.pricesTried;
        j["tables_solved"] = planned.result.tablesSolved;
    } catch (const InputError& e) {
        j["input_error"] = e.what();
    }
    out << j.dump() << "\n";
    return 0;
}

std::string caseText(const Json& c)
{
    return c["model"].get<std::string>() + " " + c["mesh"].get<std::string>() + " " + c["mode"].get<std::string>();
}

std::string outcomeText(const Json& c)
{
    if (c.contains("error")) return c["error"].get<std::string>();
    if (c.contains("input_error")) return "input: " + c["input_error"].get<std::string>();
    return formatSeconds(c["step_time_s"].get<double>()) + (c["fits"].get<bool>() ? "" : " (does not fit)");
}

void printSweep(const Json& doc, std::ostream& out)
{
    const Json& m = doc["machine"];
    out << "Sweep: " << doc["cases"].size() << " cases, " << m["cpu"].get<std::string>() << ", " << m["cores"] << " cores, "
        << m["build_type"].get<std::string>() << " build; time limit " << doc["settings"]["case_timeout_s"] << " s per case\n"
        << "Plan ms: Planner::plan in the child (model load, fold, cost models, search); process: the whole child.\n\n";
    out << std::left << std::setw(34) << "case" << std::right << std::setw(11) << "plan ms" << std::setw(12) << "process s"
        << std::setw(10) << "RSS MiB" << "  plan\n";
    for (const auto& c : doc["cases"]) {
        std::ostringstream plan;
        if (c.contains("plan_ms")) plan << std::fixed << std::setprecision(1) << c["plan_ms"].get<double>();
        else plan << "-";
        out << std::left << std::setw(34) << caseText(c) << std::right << std::setw(11) << plan.str() << std::setw(12)
            << std::fixed << std::setprecision(2) << c["process_wall_ms"].get<double>() / 1e3 << std::setw(10)
            << std::setprecision(0) << c["peak_rss_bytes"].get<double>() / (1024.0 * 1024.0) << "  " << outcomeText(c) << "\n";
    }
    const Json& s = doc["summary"];
    out << "\n" << s["over_2s"] << " of " << doc["cases"].size() << " cases took 2 s or more, " << s["timed_out"]
        << " ran past the time limit, " << s["failed"] << " failed; slowest " << std::setprecision(2)
        << s["slowest_s"].get<double>() << " s\n";
}

} // namespace

int runSweep(const Options& o, std::ostream& out)
{
    // positional[0] is "sweep"; a child is "sweep sweep-case MODEL".
    if (o.positional.size() == 3 && o.positional[1] == "sweep-case") return runSweepCase(o, out);
    if (o.positional.size() != 1)
        throw UsageError("usage: tpplan bench sweep [--models A,B] [--meshes M,N] [--modes train,infer] "
                         "[--case-timeout S] [--hardware H] [--json] [-o FILE]");
    std::vector<std::string> models = o.sweepModels.empty() ? builtinModelNames() : commaList(o.sweepModels);
    const auto known = builtinModelNames();
    for (const auto& m : models)
        if (std::find(known.begin(), known.end(), m) == known.end())
            throw UsageError("--models: '" + m + "' is not a built-in model (tpplan models lists them)");
    const std::vector<std::string> meshes = o.sweepMeshes.empty() ? kSweepMeshes : commaList(o.sweepMeshes);
    const Hardware hardware = loadHardware(o.hardware);
    for (const auto& mesh : meshes) {
        try {
            parseMesh(mesh, hardware);
        } catch (const InputError& e) {
            throw UsageError(std::string("--meshes: ") + e.what());
        }
    }
    const std::vector<std::string> modes = commaList(o.sweepModes.empty() ? "train,infer" : o.sweepModes);
    for (const auto& mode : modes)
        if (mode != "train" && mode != "infer") throw UsageError("--modes: '" + mode + "' is not train or infer");
    const unsigned timeout = o.caseTimeoutS > 0 ? static_cast<unsigned>(o.caseTimeoutS) : kDefaultCaseTimeoutS;

    Json machine = machineJson();
    const std::string self = selfExecutable().string();
    Json cases = Json::array();
    const size_t total = models.size() * meshes.size() * modes.size();
    size_t done = 0;
    int failed = 0, timedOut = 0, over2 = 0;
    double slowest = 0;
    for (const auto& model : models)
        for (const auto& mesh : meshes)
            for (const auto& mode : modes) {
                std::cerr << "sweep: [" << ++done << "/" << total << "] " << model << " " << mesh << " " << mode << " ..." << std::flush;
                const ChildResult child = runChild({self, "bench", "sweep", "sweep-case", model, "--mesh", mesh, "--mode", mode,
                                                    "--hardware", o.hardware},
                                                   {}, timeout);
                Json j = {{"model", model}, {"mesh", mesh}, {"mode", mode}};
                if (child.timedOut) {
                    j["error"] = "ran past " + std::to_string(timeout) + " s";
                    ++timedOut;
                } else if (child.exitCode != 0) {
                    j["error"] = "exit code " + std::to_string(child.exitCode);
                    ++failed;
                } else {
                    try {
                        j = Json::parse(child.output);
                    } catch (const std::exception& e) {
                        j["error"] = std::string("unreadable output: ") + e.what();
                        ++failed;
                    }
                }
                j["peak_rss_bytes"] = static_cast<double>(child.peakRssKiB) * 1024.0;
                j["process_wall_ms"] = child.wallMs;
                j["process_cpu_ms"] = child.cpuMs;
                slowest = std::max(slowest, child.wallMs / 1e3);
                if (child.wallMs >= 2000) ++over2;
                std::cerr << " " << std::fixed << std::setprecision(2) << child.wallMs / 1e3 << " s"
                          << (j.contains("error") ? "  " + j["error"].get<std::string>() : std::string()) << "\n";
                cases.push_back(std::move(j));
            }
    // Slowest first, then by name: the table opens on what needs work.
    std::vector<Json> sorted(cases.begin(), cases.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const Json& a, const Json& b) {
        return a["process_wall_ms"].get<double>() > b["process_wall_ms"].get<double>();
    });
    machine["load_average_end"] = loadAverage();
    Json doc = {{"format", "tpstudio.bench.sweep"},
                {"version", 1},
                {"settings",
                 {{"models", models}, {"meshes", meshes}, {"modes", modes}, {"hardware", o.hardware}, {"case_timeout_s", timeout},
                  {"options", "the defaults of tpplan plan"}}},
                {"machine", machine},
                {"summary", {{"over_2s", over2}, {"timed_out", timedOut}, {"failed", failed}, {"slowest_s", slowest}}},
                {"cases", sorted}};
    if (o.json || !o.output.empty()) emitJson(o, doc, out);
    if (!o.json) printSweep(doc, out);
    if (failed) {
        std::cerr << "tpplan: bench sweep: " << failed << " case(s) failed (their entries say how)\n";
        return 1;
    }
    return 0;
}

} // namespace tp::cli
