#!/usr/bin/env python3
"""Two builds of crema side by side on one GPU, in one run: a restructuring must not move speed.

    scripts/bench/compare_builds.py --base ".gpubase/run crema" --new ".gpu/run crema" \
        --out LOGS [--what bench,steps] [--rounds 2]

`bench` runs `crema bench conv` and `crema bench gemm` (their default shapes, every version) with
each build, alternating base and new for --rounds rounds, and prints per row (shape, pass,
version) the new build's median time over the base's, with the geometric mean and the extremes.
`steps` does the same for whole training steps (`crema time`: VGG-BN at batch 256 and the CIFAR
ResNet-18 at batch 128, eager and as a CUDA graph). Rows whose check failed in either build are
reported as such. Logs of every run go to --out.
"""
import argparse
import math
import os
import re
import shlex
import statistics
import subprocess
import sys

STEPS = {
    "vggbn b256": ["configs/vggbn_fashion_mnist.yaml", "--set", "data.train.batch_size=256"],
    "resnet18 32x32 b128": ["scripts/bench/resnet18_32x32.yaml"],
}


def run(command, log):
    with open(log, "w") as f:
        result = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, text=True)
    with open(log) as f:
        return result.returncode, f.read()


def bench_rows(text):
    """{(shape, pass, version): (ms, status)} from a `crema bench` table."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        # shape (which holds spaces), then pass, version, check, rel.err, tol, ms, TFLOP/s, GB/s,
        # %peak, ws_MB, status: the last eleven columns.
        if len(fields) < 12 or fields[0] in ("shape", "device:"):
            continue
        tail = fields[-11:]
        try:
            ms = float(tail[5])
        except ValueError:
            continue
        rows[(" ".join(fields[:-11]), tail[0], tail[1])] = (ms, tail[-1])
    return rows


def step_times(text):
    eager = re.search(r"^training step: ([0-9.]+) ms", text, re.M)
    graph = re.search(r"^training step, CUDA graph: ([0-9.]+) ms", text, re.M)
    return (float(eager.group(1)) if eager else None, float(graph.group(1)) if graph else None)


def summarize(name, ratios):
    if not ratios:
        print(f"{name}: no comparable rows")
        return
    geo = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
    worst = max(ratios, key=lambda kr: abs(math.log(kr[1])))
    print(f"{name}: {len(ratios)} rows, new/base geomean {geo:.4f}, "
          f"min {min(r for _, r in ratios):.3f}, max {max(r for _, r in ratios):.3f} "
          f"(furthest from 1: {worst[0]} {worst[1]:.3f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--what", default="bench,steps")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    builds = {"base": shlex.split(args.base), "new": shlex.split(args.new)}
    what = args.what.split(",")

    if "bench" in what:
        for op in ("conv", "gemm"):
            times = {"base": {}, "new": {}}
            statuses = {"base": {}, "new": {}}
            for r in range(args.rounds):
                for build in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    log = os.path.join(args.out, f"bench_{op}_{build}_{r}.txt")
                    code, text = run(builds[build] + ["bench", op, "--device", "cuda:0"], log)
                    for key, (ms, status) in bench_rows(text).items():
                        times[build].setdefault(key, []).append(ms)
                        statuses[build][key] = status
                    print(f"bench {op} {build} round {r}: exit {code}, {len(bench_rows(text))} rows",
                          flush=True)
            ratios = []
            for key in sorted(set(times["base"]) & set(times["new"])):
                b, n = statistics.median(times["base"][key]), statistics.median(times["new"][key])
                if statuses["base"][key] != "ok" or statuses["new"][key] != "ok":
                    print(f"  {' / '.join(key)}: status base {statuses['base'][key]}, "
                          f"new {statuses['new'][key]}")
                    continue
                ratios.append((" / ".join(key), n / b))
            only = set(times["base"]) ^ set(times["new"])
            for key in sorted(only):
                print(f"  {' / '.join(key)}: only in {'base' if key in times['base'] else 'new'}")
            summarize(f"crema bench {op}", ratios)

    if "steps" in what:
        for name, config in STEPS.items():
            results = {"base": [], "new": []}
            for r in range(args.rounds):
                for build in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    log = os.path.join(args.out, f"time_{name.split()[0]}_{build}_{r}.txt")
                    command = builds[build] + ["time"] + config + [
                        "--device", "cuda:0", "--iterations", str(args.iterations)]
                    _, text = run(command, log)
                    results[build].append(step_times(text))
            for i, kind in enumerate(("eager", "CUDA graph")):
                b = [t[i] for t in results["base"] if t[i]]
                n = [t[i] for t in results["new"] if t[i]]
                if b and n:
                    mb, mn = statistics.median(b), statistics.median(n)
                    print(f"{name} step, {kind}: base {mb:.4f} ms, new {mn:.4f} ms, "
                          f"new/base {mn / mb:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
