// Megatron-LM arguments for a plan, or what keeps the plan from being Megatron-shaped.
#include <algorithm>
#include <functional>
#include <sstream>
#include <variant>

#include "../cost/baselines.h"
#include "export_plan.h"
#include "export_styles.h"

namespace tp {

namespace {

// Megatron-Core's MoE arguments from the graph's routed experts (the Dispatch op's attrs) and the
// plan's expert axes; its expert-parallel ranks are carved out of the data-parallel ones.
void moeArguments(const CostModel& model, const PlanAxes& axes, std::ostream& out)
{
    const auto& ops = model.graph().ops;
    const auto dispatch = std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::Dispatch; });
    if (dispatch == ops.end()) return;
    const auto attr = [&](const char* name) {
        const auto it = dispatch->attrs.find(name);
        return it != dispatch->attrs.end() && std::holds_alternative<std::int64_t>(it->second) ? std::get<std::int64_t>(it->second)
                                                                                                 : std::int64_t{0};
    };
    int ep = 1;
    for (int a : axes.expertAxes) ep *= model.mesh().axes[static_cast<size_t>(a)].size;
    out << "--num-experts " << attr("experts") << "\n--moe-router-topk " << attr("top_k") << "\n";
    out << "--expert-model-parallel-size " << ep << "\n";
}

} // namespace

std::string exportMegatron(const PlanWorkspace& ws, const SearchResult& result)
{
    const CostModel& model = *ws.costModel;
    const Mesh& mesh = model.mesh();
    const PlanAxes axes = planAxes(model, result);
    const auto styles = moduleStyles(ws, result, axes);
    bool sequenceParallel = false;
    for (const auto& m : styles) sequenceParallel = sequenceParallel || m.style == ModuleStyle::Style::Sequence;

    // Megatron-shaped: tensor parallelism on the innermost axis with the roles Megatron's rules
    // give every weighted op, every other axis data parallel.
    std::vector<std::string> differences;
    const int innermost = mesh.rank() - 1;
    if (axes.tensorAxis >= 0 && axes.tensorAxis != innermost)
        differences.push_back("tensor parallelism runs over axis " + mesh.axes[static_cast<size_t>(axes.tensorAxis)].name +
                              "; Megatron-LM puts it on consecutive ranks (the innermost axis, " +
                              mesh.axes[static_cast<size_t>(innermost)].name + ")");
    for (int a : axes.otherAxes)
        differences.push_back("axis " + mesh.axes[static_cast<size_t>(a)].name +
                              " splits more than the batch (Megatron-LM uses one tensor-parallel axis)");
    for (const auto& m : styles)
        if (!m.inexpressible.empty()) differences.push_back(m.pattern + " [" + m.strategy + "]: " + m.inexpressible);
    if (axes.tensorAxis >= 0 && differences.empty()) {
        MegatronOptions options;
        options.sequenceParallel = sequenceParallel;
        const std::vector<int> megatron = megatronAssignment(model, options);
        for (OpId op : representativeOps(ws.folded)) {
            const StrategyClass planned = classifyOp(model, op, result.strategyOfOp[static_cast<size_t>(op)]);
            if (!planned.hasWeight) continue;
            const StrategyClass rule = classifyOp(model, op, megatron[static_cast<size_t>(op)]);
            const ShardClass a = planned.axisClass[static_cast<size_t>(axes.tensorAxis)];
            const ShardClass b = rule.axisClass[static_cast<size_t>(axes.tensorAxis)];
            if (a != b)
                differences.push_back(
                    modulePattern(model.graph(), ws.folded, op) + ": the plan is " + std::string(shardClassName(a)) + " over " +
                    mesh.axes[static_cast<size_t>(axes.tensorAxis)].name + ", Megatron-LM " + std::string(shardClassName(b)));
        }
    }

    const int tp = axes.tensorAxis >= 0 ? mesh.axes[static_cast<size_t>(axes.tensorAxis)].size : 1;
    int dp = 1;
    for (int a : axes.dataAxes) dp *= mesh.axes[static_cast<size_t>(a)].size;
    bool selective = false, full = false;
    for (Recompute r : result.recomputeOfOp) {
        // Megatron-LM has no op-level policy; its selective recompute is the closest.
        selective = selective || r == Recompute::Selective || r == Recompute::Op;
        full = full || r == Recompute::Full;
    }
    std::ostringstream out;
    out << "# Megatron-LM arguments for the TP Studio plan of " << ws.context.modelName << " on mesh " << mesh.shapeText() << " ("
        << ws.context.hardwareName << ", " << ws.context.mode << ").\n";
    if (differences.empty()) {
        out << "# The plan is Megatron-shaped: these arguments reproduce it.\n";
    } else {
        out << "# The plan is NOT Megatron-shaped; no Megatron-LM arguments reproduce it. What differs:\n";
        for (const auto& d : differences) out << "#   - " << d << "\n";
        out << "# The closest Megatron-LM arguments (tensor parallelism of the same size, data parallelism over the rest):\n";
    }
    // A pipelined plan is one stage's (docs/formats.md): the stages lie along the whole mesh's
    // outermost axis, the tensor and data parallelism inside each stage as planned here.
    const PipelineStageInfo& stage = ws.stage;
    const int pp = stage.stage >= 0 ? stage.schedule.stages : 1;
    out << "--tensor-model-parallel-size " << tp << "\n";
    out << "--pipeline-model-parallel-size " << pp << "\n";
    // Megatron-LM counts every layer, the stack's kind before and after it too.
    const std::vector<int> split =
        containerLayersOfStage(stage.layersOfStage, stage.period, stage.layersPerPeriod, stage.layersBefore, stage.layersAfter);
    const bool even = std::adjacent_find(split.begin(), split.end(), std::not_equal_to<>()) == split.end();
    // Uneven boundaries as Megatron-LM sets them: the first and last stage's layers, the middle
    // stages sharing the rest evenly (its only uneven split), chunks per rank then by count.
    const bool megatronUneven = !even && split.size() >= 2 &&
                                std::adjacent_find(split.begin() + 1, split.end() - 1, std::not_equal_to<>()) == split.end() - 1;
    if (pp > 1 && megatronUneven)
        out << "--decoder-first-pipeline-num-layers " << split.front() << "\n--decoder-last-pipeline-num-layers " << split.back()
            << "\n";
    if (pp > 1 && !even && !megatronUneven)
        out << "# Megatron-LM cannot give the middle stages different layer counts (" << split.size() - 2
            << " middle stages here); the plan's are " << [&] {
                   std::string text;
                   for (int n : split) text += (text.empty() ? "" : ", ") + std::to_string(n);
                   return text;
               }() << ".\n";
    if (pp > 1 && stage.schedule.virtualStages > 1 && stage.layers % stage.schedule.virtualStages == 0) {
        if (even)
            out << "--num-layers-per-virtual-pipeline-stage " << split.front() / stage.schedule.virtualStages << "\n";
        else out << "--num-virtual-stages-per-pipeline-rank " << stage.schedule.virtualStages << "\n";
    }
    if (pp > 1)
        out << "# Pipeline: " << pp << " stages, " << scheduleText(stage.schedule) << "; the plan's figures are stage "
            << stage.stage + 1 << "'s (" << stage.layers << " of the '" << stage.layerLabel << "' layers from layer "
            << stage.firstLayer << ").\n";
    if (sequenceParallel) out << "--sequence-parallel\n";
    moeArguments(model, axes, out);
    const std::int64_t batch = ws.context.batch;
    const std::int64_t micro =
        model.settings().microBatch > 0 ? model.settings().microBatch : (dp > 0 && batch % dp == 0 ? batch / dp : batch);
    if (batch > 0) {
        out << "--global-batch-size " << batch << "\n";
        out << "--micro-batch-size " << micro << "\n";
    }
    if (ws.context.seq > 0) out << "--seq-length " << ws.context.seq << "\n";
    // ZeRO: the distributed optimizer is stage 1; stages 2 and 3 are Megatron-FSDP's sharding
    // strategies (megatron/core/distributed/fsdp).
    // ZeRO over a data-parallel group of one device shards nothing.
    switch (model.settings().training && dp > 1 ? model.settings().zeroStage : 0) {
    case 1:
        out << "--use-distributed-optimizer\n";
        break;
    case 2:
        out << "--use-megatron-fsdp\n--data-parallel-sharding-strategy optim_grads\n";
        break;
    case 3:
        out << "--use-megatron-fsdp\n--data-parallel-sharding-strategy optim_grads_params\n";
        if (!model.settings().zeroAcrossNodes)
            out << "# The plan shards inside each node and replicates across nodes (HSDP); these arguments shard\n"
                   "# over the whole data-parallel group.\n";
        if (!model.settings().reshardAfterForward)
            out << "# The plan keeps gathered parameters from forward to backward (FSDP2's\n"
                   "# reshard_after_forward=False); optim_grads_params gathers them again for backward.\n";
        break;
    default:
        break;
    }
    if (full)
        out << "--recompute-granularity full\n--recompute-method uniform\n--recompute-num-layers 1\n";
    else if (selective)
        out << "--recompute-granularity selective\n";
    out << "# data parallel size " << dp << " (world size " << mesh.devices() * pp << " = tensor " << tp << " x pipeline " << pp
        << " x data " << dp << "); Megatron-LM derives it from the world size.\n";
    return out.str();
}

} // namespace tp
