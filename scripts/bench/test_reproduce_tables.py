#!/usr/bin/env python3
"""reproduce_tables.py's parsing, on the CPU: README tables with their comments, and fake
commands that print crema_gemm_ladder's and `crema bench`'s table formats (ctest
Bench.ReproduceTablesParsing)."""
import io
import os
import sys
import tempfile
import textwrap
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reproduce_tables as rt  # noqa: E402

# crema_gemm_ladder's format (apps/gemm_ladder/main.cpp's print_path).
LADDER = """crema GEMM ladder on NVIDIA H200

tensor-core path, 8192,8192,8192,NT
rung name               math          ms  TFLOP/s  % best  % cuBLAS   max err  idea
t1   tf32_mma           tf32       9.365    117.4    30.9      35.0   3.1e-04  tensor cores: mma
t3   wgmma              tf32       7.243    151.8    40.0      45.0   3.0e-04  Hopper's wgmma: a
t3   wgmma              bf16       6.596    166.7    43.9      25.0   2.9e-03  Hopper's wgmma: a
-    cuBLAS             tf32       3.262    337.1
"""

# crema bench's format (apps/bench.cpp's Table::print, the same widths): fields with spaces
# inside, a pass that fills its column.
def bench_line(*f):
    return ("{:<32} {:<15} {:<18} {:<12} {:>9} {:>7} {:>10} {:>8} {:>8} {:>6} {:>9} {}"
            .format(*f).rstrip() + "\n")


BENCH = ("copy bandwidth (device to device, read + write): 4047 GB/s; the %peak column is of it\n"
         "device: NVIDIA H200 (peaks: fp32 67, tf32 495, bf16 989 TFLOP/s; DRAM 4047 GB/s)\n"
         + bench_line("shape", "pass", "version", "check", "rel.err", "tol", "ms", "TFLOP/s",
                      "GB/s", "%peak", "ws_MB", "status")
         + bench_line("64,256,56,56 f32", "relu fwd", "vectorized", "ref", "0.0e+00", "1.0e-05",
                      "0.1070", "-", "3840.2", "94.9", "0", "ok")
         + bench_line("64,256,56,56 f32", "gelu_tanh bwd", "vectorized", "ref", "1.1e-07",
                      "1.0e-05", "0.1580", "-", "3900.0", "96.4", "0", "ok")
         + bench_line("64,64,112,112 f32 nchw", "max 3x3s2p1 fwd", "per_element", "ref",
                      "0.0e+00", "1.0e-05", "0.1360", "-", "2000.0", "49.4", "0", "ok")
         + bench_line("64,64,112,112 f32 nchw", "max 3x3s2p1 fwd", "channel_vectors", "ref",
                      "9.9e-01", "1.0e-05", "-", "-", "-", "-", "0", "FAILED")
         + "\nmore text after the table 9.9\n")


def run_on(readme_text, output, extra=(), after=None):
    """main() on a README holding readme_text, with {ladder} a script that prints output;
    after(README text) sees the file once main() has run."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "fake.py")
        with open(fake, "w") as f:
            f.write("import sys\nsys.stdout.write(%r)\n" % output)
        readme = os.path.join(tmp, "README.md")
        with open(readme, "w") as f:
            f.write(textwrap.dedent(readme_text))
        out = io.StringIO()
        with redirect_stdout(out):
            status = rt.main([readme, "--ladder", fake, "--crema", fake, *extra])
        if after is not None:
            with open(readme) as f:
                after(f.read())
        return status, out.getvalue()


class Parsing(unittest.TestCase):
    def test_fixed_width_fields_with_spaces(self):
        rows = rt.parse_output(BENCH, ["shape", "pass"], "ms")
        self.assertEqual(rows[("64,256,56,56 f32", "relu fwd")], "0.1070")
        self.assertEqual(rows[("64,256,56,56 f32", "gelu_tanh bwd")], "0.1580")
        rows = rt.parse_output(BENCH, ["pass"], "GB/s")
        self.assertEqual(rows[("relu fwd",)], "3840.2")
        rows = rt.parse_output(BENCH, ["shape", "pass", "version"], "ms")
        self.assertEqual(rows[("64,64,112,112 f32 nchw", "max 3x3s2p1 fwd", "per_element")],
                         "0.1360")
        self.assertEqual(rows[("64,64,112,112 f32 nchw", "max 3x3s2p1 fwd", "channel_vectors")],
                         "-")
        self.assertEqual(len(rows), 4)  # the table ends at the blank line

    def test_percent_headers_and_idea_words(self):
        rows = rt.parse_output(LADDER, ["rung", "math"], "% cuBLAS")
        self.assertEqual(rows[("t3", "bf16")], "25.0")
        rows = rt.parse_output(LADDER, ["rung", "math"], "idea")
        self.assertEqual(rows[("t1", "tf32")], "tensor cores: mma")

    def test_cells(self):
        self.assertEqual(rt.number("1,705"), 1705.0)
        self.assertEqual(rt.number("75%"), 75.0)
        self.assertIsNone(rt.number("TBD"))
        self.assertEqual(rt.expand(["rung", "math", "TFLOP/s"],
                                   ["t3 `wgmma`", "tf32 / bf16", "151.8 / 166.7"],
                                   ["rung", "math"], "TFLOP/s"),
                         [(("t3 wgmma", "tf32"), "151.8"), (("t3 wgmma", "bf16"), "166.7")])


class EndToEnd(unittest.TestCase):
    def test_pass_fail_missing_and_tbd(self):
        status, out = run_on("""
            <!-- reproduce: {python} {ladder} --path tc; key: rung, math; value: TFLOP/s -->
            | rung | math | TFLOP/s |
            | --- | --- | ---: |
            | t1 `tf32_mma` | tf32 | 117.4 |
            | t3 `wgmma` | tf32 / bf16 | 150.0 / 180.0 |
            | t4 `wgmma_pipelined` | tf32 | 379.8 |
            | t5 `wgmma_repacked` | tf32 | TBD |
            """, LADDER)
        self.assertEqual(status, 1)
        def line(prefix):
            return next(l for l in out.splitlines() if l.startswith("  " + prefix))
        self.assertIn("+0.0%  PASS", line("t1 tf32_mma / tf32"))
        self.assertIn("+1.2%  PASS", line("t3 wgmma / tf32"))  # 151.8 against 150.0
        self.assertIn("FAIL (worse)", line("t3 wgmma / bf16"))  # 166.7 against 180.0: -7.4%
        self.assertIn("row missing", line("t4 wgmma_pipelined / tf32"))
        self.assertIn("not a number", line("t5 wgmma_repacked / tf32"))
        self.assertIn("3 row(s) failed", out)

    def test_fill_tbd_writes_the_measured_cells_of_tbd_rows(self):
        table = """
            <!-- reproduce: {python} {crema} bench activation; key: shape, pass; value: ms -->
            | shape | pass | version | ms | GB/s | PyTorch ms |
            | --- | --- | --- | ---: | ---: | ---: |
            | 64,256,56,56 f32 | relu fwd | TBD | TBD | TBD | TBD |
            | 64,256,56,56 f32 | gelu_tanh bwd | vectorized | 0.160 | 3,850 | 0.2 |
            | 64,256,56,56 f32 | tanh fwd | TBD | TBD | TBD | |
            """
        written = []
        status, out = run_on(table, BENCH, ["--fill-tbd"], after=written.append)
        self.assertEqual(status, 1)  # this run still compares TBD: not a reproduction
        self.assertIn("--fill-tbd: 1 row(s) written", out)
        self.assertIn("| 64,256,56,56 f32 | relu fwd | vectorized | 0.1070 | 3840.2 | TBD |",
                      written[0])  # a column the output lacks stays TBD
        self.assertIn("| 64,256,56,56 f32 | tanh fwd | TBD | TBD | TBD | |", written[0])
        status, out = run_on(written[0], BENCH)
        self.assertIn("+0.0%  PASS", out)

    def test_a_command_past_the_timeout_fails_its_rows(self):
        with tempfile.TemporaryDirectory() as tmp:
            slow = os.path.join(tmp, "slow.py")
            with open(slow, "w") as f:
                f.write("import time\ntime.sleep(5)\n")
            readme = os.path.join(tmp, "README.md")
            with open(readme, "w") as f:
                f.write("<!-- reproduce: {python} {ladder}; key: rung; value: TFLOP/s -->\n"
                        "| rung | TFLOP/s |\n| --- | ---: |\n| s1 | 0.5 |\n| s2 | 5.0 |\n")
            out = io.StringIO()
            with redirect_stdout(out):
                status = rt.main([readme, "--ladder", slow, "--timeout", "0.5"])
        self.assertEqual(status, 1)
        self.assertIn("stopped after 0.5 s (--timeout)", out.getvalue())
        self.assertIn("2 row(s) failed", out.getvalue())

    def test_time_column_and_all_pass(self):
        status, out = run_on("""
            Some text.

            <!-- reproduce: {python} {crema} bench activation; key: shape, pass; value: ms -->
            | shape | pass | ms | GB/s |
            | --- | --- | ---: | ---: |
            | 64,256,56,56 f32 | relu fwd | 0.105 | 3,900 |
            | 64,256,56,56 f32 | gelu_tanh bwd | 0.160 | 3,850 |
            """, BENCH)
        self.assertEqual(status, 0, out)
        self.assertIn("+1.9%  PASS", out)
        self.assertIn("all rows reproduced", out)

    def test_long_keys_print_whole(self):
        status, out = run_on("""
            <!-- reproduce: {python} {crema} bench pooling; key: shape, pass, version; value: ms -->
            | shape | pass | version | ms |
            | --- | --- | --- | ---: |
            | 64,64,112,112 f32 nchw | max 3x3s2p1 fwd | per_element | 0.1360 |
            | 64,64,112,112 f32 nchw | max 3x3s2p1 fwd | channel_vectors | 0.5 |
            """, BENCH)
        self.assertEqual(status, 1)
        self.assertRegex(out, r"  64,64,112,112 f32 nchw / max 3x3s2p1 fwd / per_element +0.1360 "
                              r"+0.1360 +\+0.0%  PASS")
        self.assertRegex(out, r"  64,64,112,112 f32 nchw / max 3x3s2p1 fwd / channel_vectors +0.5 "
                              r"+- +-  FAIL \(measured '-' is not a number\)")

    def test_no_table_in_the_output(self):
        status, out = run_on("""
            <!-- reproduce: {python} {ladder}; key: rung; value: TFLOP/s -->
            | rung | TFLOP/s |
            | --- | ---: |
            | s1 | 0.5 |
            """, "crema_gemm_ladder: no CUDA device (none found)\n")
        self.assertEqual(status, 1)
        self.assertIn("no table with columns", out)

    def test_comment_naming_a_missing_column(self):
        with self.assertRaises(ValueError):
            run_on("""
                <!-- reproduce: {ladder}; key: rung; value: GB/s -->
                | rung | TFLOP/s |
                | --- | ---: |
                | s1 | 0.5 |
                """, LADDER)

    def test_the_kernel_readmes_comments_parse(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(rt.main(["--list"]), 0)
        self.assertIn("crema_gemm_ladder --path simt", out.getvalue())
        self.assertTrue(os.path.isdir(os.path.join(root, "kernels")))


if __name__ == "__main__":
    unittest.main()
