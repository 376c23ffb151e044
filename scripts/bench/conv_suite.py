#!/usr/bin/env python3
"""crema's convolutions against cuDNN on a broad suite of public training shapes (issue 20).

The suite is conv_suite.txt beside this script (ResNet-50, VGG-16, GoogLeNet, MobileNetV2,
EfficientNet-B0, grouped, AlexNet and speech front-end layers; one `crema bench conv --shape` a
line). This script runs `crema bench conv` (fp32, NCHW; --math bf16: `crema bench conv-tc --math
bf16`, NHWC) on it, a few shapes per command, then times PyTorch's cuDNN on the same shapes in the
same run (fp32: contiguous NCHW tensors, TF32 off; bf16: channels_last; cudnn.benchmark on;
forward, backward data and backward filter each alone, timed by cuda_timing.median_ms over input
copies rotated past L2 as crema bench does), and prints per shape and pass:

  best   crema's fastest version that passed its check, and its ms
  auto   the version the heuristic picks (fp32: the bench's "auto:" lines, get_conv_algorithm;
         bf16: the row conv-tc marks '*') and its ms
  cuDNN  ms, and the ratios best/cuDNN and auto/cuDNN

then the geometric mean of best/cuDNN, the passes above 1.5x, the worst five, and the share of
passes where auto is within 10% of best (the proxy for `find`, which measures and keeps the
fastest). Issue 20's bars: fp32 geomean <= 0.8, none above 1.5, auto within 10% of find;
bf16 geomean <= 1.0.

  python3 scripts/bench/conv_suite.py --crema build/bin/crema [--math fp32|bf16] [--out DIR]
      [--budget-s 450] [--chunk 3] [--match TEXT] [--bench-args "--repeats 20"]
      [--command-timeout 300]
  python3 scripts/bench/conv_suite.py --from DIR [--math fp32|bf16]   (the report again)
  ... --against DIR2   (also this run's times over another run's kept in DIR2: crema's best and
                        auto, and cuDNN's own, which drifts ~5% call to call on an H200)

DIR (default conv_suite_out) keeps the raw outputs: crema_<math>_NNN.txt (one per command),
peer_<math>.json. A run goes on where the kept outputs stop (shapes already there are skipped), so
a run cut by --budget-s (no new command or peer shape after that many seconds) or by a time limit
is finished by running the same command again; a crema command that crashed or ran past
--command-timeout is kept aside (failed_<math>_NNN.txt) and its shapes tried again then. --match keeps the suite lines whose shape or source holds TEXT.
"""
import argparse
import glob
import json
import math
import os
import shlex
import subprocess
import sys
import time

from compare_cudnn import PASSES, best, geomean, parse_table

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_suite.txt")
BATCHES = (8, 16)
ROTATION_BYTES, MAX_COPIES = 200e6, 256  # as apps/bench.cpp's rotation_copies
BARS = {"fp32": {"geomean": 0.8, "worst": 1.5, "auto": 0.1}, "bf16": {"geomean": 1.0}}


def parse_shape(text):
    """The geometry of a `--shape` N,C,H,W,K,R[xS][,sN][,pN][,dN][,gN] (bench_shapes.cpp's format:
    one number for both axes or HxW); ValueError saying what is wrong."""
    def pair(t, minimum):
        parts = t.split("x")
        if len(parts) > 2 or not all(p.isdigit() and int(p) >= minimum for p in parts):
            raise ValueError(f"'{t}' is not n or HxW")
        return (int(parts[0]), int(parts[-1]))

    fields = text.split(",")
    if len(fields) < 6 or not all(f.isdigit() and int(f) > 0 for f in fields[:5]):
        raise ValueError(f"'{text}' does not start N,C,H,W,K (positive integers)")
    g = dict(zip("NCHWK", map(int, fields[:5])))
    g["R"], g["S"] = pair(fields[5], 1)
    g.update(stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1)
    keys = {"s": "stride", "p": "pad", "d": "dilation", "g": "groups"}
    for field in fields[6:]:
        if not field or field[0] not in keys:
            raise ValueError(f"'{field}' is not s<n>, p<n>, d<n> or g<n>")
        value = pair(field[1:], 0 if field[0] == "p" else 1)
        if field[0] == "g":
            if value[0] != value[1]:
                raise ValueError(f"'{field}': groups is one number")
            value = value[0]
        g[keys[field[0]]] = value
    g["P"], g["Q"] = (
        (size + 2 * p - d * (r - 1) - 1) // s + 1
        for size, p, d, r, s in zip((g["H"], g["W"]), g["pad"], g["dilation"], (g["R"], g["S"]),
                                    g["stride"]))
    if g["C"] % g["groups"] or g["K"] % g["groups"]:
        raise ValueError(f"'{text}': groups must divide C and K")
    if g["P"] < 1 or g["Q"] < 1:
        raise ValueError(f"'{text}': the filter is larger than the padded image")
    return g


def read_suite(path=SUITE):
    """[(shape, source)] of a suite file; ValueError naming path:line for a line that breaks its
    rules: a shape and a '# source' comment, batch 8 or 16, dense or grouped (not depthwise), each
    geometry once."""
    suite, seen = [], {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text, _, source = line.partition("#")
            shape, source = text.strip(), source.strip()
            if not shape:
                continue
            where = f"{path}:{number}"
            try:
                g = parse_shape(shape)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if not source:
                raise ValueError(f"{where}: '{shape}' needs a '# model: layer' comment")
            if g["N"] not in BATCHES:
                raise ValueError(f"{where}: batch {g['N']} (the suite's are {BATCHES})")
            if g["groups"] > 1 and g["groups"] == g["C"] == g["K"]:
                raise ValueError(f"{where}: '{shape}' is depthwise (those have --shape depthwise)")
            key = json.dumps(g, sort_keys=True)
            if key in seen:
                raise ValueError(f"{where}: '{shape}' is line {seen[key]}'s geometry again")
            seen[key] = number
            suite.append((shape, source))
    return suite


def parse_autos(text):
    """{(shape, pass): version} from `crema bench conv`'s "auto: PASS VERSION SHAPE" lines."""
    autos = {}
    for line in text.splitlines():
        if line.startswith("auto: "):
            pass_, version, shape = line[len("auto: "):].split(None, 2)
            autos[(shape.strip(), pass_)] = version
    return autos


def load_crema(out_dir, math_):
    """The rows and auto picks of every kept crema output of this math."""
    rows, autos = [], {}
    for path in sorted(glob.glob(os.path.join(out_dir, f"crema_{math_}_*.txt"))):
        with open(path) as f:
            text = f.read()
        rows += parse_table(text)
        autos.update(parse_autos(text))
    return rows, autos


def entries(suite, rows, autos, peer_ms, math_):
    """One dict per (shape, pass) of the suite: best and auto versions and ms, cuDNN's ms (None
    where missing). bf16: auto is the row conv-tc marks '*'."""
    out = []
    for shape, source in suite:
        for pass_ in PASSES:
            top = best(rows, shape, pass_)
            if math_ == "fp32":
                auto_version = autos.get((shape, pass_))
            else:
                marked = [r["version"] for r in rows if r["shape"] == shape and r["pass"] == pass_
                          and r["version"].endswith("*")]
                auto_version = marked[0] if marked else None
            auto_ms = [r["ms"] for r in rows if r["shape"] == shape and r["pass"] == pass_
                       and r["version"] == auto_version and r["ok"] and r["ms"]]
            out.append({"shape": shape, "source": source, "pass": pass_,
                        "best_version": top["version"] if top else None,
                        "best_ms": top["ms"] if top else None,
                        "auto_version": auto_version, "auto_ms": auto_ms[0] if auto_ms else None,
                        "cudnn_ms": peer_ms.get(shape, {}).get(pass_)})
    return out


def summarize(items):
    """The report's numbers over the passes with both a crema and a cuDNN time."""
    both = [e for e in items if e["best_ms"] and e["cudnn_ms"]]
    ratios = sorted(((e["best_ms"] / e["cudnn_ms"], e) for e in both), key=lambda t: -t[0])
    timed = [e for e in items if e["best_ms"]]
    close = [e for e in timed if e["auto_ms"] and e["auto_ms"] <= 1.1 * e["best_ms"]]
    autos = [e["auto_ms"] / e["cudnn_ms"] for e in both if e["auto_ms"]]
    return {"passes": len(items), "compared": len(both),
            "geomean": geomean([r for r, _ in ratios]), "auto_geomean": geomean(autos),
            "auto_over_best": geomean([e["auto_ms"] / e["best_ms"] for e in timed if e["auto_ms"]]),
            "above_1_5": sum(1 for r, _ in ratios if r > 1.5), "worst": ratios[:5],
            "auto_close": len(close), "auto_timed": len(timed),
            "missing": [e for e in items if not (e["best_ms"] and e["cudnn_ms"])]}


def drift(items, base_items):
    """This run's times over another run's on the passes both timed, as geometric means:
    crema's best, crema's auto and cuDNN's -- the peer's own drift between calls (about 5% on an
    H200) moves the ratios as much as a change in crema does."""
    base = {(e["shape"], e["pass"]): e for e in base_items}
    out = {}
    for key in ("best_ms", "auto_ms", "cudnn_ms"):
        ratios = [e[key] / base[e["shape"], e["pass"]][key] for e in items
                  if e[key] and (e["shape"], e["pass"]) in base and base[e["shape"], e["pass"]][key]]
        out[key] = (geomean(ratios), len(ratios))
    return out


def ms(value):
    return f"{value:9.4f}" if value else f"{'-':>9}"


def load_items(out_dir, math_, suite):
    """The entries of the raw outputs kept in out_dir, and the peer's record."""
    rows, autos = load_crema(out_dir, math_)
    peer_path = os.path.join(out_dir, f"peer_{math_}.json")
    peer = {"ms": {}}
    if os.path.exists(peer_path):
        with open(peer_path) as f:
            peer = json.load(f)
    return entries(suite, rows, autos, peer["ms"], math_), peer


def report(out_dir, math_, suite, against=None):
    items, peer = load_items(out_dir, math_, suite)
    device, torch_, cudnn = (peer.get(k, "?") for k in ("device", "torch", "cudnn"))
    print(f"\ncrema / cuDNN, {math_}, on {device} (torch {torch_}, cuDNN {cudnn}); "
          f"{len(suite)} shapes")
    print(f"{'shape':32} {'pass':5} {'best':22} {'ms':>9} {'auto':22} {'ms':>9} {'cuDNN':>9} "
          f"{'best/c':>6} {'auto/c':>6}")
    def ratio(e, key):
        return f"{e[key] / e['cudnn_ms']:6.2f}" if e[key] and e["cudnn_ms"] else f"{'-':>6}"

    for e in items:
        print(f"{e['shape']:32} {e['pass']:5} {e['best_version'] or '-':22} {ms(e['best_ms'])} "
              f"{e['auto_version'] or '-':22} {ms(e['auto_ms'])} {ms(e['cudnn_ms'])} "
              f"{ratio(e, 'best_ms')} {ratio(e, 'auto_ms')}")
    s = summarize(items)
    bars = BARS[math_]
    print(f"\nbest/cuDNN geometric mean {s['geomean']:.3f} over {s['compared']} of {s['passes']} "
          f"passes (bar <= {bars['geomean']}); auto/cuDNN {s['auto_geomean']:.3f}")
    print(f"above 1.5x: {s['above_1_5']}" + (" (bar: none)" if "worst" in bars else ""))
    print(f"auto within 10% of best: {s['auto_close']} of {s['auto_timed']} passes"
          + (f" ({100 * s['auto_close'] / s['auto_timed']:.0f}%)" if s["auto_timed"] else "")
          + f"; auto/best geometric mean {s['auto_over_best']:.3f}"
          + (" (bar <= 1.10)" if "auto" in bars else ""))
    print("worst five:")
    for r, e in s["worst"]:
        print(f"  {r:5.2f}x {e['shape']} {e['pass']} ({e['best_version']}; {e['source']})")
    if s["missing"]:
        print(f"incomplete: {len(s['missing'])} passes lack a passing crema row or a cuDNN time "
              f"(first: {s['missing'][0]['shape']} {s['missing'][0]['pass']}); run again with the "
              f"same --out to go on")
    if against:
        d = drift(items, load_items(against, math_, suite)[0])
        print(f"against {against} (this run's ms over its, geometric mean over the passes both "
              f"timed): crema best {d['best_ms'][0]:.3f} ({d['best_ms'][1]} passes), auto "
              f"{d['auto_ms'][0]:.3f}, cuDNN {d['cudnn_ms'][0]:.3f} ({d['cudnn_ms'][1]} passes)")
    return s


def run_crema(args, suite, deadline):
    """`crema bench` on the suite's shapes not yet in --out, args.chunk per command."""
    crema, extra = shlex.split(args.crema), shlex.split(args.bench_args)
    op = ["bench", "conv"] if args.math == "fp32" else ["bench", "conv-tc", "--math", "bf16"]
    rows, _ = load_crema(args.out, args.math)
    done = {r["shape"] for r in rows}
    todo = [shape for shape, _ in suite if shape not in done]
    kept = glob.glob(os.path.join(args.out, f"*_{args.math}_[0-9][0-9][0-9].txt"))
    index = 1 + max((int(p[-7:-4]) for p in kept), default=-1)  # after crema_ and failed_ files
    for at in range(0, len(todo), args.chunk):
        if time.time() > deadline:
            return False
        chunk = todo[at:at + args.chunk]
        command = crema + op + [a for s in chunk for a in ("--shape", s)] + extra
        print("$", shlex.join(command), flush=True)
        began = time.time()
        try:
            result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=args.command_timeout)
            status, output = result.returncode, result.stdout
        except subprocess.TimeoutExpired as e:
            status = f"no exit after {args.command_timeout:g} s"
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        print(f"  {time.time() - began:.0f} s", flush=True)
        name = "crema" if status in (0, 1) else "failed"  # 1: a check failed, the table is whole
        path = os.path.join(args.out, f"{name}_{args.math}_{index:03d}.txt")
        with open(path + ".tmp", "w") as f:
            f.write(output)
        os.replace(path + ".tmp", path)  # whole, or not there: a rerun starts the chunk again
        if name == "failed":  # its shapes stay to do: the next run tries them again
            print(f"  exited with {status} (kept in {path}):\n{output[-2000:]}")
        index += 1
    return True


def peer_calls(shape, math_, device="cuda"):
    """({pass: fn()} running that pass of `shape` in PyTorch (fp32 contiguous or bf16 channels_last
    tensors), [[x, w, dy]] the input copies: call i of any pass reads copy i % copies, enough of
    them to rotate ~200 MB past L2)."""
    import torch
    import torch.nn.functional as F

    g = parse_shape(shape)
    dtype = torch.float32 if math_ == "fp32" else torch.bfloat16
    layout = torch.contiguous_format if math_ == "fp32" else torch.channels_last
    sizes = ((g["N"], g["C"], g["H"], g["W"]), (g["K"], g["C"] // g["groups"], g["R"], g["S"]),
             (g["N"], g["K"], g["P"], g["Q"]))  # x, w, dy
    size = sum(math.prod(s) for s in sizes) * torch.finfo(dtype).bits // 8
    copies = int(min(MAX_COPIES, max(1, math.ceil(ROTATION_BYTES / size))))
    sets = [[torch.randn(s, device=device, dtype=dtype).contiguous(memory_format=layout)
             for s in sizes] for _ in range(copies)]
    conv = dict(stride=g["stride"], padding=g["pad"], dilation=g["dilation"], groups=g["groups"])

    def backward(x, w, dy, mask):  # mask: (dx, dw, bias)
        return torch.ops.aten.convolution_backward(
            dy, x, w, None, list(g["stride"]), list(g["pad"]), list(g["dilation"]), False, [0, 0],
            g["groups"], mask)

    passes = {"fwd": lambda x, w, dy: F.conv2d(x, w, **conv),
              "dgrad": lambda x, w, dy: backward(x, w, dy, [True, False, False])[0],
              "wgrad": lambda x, w, dy: backward(x, w, dy, [False, True, False])[1]}
    count = [0]

    def rotated(call):
        def fn():
            i = count[0] % copies
            count[0] += 1
            return call(*sets[i])
        return fn
    return {pass_: rotated(call) for pass_, call in passes.items()}, sets


def run_peer(args, suite, deadline):
    """cuDNN through PyTorch on the suite's shapes not yet in peer_<math>.json (kept per shape)."""
    import torch
    from cuda_timing import median_ms

    if not torch.cuda.is_available():
        sys.exit("conv_suite.py: the cuDNN peer needs PyTorch with CUDA (crema's outputs are kept "
                 f"in {args.out}; run again on a GPU machine to go on)")
    path = os.path.join(args.out, f"peer_{args.math}.json")
    peer = {"ms": {}}
    if os.path.exists(path):
        with open(path) as f:
            peer = json.load(f)
    peer.update(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                cudnn=torch.backends.cudnn.version())
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # bf16 tensors compute in bf16 whatever this says
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    for shape, _ in suite:
        if shape in peer["ms"]:
            continue
        if time.time() > deadline:
            return False
        calls, _ = peer_calls(shape, args.math)
        times = {pass_: median_ms(fn) for pass_, fn in calls.items()}
        del calls  # the input copies
        print(f"cuDNN {shape}: " + ", ".join(f"{p} {t:.4f} ms" for p, t in times.items()),
              flush=True)
        peer["ms"][shape] = times
        with open(path + ".tmp", "w") as f:
            json.dump(peer, f, indent=1)
        os.replace(path + ".tmp", path)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crema", help="the crema executable (a command: '.gpu-x/run crema')")
    parser.add_argument("--math", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--out", default="conv_suite_out", help="where the raw outputs go")
    parser.add_argument("--from", dest="from_dir", help="report from the raw outputs kept in DIR")
    parser.add_argument("--against", help="another run's kept outputs: print this run's times "
                        "over those (crema's and cuDNN's), as the ratios drift with the peer")
    parser.add_argument("--suite", default=SUITE, help="the suite file (default: conv_suite.txt)")
    parser.add_argument("--match", default="", help="only suite lines whose text holds this")
    parser.add_argument("--chunk", type=int, default=3, help="shapes per crema command")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="start no command or peer shape after this many seconds")
    parser.add_argument("--bench-args", default="", help="appended to every `crema bench`")
    parser.add_argument("--command-timeout", type=float, default=300,
                        help="seconds one crema command may take before it is stopped")
    args = parser.parse_args()
    suite = [(s, src) for s, src in read_suite(args.suite) if args.match in f"{s} # {src}"]
    if not suite:
        parser.error(f"no suite line holds '{args.match}'")
    if args.from_dir:
        report(args.from_dir, args.math, suite, args.against)
        return
    if not args.crema:
        parser.error("--crema is required (or --from DIR)")
    os.makedirs(args.out, exist_ok=True)
    deadline = time.time() + args.budget_s
    # crema first: the peer's process then holds the GPU's memory only after the last command.
    if run_crema(args, suite, deadline):
        run_peer(args, suite, deadline)
    report(args.out, args.math, suite, args.against)


if __name__ == "__main__":
    main()
