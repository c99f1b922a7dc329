#!/usr/bin/python3
"""Builds the ONNX fixtures of tests/tst_onnx.cpp from real PyTorch modules.

Needs Debian's python3-torch and python3-torchvision (run with /usr/bin/python3). Each model is
exported with export_params=False, so the files hold the graph and no weights (the weights become
graph inputs, which the importer must recognise as weights). Beside the files, fixtures.json
records each module's exact parameter count (shared parameters counted once, buffers not at all)
and the shapes the graph was exported with. The committed files are what the tests read; CI does
not run this script.
"""
import json
import math
import os

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q = q.view(b, t, self.heads, h // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, h // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, h // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        context = F.softmax(scores, dim=-1) @ v
        return self.proj(context.transpose(1, 2).reshape(b, t, h))


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2Style(nn.Module):
    """A GPT-2-style decoder built from torch.nn: tied input/output embedding, pre-norm blocks."""

    def __init__(self, vocab=5000, context=128, hidden=256, heads=8, layers=4):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(context, hidden)
        self.layers = nn.ModuleList([Block(hidden, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for layer in self.layers:
            x = layer(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied, like GPT-2


def parameter_count(module):
    return sum(p.numel() for p in module.parameters())  # parameters() yields shared ones once


def export(name, module, example, opset, input_names, dynamic_axes=None, preserve_mode=False):
    module.eval()
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(
        module, example, path, export_params=False, do_constant_folding=False, opset_version=opset,
        input_names=input_names, output_names=["output"], dynamic_axes=dynamic_axes,
        # PRESERVE keeps BatchNormalization as its own node (EVAL would fuse it into the conv,
        # changing the parameter count).
        training=torch.onnx.TrainingMode.PRESERVE if preserve_mode else torch.onnx.TrainingMode.EVAL)
    return {"file": name + ".onnx", "params": parameter_count(module), "opset": opset,
            "input_shape": list(example.shape)}


def make_handwritten(fixtures):
    """Two small models written with the onnx helper API instead of torch: one with initializers
    (weights stored, as with export_params=True), a Gemm and scoped node names; one with an
    operator TP Studio has no row for."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    def weight(name, *shape):
        return numpy_helper.from_array(np.random.default_rng(0).standard_normal(shape).astype(np.float32), name)

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/mlp/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["a"], name="/mlp/act/Relu"),
        helper.make_node("MatMul", ["a", "fc2.weight"], ["p"], name="/mlp/fc2/MatMul"),
        helper.make_node("Add", ["p", "fc2.bias"], ["y"], name="/mlp/fc2/Add"),
    ]
    inits = [weight("fc1.weight", 32, 16), weight("fc1.bias", 32), weight("fc2.weight", 32, 8), weight("fc2.bias", 8)]
    graph = helper.make_graph(nodes, "scoped_mlp", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="make_fixtures.py")
    onnx.save(model, os.path.join(HERE, "scoped_mlp.onnx"))
    fixtures["scoped_mlp"] = {"file": "scoped_mlp.onnx", "params": 32 * 16 + 32 + 32 * 8 + 8, "opset": 14,
                              "input_shape": [1, 16]}

    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 16, 8, 8])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 16, 16])
    nodes = [
        helper.make_node("Relu", ["image"], ["r"], name="/stem/Relu"),
        helper.make_node("DepthToSpace", ["r"], ["out"], name="/head/DepthToSpace", blocksize=2),
    ]
    graph = helper.make_graph(nodes, "unsupported_op", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="make_fixtures.py")
    onnx.save(model, os.path.join(HERE, "unsupported_op.onnx"))


def main():
    fixtures = {}
    make_handwritten(fixtures)
    gpt = Gpt2Style()
    fixtures["gpt2_style"] = export(
        "gpt2_style", gpt, torch.zeros(2, 64, dtype=torch.long), 14, ["input_ids"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "output": {0: "batch", 1: "sequence"}})
    fixtures["gpt2_style"].update(layers=4, hidden=256, heads=8, vocab=5000)

    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
    fixtures["transformer_encoder"] = export(
        "transformer_encoder", encoder, torch.zeros(2, 32, 256), 17, ["src"])
    fixtures["transformer_encoder"].update(layers=3)

    resnet = torchvision.models.resnet50(weights=None)
    fixtures["resnet50"] = export("resnet50", resnet, torch.zeros(1, 3, 224, 224), 14, ["image"],
                                  preserve_mode=True)

    vit = torchvision.models.vit_b_16(weights=None)
    fixtures["vit_b16"] = export("vit_b16", vit, torch.zeros(1, 3, 224, 224), 14, ["image"])
    fixtures["vit_b16"].update(layers=12)

    with open(os.path.join(HERE, "fixtures.json"), "w") as f:
        json.dump(fixtures, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
