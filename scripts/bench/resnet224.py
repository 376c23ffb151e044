#!/usr/bin/env python3
"""Issue 21's whole-net comparison: crema and PyTorch + cuDNN training ResNet-18/50 at 224x224 on
random data, per precision, in one run on one GPU, with the ratios (crema ms / PyTorch ms) and
both peak memories.

crema: `crema time configs/zoo/NET_finetune.yaml --device cuda:0 --set data.train.batch_size=B
--set +model.precision=P --set model.layers.fc_new.num_output=1000` (torchvision's layer names; the
faster of its "training step" lines, eager or CUDA graph, and its measured peak, "memory: X MiB
at the peak"). PyTorch: scripts/bench/peer_zoo224.py with the matching modes:
fp32 (TF32 off), tf32, bf16 (fp16) autocast + channels_last eager, and bf16 under torch.compile.

Usage: scripts/bench/resnet224.py [--crema build/bin/crema] [--precisions fp32,tf32,bf16]
                                  [--iterations 20] [--no-peer | --peer-file F] [NET:BATCH ...]
(default resnet50:128 resnet18:256). Extra `--set` overrides for crema: --crema-set KEY=VALUE.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEER_MODE = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16_cl", "fp16": "fp16_cl"}


def crema_step(args, net, batch, precision):
    config = os.path.join(ROOT, "configs", "zoo", f"{net}_finetune.yaml")
    cmd = [args.crema, "time", config, "--device", "cuda:0", "--iterations", str(args.iterations),
           "--set", f"data.train.batch_size={batch}", "--set", f"+model.precision={precision}",
           "--set", "model.layers.fc_new.num_output=1000"]
    for kv in args.crema_set:
        cmd += ["--set", kv]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, None, (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
    step = re.search(r"^training step: ([\d.]+) ms", run.stdout, re.M)
    graph = re.search(r"^training step, CUDA graph: ([\d.]+) ms", run.stdout, re.M)
    peak = re.search(r"^memory: ([\d.]+) MiB at the peak", run.stdout, re.M)
    ms = min(float(m.group(1)) for m in (step, graph) if m) if (step or graph) else None
    return ms, float(peak.group(1)) / 1024 if peak else None, ""


def peer_steps(args, specs):
    if args.peer_file:  # peer_zoo224.py's output from another run (another GPU of the same machine)
        with open(args.peer_file) as f:
            return parse_peer(f.read())
    modes = [PEER_MODE[p] for p in args.precisions]
    if "bf16" in args.precisions:
        modes.append("bf16_cl_compile")
    cmd = [sys.executable, os.path.join(HERE, "peer_zoo224.py"), "--modes", ",".join(modes)] + specs
    run = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        print("peer failed:", run.stderr.strip().splitlines()[-1:], flush=True)
    return parse_peer(run.stdout)


def parse_peer(text):
    out = {}
    for m in re.finditer(r"^(\w+) b(\d+) (\S+)\s+([\d.]+) ms/step\s+\d+ img/s\s+peak\s+([\d.]+) GiB",
                         text, re.M):
        out[(m.group(1), int(m.group(2)), m.group(3))] = (float(m.group(4)), float(m.group(5)))
    return out


def fmt(v, spec="{:.1f}"):
    return spec.format(v) if v is not None else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--crema", default=os.path.join(ROOT, "build", "bin", "crema"))
    p.add_argument("--precisions", default="fp32,tf32,bf16")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--crema-set", action="append", default=[])
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--peer-file", help="read peer_zoo224.py's output from this file instead of running it")
    p.add_argument("nets", nargs="*", default=["resnet50:128", "resnet18:256"])
    args = p.parse_args()
    args.crema = os.path.abspath(args.crema)  # a path relative to where the script was started
    args.precisions = args.precisions.split(",")
    peer = {} if args.no_peer else peer_steps(args, args.nets)
    print(f"{'net':10s} {'batch':>5s} {'precision':9s} {'crema ms':>9s} {'peer ms':>8s} {'ratio':>6s}"
          f" {'compile ms':>10s} {'ratio':>6s} {'crema GiB':>9s} {'peer GiB':>8s}")
    for spec in args.nets:
        net, batch = spec.split(":")
        batch = int(batch)
        for precision in args.precisions:
            ms, gib, err = crema_step(args, net, batch, precision)
            peer_ms, peer_gib = peer.get((net, batch, PEER_MODE[precision]), (None, None))
            comp_ms = peer.get((net, batch, "bf16_cl_compile"), (None, None))[0] if precision == "bf16" else None
            ratio = ms / peer_ms if ms and peer_ms else None
            comp_ratio = ms / comp_ms if ms and comp_ms else None
            print(f"{net:10s} {batch:5d} {precision:9s} {fmt(ms):>9s} {fmt(peer_ms):>8s} {fmt(ratio, '{:.2f}'):>6s}"
                  f" {fmt(comp_ms):>10s} {fmt(comp_ratio, '{:.2f}'):>6s} {fmt(gib, '{:.2f}'):>9s}"
                  f" {fmt(peer_gib, '{:.2f}'):>8s}" + (f"  crema: {err}" if err else ""), flush=True)


if __name__ == "__main__":
    main()
