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

// The modules holding expert-parallel ops (their parents: "layers.*.moe.experts"), in order.
std::vector<std::string> expertModulesOf(const std::vector<ModuleStyle>& styles)
{
    std::vector<std::string> out;
    for (const auto& m : styles)
        if (m.style == ModuleStyle::Style::Expert) {
            const std::string parent = m.pattern.substr(0, m.pattern.rfind('.'));
            if (std::find(out.begin(), out.end(), parent) == out.end()) out.push_back(parent);
        }
    return out;
}

// A Python tuple of already-quoted items: "()", "(a,)", "(a, b)".
std::string pyTuple(const std::vector<std::string>& items)
{
    std::string out = "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
    return out + (items.size() == 1 ? ",)" : ")");
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
    case ModuleStyle::Style::Expert: // apply_expert_parallel, not a parallelize_module style
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

constexpr const char* kPipelineDim = "pp";

/// A tuple literal of Python values.
template <typename T, typename F>
std::string pyTuple(const std::vector<T>& items, F&& text)
{
    std::string out = "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + text(items[i]);
    return out + (items.size() == 1 ? ",)" : ")");
}

/// What apply_pipelined_plan needs to cut the model: the stages and chunks, every virtual
/// stage's layers in order (virtual stage k * P + r is chunk k of pipeline rank r, as
/// ScheduleInterleaved1F1B numbers them), and the modules outside the layers.
void pipelineConstants(std::ostream& py, const PipelineStageInfo& stage)
{
    const int p = stage.schedule.stages, v = stage.schedule.virtualStages;
    // Chunk k of rank r holds 1/V of rank r's layers of the stack (V divides each:
    // splitIntoStages); the stack's kind before it goes with the first chunk, after it with the
    // last (containerLayersOfStage).
    std::vector<int> layers;
    for (int k = 0; k < v; ++k)
        for (int n : stage.layersOfStage) layers.push_back(n / v);
    layers = containerLayersOfStage(layers, stage.period, stage.layersPerPeriod, stage.layersBefore, stage.layersAfter);
    const std::string& label = stage.layerLabel;
    const std::string container = label.size() > 2 && label.ends_with(".*") ? label.substr(0, label.size() - 2) : label;
    auto quoted = [](const std::string& x) { return pyString(x); };
    py << "\nPP_DIM = " << pyString(kPipelineDim) << "\n";
    py << "PP_STAGES = " << p << "\n";
    py << "PP_CHUNKS = " << v << "  # virtual stages per device (" << scheduleText(stage.schedule) << ")\n";
    py << "PP_LAYER_CONTAINER = " << pyString(container) << "\n";
    py << "PP_LAYERS_OF_STAGE = " << pyTuple(layers, [](int n) { return std::to_string(n); })
       << "  # per virtual stage, in layer order\n";
    py << "PP_FIRST_STAGE_MODULES = " << pyTuple(stage.firstStageModules, quoted) << "\n";
    py << "PP_LAST_STAGE_MODULES = " << pyTuple(stage.lastStageModules, quoted) << "\n";
}

// Expert parallelism (ModuleStyle::Style::Expert): DTensor's styles have no expert style, so
// the script uses torchtitan's ExpertParallel where it is installed (stacked weights sharded on
// the expert dim, the token all-to-alls inserted) and otherwise shards the weights itself,
// leaving the token exchange to the MoE layer.
constexpr const char* kExpertFunctions = R"PY(def apply_expert_parallel(model, mesh):
    """Expert parallelism over EP_DIMS: every EXPERT_MODULES module keeps 1/n of its experts,
    its stacked parameters [experts, ...] split on dim 0. torchtitan's ExpertParallel style also
    inserts the all-to-alls that bring each expert its tokens and take them back; without
    torchtitan only the weights are split here, and the MoE layer must exchange its tokens itself
    (torch.distributed.all_to_all_single over ep_mesh) as Megatron-Core and DeepSpeed-MoE do."""
    if not EP_DIMS or not EXPERT_MODULES:
        return model
    import torch
    from torch.distributed.tensor import distribute_tensor

    ep_mesh = mesh[EP_DIMS[0]] if len(EP_DIMS) == 1 else mesh[EP_DIMS]._flatten("_".join(EP_DIMS))
    try:
        from torchtitan.distributed.expert_parallel import ExpertParallel
    except ImportError:
        ExpertParallel = None
    for name, module in model.named_modules():
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in EXPERT_MODULES):
            continue
        if ExpertParallel is not None:
            parallelize_module(module, ep_mesh, ExpertParallel())
            continue
        for owner in module.modules():
            for key, param in list(owner.named_parameters(recurse=False)):
                owner.register_parameter(
                    key, torch.nn.Parameter(distribute_tensor(param.data, ep_mesh, [Shard(0)]), param.requires_grad))
    return model


)PY";

constexpr const char* kPipelineFunctions = R"PY(

def pipeline_stage_module(model, stage_index):
    """A copy of the model with only virtual stage `stage_index`'s layers, the first-stage modules
    on the first and the last-stage ones on the last (the others set to None: the model's
    forward must skip a None module, as torchtitan's do). Build the model on the meta device."""
    import copy

    import torch.nn as nn

    stage = copy.deepcopy(model)
    first = sum(PP_LAYERS_OF_STAGE[:stage_index])
    keep = range(first, first + PP_LAYERS_OF_STAGE[stage_index])
    parent_name, _, attr = PP_LAYER_CONTAINER.rpartition(".")
    parent = stage.get_submodule(parent_name) if parent_name else stage
    layers = getattr(parent, attr)
    if isinstance(layers, nn.ModuleDict):
        for key in list(layers.keys()):
            if int(key) not in keep:
                del layers[key]
    else:
        setattr(parent, attr, nn.ModuleList(layers[i] for i in keep))
    last = len(PP_LAYERS_OF_STAGE) - 1
    for names, here in ((PP_FIRST_STAGE_MODULES, stage_index == 0), (PP_LAST_STAGE_MODULES, stage_index == last)):
        for name in names:
            if not here and hasattr(stage, name):
                setattr(stage, name, None)
    return stage


def apply_pipelined_plan(model, n_microbatches, loss_fn, device_type="cuda"):
    """Builds the device mesh (the pipeline dim outermost, then each stage's mesh), cuts this
    rank's stages out of the model, applies the tensor-parallel plan and ZeRO to each, and
    returns (schedule, stage modules, mesh); run a step with schedule.step(inputs) on the first
    stage, schedule.step(target=labels) on the last, schedule.step() on the others."""
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

    mesh = init_device_mesh(device_type, (PP_STAGES,) + MESH_SHAPE, mesh_dim_names=(PP_DIM,) + MESH_DIM_NAMES)
    pp_rank = mesh[PP_DIM].get_local_rank()
    device = torch.device(device_type, torch.cuda.current_device()) if device_type == "cuda" else torch.device(device_type)
    stages, modules = [], []
    for chunk in range(PP_CHUNKS):
        index = chunk * PP_STAGES + pp_rank
        module = pipeline_stage_module(model, index)
        if TP_DIM is not None and PLAN:
            parallelize_module(module, mesh[TP_DIM], expand_plan(module, PLAN, strict=False))
        apply_expert_parallel(module, mesh)
        apply_fsdp(module, mesh)
        modules.append(module)
        stages.append(PipelineStage(module, index, PP_STAGES * PP_CHUNKS, device, group=mesh[PP_DIM].get_group()))
    if PP_CHUNKS == 1:
        schedule = Schedule1F1B(stages[0], n_microbatches=n_microbatches, loss_fn=loss_fn)
    else:
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=n_microbatches, loss_fn=loss_fn)
    return schedule, modules, mesh
)PY";

// The script's opening comments: the plan's figures, its axes and what the styles cannot express.
void writeHeaderComments(std::ostream& py, const PlanWorkspace& ws, const SearchResult& result, const PlanAxes& axes,
                         const std::vector<ModuleStyle>& styles)
{
    const CostModel& model = *ws.costModel;
    const Mesh& mesh = model.mesh();
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
        py << "# The plan splits no weight" << (axes.expertAxes.empty() ? "" : " but the experts'")
           << ": there is no tensor parallelism to apply.\n";
    const std::vector<std::string> expertModules = expertModulesOf(styles);
    if (!expertModules.empty()) {
        py << "# Expert parallelism over mesh dim";
        for (int a : axes.expertAxes) py << " '" << mesh.axes[static_cast<size_t>(a)].name << "'";
        py << ": apply_expert_parallel splits the experts of EXPERT_MODULES.\n";
        for (const auto& m : styles)
            if (m.style == ModuleStyle::Style::Expert) py << "#   " << m.pattern << "  [" << m.strategy << "]: " << m.implies << "\n";
    }
    const int zero = model.settings().training ? model.settings().zeroStage : 0;
    for (int a : axes.dataAxes) {
        const bool experts = std::find(axes.expertAxes.begin(), axes.expertAxes.end(), a) != axes.expertAxes.end();
        py << "# Mesh dim '" << mesh.axes[static_cast<size_t>(a)].name << "' "
           << (experts ? "splits the experts and the batch of every other op" : "only splits the batch")
           << " (data parallelism).\n";
    }
    if (!axes.dataAxes.empty()) py << "# " << zeroComment(zero, model.settings().reshardAfterForward) << "\n";
    if (const PipelineStageInfo& stage = ws.stage; stage.stage >= 0)
        py << "# Pipeline: " << stage.schedule.stages << " stages over mesh dim " << pyString(kPipelineDim) << " ("
           << scheduleText(stage.schedule) << "), each on a mesh " << mesh.shapeText() << "; the figures above are stage "
           << stage.stage + 1 << "'s.\n# apply_pipelined_plan cuts the model into its stages (torch.distributed.pipelining) and\n"
              "# applies the plan below to each.\n";
    bool anyInexpressible = false;
    for (const auto& m : styles)
        if (!m.inexpressible.empty()) {
            if (!anyInexpressible) py << "#\n# Ops the DTensor styles cannot express (not in the plan below; apply by hand):\n";
            anyInexpressible = true;
            py << "#   " << m.pattern << "  [" << m.strategy << "]: " << m.inexpressible << "\n";
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
    writeHeaderComments(py, ws, result, axes, styles);
    const std::vector<std::string> expertModules = expertModulesOf(styles);
    const int zero = model.settings().training ? model.settings().zeroStage : 0;
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
    std::vector<std::string> expertDims;
    for (int a : axes.expertAxes)
        if (!expertModules.empty()) expertDims.push_back(pyString(mesh.axes[static_cast<size_t>(a)].name));
    py << "EP_DIMS = " << pyTuple(expertDims) << "\n";
    std::vector<std::string> quoted;
    for (const auto& name : expertModules) quoted.push_back(pyString(name));
    py << "EXPERT_MODULES = " << pyTuple(quoted) << "\n";
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
        if (m.style == ModuleStyle::Style::None || m.style == ModuleStyle::Style::Expert) continue;
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
    if (ws.stage.stage >= 0) pipelineConstants(py, ws.stage);
    py << "\n\ndef expand_plan(model, plan, strict=True):\n"
          "    \"\"\"Resolves '*' in the plan's module names against the model's modules (a pipeline\n"
          "    stage holds only some of them: strict=False skips the others).\"\"\"\n"
          "    names = [name for name, _ in model.named_modules()]\n"
          "    expanded = {}\n"
          "    for pattern, style in plan.items():\n"
          "        matches = [name for name in names if fnmatch.fnmatchcase(name, pattern)]\n"
          "        if not matches and strict:\n"
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
       << kExpertFunctions
       << "def apply_plan(model, device_type=\"cuda\"):\n"
          "    \"\"\"Builds the device mesh, applies the tensor-parallel plan and then, for ZeRO stage 2\n"
          "    or 3, fully_shard over the data-parallel dims; returns (model, mesh).\"\"\"\n"
          "    mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)\n"
          "    if TP_DIM is not None and PLAN:\n"
          "        parallelize_module(model, mesh[TP_DIM], expand_plan(model, PLAN))\n"
          "    apply_expert_parallel(model, mesh)\n"
          "    apply_fsdp(model, mesh)\n"
          "    return model, mesh\n";
    if (ws.stage.stage >= 0) py << kPipelineFunctions;
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
        case ModuleStyle::Style::Expert: // Transformers' tp_plan has no expert style
        case ModuleStyle::Style::None:
            break;
        }
    }
    return plan.dump(2) + "\n";
}

} // namespace tp
