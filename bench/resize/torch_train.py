"""The torchrun side of the resize benchmark (bench/resize/resize.py): a tiny data-parallel
loop comparable to `warren example train`: per step one allreduce (gloo, CPU) of a gradient
the size of the model, an SGD update, and rank 0 prints `STEP <it> <world> <unix time>`.

Torch elastic restarts every worker on a membership change, so this is its usual recipe:
rank 0 saves the model and step (torch.save, every --save-every steps, atomically) and a
(re)started job loads it on rank 0 and broadcasts it."""

import argparse
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model-bytes", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=100000)
    p.add_argument("--compute-ms", type=int, default=0)
    p.add_argument("--save-every", type=int, default=1)
    p.add_argument("--ckpt", required=True)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = max(a.model_bytes // 4, 1)
    model = torch.zeros(n)
    start = torch.zeros(1, dtype=torch.int64)
    if rank == 0 and os.path.exists(a.ckpt):
        state = torch.load(a.ckpt)
        model, start[0] = state["model"], state["it"]
    dist.broadcast(start, 0)
    dist.broadcast(model, 0)
    grad = torch.empty(n)
    for it in range(int(start[0]), a.iters):
        if a.compute_ms:
            time.sleep(a.compute_ms / 1000)
        torch.mul(model, 0.01, out=grad)
        grad.add_(float(rank + it % 7) * 1e-3)
        dist.all_reduce(grad)
        if rank == 0:
            print(f"STEP {it} {world} {time.time():.6f}", flush=True)
        model.sub_(grad, alpha=0.1 / world)
        if rank == 0 and (it + 1) % a.save_every == 0:
            tmp = a.ckpt + ".tmp"
            torch.save({"model": model, "it": it + 1}, tmp)
            os.replace(tmp, a.ckpt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
