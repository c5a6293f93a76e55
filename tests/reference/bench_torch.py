#!/usr/bin/env python3
"""PyTorch side of the model benchmark (issue 5 "Performance"): training-step throughput and
peak memory of the reference model tupe_ref.py in eager PyTorch.

One training step = forward (MLM head on 15% of the positions), backward, global-norm clipping
and the AdamW update of contract §5 (tupe_ref.AdamW), in fp32 and train mode with the preset's
dropout. Sequences are full length (no padding); vocabulary size --vocab-size (default 32,769,
the paper's). Each (preset, variant) runs in its own child process so that its peak RSS is its
own. Prints one JSON object per line on stdout:

  {"preset": "small", "variant": "tupe-r", "batch": 16, "seq": 128, "threads": 2,
   "attention": "sdpa", "steps": 5, "step_s": 0.91, "step_s_min": 0.90, "tokens_per_s": 2250.1,
   "tokens_per_s_best": 2275.6, "cpu_s": 1.80, "cpu_s_min": 1.79,
   "peak_rss_mib": 812.4, "base_rss_mib": 301.2, "params": 6871041, "torch": "2.x"}

step_s is the median over the timed steps (after --warmup untimed ones) and tokens_per_s =
batch·seq / step_s; tokens_per_s_best uses the fastest step (less sensitive to a busy machine);
cpu_s and cpu_s_min are the median and least CPU time of a step, all threads (with
OMP_WAIT_POLICY=passive, the work done whatever else the machine runs). peak_rss_mib is the child's ru_maxrss; base_rss_mib its RSS after importing
torch, before building the model (so peak - base is what the model and its step need).

Package: torch (PyPI, MKL/oneDNN CPU kernels). Example (what tests/bench/model.sh runs):
  python3 tests/reference/bench_torch.py --runs small:16,bert-base:8 --seq 128 --threads 2
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANT_NAMES = ("bert-a", "bert-r", "bert-ad", "tupe-a", "tupe-a-tie", "tupe-r")


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def child(a):
    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    sys.path.insert(0, HERE)
    import tupe_ref as R
    base = rss_mib()
    position, untie = R.VARIANTS[a.variant]
    cfg = R.make_config(a.preset, vocab_size=a.vocab_size, position=position, untie_cls=untie)
    torch.manual_seed(a.seed)
    model = R.TupeModel(cfg, sdpa=(a.attention == "sdpa")).train()
    opt = R.AdamW(model, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, clip=1.0,
                  warmup=10000, total=1000000)
    B, T = a.batch, a.seq
    g = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(7, a.vocab_size, (B, T), generator=g)
    ids[:, 0] = 0
    lengths = torch.full((B,), T, dtype=torch.long)
    M = max(1, round(a.mask_rate * B * T))
    mask_pos = torch.randperm(B * T, generator=g)[:M].sort().values
    labels = torch.randint(7, a.vocab_size, (M,), generator=g)

    def step():
        model.zero_grad(set_to_none=True)
        loss = model.loss(model(ids, lengths, mask_pos), labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    times, cpus = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    med = statistics.median(times)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "preset": a.preset, "variant": a.variant, "batch": B, "seq": T, "threads": a.threads,
        "attention": a.attention, "steps": a.steps, "step_s": round(med, 4),
        "step_s_min": round(min(times), 4), "tokens_per_s": round(B * T / med, 1),
        "tokens_per_s_best": round(B * T / min(times), 1),
        "cpu_s": round(statistics.median(cpus), 4), "cpu_s_min": round(min(cpus), 4),
        "peak_rss_mib": round(peak, 1), "base_rss_mib": round(base, 1),
        "params": sum(p.numel() for p in model.parameters()), "torch": torch.__version__}),
        flush=True)


def main():
    ap = argparse.ArgumentParser(description="Training-step tokens/s and peak RSS of the PyTorch reference.")
    ap.add_argument("--runs", default="small:16,bert-base:8",
                    help="comma-separated preset:batch pairs (default small:16,bert-base:8)")
    ap.add_argument("--variants", default=",".join(VARIANT_NAMES),
                    help="comma-separated variants (default all six)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    ap.add_argument("--vocab-size", type=int, default=32769)
    ap.add_argument("--mask-rate", type=float, default=0.15)
    ap.add_argument("--attention", choices=("sdpa", "matmul"), default="sdpa",
                    help="F.scaled_dot_product_attention (default) or matmul + softmax")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--preset", help=argparse.SUPPRESS)     # child mode
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.preset:
        child(a)
        return 0
    rc = 0
    for run in a.runs.split(","):
        preset, batch = run.split(":")
        for variant in a.variants.split(","):
            if variant not in VARIANT_NAMES:
                sys.exit(f"bench_torch.py: unknown variant {variant!r}")
            cmd = [sys.executable, os.path.abspath(__file__), "--preset", preset, "--variant", variant,
                   "--batch", batch, "--seq", str(a.seq), "--threads", str(a.threads),
                   "--steps", str(a.steps), "--warmup", str(a.warmup), "--vocab-size", str(a.vocab_size),
                   "--mask-rate", str(a.mask_rate), "--attention", a.attention, "--seed", str(a.seed)]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            sys.stdout.write(r.stdout)
            sys.stdout.flush()
            if r.returncode:
                print(f"bench_torch.py: {preset} {variant} failed (exit {r.returncode})", file=sys.stderr)
                rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
