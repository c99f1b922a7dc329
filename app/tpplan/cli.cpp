#include "cli.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include "util/error.h"

#include <unistd.h>

namespace tp::cli {

namespace {

std::int64_t parsePositive(const std::string& flag, const std::string& value)
{
    try {
        size_t used = 0;
        long long v = std::stoll(value, &used);
        if (used == value.size() && v > 0) return v;
    } catch (const std::exception&) {}
    throw UsageError(flag + " '" + value + "': expected a positive integer");
}

/// A link bandwidth in GB/s: a finite number above 0.
double parseBandwidth(const std::string& flag, const std::string& value)
{
    try {
        size_t used = 0;
        const double v = std::stod(value, &used);
        if (used == value.size() && std::isfinite(v) && v > 0) return v;
    } catch (const std::exception&) {}
    throw UsageError(flag + " '" + value + "': expected a bandwidth in GB/s above 0, e.g. 300");
}

/// on/off (also true/false, 1/0).
bool parseSwitch(const std::string& flag, const std::string& value)
{
    if (value == "on" || value == "true" || value == "1") return true;
    if (value == "off" || value == "false" || value == "0") return false;
    throw UsageError(flag + " '" + value + "': use on or off");
}

/// Flags that take any text (checked where they are used).
const std::map<std::string, std::string Options::*>& textFlags()
{
    static const std::map<std::string, std::string Options::*> flags = {
        {"--versus", &Options::versus},        {"--mesh", &Options::mesh},           {"--hardware", &Options::hardware},
        {"--memory-limit", &Options::memoryLimit}, {"--baseline", &Options::baseline}, {"--schedule", &Options::schedule},
        {"--import", &Options::importPath},    {"--base", &Options::base},           {"--format", &Options::format},
        {"--plot", &Options::plot},            {"--models", &Options::sweepModels}, {"--meshes", &Options::sweepMeshes},
        {"--modes", &Options::sweepModes},     {"-o", &Options::output},             {"--output", &Options::output}};
    return flags;
}

/// Flags that take one of a few words: the member, the words and the line that lists them.
struct WordFlag {
    std::string Options::*member;
    std::vector<std::string> words;
    const char* hint;
};
const std::map<std::string, WordFlag>& wordFlags()
{
    static const std::map<std::string, WordFlag> flags = {
        {"--mode", {&Options::mode, {"train", "infer"}, "use train or infer"}},
        {"--recompute", {&Options::recompute, {"auto", "none", "selective", "full", "op"}, "use auto, none, selective, full or op"}},
        {"--zero-shard", {&Options::zeroShard, {"auto", "all", "node"}, "use auto, all or node"}},
        {"--reshard-after-forward", {&Options::reshardAfterForward, {"auto", "on", "off"}, "use auto, on or off"}},
        {"--grad-dtype", {&Options::gradDtype, {"bf16", "fp32"}, "use bf16 or fp32"}},
        {"--dtype", {&Options::matmulDtype, {"bf16", "fp8"}, "use bf16 or fp8 (the Linear layers' matmuls)"}},
        {"--optimizer-dtype", {&Options::optimizerDtype, {"fp32", "bf16"}, "use fp32 or bf16"}}};
    return flags;
}

/// A positive integer flag with an upper bound ("--threads '2000': at most 1024").
int boundedPositive(const std::string& flag, const std::string& text, std::int64_t most, const char* unit = "")
{
    const std::int64_t v = parsePositive(flag, text);
    if (v > most) throw UsageError(flag + " '" + std::to_string(v) + "': at most " + std::to_string(most) + unit);
    return static_cast<int>(v);
}

} // namespace

Options parseArguments(const std::vector<std::string>& args)
{
    Options o;
    if (args.empty()) throw UsageError("no command given; try 'tpplan --help'");
    o.command = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (const auto text = textFlags().find(a); text != textFlags().end()) {
            o.*(text->second) = value();
            continue;
        }
        if (const auto word = wordFlags().find(a); word != wordFlags().end()) {
            const std::string v = value();
            const auto& words = word->second.words;
            if (std::find(words.begin(), words.end(), v) == words.end()) throw UsageError(a + " '" + v + "': " + word->second.hint);
            o.*(word->second.member) = v;
            continue;
        }
        if (a == "--json")
            o.json = true;
        else if (a == "--quick")
            o.quick = true;
        else if (a == "--devices-as-threads")
            o.devicesAsThreads = true;
        else if (a == "--batch")
            o.batch = parsePositive(a, value());
        else if (a == "--micro-batch") {
            const std::string v = value();
            try {
                o.microBatch = v == "auto" ? kAuto : parsePositive(a, v);
            } catch (const UsageError&) {
                throw UsageError("--micro-batch '" + v + "': use auto or a positive integer");
            }
        } else if (a == "--seq")
            o.seq = parsePositive(a, value());
        else if (a == "--overlap")
            o.overlapChunks = boundedPositive(a, value(), 1024, " chunks");
        else if (a == "--intra-node-bw")
            o.intraNodeGBps = parseBandwidth(a, value());
        else if (a == "--inter-node-bw")
            o.interNodeGBps = parseBandwidth(a, value());
        else if (a == "--threads")
            o.threads = boundedPositive(a, value(), 1024);
        else if (a == "--case-timeout")
            o.caseTimeoutS = boundedPositive(a, value(), 86400, " s");
        else if (a == "--set")
            o.sets.push_back(value());
        else if (a == "--lock")
            o.locks.push_back(value());
        else if (a == "--zero") {
            const std::string v = value();
            if (v == "auto")
                o.zero = kAuto;
            else if (v.size() != 1 || v[0] < '0' || v[0] > '3')
                throw UsageError("--zero '" + v + "': use auto, 0, 1, 2 or 3");
            else
                o.zero = v[0] - '0';
        } else if (a == "--pipeline") {
            const std::string v = value();
            std::int64_t stages = kAuto;
            try {
                if (v != "auto") stages = parsePositive(a, v);
            } catch (const UsageError&) {
                throw UsageError("--pipeline '" + v + "': use auto or a positive number of stages");
            }
            if (stages > 4096) throw UsageError("--pipeline '" + v + "': at most 4096 stages");
            o.pipeline = static_cast<int>(stages);
        } else if (a == "--stage-layers") {
            o.stageLayers = value();
            try {
                parseStageLayers(o.stageLayers);
            } catch (const tp::InputError& e) {
                throw UsageError(e.what());
            }
        } else if (a == "--grad-overlap")
            o.overlapGradients = parseSwitch(a, value());
        else if (a == "--tp-overlap")
            o.overlapTensorParallel = parseSwitch(a, value());
        else if (a == "--scatter-gather")
            o.pipelineScatterGather = parseSwitch(a, value());
        else if (a == "--grad-bucket") {
            const std::string v = value();
            try {
                size_t used = 0;
                o.gradientBucketMiB = std::stod(v, &used);
                if (used != v.size() || !std::isfinite(o.gradientBucketMiB) || o.gradientBucketMiB < 0 ||
                    o.gradientBucketMiB > 1e6)
                    throw std::invalid_argument(v);
            } catch (const std::exception&) {
                throw UsageError("--grad-bucket '" + v + "': expected a size in MiB from 0 to 1000000, e.g. 25");
            }
        } else if (a.size() > 1 && a[0] == '-')
            throw UsageError("unknown option '" + a + "'");
        else
            o.positional.push_back(a);
    }
    return o;
}

void emitJson(const Options& options, const nlohmann::json& document, std::ostream& out)
{
    const std::string text = document.dump(2) + "\n";
    if (options.json) out << text;
    if (!options.output.empty()) writeFileAtomically(options.output, text);
}

void writeFileAtomically(const std::string& path, const std::string& bytes)
{
    namespace fs = std::filesystem;
    const fs::path target(path);
    // Beside the target, so the rename stays on one file system; the pid keeps two runs apart.
    fs::path temporary = target;
    temporary += ".tmp-" + std::to_string(getpid());
    bool written = false;
    {
        std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
        written = file && (file << bytes) && file.flush();
    }
    std::error_code error;
    if (written) fs::rename(temporary, target, error);
    if (!written || error) {
        fs::remove(temporary, error);
        throw UsageError(path + ": cannot write the file");
    }
}

const std::vector<Command>& commands()
{
    static const std::vector<Command> table = {
        {"models", "tpplan models                          built-in models, hardware presets, mesh examples", &runModels},
        {"info", "tpplan info MODEL [--set k=v] [--json]   ops, tensors, parameters, FLOPs per step", &runInfo},
        {"plan", "tpplan plan MODEL [options] [--json] [-o F]  search (or a baseline) and the breakdown", &runPlan},
        {"fold", "tpplan fold MODEL [--set k=v] [--json]   block classes, instances, runs, fold time", &runFold},
        {"check", "tpplan check PLAN.tpplan.json [--json]   re-validate a saved plan, re-cost it, list differences", &runCheck},
        {"export", "tpplan export PLAN.tpplan.json --format csv|dot|svg|png|pytorch|megatron|hf-tp-plan -o OUT", &runExport},
        {"explain",
         "tpplan explain PLAN|MODEL [OP] [options] [--versus megatron|dp|search|PLAN] [--json]  how an op is split, its "
         "collectives, why not the others",
         &runExplain},
        {"verify",
         "tpplan verify PLAN.tpplan.json [--devices-as-threads] [--json]  run the plan on simulated devices, compare with one "
         "device",
         &runVerify},
        {"calibrate",
         "tpplan calibrate [-o calibrate.py] | --import RESULTS.json [--base PRESET|FILE] -o HW.json  measure a cluster, "
         "make a hardware file",
         &runCalibrate},
        {"bench",
         "tpplan bench [--quick] [--json] [-o F]   the benchmark suite (docs/PERFORMANCE.md)\n"
         "  tpplan bench fidelity [RUNS.json] [--json] [--plot F.svg]  published runs: measured vs predicted (docs/FIDELITY.md)\n"
         "  tpplan bench sweep [--models A,B] [--meshes M,N] [--modes train,infer] [--case-timeout S] [--json] [-o F]\n"
         "                     every built-in on a spread of meshes, slowest first (docs/PERFORMANCE.md)",
         &runBench},
    };
    return table;
}

} // namespace tp::cli
