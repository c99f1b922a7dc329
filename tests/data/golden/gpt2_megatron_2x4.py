# Tensor-parallel plan for gpt2, exported by TP Studio (tpplan export --format pytorch).
# Mesh 2x4 (x=2 intra-node, y=4 intra-node), a100-80g-dgx, train, global batch 8; plan method: megatron.
# Step time 14.070 ms (communication 989.430 us), 1.51 GiB per device.
#
# Module names are the op names of the TP Studio graph ('/' read as '.', '*' for every
# instance of a block class); rename them to your model's module names if they differ.
# Tensor parallelism runs over mesh dim 'y'.
# Mesh dim 'x' only splits the batch (data parallelism).
# ZeRO stage 0: replicate the model over them (DDP) after parallelize_module.

import fnmatch

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

MESH_SHAPE = (2, 4)
MESH_DIM_NAMES = ("x", "y")
TP_DIM = "y"
DP_DIMS = ("x",)
EP_DIMS = ()
EXPERT_MODULES = ()
ZERO_STAGE = 0
HSDP_REPLICATE_DIMS = ()
RESHARD_AFTER_FORWARD = False
FSDP_UNITS = ("layers.*",)

# Block class 'embed' (x1)
PLAN_EMBED = {
    # v=y: forward: all-reduce of the output over y (input sliced locally, no collective)
    #   plan: forward all-reduce over y 1.50 MiB; backward all-reduce over x 1.50 MiB
    "embed.wpe": RowwiseParallel(input_layouts=Replicate()),
}

# Block class 'layers.*' (x2)
PLAN_LAYERS = {
    # b=x,f=y: forward: no collective; backward: all-reduce of the input gradient over y
    #   plan: gradient all-reduce over x 288.38 KiB
    "layers.*.attn.q": ColwiseParallel(),
    # b=x,f=y: forward: no collective; backward: all-reduce of the input gradient over y
    #   plan: gradient all-reduce over x 288.38 KiB
    "layers.*.attn.k": ColwiseParallel(),
    # b=x,f=y: forward: no collective; backward: all-reduce of the input gradient over y
    #   plan: gradient all-reduce over x 288.38 KiB
    "layers.*.attn.v": ColwiseParallel(),
    # b=x,h=y: forward: all-reduce of the output over y
    #   plan: gradient all-reduce over x 289.50 KiB; forward all-reduce over y 6.00 MiB
    "layers.*.attn.out": RowwiseParallel(),
    # b=x,f=y: forward: no collective; backward: all-reduce of the input gradient over y
    #   plan: gradient all-reduce over x 1.13 MiB
    "layers.*.mlp.fc1": ColwiseParallel(),
    # b=x,h=y: forward: all-reduce of the output over y
    #   plan: gradient all-reduce over x 1.13 MiB; forward all-reduce over y 6.00 MiB
    "layers.*.mlp.fc2": RowwiseParallel(),
}

PLAN = {**PLAN_EMBED, **PLAN_LAYERS}


def expand_plan(model, plan, strict=True):
    """Resolves '*' in the plan's module names against the model's modules (a pipeline
    stage holds only some of them: strict=False skips the others)."""
    names = [name for name, _ in model.named_modules()]
    expanded = {}
    for pattern, style in plan.items():
        matches = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        if not matches and strict:
            raise KeyError(f"no module of the model matches {pattern!r}")
        for name in matches:
            expanded[name] = style
    return expanded


def apply_fsdp(model, mesh):
    """ZeRO stage 2 or 3 over the data-parallel mesh dims: FSDP2's fully_shard, each block
    instance (FSDP_UNITS) a unit of its own so that its gather overlaps the previous one's compute."""
    if ZERO_STAGE < 2 or not DP_DIMS:
        return model
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # PyTorch 2.4 and 2.5
        from torch.distributed._composable.fsdp import fully_shard
    shard_dims = tuple(d for d in DP_DIMS if d not in HSDP_REPLICATE_DIMS)
    if HSDP_REPLICATE_DIMS:
        # Hybrid sharding: FSDP2 replicates over the first dim of a 2-D mesh, shards over the second.
        if len(HSDP_REPLICATE_DIMS) != 1 or len(shard_dims) != 1:
            raise NotImplementedError("HSDP over several replicate or shard dims: flatten them first")
        dp_mesh = mesh[HSDP_REPLICATE_DIMS + shard_dims]
    elif len(DP_DIMS) > 1:
        # Sharded over every data-parallel dim: one flattened dim (a 2-D mesh would be HSDP).
        dp_mesh = mesh[DP_DIMS]._flatten("_".join(DP_DIMS))
    else:
        dp_mesh = mesh[DP_DIMS[0]]
    for name, module in model.named_modules():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in FSDP_UNITS):
            fully_shard(module, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)
    return model


def apply_expert_parallel(model, mesh):
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


def apply_plan(model, device_type="cuda"):
    """Builds the device mesh, applies the tensor-parallel plan and then, for ZeRO stage 2
    or 3, fully_shard over the data-parallel dims; returns (model, mesh)."""
    mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)
    if TP_DIM is not None and PLAN:
        parallelize_module(model, mesh[TP_DIM], expand_plan(model, PLAN))
    apply_expert_parallel(model, mesh)
    apply_fsdp(model, mesh)
    return model, mesh
