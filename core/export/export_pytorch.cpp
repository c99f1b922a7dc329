// PyTorch DTensor script and Hugging Face tp-plan exports.
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "export_plan.h"
#include "export_styles.h"
#include "../util/format.h"

namespace tp {

namespace {

std::string pyString(const std::string& text)
{
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// "layers.*" -> "PLAN_LAYERS"; distinct identifiers for distinct classes.
std::string planVariable(const std::string& label, std::set<std::string>& taken)
{
    std::string name = "PLAN_";
    for (char c : label) {
        if (std::isalnum(static_cast<unsigned char>(c)))
            name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        else if (name.back() != '_')
            name += '_';
    }
    while (name.size() > 5 && name.back() == '_') name.pop_back();
    if (name == "PLAN") name = "PLAN_BLOCK";
    std::string unique = name;
    for (int i = 2; !taken.insert(unique).second; ++i) unique = name + "_" + std::to_string(i);
    return unique;
}

std::string styleCall(const ModuleStyle& m)
{
    switch (m.style) {
    case ModuleStyle::Style::Colwise:
    case ModuleStyle::Style::Rowwise: {
        const bool column = m.style == ModuleStyle::Style::Colwise;
        const std::string defaultIn = column ? "Replicate()" : "Shard(-1)";
        const std::string defaultOut = column ? "Shard(-1)" : "Replicate()";
        std::string args;
        if (m.inputLayout != defaultIn) args += "input_layouts=" + m.inputLayout;
        if (m.outputLayout != defaultOut) args += std::string(args.empty() ? "" : ", ") + "output_layouts=" + m.outputLayout;
        return std::string(column ? "ColwiseParallel(" : "RowwiseParallel(") + args + ")";
    }
    case ModuleStyle::Style::Sequence:
        return m.sequenceDim == 1 ? "SequenceParallel()" : "SequenceParallel(sequence_dim=" + std::to_string(m.sequenceDim) + ")";
    case ModuleStyle::Style::None:
        break;
    }
    return {};
}

std::string axesText(const Mesh& mesh)
{
    std::string s;
    for (size_t a = 0; a < mesh.axes.size(); ++a)
        s += (a ? ", " : "") + mesh.axes[a].name + "=" + std::to_string(mesh.axes[a].size) +
             (mesh.axes[a].crossesNodes ? " inter-node" : " intra-node");
    return s;
}

/// How the plan's ZeRO stage is run in PyTorch, for the script's header.
std::string zeroComment(int zero, bool reshardAfterForward)
{
    switch (zero) {
    case 0:
        return "ZeRO stage 0: replicate the model over them (DDP) after parallelize_module.";
    case 1:
        return "ZeRO stage 1: DDP over them, with torch.distributed.optim.ZeroRedundancyOptimizer sharding the\n"
               "# optimizer states over the data-parallel group.";
    case 2:
        return "ZeRO stage 2: apply_fsdp below (fully_shard, parameters kept gathered between forward and backward).";
    default:
        return reshardAfterForward
                   ? "ZeRO stage 3 (FSDP): apply_fsdp below (fully_shard, parameters resharded after forward)."
                   : "ZeRO stage 3 (FSDP): apply_fsdp below (fully_shard, parameters kept gathered from each\n"
                     "# module's forward to its backward: reshard_after_forward=False).";
    }
}

} // namespace

std::string exportPytorch(const PlanWorkspace& ws, const SearchResult& result)
{
    const CostModel& model = *ws.costModel;
    const Mesh& mesh = model.mesh();
    const PlanAxes axes = planAxes(model, result);
    const auto styles = moduleStyles(ws, result, axes);
    std::ostringstream py;
    py << "# Tensor-parallel plan for " << ws.context.modelName << ", exported by TP Studio (tpplan export --format pytorch).\n";
    py << "# Mesh " << mesh.shapeText() << " (" << axesText(mesh) << "), " << ws.context.hardwareName << ", " << ws.context.mode
       << ", global batch " << ws.context.batch << "; plan method: " << result.method << ".\n";
    py << "# Step time " << formatSeconds(result.breakdown.stepSeconds) << " (communication "
       << formatSeconds(result.breakdown.commSeconds) << "), " << formatBytes(result.breakdown.perDeviceBytes)
       << " per device.\n";
    py << "#\n# Module names are the op names of the TP Studio graph ('/' read as '.', '*' for every\n"
          "# instance of a block class); rename them to your model's module names if they differ.\n";
    if (axes.tensorAxis >= 0)
        py << "# Tensor parallelism runs over mesh dim '" << mesh.axes[static_cast<size_t>(axes.tensorAxis)].name << "'.\n";
    else
        py << "# The plan splits no weight: there is no tensor parallelism to apply.\n";
    const int zero = model.settings().training ? model.settings().zeroStage : 0;
    for (int a : axes.dataAxes)
        py << "# Mesh dim '" << mesh.axes[static_cast<size_t>(a)].name << "' only splits the batch (data parallelism).\n";
    if (!axes.dataAxes.empty()) py << "# " << zeroComment(zero, model.settings().reshardAfterForward) << "\n";
    if (const PipelineStageInfo& stage = ws.stage; stage.stage >= 0)
        py << "# Pipeline: this plan is stage " << stage.stage + 1 << " of " << stage.schedule.stages << " ("
           << scheduleText(stage.schedule) << "; " << stage.layers << " of the '" << stage.layerLabel << "' layers from layer "
           << stage.firstLayer << "),\n# on each stage's mesh " << mesh.shapeText()
           << ". Apply the plan below to every stage's module; splitting the model into stages\n"
              "# (torch.distributed.pipelining: PipelineStage with Schedule1F1B or ScheduleInterleaved1F1B)\n"
              "# is not generated yet.\n";
    bool anyInexpressible = false;
    for (const auto& m : styles)
        if (!m.inexpressible.empty()) {
            if (!anyInexpressible) py << "#\n# Ops the DTensor styles cannot express (not in the plan below; apply by hand):\n";
            anyInexpressible = true;
            py << "#   " << m.pattern << "  [" << m.strategy << "]: " << m.inexpressible << "\n";
        }
    py << "\nimport fnmatch\n\n"
          "from torch.distributed.device_mesh import init_device_mesh\n"
          "from torch.distributed.tensor import Replicate, Shard\n"
          "from torch.distributed.tensor.parallel import (\n"
          "    ColwiseParallel,\n"
          "    PrepareModuleInput,\n"
          "    RowwiseParallel,\n"
          "    SequenceParallel,\n"
          "    parallelize_module,\n"
          ")\n\n";
    py << "MESH_SHAPE = (";
    for (size_t a = 0; a < mesh.axes.size(); ++a) py << (a ? ", " : "") << mesh.axes[a].size;
    py << (mesh.axes.size() == 1 ? ",)\n" : ")\n");
    py << "MESH_DIM_NAMES = (";
    for (size_t a = 0; a < mesh.axes.size(); ++a) py << (a ? ", " : "") << pyString(mesh.axes[a].name);
    py << (mesh.axes.size() == 1 ? ",)\n" : ")\n");
    py << "TP_DIM = " << (axes.tensorAxis >= 0 ? pyString(mesh.axes[static_cast<size_t>(axes.tensorAxis)].name) : "None") << "\n";
    py << "DP_DIMS = (";
    for (size_t i = 0; i < axes.dataAxes.size(); ++i)
        py << (i ? ", " : "") << pyString(mesh.axes[static_cast<size_t>(axes.dataAxes[i])].name);
    py << (axes.dataAxes.size() == 1 ? ",)\n" : ")\n");
    py << "ZERO_STAGE = " << zero << "\n";
    // HSDP (CostSettings::zeroAcrossNodes false): the dims that cross nodes replicate the states.
    std::vector<std::string> replicate;
    if (zero > 0 && !model.settings().zeroAcrossNodes)
        for (int a : axes.dataAxes)
            if (mesh.axes[static_cast<size_t>(a)].crossesNodes) replicate.push_back(pyString(mesh.axes[static_cast<size_t>(a)].name));
    py << "HSDP_REPLICATE_DIMS = (";
    for (size_t i = 0; i < replicate.size(); ++i) py << (i ? ", " : "") << replicate[i];
    py << (replicate.size() == 1 ? ",)\n" : ")\n");
    // Stage 3 gathers the parameters again for backward unless the plan keeps them gathered
    // (CostSettings::reshardAfterForward); stage 2 runs as FSDP's SHARD_GRAD_OP.
    py << "RESHARD_AFTER_FORWARD = " << (zero == 3 && model.settings().reshardAfterForward ? "True" : "False") << "\n";
    const BlockClass* layers = ws.folded.largestClass();
    py << "FSDP_UNITS = (" << (layers && layers->instances.size() > 1 ? pyString(layers->label) + "," : std::string()) << ")\n";

    // One dict per block class, in order of first appearance.
    std::set<std::string> taken;
    std::vector<std::string> variables;
    std::string currentBlock;
    bool open = false;
    for (const auto& m : styles) {
        if (m.style == ModuleStyle::Style::None) continue;
        if (!open || m.blockLabel != currentBlock) {
            if (open) py << "}\n";
            currentBlock = m.blockLabel;
            variables.push_back(planVariable(m.blockLabel, taken));
            py << "\n# Block class '" << m.blockLabel << "' (x" << m.blockInstances << ")\n" << variables.back() << " = {\n";
            open = true;
        }
        py << "    # " << m.strategy << ": " << m.implies << "\n";
        if (!m.planCollectives.empty()) py << "    #   plan: " << m.planCollectives << "\n";
        py << "    " << pyString(m.pattern) << ": " << styleCall(m) << ",\n";
    }
    if (open) py << "}\n";
    py << "\nPLAN = {";
    for (size_t i = 0; i < variables.size(); ++i) py << (i ? ", " : "") << "**" << variables[i];
    py << "}\n";
    py << "\n\ndef expand_plan(model, plan):\n"
          "    \"\"\"Resolves '*' in the plan's module names against the model's modules.\"\"\"\n"
          "    names = [name for name, _ in model.named_modules()]\n"
          "    expanded = {}\n"
          "    for pattern, style in plan.items():\n"
          "        matches = [name for name in names if fnmatch.fnmatchcase(name, pattern)]\n"
          "        if not matches:\n"
          "            raise KeyError(f\"no module of the model matches {pattern!r}\")\n"
          "        for name in matches:\n"
          "            expanded[name] = style\n"
          "    return expanded\n\n\n"
          "def apply_fsdp(model, mesh):\n"
          "    \"\"\"ZeRO stage 2 or 3 over the data-parallel mesh dims: FSDP2's fully_shard, each block\n"
          "    instance (FSDP_UNITS) a unit of its own so that its gather overlaps the previous one's compute.\"\"\"\n"
          "    if ZERO_STAGE < 2 or not DP_DIMS:\n"
          "        return model\n"
          "    try:\n"
          "        from torch.distributed.fsdp import fully_shard\n"
          "    except ImportError:  # PyTorch 2.4 and 2.5\n"
          "        from torch.distributed._composable.fsdp import fully_shard\n"
          "    shard_dims = tuple(d for d in DP_DIMS if d not in HSDP_REPLICATE_DIMS)\n"
          "    if HSDP_REPLICATE_DIMS:\n"
          "        # Hybrid sharding: FSDP2 replicates over the first dim of a 2-D mesh, shards over the second.\n"
          "        if len(HSDP_REPLICATE_DIMS) != 1 or len(shard_dims) != 1:\n"
          "            raise NotImplementedError(\"HSDP over several replicate or shard dims: flatten them first\")\n"
          "        dp_mesh = mesh[HSDP_REPLICATE_DIMS + shard_dims]\n"
          "    elif len(DP_DIMS) > 1:\n"
          "        # Sharded over every data-parallel dim: one flattened dim (a 2-D mesh would be HSDP).\n"
          "        dp_mesh = mesh[DP_DIMS]._flatten(\"_\".join(DP_DIMS))\n"
          "    else:\n"
          "        dp_mesh = mesh[DP_DIMS[0]]\n"
          "    for name, module in model.named_modules():\n"
          "        if any(fnmatch.fnmatchcase(name, pattern) for pattern in FSDP_UNITS):\n"
          "            fully_shard(module, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)\n"
          "    fully_shard(model, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)\n"
          "    return model\n\n\n"
          "def apply_plan(model, device_type=\"cuda\"):\n"
          "    \"\"\"Builds the device mesh, applies the tensor-parallel plan and then, for ZeRO stage 2\n"
          "    or 3, fully_shard over the data-parallel dims; returns (model, mesh).\"\"\"\n"
          "    mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)\n"
          "    if TP_DIM is not None and PLAN:\n"
          "        parallelize_module(model, mesh[TP_DIM], expand_plan(model, PLAN))\n"
          "    apply_fsdp(model, mesh)\n"
          "    return model, mesh\n";
    return py.str();
}

std::string exportHfTpPlan(const PlanWorkspace& ws, const SearchResult& result)
{
    const PlanAxes axes = planAxes(*ws.costModel, result);
    nlohmann::ordered_json plan = nlohmann::ordered_json::object();
    for (const auto& m : moduleStyles(ws, result, axes)) {
        switch (m.style) {
        case ModuleStyle::Style::Colwise:
            plan[m.pattern] = m.outputLayout == "Replicate()" ? "colwise_rep" : "colwise";
            break;
        case ModuleStyle::Style::Rowwise:
            plan[m.pattern] = "rowwise";
            break;
        case ModuleStyle::Style::Sequence:
            plan[m.pattern] = "sequence_parallel";
            break;
        case ModuleStyle::Style::None:
            break;
        }
    }
    return plan.dump(2) + "\n";
}

} // namespace tp
