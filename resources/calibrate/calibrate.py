#!/usr/bin/env python3
"""TP Studio calibration: measures this cluster for `tpplan calibrate --import`.

Written by `tpplan calibrate -o calibrate.py`. Needs PyTorch 1.13 or later and nothing else.

  One node:   torchrun --nproc-per-node 8 calibrate.py --out results.json
  Several:    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
                  --rdzv-endpoint HOST:29500 calibrate.py --out results.json
  Dry run:    python3 calibrate.py --dry-run --out results.json
              (CPU, gloo, two processes of its own, tiny sizes: checks the path, not the cluster)

Then: tpplan calibrate --import results.json -o my-cluster.json
      tpplan plan MODEL --hardware my-cluster.json

It measures, on every rank at once, and keeps global rank 0's figures (the medians of several
timed repeats after a warm-up, with CUDA events on a GPU):
  - GEMM TFLOP/s over (m, n, k) shapes: large squares, tensor-parallel transformer shapes,
    small contractions (K 32 to 2048) and small N;
  - HBM streaming bandwidth (one large device-to-device copy: bytes read plus bytes written);
  - the time of one tiny elementwise kernel (the launch overhead);
  - all-reduce, all-gather, reduce-scatter and all-to-all bus bandwidth by message size (the
    nccl-tests definitions: busbw = algbw * 2(g-1)/g for all-reduce, algbw * (g-1)/g for the
    others), within a node (the ranks of each node, all nodes at once) and, with several
    nodes, across nodes (one rank per node, every local rank's group at once, so each GPU gets
    its share of the network as in training).
The results file's format is in TP Studio's docs/formats.md, "Calibration results".
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

FORMAT = "tpstudio.calibration"
VERSION = 1
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def gemm_shapes(dry):
    """(kind, m, n, k): the shapes whose rates the importer fits (large, small_k) or records."""
    if dry:
        return ([("large", 256, 256, 256), ("large", 384, 384, 384)] +
                [("small_k", 256, 256, k) for k in (16, 32, 64, 128)] +
                [("tp", 256, 96, 256), ("tp", 256, 256, 64)] + [("small_n", 256, 16, 256)])
    shapes = [("large", s, s, s) for s in (4096, 8192, 16384)]
    shapes += [("small_k", 8192, 8192, k) for k in (32, 64, 96, 128, 192, 256, 512, 1024, 2048)]
    # Megatron's per-device matmuls for 8192 tokens: QKV, attention projection, fc1, fc2 at
    # hidden h and tensor-parallel degree t.
    for h in (4096, 8192, 12288):
        for t in (1, 2, 4, 8):
            shapes += [("tp", 8192, 3 * h // t, h), ("tp", 8192, h, h // t), ("tp", 8192, 4 * h // t, h),
                       ("tp", 8192, h, 4 * h // t)]
    shapes += [("small_n", 8192, n, 8192) for n in (16, 64, 128, 256)]
    return shapes


def collective_sizes(dry):
    """Message sizes in bytes: 4 KiB to 256 KiB (dry run), 64 KiB to 1 GiB."""
    low, high = (12, 18) if dry else (16, 30)
    return [1 << e for e in range(low, high + 1, 2 if dry else 1)]


class Timer:
    """Median seconds per call of fn over `repeats` timed batches of `iters` calls."""

    def __init__(self, torch, cuda, warmup, iters, repeats):
        self.torch, self.cuda = torch, cuda
        self.warmup, self.iters, self.repeats = warmup, iters, repeats

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def measure(self, fn, iters=None):
        iters = iters or self.iters
        for _ in range(self.warmup):
            fn()
        self.sync()
        samples = []
        for _ in range(self.repeats):
            if self.cuda:
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(iters):
                    fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / iters)
            else:
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                samples.append((time.perf_counter() - t0) / iters)
        return max(statistics.median(samples), 1e-9)


def measure_gemm(torch, timer, device, dtype, dry):
    results = []
    for kind, m, n, k in gemm_shapes(dry):
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        seconds = timer.measure(lambda: torch.matmul(a, b))
        results.append({"kind": kind, "m": m, "n": n, "k": k, "seconds": seconds,
                        "tflops": 2.0 * m * n * k / seconds / 1e12})
        del a, b
    return results


def measure_hbm(torch, timer, device, dry):
    numel = (8 << 20) // 4 if dry else (1 << 30) // 4
    src = torch.ones(numel, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = timer.measure(lambda: dst.copy_(src))
    moved = 2 * numel * 4
    del src, dst
    return {"bytes": moved, "seconds": seconds, "gbps": moved / seconds / 1e9}


def measure_elementwise(torch, timer, device):
    x = torch.zeros(1024, dtype=torch.float32, device=device)
    seconds = timer.measure(lambda: x.add_(1.0), iters=max(timer.iters, 200))
    return {"elements": 1024, "seconds": seconds}


def bus_factor(kind, g):
    return 2.0 * (g - 1) / g if kind == "all-reduce" else (g - 1) / g


class Collectives:
    """The four collectives on one group, each as a call on buffers of a given total size."""

    def __init__(self, torch, dist, group, size, device, gloo):
        self.torch, self.dist, self.group, self.size = torch, dist, group, size
        self.device, self.gloo = device, gloo
        self.emulated = []

    def op(self, kind, nbytes):
        torch, dist, g = self.torch, self.dist, self.group
        count = max(nbytes // 4 // self.size, 1) * self.size  # divisible by the group size
        full = torch.ones(count, dtype=torch.float32, device=self.device)
        part = torch.ones(count // self.size, dtype=torch.float32, device=self.device)
        if kind == "all-reduce":
            return count * 4, lambda: dist.all_reduce(full, group=g)
        if kind == "all-to-all":
            out = torch.empty_like(full)
            return count * 4, lambda: dist.all_to_all_single(out, full, group=g)
        if kind == "all-gather":
            if not self.gloo and hasattr(dist, "all_gather_into_tensor"):
                return count * 4, lambda: dist.all_gather_into_tensor(full, part, group=g)
            parts = list(full.chunk(self.size))
            return count * 4, lambda: dist.all_gather(parts, part, group=g)
        # reduce-scatter: gloo has none, so the dry run times an all-reduce in its place.
        if self.gloo:
            if kind not in self.emulated:
                self.emulated.append(kind)
            return count * 4, lambda: dist.all_reduce(full, group=g)
        if hasattr(dist, "reduce_scatter_tensor"):
            return count * 4, lambda: dist.reduce_scatter_tensor(part, full, group=g)
        return count * 4, lambda: dist.reduce_scatter(part, list(full.chunk(self.size)), group=g)


def measure_collectives(torch, dist, timer, group, size, device, gloo, dry):
    """{kind: [[bytes, seconds], ...]} on this rank's group, every rank of the job at once."""
    coll = Collectives(torch, dist, group, size, device, gloo)
    out = {}
    for kind in KINDS:
        points = []
        for nbytes in collective_sizes(dry):
            actual, fn = coll.op(kind, nbytes)
            dist.barrier()
            iters = timer.iters if nbytes < (64 << 20) else max(timer.iters // 4, 2)
            points.append([actual, timer.measure(fn, iters=iters)])
        out[kind] = points
    return out, coll.emulated


def slowest_rank(torch, dist, device, table):
    """The per-size times as the slowest rank of the job saw them (a collective ends for all)."""
    flat = [s for kind in KINDS for _, s in table[kind]]
    t = torch.tensor(flat, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    values = iter(t.tolist())
    return {kind: [[b, next(values)] for b, _ in table[kind]] for kind in KINDS}


def link_result(table, size, emulated):
    result = {"group_size": size, "emulated": emulated}
    for kind in KINDS:
        result[kind] = [{"bytes": b, "seconds": s, "algbw_gbps": b / s / 1e9,
                         "busbw_gbps": max(b / s / 1e9 * bus_factor(kind, size), 1e-6)}
                        for b, s in table[kind]]
    return result


def make_groups(dist, world, per_node):
    """(this rank's intra-node group, its inter-node group or None); every rank creates all."""
    rank = dist.get_rank()
    nodes = world // per_node
    intra = inter = None
    for node in range(nodes):
        g = dist.new_group(list(range(node * per_node, (node + 1) * per_node)))
        if rank // per_node == node:
            intra = g
    if nodes > 1:
        for local in range(per_node):
            g = dist.new_group(list(range(local, world, per_node)))
            if rank % per_node == local:
                inter = g
    return intra, inter


def device_info(torch, cuda):
    if cuda:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return props.name, int(props.total_memory)
    return "cpu " + (platform.processor() or platform.machine()), 0


def run(args, torch, dist):
    dry = args.dry_run
    cuda = not dry
    world, rank = dist.get_world_size(), dist.get_rank()
    per_node = args.ranks_per_node or int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if per_node < 1 or world % per_node:
        raise SystemExit("calibrate.py: %d ranks do not split into nodes of %d" % (world, per_node))
    device = "cuda" if cuda else "cpu"
    timer = Timer(torch, cuda, *((1, 3, 3) if dry else (5, 20, 5)))
    dtype = torch.float32 if dry else torch.bfloat16
    result = {"format": FORMAT, "version": VERSION, "dry_run": dry}
    result["device"], result["device_memory_bytes"] = device_info(torch, cuda)
    result.update({"backend": dist.get_backend(), "torch_version": torch.__version__, "world_size": world,
                   "ranks_per_node": per_node, "nodes": world // per_node,
                   "dtype": "f32" if dtype == torch.float32 else "bf16"})
    result["gemm"] = measure_gemm(torch, timer, device, dtype, dry)
    result["hbm"] = measure_hbm(torch, timer, device, dry)
    result["elementwise"] = measure_elementwise(torch, timer, device)
    intra, inter = make_groups(dist, world, per_node)
    links = {}
    for name, group, size in (("intra_node", intra, per_node), ("inter_node", inter, world // per_node)):
        # Every rank sees the same sizes, so all take the same steps (the all-reduce of the times).
        if size < 2:
            continue
        table, emulated = measure_collectives(torch, dist, timer, group, size, device, not cuda, dry)
        links[name] = link_result(slowest_rank(torch, dist, device, table), size, emulated)
    result["collectives"] = links
    if rank == 0:
        write_atomically(args.out, json.dumps(result, indent=1) + "\n")
        print("calibrate.py: wrote %s (%s, %d ranks, %d per node)" % (args.out, result["device"], world, per_node))


def write_atomically(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".calibrate-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def init_and_run(args, rank=None, world=None, store=None):
    import torch
    import torch.distributed as dist
    if args.dry_run:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("calibrate.py: no CUDA device here (use --dry-run to check the script on CPU)")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group("nccl")
    try:
        run(args, torch, dist)
    finally:
        dist.destroy_process_group()


def dry_worker(rank, args, world, store):
    init_and_run(args, rank, world, store)


def main(argv):
    parser = argparse.ArgumentParser(description="Measure GEMM, HBM, kernel launch and collective figures "
                                     "for tpplan calibrate --import.")
    parser.add_argument("--out", default="results.json", help="results file written by rank 0")
    parser.add_argument("--dry-run", action="store_true", help="CPU, gloo, tiny sizes, spawning its own processes")
    parser.add_argument("--nproc", type=int, default=2, help="processes of a dry run (default 2)")
    parser.add_argument("--ranks-per-node", type=int, default=0,
                        help="ranks per node (default: torchrun's LOCAL_WORLD_SIZE, or --nproc in a dry run)")
    args = parser.parse_args(argv)
    if not args.dry_run:
        init_and_run(args)
        return
    if args.nproc < 1:
        parser.error("--nproc must be at least 1")
    import torch.multiprocessing as mp
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    folder = tempfile.mkdtemp(prefix="tp-calibrate-")
    try:
        mp.spawn(dry_worker, args=(args, args.nproc, os.path.join(folder, "store")), nprocs=args.nproc)
    finally:
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)


if __name__ == "__main__":
    main(sys.argv[1:])
