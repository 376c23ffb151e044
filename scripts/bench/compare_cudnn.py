#!/usr/bin/env python3
"""crema's convolutions and GEMM against cuDNN and cuBLAS (through PyTorch), on one GPU.

Runs `crema bench conv`, `crema bench gemm` (fp32, and tf32/bf16 at 8192^3) and the peer
benchmark peer_cudnn.py (its path is an argument: it is not part of crema) in one go, then prints
per convolution shape and pass the time of crema's fastest version that passed its check over
cuDNN's (fp32, TF32 off), their geometric mean, the same in TF32 (crema's fastest version in fp32
or tf32 -- `crema bench conv --math tf32` runs the versions with a tf32 path -- over cuDNN's with
TF32 on), and crema's GEMM against cuBLAS. The bars of issue 8: fp32 convolutions geomean <= 1.2
with no shape above 2.0; TF32 convolutions geomean <= 1.5; fp32 GEMM >= 90% of cuBLAS.

  python3 scripts/bench/compare_cudnn.py --crema build/bin/crema --peer PATH/peer_cudnn.py \
      [--out DIR] [--conv-only] [--bench-args "--repeats 10"]
      (DIR keeps the raw outputs: conv*.txt, gemm*.txt, peer.json; --conv-only skips crema's GEMM
      benchmarks; --bench-args are appended to every `crema bench` command)
  python3 scripts/bench/compare_cudnn.py --from DIR   (the comparison again, from kept outputs)
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys

PASSES = ("fwd", "dgrad", "wgrad")
GEMM_MATHS = (("fp32", "sgemm 8192^3 tf32=False"), ("tf32", "sgemm 8192^3 tf32=True"),
              ("bf16", "bf16 gemm 8192^3"))


def parse_table(text):
    """Rows of a crema bench table: every field is one token except the shape, which comes first."""
    rows = []
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) < 12 or tokens[-1] not in ("ok", "FAIL") or tokens[0] == "shape":
            continue
        rows.append({"shape": " ".join(tokens[:-11]), "pass": tokens[-11], "version": tokens[-10],
                     "ok": tokens[-1] == "ok", "ms": None if tokens[-6] == "-" else float(tokens[-6]),
                     "tflops": None if tokens[-5] == "-" else float(tokens[-5])})
    return rows


def best(rows, shape, pass_):
    timed = [r for r in rows if r["shape"] == shape and r["pass"] == pass_ and r["ok"] and r["ms"]]
    return min(timed, key=lambda r: r["ms"]) if timed else None


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def compare_conv(peer, conv, title, peer_suffix):
    """Prints crema's fastest passing version per shape and pass over the peer's; the ratios."""
    prims = peer["prims"]
    print(f"\ncrema / cuDNN on {peer['device']} (torch {peer['torch']}, cuDNN {peer['cudnn']}), "
          f"{title}")
    print(f"{'shape':34} {'pass':6} {'crema version':18} {'crema ms':>9} {'cuDNN ms':>9} {'ratio':>6}")
    ratios = []
    for shape in dict.fromkeys(r["shape"] for r in conv):
        for pass_ in PASSES:
            row = best(conv, shape, pass_)
            key = f"conv {pass_} {shape} {peer_suffix}"
            if row is None or key not in prims:
                print(f"{shape:34} {pass_:6} {'(no passing version or no peer)':18}")
                continue
            ratio = row["ms"] / prims[key]["ms"]
            ratios.append(ratio)
            print(f"{shape:34} {pass_:6} {row['version']:18} {row['ms']:9.4f} "
                  f"{prims[key]['ms']:9.4f} {ratio:6.2f}")
    return ratios


def run(command, path):
    print("$", " ".join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(path, "w") as f:
        f.write(result.stdout)
    if result.returncode not in (0, 1):  # 1: a check failed; the table is still there
        sys.exit(f"{' '.join(command)} exited with {result.returncode}:\n{result.stdout[-2000:]}")
    return result.stdout


def compare(out_dir):
    with open(os.path.join(out_dir, "peer.json")) as f:
        peer = json.load(f)
    prims = peer["prims"]
    with open(os.path.join(out_dir, "conv.txt")) as f:
        conv = parse_table(f.read())
    ratios = compare_conv(peer, conv, "fp32", "tf32=False")
    worst = max(ratios) if ratios else float("nan")
    print(f"geometric mean {geomean(ratios):.2f} over {len(ratios)} (bar <= 1.2), "
          f"worst {worst:.2f} (bar <= 2.0)")
    tf32_path = os.path.join(out_dir, "conv_tf32.txt")
    if os.path.exists(tf32_path):
        with open(tf32_path) as f:
            conv_tf32 = parse_table(f.read())
        for row in conv_tf32:
            row["version"] += "/tf32"
        ratios = compare_conv(peer, conv + conv_tf32, "TF32 (crema fp32 or tf32 versions)",
                              "tf32=True")
        print(f"geometric mean {geomean(ratios):.2f} over {len(ratios)} (bar <= 1.5), "
              f"worst {max(ratios) if ratios else float('nan'):.2f}")

    print(f"\n{'GEMM 8192^3':34} {'math':6} {'crema version':18} {'TFLOP/s':>9} {'cuBLAS':>9} {'share':>6}")
    for math_, key in GEMM_MATHS:
        path = os.path.join(out_dir, f"gemm_{math_}.txt")
        if not os.path.exists(path) or key not in prims:
            continue
        with open(path) as f:
            rows = parse_table(f.read())
        row = best(rows, "8192,8192,8192,NN", "-")
        if row is None:
            print(f"{'':34} {math_:6} (no passing version)")
            continue
        share = row["tflops"] / prims[key]["tflops"]
        print(f"{'':34} {math_:6} {row['version']:18} {row['tflops']:9.1f} "
              f"{prims[key]['tflops']:9.1f} {100 * share:5.0f}%")
    print("(fp32 bar: >= 90% of cuBLAS)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crema", help="the crema executable (a command: '.gpu-x/run crema')")
    parser.add_argument("--peer", help="path of peer_cudnn.py")
    parser.add_argument("--out", default="bench_compare", help="where the raw outputs go")
    parser.add_argument("--from", dest="from_dir", help="compare the raw outputs kept in DIR")
    parser.add_argument("--conv-only", action="store_true", help="skip crema's GEMM benchmarks")
    parser.add_argument("--bench-args", default="", help="appended to every `crema bench` command")
    args = parser.parse_args()
    if args.from_dir:
        compare(args.from_dir)
        return
    if not args.crema or not args.peer:
        parser.error("--crema and --peer are required (or --from DIR)")
    os.makedirs(args.out, exist_ok=True)
    crema = shlex.split(args.crema)
    extra = shlex.split(args.bench_args)
    run(crema + ["bench", "conv"] + extra, os.path.join(args.out, "conv.txt"))
    run(crema + ["bench", "conv", "--math", "tf32"] + extra,
        os.path.join(args.out, "conv_tf32.txt"))
    if not args.conv_only:
        run(crema + ["bench", "gemm"] + extra, os.path.join(args.out, "gemm_fp32.txt"))
        for math_ in ("tf32", "bf16"):
            run(crema + ["bench", "gemm", "--math", math_, "--shape", "8192,8192,8192"] + extra,
                os.path.join(args.out, f"gemm_{math_}.txt"))
    run([sys.executable, args.peer, "--json", os.path.join(args.out, "peer.json")],
        os.path.join(args.out, "peer.txt"))
    compare(args.out)


if __name__ == "__main__":
    main()
