#!/usr/bin/env python3
"""conv_suite.py without a GPU: the suite file's rules, the shape format, the report's arithmetic
on canned `crema bench` output, and the chunked, resumable crema runs on a fake crema.
Run by ctest (Bench.ConvSuite) or directly: python3 scripts/bench/test_conv_suite.py"""
import io
import json
import math
import os
import sys
import tempfile
import textwrap
import unittest
from contextlib import redirect_stdout
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conv_suite  # noqa: E402


def bench_line(shape, pass_, version, ms, status="ok"):
    """One row as apps/bench.cpp's Table::print writes it (the same widths)."""
    return ("{:<32} {:<15} {:<18} {:<12} {:>9} {:>7} {:>10} {:>8} {:>8} {:>6} {:>9} {}\n".format(
        shape, pass_, version, "cpu", "1.00e-06", "1e-04", ms if status == "ok" else "-", "1.00",
        "1.0", "1.0", "0.0", status))


HEADER = ("device: NVIDIA H200 (peaks: fp32 67, tf32 495, bf16 989 TFLOP/s; DRAM 4047 GB/s)\n"
          + "{:<32} {:<15} {:<18} {:<12} {:>9} {:>7} {:>10} {:>8} {:>8} {:>6} {:>9} {}\n".format(
              "shape", "pass", "version", "check", "rel.err", "tol", "ms", "TFLOP/s", "GB/s",
              "%peak", "ws_MB", "status"))
A, B = "16,64,56,56,64,3,p1", "8,1,161,300,32,41x11,s2,p20x5"
SUITE = [(A, "ResNet-50: layer1 conv2"), (B, "DeepSpeech2: conv1")]
# A: best fwd 1.0 (winograd_4x4; auto implicit_gemm 1.05), dgrad 2.0 (auto is best), wgrad 3.0
# (auto implicit_gemm 4.0, over 10%); B: fwd 1.0 (its faster version FAILED), dgrad 0.5, wgrad
# none passed.
CREMA = (HEADER
         + bench_line(A, "fwd", "implicit_gemm", "1.0500")
         + bench_line(A, "fwd", "winograd_4x4", "1.0000")
         + bench_line(A, "dgrad", "implicit_gemm", "2.0000")
         + bench_line(A, "dgrad", "im2col_gemm", "2.5000")
         + bench_line(A, "wgrad", "implicit_gemm", "4.0000")
         + bench_line(A, "wgrad", "direct", "3.0000")
         + bench_line(B, "fwd", "implicit_gemm", "1.0000")
         + bench_line(B, "fwd", "direct", "0.1", "FAIL")
         + bench_line(B, "dgrad", "im2col_gemm", "0.5000")
         + bench_line(B, "wgrad", "implicit_gemm", "-", "FAIL")
         + "\nauto: fwd implicit_gemm " + A + "\nauto: dgrad implicit_gemm " + A
         + "\nauto: wgrad implicit_gemm " + A + "\nauto: fwd implicit_gemm " + B
         + "\nauto: dgrad im2col_gemm " + B + "\nauto: wgrad implicit_gemm " + B + "\n")
PEER = {"device": "NVIDIA H200", "torch": "2.5", "cudnn": 90100,
        "ms": {A: {"fwd": 2.0, "dgrad": 1.0, "wgrad": 1.5}, B: {"fwd": 0.5, "dgrad": 1.0}}}


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class SuiteFile(unittest.TestCase):
    def test_the_suite_keeps_its_rules(self):
        suite = conv_suite.read_suite()
        self.assertGreaterEqual(len(suite), 50)
        sources = " ".join(source for _, source in suite)
        for family in ("ResNet-50", "VGG-16", "GoogLeNet", "MobileNetV2", "EfficientNet-B0",
                       "AlexNet", "ResNeXt-50", "DeepSpeech2", "DeepBench"):
            self.assertIn(family, sources)
        shapes = [conv_suite.parse_shape(s) for s, _ in suite]
        self.assertTrue(any(g["R"] == 5 and g["S"] == 5 and g["K"] <= 64 for g in shapes))
        self.assertTrue(any(g["R"] == 1 and g["stride"] == (2, 2) for g in shapes))
        self.assertTrue(any(g["groups"] > 1 for g in shapes))

    def test_rectangular_filters_and_per_axis_strides(self):
        g = conv_suite.parse_shape("8,32,81,150,32,21x11,s2x1,p10x5")
        self.assertEqual((g["R"], g["S"], g["stride"], g["pad"]), (21, 11, (2, 1), (10, 5)))
        self.assertEqual((g["P"], g["Q"]), (41, 150))
        g = conv_suite.parse_shape("2,6,17,13,4,5x3,s2x1,p2x0,d1x2,g2")  # bench_test.cpp's
        self.assertEqual((g["P"], g["Q"], g["groups"], g["dilation"]), (9, 9, 2, (1, 2)))
        for bad in ("64,64,56,56,64", "64,64,56,56,64,3,q1", "64,64,56,56,64,3x,p1",
                    "64,64,56,56,64,3,s0", "64,64,56,56,64,3,g2x1", "a,64,56,56,64,3",
                    "1,6,8,8,4,3,g4", "1,3,4,4,4,7"):
            with self.assertRaises(ValueError, msg=bad):
                conv_suite.parse_shape(bad)

    def test_broken_lines_are_named(self):
        cases = {"16,64,56,56,64,3,p1\n": "needs a '# model: layer'",
                 "32,64,56,56,64,3,p1 # x\n": "batch 32",
                 "16,32,56,56,32,3,p1,g32 # x\n": "depthwise",
                 "# c\n16,64,56,56,64,3,p1 # x\n16,64,56,56,64,3,p1,s1 # y\n": "line 2's geometry",
                 "16,64,56,56,64,3,q1 # x\n": "'q1'"}
        with tempfile.TemporaryDirectory() as tmp:
            for text, why in cases.items():
                path = write(tmp, "suite.txt", text)
                with self.assertRaises(ValueError) as caught:
                    conv_suite.read_suite(path)
                self.assertIn(why, str(caught.exception))
                self.assertIn(path + ":", str(caught.exception))


class Report(unittest.TestCase):
    def test_arithmetic_on_canned_output(self):
        from compare_cudnn import parse_table
        items = conv_suite.entries(SUITE, parse_table(CREMA), conv_suite.parse_autos(CREMA),
                                   PEER["ms"], "fp32")
        by = {(e["shape"], e["pass"]): e for e in items}
        self.assertEqual(len(items), 6)
        fwd = by[A, "fwd"]
        self.assertEqual((fwd["best_version"], fwd["best_ms"]), ("winograd_4x4", 1.0))
        self.assertEqual((fwd["auto_version"], fwd["auto_ms"]), ("implicit_gemm", 1.05))
        self.assertEqual(by[B, "fwd"]["best_version"], "implicit_gemm")  # the faster one FAILED
        self.assertIsNone(by[B, "wgrad"]["best_ms"])
        s = conv_suite.summarize(items)
        # best/cuDNN: 0.5, 2.0, 2.0, 2.0, 0.5; B wgrad has neither.
        self.assertEqual(s["compared"], 5)
        self.assertAlmostEqual(s["geomean"], math.exp((2 * math.log(0.5) + 3 * math.log(2)) / 5))
        self.assertEqual(s["above_1_5"], 3)
        self.assertEqual([r for r, _ in s["worst"]], [2.0, 2.0, 2.0, 0.5, 0.5])
        # auto within 10% of best: A fwd (1.05), A dgrad, B fwd, B dgrad; not A wgrad (4 vs 3).
        self.assertEqual((s["auto_close"], s["auto_timed"]), (4, 5))
        self.assertAlmostEqual(s["auto_geomean"], (1.05 / 2 * 2 * 4 / 1.5 * 2 * 0.5) ** (1 / 5))
        self.assertAlmostEqual(s["auto_over_best"], (1.05 * 4 / 3) ** (1 / 5))
        self.assertEqual([(e["shape"], e["pass"]) for e in s["missing"]], [(B, "wgrad")])

    def test_bf16_auto_is_the_marked_row(self):
        from compare_cudnn import parse_table
        text = HEADER + bench_line(A, "fwd", "tc_bf16", "2.0000") + bench_line(
            A, "fwd", "tc_bf16_wgmma*", "1.0000")
        e = conv_suite.entries(SUITE[:1], parse_table(text), {}, {A: {"fwd": 1.25}}, "bf16")[0]
        self.assertEqual((e["auto_version"], e["auto_ms"], e["best_ms"]),
                         ("tc_bf16_wgmma*", 1.0, 1.0))

    def test_report_from_kept_outputs(self):
        with tempfile.TemporaryDirectory() as tmp:
            write(tmp, "crema_fp32_000.txt", CREMA)
            write(tmp, "peer_fp32.json", json.dumps(PEER))
            write(tmp, "failed_fp32_001.txt", "not read\n")
            out = io.StringIO()
            with redirect_stdout(out):
                conv_suite.report(tmp, "fp32", SUITE)
        text = out.getvalue()
        self.assertIn("above 1.5x: 3 (bar: none)", text)
        self.assertIn("auto within 10% of best: 4 of 5 passes (80%); auto/best geometric mean "
                      f"{(1.05 * 4 / 3) ** (1 / 5):.3f} (bar <= 1.10)", text)
        self.assertIn(f"2.00x {A} dgrad (implicit_gemm; ResNet-50: layer1 conv2)", text)
        self.assertIn("incomplete: 1 passes", text)

    def test_against_another_run(self):
        # The other run: every crema time doubled; cuDNN's A dgrad and wgrad doubled, the rest
        # missing there.
        doubled = CREMA
        for before, after in (("1.0500", "2.1000"), ("1.0000", "2.0000"), ("2.5000", "5.0000"),
                              ("4.0000", "8.0000"), ("3.0000", "6.0000"), ("0.5000", "1.0000")):
            doubled = doubled.replace(f" {before} ", f" {after}@ ")
        doubled = doubled.replace(" 2.0000 ", " 4.0000 ").replace("@ ", " ")
        base_peer = {"ms": {A: {"dgrad": 2.0, "wgrad": 3.0}}}
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as base:
            write(tmp, "crema_fp32_000.txt", CREMA)
            write(tmp, "peer_fp32.json", json.dumps(PEER))
            write(base, "crema_fp32_000.txt", doubled)
            write(base, "peer_fp32.json", json.dumps(base_peer))
            items = conv_suite.load_items(tmp, "fp32", SUITE)[0]
            d = conv_suite.drift(items, conv_suite.load_items(base, "fp32", SUITE)[0])
            out = io.StringIO()
            with redirect_stdout(out):
                conv_suite.report(tmp, "fp32", SUITE, base)
        # crema: all five timed passes at half the other run's; cuDNN: A's dgrad and wgrad only.
        self.assertAlmostEqual(d["best_ms"][0], 0.5)
        self.assertEqual(d["best_ms"][1], 5)
        self.assertAlmostEqual(d["auto_ms"][0], 0.5)
        self.assertAlmostEqual(d["cudnn_ms"][0], 0.5)
        self.assertEqual(d["cudnn_ms"][1], 2)
        self.assertIn("crema best 0.500 (5 passes), auto 0.500, cuDNN 0.500 (2 passes)",
                      out.getvalue())


class Peer(unittest.TestCase):
    def test_each_pass_computes_its_tensor_on_the_next_copy(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no PyTorch")
        import torch.nn.functional as F
        shape = "8,4,9,7,6,3x2,s2x1,p1x0,d1x2,g2"  # P = 5, Q = 5: every option per axis
        calls, sets = conv_suite.peer_calls(shape, "fp32", device="cpu")
        self.assertEqual(tuple(calls["fwd"]().shape), (8, 6, 5, 5))
        self.assertEqual(tuple(calls["dgrad"]().shape), (8, 4, 9, 7))
        self.assertEqual(tuple(calls["wgrad"]().shape), (6, 2, 3, 2))
        # The calls share one rotation of input copies: x, w, dy of call i are copy i % copies.
        copies = len(sets)
        self.assertGreater(copies, 1)
        x, w, _ = sets[3 % copies]
        want = F.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
        torch.testing.assert_close(calls["fwd"](), want)
        # dgrad and wgrad (calls 4 and 5) against autograd's on the same copies.
        for i, pass_ in ((4, "dgrad"), (5, "wgrad")):
            x, w, dy = (t.clone().requires_grad_() for t in sets[i % copies])
            F.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2).backward(dy)
            torch.testing.assert_close(calls[pass_](), x.grad if pass_ == "dgrad" else w.grad)


class Runs(unittest.TestCase):
    def test_chunks_and_going_on_where_the_outputs_stop(self):
        fake = textwrap.dedent("""\
            import sys
            shapes = [a for p, a in zip(sys.argv, sys.argv[1:]) if p == "--shape"]
            with open(sys.argv[1], "a") as log:
                log.write(" ".join(shapes) + "\\n")
            print("device: fake")
            for s in shapes:
                print(f"{s:<32} fwd             implicit_gemm      cpu           1.00e-06   1e-04"
                      f"     1.0000     1.00      1.0    1.0       0.0 ok")
            sys.exit(3 if "16,2,9,9,4,3" in shapes else 0)
            """)
        with tempfile.TemporaryDirectory() as tmp:
            script, log = write(tmp, "fake.py", fake), os.path.join(tmp, "log")
            suite = [(f"16,{c},9,9,4,3", "x") for c in range(1, 6)]
            args = SimpleNamespace(crema=f"{sys.executable} {script} {log}", bench_args="",
                                   math="fp32", out=tmp, chunk=2, command_timeout=60)
            with redirect_stdout(io.StringIO()):
                self.assertTrue(conv_suite.run_crema(args, suite, float("inf")))
                with open(log) as f:
                    self.assertEqual(f.read().split("\n")[:3],
                                     ["16,1,9,9,4,3 16,2,9,9,4,3", "16,3,9,9,4,3 16,4,9,9,4,3",
                                      "16,5,9,9,4,3"])
                # The failed command's output is kept aside; a second run redoes only its chunk.
                self.assertTrue(os.path.exists(os.path.join(tmp, "failed_fp32_000.txt")))
                self.assertTrue(conv_suite.run_crema(args, suite, float("inf")))
                with open(log) as f:
                    self.assertEqual(f.read().split("\n")[3], "16,1,9,9,4,3 16,2,9,9,4,3")
                self.assertFalse(conv_suite.run_crema(args, suite, 0))  # past the budget

    def test_a_command_past_its_timeout_is_kept_aside(self):
        fake = "import sys, time\nprint('device: fake', flush=True)\ntime.sleep(30)\n"
        with tempfile.TemporaryDirectory() as tmp:
            script = write(tmp, "slow.py", fake)
            args = SimpleNamespace(crema=f"{sys.executable} {script}", bench_args="", math="bf16",
                                   out=tmp, chunk=3, command_timeout=1)
            with redirect_stdout(io.StringIO()) as out:
                self.assertTrue(conv_suite.run_crema(args, SUITE, float("inf")))
            self.assertIn("no exit after 1 s", out.getvalue())
            with open(os.path.join(tmp, "failed_bf16_000.txt")) as f:
                self.assertEqual(f.read(), "device: fake\n")


if __name__ == "__main__":
    unittest.main()
