// tpplan calibrate: the calibration script a cluster runs, and its results as a hardware file
// (docs/TUTORIAL.md, "Calibrating to your cluster"; the formats: docs/formats.md).
#include <iostream>
#include <utility>

#include "cli.h"
#include "mesh/calibration.h"
#include "util/error.h"

namespace tp::cli {

namespace {

constexpr const char* kUsage =
    "usage: tpplan calibrate [-o calibrate.py]  or  tpplan calibrate --import RESULTS.json [--base PRESET|FILE] [-o HW.json]";

// The planning options mean nothing here; naming the first one given beats ignoring it.
void rejectPlanningOptions(const Options& o)
{
    const Options d;
    const std::pair<bool, const char*> given[] = {
        {o.mesh != d.mesh, "--mesh"},
        {o.hardware != d.hardware, "--hardware (use --base)"},
        {o.batch != d.batch, "--batch"},
        {o.microBatch != d.microBatch, "--micro-batch"},
        {o.seq != d.seq, "--seq"},
        {o.mode != d.mode, "--mode"},
        {!o.memoryLimit.empty(), "--memory-limit"},
        {!o.sets.empty(), "--set"},
        {!o.locks.empty(), "--lock"},
        {!o.baseline.empty(), "--baseline"},
        {!o.format.empty(), "--format"},
        {o.json, "--json"},
        {o.overlapChunks != d.overlapChunks, "--overlap"},
        {o.intraNodeGBps != d.intraNodeGBps, "--intra-node-bw"},
        {o.interNodeGBps != d.interNodeGBps, "--inter-node-bw"},
        {o.recompute != d.recompute, "--recompute"},
        {o.overlapGradients != d.overlapGradients, "--grad-overlap"},
        {o.overlapTensorParallel != d.overlapTensorParallel, "--tp-overlap"},
        {o.pipelineScatterGather != d.pipelineScatterGather, "--scatter-gather"},
        {o.gradientBucketMiB != d.gradientBucketMiB, "--grad-bucket"},
        {o.zero != d.zero, "--zero"},
        {o.zeroShard != d.zeroShard, "--zero-shard"},
        {o.reshardAfterForward != d.reshardAfterForward, "--reshard-after-forward"},
        {o.gradDtype != d.gradDtype, "--grad-dtype"},
        {o.optimizerDtype != d.optimizerDtype, "--optimizer-dtype"},
        {o.matmulDtype != d.matmulDtype, "--dtype"},
        {!o.plot.empty(), "--plot"},
    };
    for (const auto& [set, flag] : given)
        if (set) throw UsageError(std::string(flag) + " does not apply to tpplan calibrate; " + kUsage);
}

void writeOutput(const Options& o, const std::string& bytes, std::ostream& out)
{
    if (o.output.empty() || o.output == "-")
        out << bytes;
    else
        writeFileAtomically(o.output, bytes);
}

} // namespace

int runCalibrate(const Options& o, std::ostream& out)
{
    if (!o.positional.empty()) throw UsageError("tpplan calibrate takes no argument '" + o.positional[0] + "'; " + kUsage);
    rejectPlanningOptions(o);
    if (o.importPath.empty()) {
        if (!o.base.empty()) throw UsageError("--base needs --import RESULTS.json; " + std::string(kUsage));
        writeOutput(o, std::string(calibrationScript()), out);
        if (!o.output.empty() && o.output != "-")
            std::cerr << "tpplan: wrote " << o.output << "; run it with: torchrun --nproc-per-node 8 " << o.output
                      << " --out results.json\n";
        return 0;
    }
    const CalibrationResults results = readCalibrationResults(readTextFile(o.importPath), o.importPath);
    std::string base = o.base;
    if (base.empty()) {
        if (auto preset = presetForDevice(results.device, results.deviceMemoryBytes)) {
            base = *preset;
        } else {
            base = "a100-80g-dgx";
            std::cerr << "tpplan: note: no preset matches device '" << results.device
                      << "'; the figures not measured come from a100-80g-dgx (choose another with --base)\n";
        }
    }
    const Hardware baseHardware = [&] {
        try {
            return loadHardware(base);
        } catch (const InputError& e) {
            throw UsageError(std::string("--base: ") + e.what());
        }
    }();
    writeOutput(o, hardwareToJsonText(hardwareFromCalibration(results, baseHardware, o.importPath)), out);
    return 0;
}

} // namespace tp::cli
