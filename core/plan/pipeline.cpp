#include "pipeline.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "../util/error.h"

namespace tp {

PipelineSchedule parseSchedule(int stages, const std::string& schedule)
{
    if (stages < 1 || stages > 4096)
        throw InputError("--pipeline " + std::to_string(stages) + ": expected a number of stages from 1 to 4096");
    PipelineSchedule s;
    s.stages = stages;
    if (schedule == "1f1b" || schedule.empty()) return s;
    const std::string prefix = "interleaved:";
    if (schedule.rfind(prefix, 0) == 0) {
        const std::string digits = schedule.substr(prefix.size());
        int v = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec == std::errc() && end == digits.data() + digits.size() && v >= 2 && v <= 1024) {
            if (stages < 2) throw InputError("--schedule " + schedule + ": an interleaved schedule needs --pipeline 2 or more");
            s.virtualStages = v;
            return s;
        }
    }
    throw InputError("--schedule '" + schedule + "': use auto, 1f1b or interleaved:V with V from 2 to 1024 chunks per device");
}

std::string scheduleText(const PipelineSchedule& schedule)
{
    if (schedule.virtualStages <= 1) return "1F1B";
    return "interleaved, " + std::to_string(schedule.virtualStages) + " chunks per device";
}

std::string scheduleWord(const PipelineSchedule& schedule)
{
    return schedule.virtualStages <= 1 ? "1f1b" : "interleaved:" + std::to_string(schedule.virtualStages);
}

double bubbleMicroBatches(const PipelineSchedule& schedule)
{
    return static_cast<double>(schedule.stages - 1) / static_cast<double>(schedule.virtualStages);
}

double inFlightMicroBatches(const PipelineSchedule& schedule, int stage)
{
    double held = static_cast<double>(schedule.stages - stage);
    if (schedule.virtualStages > 1) held += bubbleMicroBatches(schedule);
    return held;
}

std::string stageMeshText(const Mesh& mesh, int stages)
{
    if (mesh.axes.empty()) throw InputError("--pipeline: the mesh has no axes");
    const int outer = mesh.axes[0].size;
    if (stages < 1 || outer % stages != 0)
        throw InputError("--pipeline " + std::to_string(stages) + ": the stages must divide the outermost mesh axis (" +
                         mesh.axes[0].name + " = " + std::to_string(outer) + " on mesh " + mesh.shapeText() + ")");
    std::string text;
    if (outer / stages > 1) text = std::to_string(outer / stages);
    for (size_t a = 1; a < mesh.axes.size(); ++a) text += (text.empty() ? "" : "x") + std::to_string(mesh.axes[a].size);
    return text.empty() ? "1" : text;
}

const Run* stagedRun(const FoldedGraph& folded)
{
    const Run* best = nullptr;
    std::int64_t bestOps = 0;
    for (const auto& run : folded.runs) {
        const std::int64_t ops =
            static_cast<std::int64_t>(run.count) * folded.classes[static_cast<size_t>(run.classId)].opsPerInstance();
        if (run.count > 1 && ops > bestOps) {
            best = &run;
            bestOps = ops;
        }
    }
    return best;
}

StageSplit splitIntoStages(const FoldedGraph& folded, const PipelineSchedule& schedule)
{
    const Run* best = stagedRun(folded);
    const int p = schedule.stages;
    if (!best) throw InputError("--pipeline " + std::to_string(p) + ": the model has no run of repeated layers to split into stages");
    const BlockClass& layer = folded.classes[static_cast<size_t>(best->classId)];
    const int layers = best->count;
    if (p > layers)
        throw InputError("--pipeline " + std::to_string(p) + ": more stages than the " + std::to_string(layers) + " layers of '" +
                         layer.label + "'");
    StageSplit split;
    split.classId = best->classId;
    split.runFirstInstance = best->firstInstance;
    split.runLength = layers;
    split.label = layer.label;
    split.countOfStage.assign(static_cast<size_t>(p), layers / p);
    // The extra layers go to stages 1, 2, ... (the first stage also holds the embedding and
    // the most in-flight activations): Planner's middle-stage argument needs stage 1 to hold
    // the most layers of the middle stages.
    for (int extra = 0; extra < layers % p; ++extra) split.countOfStage[static_cast<size_t>(1 + extra % (p - 1))] += 1;
    const int v = schedule.virtualStages;
    if (v > 1 && layers % (p * v) != 0)
        throw InputError("--schedule interleaved:" + std::to_string(v) + ": " + std::to_string(v) +
                         " chunks per device do not divide the " + std::to_string(layers / p) + " layers per stage of '" +
                         layer.label + "' (" + std::to_string(layers) + " layers over " + std::to_string(p) + " stages)");
    int first = 0;
    for (int s = 0; s < p; ++s) {
        split.firstOfStage.push_back(first);
        first += split.countOfStage[static_cast<size_t>(s)];
    }
    return split;
}

StageCutter::StageCutter(const Graph& graph, const FoldedGraph& folded, StageSplit split) :
    graph_(graph), split_(std::move(split)), order_(graph.topologicalOrder()), producers_(graph.producers()),
    consumers_(graph.consumers())
{
    const int p = stages();
    const BlockClass& layer = folded.classes.at(static_cast<size_t>(split_.classId));
    // Each op's stage: the run's instances by their range; everything else by whether it comes
    // before the run's first op in topological order (first stage) or after (last stage).
    stageOfOp_.assign(graph.ops.size(), -1);
    for (int s = 0; s < p; ++s)
        for (int i = 0; i < split_.countOfStage[static_cast<size_t>(s)]; ++i) {
            const auto& inst =
                layer.instances[static_cast<size_t>(split_.runFirstInstance + split_.firstOfStage[static_cast<size_t>(s)] + i)];
            for (OpId op : inst.ops) stageOfOp_[static_cast<size_t>(op)] = s;
        }
    const OpId runStart = layer.instances[static_cast<size_t>(split_.runFirstInstance)].ops.front();
    bool beforeRun = true;
    for (OpId op : order_) {
        if (op == runStart) beforeRun = false;
        if (stageOfOp_[static_cast<size_t>(op)] < 0) stageOfOp_[static_cast<size_t>(op)] = beforeRun ? 0 : p - 1;
    }
}

double StageCutter::receivedBytes(int stage) const
{
    std::vector<char> counted(graph_.tensors.size(), 0);
    double bytes = 0;
    for (const auto& op : graph_.ops) {
        if (stageOfOp_[static_cast<size_t>(op.id)] != stage) continue;
        for (TensorId t : op.inputs) {
            const OpId producer = producers_[static_cast<size_t>(t)];
            if (producer < 0 || stageOfOp_[static_cast<size_t>(producer)] == stage || counted[static_cast<size_t>(t)]) continue;
            counted[static_cast<size_t>(t)] = 1;
            bytes += static_cast<double>(graph_.tensor(t).bytes());
        }
    }
    return bytes;
}

std::vector<std::string> StageCutter::modulesOutsideRun(int stage) const
{
    const std::string prefix = split_.label.substr(0, split_.label.find('*'));
    std::vector<std::string> out;
    for (OpId id : order_) {
        if (stageOfOp_[static_cast<size_t>(id)] != stage) continue;
        const std::string& name = graph_.op(id).name;
        if (!prefix.empty() && name.rfind(prefix, 0) == 0) continue;
        const std::string module = name.substr(0, name.find('/'));
        if (std::find(out.begin(), out.end(), module) == out.end()) out.push_back(module);
    }
    return out;
}

StageGraph StageCutter::cut(int stage) const
{
    if (stage < 0 || stage >= stages()) throw std::logic_error("StageCutter: no such stage");
    auto mine = [&](OpId op) { return op >= 0 && stageOfOp_[static_cast<size_t>(op)] == stage; };
    // The tensors the stage touches, received ones first (the batch is read from the first
    // input of rank >= 2, core/cost/cost_model.cpp graphBatchOf), then the rest in id order.
    std::vector<char> used(graph_.tensors.size(), 0);
    for (const auto& op : graph_.ops)
        if (mine(op.id)) {
            for (TensorId t : op.inputs) used[static_cast<size_t>(t)] = 1;
            for (TensorId t : op.outputs) used[static_cast<size_t>(t)] = 1;
        }
    auto received = [&](TensorId t) {
        const OpId producer = producers_[static_cast<size_t>(t)];
        return producer >= 0 && !mine(producer);
    };
    std::vector<TensorId> order;
    for (const auto& t : graph_.tensors)
        if (used[static_cast<size_t>(t.id)] && received(t.id)) order.push_back(t.id);
    for (const auto& t : graph_.tensors)
        if (used[static_cast<size_t>(t.id)] && !received(t.id)) order.push_back(t.id);
    StageGraph result;
    Graph& out = result.graph;
    out.name = graph_.name + " (stage " + std::to_string(stage + 1) + " of " + std::to_string(stages()) + ")";
    std::vector<TensorId> newId(graph_.tensors.size(), -1);
    for (TensorId t : order) {
        const Tensor& old = graph_.tensor(t);
        TensorRole role = old.role;
        if (received(t)) {
            role = TensorRole::Input;
            result.receivedBytes += static_cast<double>(old.bytes());
        }
        const auto& readers = consumers_[static_cast<size_t>(t)];
        const bool sent = std::any_of(readers.begin(), readers.end(), [&](OpId c) { return !mine(c); });
        if (sent && role == TensorRole::Activation) role = TensorRole::Output;
        newId[static_cast<size_t>(t)] = out.addTensor(old.name, old.shape, old.dtype, role);
    }
    for (OpId id : order_) {
        if (!mine(id)) continue;
        const Op& op = graph_.op(id);
        std::vector<TensorId> ins, outs;
        for (TensorId t : op.inputs) ins.push_back(newId[static_cast<size_t>(t)]);
        for (TensorId t : op.outputs) outs.push_back(newId[static_cast<size_t>(t)]);
        out.addOp(op.name, op.kind, std::move(ins), std::move(outs), op.einsum, op.attrs);
    }
    return result;
}

StageGraph stageGraph(const Graph& graph, const FoldedGraph& folded, const StageSplit& split, int stage)
{
    return StageCutter(graph, folded, split).cut(stage);
}

} // namespace tp
