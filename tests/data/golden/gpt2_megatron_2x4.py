# Tensor-parallel plan for gpt2, exported by TP Studio (tpplan export --format pytorch).
# Mesh 2x4 (x=2 intra-node, y=4 intra-node), a100-80g-dgx, train, global batch 8; plan method: megatron.
# Step time 14.070 ms (communication 989.430 us), 1.51 GiB per device.
#
# Module names are the op names of the TP Studio graph ('/' read as '.', '*' for every
# instance of a block class); rename them to your model's module names if they differ.
# Tensor parallelism runs over mesh dim 'y'.
# Mesh dim 'x' only splits the batch (data parallelism): after parallelize_module, wrap the model with
# FSDP (fully_shard(model, mesh=mesh["x"])) or DDP over that dim.

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


def expand_plan(model, plan):
    """Resolves '*' in the plan's module names against the model's modules."""
    names = [name for name, _ in model.named_modules()]
    expanded = {}
    for pattern, style in plan.items():
        matches = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        if not matches:
            raise KeyError(f"no module of the model matches {pattern!r}")
        for name in matches:
            expanded[name] = style
    return expanded


def apply_plan(model, device_type="cuda"):
    """Builds the device mesh and applies the tensor-parallel plan; returns (model, mesh)."""
    mesh = init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)
    if TP_DIM is not None and PLAN:
        parallelize_module(model, mesh[TP_DIM], expand_plan(model, PLAN))
    return model, mesh
