#pragma once
// tpplan: the command-line twin of the GUI (docs/ARCHITECTURE.md, "app/"; what it writes: docs/formats.md).
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "import/catalog.h"
#include "plan/planner.h"
#include "util/format.h"

namespace tp::cli {

/// Thrown for wrong usage; main prints it as one line and exits 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    std::string command;
    std::vector<std::string> positional;
    std::string mesh = "8";
    std::string hardware = "a100-80g-dgx";
    std::int64_t batch = 0;
    std::int64_t microBatch = kAuto; ///< --micro-batch auto|N (PlanRequest::microBatch)
    std::int64_t seq = 0;
    int overlapChunks = 1;    ///< --overlap N: each collective split into N chunks hidden behind compute (ATP)
    double intraNodeGBps = 0; ///< --intra-node-bw GBps: link override (0: the hardware's)
    double interNodeGBps = 0; ///< --inter-node-bw GBps
    int threads = 0;          ///< --threads N: search threads for large block tables (0: all)
    std::string mode = "train";
    std::string memoryLimit;
    std::vector<std::string> sets;
    std::vector<std::string> locks;
    std::string baseline;
    std::string recompute = "auto";      ///< --recompute auto|none|selective|full|op
    bool overlapGradients = true;        ///< --grad-overlap on|off
    double gradientBucketMiB = 25;       ///< --grad-bucket MiB
    bool overlapTensorParallel = false;  ///< --tp-overlap on|off
    bool pipelineScatterGather = true;   ///< --scatter-gather on|off
    int zero = kAuto;                    ///< --zero auto|0|1|2|3
    std::string zeroShard = "auto";      ///< --zero-shard auto|all|node
    std::string reshardAfterForward = "auto"; ///< --reshard-after-forward auto|on|off
    std::string gradDtype = "bf16";      ///< --grad-dtype bf16|fp32
    std::string optimizerDtype = "fp32"; ///< --optimizer-dtype fp32|bf16
    std::string matmulDtype = "bf16";    ///< --dtype bf16|fp8 (the Linear layers' matmuls)
    int pipeline = kDefaultPipeline;     ///< --pipeline auto|P: stages over the outermost mesh axis
    std::string schedule = kDefaultSchedule; ///< --schedule auto|1f1b|interleaved:V
    std::string stageLayers = kDefaultStageLayers; ///< --stage-layers auto|even|F,L
    std::string format;
    std::string plot; ///< bench fidelity --plot FILE.svg
    std::string output;
    bool json = false;
    bool quick = false;
    std::string versus;            ///< explain: the plan to compare against (baseline name or file)
    bool devicesAsThreads = false; ///< verify: one thread per simulated device
    std::string importPath;        ///< calibrate --import: a results file of calibrate.py
    std::string base;              ///< calibrate --base: the preset or file the results refine
    std::string sweepModels;       ///< bench sweep --models A,B (all built-ins when empty)
    std::string sweepMeshes;       ///< bench sweep --meshes M,N
    std::string sweepModes;        ///< bench sweep --modes train,infer
    int caseTimeoutS = 0;          ///< bench sweep --case-timeout S (0: the default)
};

Options parseArguments(const std::vector<std::string>& args);

/// Writes the JSON document to stdout (with --json) and to -o (when given).
void emitJson(const Options& options, const nlohmann::json& document, std::ostream& out);

using CommandFn = int (*)(const Options& options, std::ostream& out);
struct Command {
    const char* name;
    const char* synopsis;
    CommandFn run;
};
const std::vector<Command>& commands();

/// The model options (--set, --batch, --seq) of a command line.
ModelOptions modelOptions(const Options& options);
/// The plan request (model, mesh, hardware, mode, limits, locks, baseline) of a command line.
PlanRequest planRequest(const Options& options, const std::string& model);

int runModels(const Options& options, std::ostream& out);
int runInfo(const Options& options, std::ostream& out);
int runPlan(const Options& options, std::ostream& out);
int runFold(const Options& options, std::ostream& out);
int runCheck(const Options& options, std::ostream& out);
int runExport(const Options& options, std::ostream& out);
int runExplain(const Options& options, std::ostream& out);
int runVerify(const Options& options, std::ostream& out);
int runCalibrate(const Options& options, std::ostream& out);
/// Writes `bytes` to `path` through a temporary file beside it renamed over it, so a failure
/// leaves an existing file as it was. Throws UsageError naming the path.
void writeFileAtomically(const std::string& path, const std::string& bytes);
/// The whole file; throws InputError naming the path when it cannot be read.
std::string readTextFile(const std::string& path);
int runBench(const Options& options, std::ostream& out);
/// tpplan bench fidelity [RUNS.json]: published runs, measured against predicted.
int runFidelity(const Options& options, std::ostream& out);
int runSweep(const Options& options, std::ostream& out);

} // namespace tp::cli
