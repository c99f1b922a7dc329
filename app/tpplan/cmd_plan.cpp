// tpplan plan: search (or a baseline) and the breakdown.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <condition_variable>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <ostream>
#include <thread>

#include "cli.h"
#include "graph/opkinds.h"
#include "mesh/calibration.h"
#include "plan/mesh_fit.h"
#include "plan/plan_file.h"
#include "plan/planner.h"

namespace tp::cli {

PlanRequest planRequest(const Options& o, const std::string& model)
{
    PlanRequest r;
    r.model = model;
    r.modelOptions = modelOptions(o);
    r.mesh = o.mesh;
    r.hardware = o.hardware;
    r.mode = o.mode;
    r.memoryLimit = o.memoryLimit;
    r.microBatch = o.microBatch;
    r.overlapChunks = o.overlapChunks;
    r.intraNodeGBps = o.intraNodeGBps;
    r.interNodeGBps = o.interNodeGBps;
    r.threads = o.threads;
    r.locks = o.locks;
    r.baseline = o.baseline;
    r.recompute = o.recompute;
    r.overlapGradients = o.overlapGradients;
    r.gradientBucketMiB = o.gradientBucketMiB;
    r.overlapTensorParallel = o.overlapTensorParallel;
    r.pipelineScatterGather = o.pipelineScatterGather;
    r.zero = o.zero;
    r.zeroShard = o.zeroShard;
    r.reshardAfterForward = o.reshardAfterForward;
    r.gradDtype = o.gradDtype;
    r.optimizerDtype = o.optimizerDtype;
    r.matmulDtype = o.matmulDtype;
    r.pipeline = o.pipeline;
    r.schedule = o.schedule;
    r.stageLayers = o.stageLayers;
    return r;
}

namespace {

void printSummary(const PlanWorkspace& ws, const SearchResult& r, std::ostream& out)
{
    const CostModel& model = *ws.costModel;
    const Breakdown& b = r.breakdown;
    const Mesh& mesh = model.mesh();
    out << ws.context.modelName << " on mesh " << mesh.shapeText() << " (";
    for (size_t i = 0; i < mesh.axes.size(); ++i)
        out << (i ? ", " : "") << mesh.axes[i].name << "=" << mesh.axes[i].size << " "
            << (mesh.axes[i].crossesNodes ? "inter-node" : "intra-node") << " " << formatBandwidth(mesh.axes[i].link.bandwidth);
    out << "), " << ws.hardware.name << ", " << ws.context.mode << ", batch " << ws.context.batch << "\n";
    if (!ws.hardware.calibrated.empty()) out << "  hardware        " << calibrationSummary(ws.hardware) << "\n";
    out << "  method          " << r.method;
    if (r.method == "folded" || r.method == "flat")
        out << ": " << r.blockClasses << " block classes, " << r.opsSearched << " ops searched, "
            << formatSeconds(r.searchMs / 1e3) << " (fold " << formatSeconds(ws.foldMs / 1e3) << ")";
    if (r.inlinedClasses > 0)
        out << "\n                  " << r.inlinedClasses << (r.inlinedClasses == 1 ? " class" : " classes")
            << " solved instance by instance: its boundary has too many specs on this mesh for one table";
    out << "\n";
    out << "  step time       " << formatSeconds(b.stepSeconds) << "  (compute " << formatSeconds(b.computeSeconds)
        << ", communication " << formatSeconds(b.commSeconds);
    if (b.hiddenCommSeconds > 0) out << ", of which hidden " << formatSeconds(b.hiddenCommSeconds);
    out << ")\n";
    if (b.optimizerSeconds > 0) out << "    optimizer step  " << formatSeconds(b.optimizerSeconds) << "\n";
    if (b.bufferCopySeconds > 0) out << "    FSDP copies     " << formatSeconds(b.bufferCopySeconds) << "\n";
    const CostSettings& cs = model.settings();
    auto onOff = [](bool on) { return on ? "on" : "off"; };
    out << "  kernels         FlashAttention " << onOff(cs.flashAttention) << ", fused kernels " << onOff(cs.fusedKernels)
        << ", fused cross-entropy " << onOff(cs.fusedCrossEntropy)
        << (cs.training ? std::string(", gradient overlap ") + onOff(cs.overlapGradientReduction) + " (" +
                              formatBytes(cs.gradientBucketBytes) + " buckets), tensor-parallel overlap " +
                              onOff(cs.overlapTensorParallelBackward) + ", ZeRO stage " + std::to_string(cs.zeroStage)
                        : std::string())
        << ", micro-batch " << (cs.microBatch > 0 ? std::to_string(cs.microBatch) : std::string("whole local batch")) << "\n";
    for (const auto& [kind, seconds] : b.commByKind)
        out << "    " << std::left << std::setw(16) << collectiveName(kind) << formatSeconds(seconds) << "\n";
    // A limit under the capacity (--memory-limit) is what the plan was held to: said beside it.
    const bool ownLimit = r.memoryLimitBytes > 0 && r.memoryLimitBytes < b.capacityBytes;
    out << "  memory/device   " << formatBytes(b.perDeviceBytes) << " of " << formatBytes(b.capacityBytes)
        << (ownLimit ? " (limit " + formatBytes(r.memoryLimitBytes) + ")" : std::string()) << (r.fits ? "" : "  DOES NOT FIT")
        << "\n"
        << "    parameters    " << formatBytes(b.paramBytes) << "\n"
        << "    gradients     " << formatBytes(b.gradBytes) << "\n"
        << "    optimizer     " << formatBytes(b.optimizerBytes) << "\n"
        << "    activations   " << formatBytes(b.activationBytes) << "\n";
    if (cs.training) {
        auto whole = [](double bytes) { return std::to_string(static_cast<long long>(std::llround(bytes))); };
        out << "    model states  " << whole(cs.paramBytesPerParam + cs.gradBytesPerParam + cs.optimizerBytesPerParam)
            << " B/param (parameters " << whole(cs.paramBytesPerParam) << ", gradients " << whole(cs.gradBytesPerParam)
            << ", optimizer " << whole(cs.optimizerBytesPerParam) << ")"
            << (cs.zeroStage > 0 ? ", ZeRO " + std::to_string(cs.zeroStage) + " shards them over the data-parallel axes" +
                                       (cs.zeroAcrossNodes ? "" : " inside a node, replicated across nodes (HSDP)") +
                                       (cs.zeroStage >= 3 && !cs.reshardAfterForward
                                            ? "; gathered weights are held from their forward to their backward"
                                            : "")
                                 : "")
            << "\n";
    }
    for (int a : axesNoOpCanSplit(model))
        out << "  note            no op can split anything over axis " << mesh.axes[static_cast<size_t>(a)].name << " (size "
            << mesh.axes[static_cast<size_t>(a)].size << "): no loop of the model divides by it, so its devices only repeat the"
            << " work; choose a mesh whose sizes divide the batch, heads or hidden size\n";
    const BlockClass* layer = ws.folded.largestClass();
    if (!layer) return;
    const auto& bc = *layer;
    out << "  block '" << bc.label << "' x" << bc.instances.size() << " (representative strategies):\n";
    for (OpId op : bc.instances[0].ops) {
        const int s = r.strategyOfOp[static_cast<size_t>(op)];
        const Signature& sig = model.signature(op);
        out << "    " << std::left << std::setw(34) << model.graph().op(op).name << std::setw(13)
            << opKindName(model.graph().op(op).kind) << std::setw(22) << sig.equation << std::setw(12)
            << strategyToString(model.strategies(op)[static_cast<size_t>(s)], sig, mesh)
            << specToString(model.outputSpec(op, s, 0), mesh) << (r.lockedOp[static_cast<size_t>(op)] ? "  [locked]" : "")
            << (r.recomputeOfOp[static_cast<size_t>(op)] != Recompute::None
                    ? "  recompute " + std::string(recomputeName(r.recomputeOfOp[static_cast<size_t>(op)]))
                    : "")
            << "\n";
    }
    // Under a binding memory limit the search may mix two layouts across identical instances;
    // name the instances that differ from the representative and how.
    auto choiceOf = [&](const BlockInstance& inst) {
        std::vector<std::pair<int, Recompute>> choice;
        for (OpId op : inst.ops)
            choice.emplace_back(r.strategyOfOp[static_cast<size_t>(op)], r.recomputeOfOp[static_cast<size_t>(op)]);
        return choice;
    };
    const auto representative = choiceOf(bc.instances[0]);
    std::vector<size_t> differing;
    for (size_t i = 1; i < bc.instances.size(); ++i)
        if (choiceOf(bc.instances[i]) != representative) differing.push_back(i);
    if (!differing.empty()) {
        out << "  " << differing.size() << " of " << bc.instances.size() << " instances use another layout (";
        const auto& firstOps = bc.instances[differing.front()].ops;
        out << model.graph().op(firstOps.front()).name.substr(0, model.graph().op(firstOps.front()).name.find('/'));
        if (differing.size() > 1) {
            const auto& lastOps = bc.instances[differing.back()].ops;
            out << " .. " << model.graph().op(lastOps.front()).name.substr(0, model.graph().op(lastOps.front()).name.find('/'));
        }
        out << "), e.g. in "
            << model.graph().op(firstOps.front()).name.substr(0, model.graph().op(firstOps.front()).name.find('/')) << ":\n";
        const auto other = choiceOf(bc.instances[differing.front()]);
        for (size_t k = 0; k < firstOps.size(); ++k) {
            if (other[k] == representative[k]) continue;
            const OpId op = firstOps[k];
            const Signature& sig = model.signature(op);
            out << "    " << std::left << std::setw(34) << model.graph().op(op).name
                << strategyToString(model.strategies(op)[static_cast<size_t>(other[k].first)], sig, mesh)
                << (other[k].second != Recompute::None ? "  recompute " + std::string(recomputeName(other[k].second)) : "")
                << "\n";
        }
    }
    out << "  collectives per instance of '" << bc.label << "':\n";
    int shown = 0;
    for (const auto& c : summarizeCollectives(b, ws.folded)) {
        if (ws.folded.classOfOp[static_cast<size_t>(c.at)] != bc.id) continue;
        out << "    " << std::left << std::setw(15) << collectiveName(c.kind) << std::setw(10) << phaseName(c.phase) << "axis "
            << mesh.axes[static_cast<size_t>(c.axis)].name << "  " << std::setw(12) << formatBytes(c.bytes)
            << formatSeconds(c.seconds) << "  after " << model.graph().op(c.at).name << "\n";
        ++shown;
    }
    if (!shown) out << "    none\n";
}

/// While a search runs longer than a second, a line on the terminal says how far it has got
/// (only when stderr is a terminal: logs and pipes stay clean). Cleared when the search ends.
class ProgressLine {
public:
    explicit ProgressLine(const SearchProgress& progress) : progress_(progress)
    {
        if (!isatty(STDERR_FILENO)) return;
        thread_ = std::thread([this] { run(); });
    }
    ~ProgressLine()
    {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

private:
    void run()
    {
        const auto start = std::chrono::steady_clock::now();
        bool shown = false;
        std::unique_lock<std::mutex> lock(mutex_);
        while (!wake_.wait_for(lock, std::chrono::milliseconds(shown ? 250 : 1000), [this] { return done_; })) {
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr, "\rsearching... %.1f s (memory prices tried: %d, block tables solved: %d) ", seconds,
                         progress_.pricesTried.load(std::memory_order_relaxed),
                         progress_.tablesSolved.load(std::memory_order_relaxed));
            std::fflush(stderr);
            shown = true;
        }
        if (shown) std::fputs("\r\033[K", stderr);
    }

    const SearchProgress& progress_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool done_ = false;
    std::thread thread_;
};

/// What the planner chose where the request left it open, and how the other combinations fared.
void printChoices(const PlannerResult& planned, std::ostream& out)
{
    if (planned.candidates.empty()) return;
    std::map<std::string, int> counts;
    for (const auto& c : planned.candidates) ++counts[outcomeName(c.outcome)];
    out << "  chosen          " << choiceSummary(planned.candidates) << "\n    (";
    bool first = true;
    for (const auto& [what, n] : counts) {
        out << (first ? "" : ", ") << n << " " << what;
        first = false;
    }
    out << ")\n";
}

/// A pipelined plan: the schedule, the step and every stage's share (the slowest stage's whole
/// breakdown follows).
void printPipeline(const PipelinePlan& p, std::ostream& out)
{
    const PipelineStageInfo& first = p.stages.front().workspace->stage;
    const int stages = p.schedule.stages;
    const PipelineStagePlan& slowest = p.stages[static_cast<size_t>(p.slowest)];
    out << "pipeline          " << pipelineSummary(p) << " (" << slowest.microBatches << " micro-batches per step)\n";
    out << "  step time       " << formatSeconds(p.stepSeconds) << "  (the slowest stage's; bubble "
        << formatSeconds(p.bubbleFraction() * slowest.result.breakdown.stepSeconds) << ", "
        << std::fixed << std::setprecision(1) << 100 * p.bubbleFraction() << "% of it)\n"
        << std::defaultfloat << std::setprecision(6);
    std::string split;
    for (int n : p.layersOfStage) split += (split.empty() ? "" : ", ") + std::to_string(n);
    out << "  stage layers    " << split << " of '" << first.layerLabel << "'\n";
    for (const auto& st : p.stages) {
        const PipelineStageInfo& info = st.workspace->stage;
        const std::string which = st.standsFor > 1 ? "stages " + std::to_string(st.stage + 1) + "-" +
                                                         std::to_string(st.stage + st.standsFor)
                                                   : "stage " + std::to_string(st.stage + 1);
        out << "  " << std::left << std::setw(16) << which << info.layers << " x '" << first.layerLabel << "' from "
            << info.firstLayer << (st.stage == 0 ? " + what comes before" : "")
            << (st.stage + st.standsFor == stages ? " + what comes after" : "") << ": step "
            << formatSeconds(st.stepSeconds()) << " (sends " << formatSeconds(st.sendSeconds) << "), memory "
            << formatBytes(st.result.breakdown.perDeviceBytes) << (st.result.fits ? "" : " DOES NOT FIT") << ", "
            << settingsText(candidateOf(st.workspace->costModel->settings())) << "\n";
    }
    out << "slowest stage, " << (slowest.standsFor > 1 ? "stages " : "stage ") << slowest.stage + 1 << ":\n";
}

} // namespace

int runPlan(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1) throw UsageError("usage: tpplan plan MODEL [--mesh 2x8] [--hardware NAME] [--json] [-o FILE]");
    const PlanRequest request = planRequest(o, o.positional[0]);
    // The planner the GUI keeps between edits, used once (planner.h).
    Planner planner;
    SearchProgress progress;
    const PlannerResult planned = [&] {
        ProgressLine line(progress);
        return planner.plan(request, nullptr, &progress);
    }();
    const PlanWorkspace& ws = *planned.workspace;
    const SearchResult& r = planned.result;
    nlohmann::json doc = planToJson(ws.context, *ws.costModel, ws.folded, r);
    if (planned.pipeline) {
        doc["pipeline"] = pipelineToJson(*planned.pipeline, parseMesh(request.mesh, ws.hardware).shapeText());
    }
    if (o.json || !o.output.empty()) emitJson(o, doc, out);
    if (!o.json) {
        if (planned.pipeline) printPipeline(*planned.pipeline, out);
        printSummary(ws, r, out);
        printChoices(planned, out);
    }
    if (!r.fits) {
        std::cerr << "tpplan: no plan fits " << formatBytes(r.memoryLimitBytes) << " per device; the smallest found needs "
                  << formatBytes(r.breakdown.perDeviceBytes) << "\n";
        if (const auto fit = planned.pipeline ? std::nullopt : smallestFittingMesh(request, ws)) std::cerr << "tpplan: " << meshFitText(*fit) << "\n";
        return 1;
    }
    return 0;
}

} // namespace tp::cli
