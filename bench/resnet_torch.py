"""ResNet training throughput in PyTorch eager (the other side of bench/resnet_compare.sh).

torchvision's resnet18 (or resnet50) with num_classes 10 in training mode, random images,
cross-entropy and AdamW, on the CPU with a fixed thread count. Prints one JSON line:
{"framework": "pytorch", "model", "batch", "size", "threads", "steps", "images_per_s", "ms_per_step"}.
The first --warmup steps are not timed. --profile runs as many steps again under torch.profiler
and adds "profile": {family: ms per step} (bench/profile_families.py), scaled to the unprofiled
step's time, for bench/profile_compare.sh.

Usage: python3 bench/resnet_torch.py [--model resnet18] [--batch 32] [--size 32] [--threads 2]
       [--steps 10] [--warmup 2] [--profile]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="self CPU time per op family (torch.profiler)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=10)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            t0 = time.perf_counter()
        step()
    s = time.perf_counter() - t0
    extra = {}
    if a.profile:  # after the timed steps, scaled to them (the profiler slows every operator)
        from torch.profiler import ProfilerActivity, profile
        from profile_families import torch_families
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t1 = time.perf_counter()
            for _ in range(a.steps):
                step()
            profiled = time.perf_counter() - t1
        extra["profile"] = {k: round(v * s / profiled, 3) for k, v in torch_families(prof.key_averages(), a.steps).items()}
    print(json.dumps({"framework": "pytorch", "model": a.model, "batch": a.batch, "size": a.size,
                      "threads": a.threads, "steps": a.steps, "images_per_s": round(a.batch * a.steps / s, 2),
                      "ms_per_step": round(1e3 * s / a.steps, 1), **extra}))


if __name__ == "__main__":
    main()
