#!/usr/bin/env bash
# The GEMM ladder in one command: builds crema_gemm_ladder, times cuBLAS on the same shapes
# (scripts/bench/peer_gemm.py, when python3 has a CUDA torch), runs every rung of both paths
# against it (apps/gemm_ladder/main.cpp: the tables of kernels/gemm/README.md), then the split of
# K's shape for the last SIMT rungs, and records each rung's key counters (DRAM throughput, FMA
# pipe, shared-memory wavefronts and bank conflicts, the top stall reasons): with ncu when it is on
# PATH, else with CUPTI_COUNTERS_LIB (scripts/cupti_tools.sh builds it; same metrics, same table).
#
#   scripts/bench/gemm_ladder.sh [OUT]     (OUT: a folder for the logs, default build/gemm_ladder)
#
# Environment: BUILD (the build folder, default build), SIZE_SIMT (4096), SIZE_TC (8192),
# CUPTI_COUNTERS_LIB (DIR/libcupti_counters.so, used without ncu; the libnvperf_* it needs, and
# their libcupti, come from python3's nvidia wheels, torch's nvidia/cu13/lib, when it has them).
set -euo pipefail
counters_lib=${CUPTI_COUNTERS_LIB:+$(realpath -m "$CUPTI_COUNTERS_LIB")}
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
out=${1:-$build/gemm_ladder}
simt=${SIZE_SIMT:-4096}
tc=${SIZE_TC:-8192}
mkdir -p "$out"

# BUILD may also be a bundle without a build system (bin/ and lib/ from ../shared/tools/gpu-bundle,
# for GPU machines that cannot build): its binary is run as it is.
ladder=$build/bin/crema_gemm_ladder
if [[ -f "$build/build.ninja" || -f "$build/Makefile" || ! -x $ladder ]]; then
  if [[ ! -f "$build/build.ninja" && ! -f "$build/Makefile" ]]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$build" -j"$(nproc)" --target crema_gemm_ladder >"$out/build.log"
fi

# cuBLAS through torch: both sizes, every layout and math (one line each); skipped without torch.
cublas=()
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  : >"$out/cublas.txt"
  for n in $simt $tc; do
    (cd scripts/bench && python3 peer_gemm.py "$n") | tee -a "$out/cublas.txt"
  done
  cublas=(--cublas "$out/cublas.txt")
else
  echo "cuBLAS: no CUDA torch for python3, the '% cuBLAS' column stays empty"
fi

"$ladder" --shape "$simt,$simt,$simt,NN" --tc-shape "$tc,$tc,$tc,NT" "${cublas[@]}" |
  tee "$out/ladder.txt"
# The last SIMT rungs on a weight gradient (ConvNeXt-T's first stage at batch 128): a small C with
# a long K, where s15's smaller tiles and s16's split of K matter.
"$ladder" --path simt --rungs s14,s15,s16 --shape 384,96,401408,TN | tee -a "$out/ladder.txt"

# Counters: ncu, else the CUPTI library (same metric names, rows of ncu's CSV form).
if command -v ncu >/dev/null; then
  profiler=ncu
elif [[ -f $counters_lib ]]; then
  profiler=cupti
  # A folder with libnvperf_* and the libcupti that goes with them, from python3's nvidia wheels.
  cupti_so=$(basename "$(ls "$(dirname "$counters_lib")"/libcupti.so.* 2>/dev/null | head -1)")
  nvlib=$(python3 - "$cupti_so" <<'EOF' 2>/dev/null || true
import glob, os, sys
import nvidia
for root in nvidia.__path__:
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib", "libnvperf_host.so"))):
        if os.path.exists(os.path.join(os.path.dirname(lib), sys.argv[1])):
            print(os.path.dirname(lib))
            sys.exit()
EOF
)
  # Only those three on the library path (links in OUT), not the rest of the wheel's folder.
  libs=${LD_LIBRARY_PATH:-}
  if [[ -n $nvlib ]]; then
    mkdir -p "$out/cupti_libs"
    ln -sf "$nvlib/libnvperf_host.so" "$nvlib/libnvperf_target.so" "$nvlib/$cupti_so" \
      "$out/cupti_libs/"
    libs=$(realpath "$out/cupti_libs")${libs:+:$libs}
  fi
  echo "ncu not found: counters from $counters_lib (libnvperf from ${nvlib:-LD_LIBRARY_PATH})"
else
  echo "ncu not found${counters_lib:+, nor $counters_lib}: no per-rung counters" \
    "(scripts/cupti_tools.sh DIR; CUPTI_COUNTERS_LIB=DIR/libcupti_counters.so)"
  exit 0
fi
metrics=gpu__time_duration.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
stalls=(long_scoreboard short_scoreboard mio_throttle barrier math_pipe_throttle not_selected
        wait lg_throttle dispatch_stall no_instruction)
for s in "${stalls[@]}"; do
  metrics+=,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
echo
echo "$profiler, one run of each rung (a rung's kernels in launch order; stalls: warps per issue)"
for rung in s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 s12 s13 s14 s15 s16 t1 t2 t3 t4 t5; do
  path=simt
  [[ $rung == t* ]] && path=tc
  args=(--profile --path "$path" --rungs "$rung" --shape "$simt,$simt,$simt,NN"
        --tc-shape "$tc,$tc,$tc,NT")
  csv=$out/ncu_$rung.csv log=$out/ncu_$rung.csv
  if [[ $profiler == ncu ]]; then
    ncu --csv --print-units base --print-kernel-base function --metrics "$metrics" \
      "$ladder" "${args[@]}" >"$csv" 2>&1 || true
  else
    log=$out/cupti_$rung.log
    : >"$csv"  # no stale rows if the library does not load
    LD_LIBRARY_PATH=$libs CUDA_INJECTION64_PATH=$counters_lib CUPTI_COUNTERS_METRICS=$metrics \
      CUPTI_COUNTERS_OUT=$csv "$ladder" "${args[@]}" >"$log" 2>&1 || true
  fi
  python3 - "$rung" "$csv" "$log" <<'EOF'
import csv, sys
rung, path, log = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
if not rows:
    print(f"{rung}: no metrics in {path} (see {log})")
    sys.exit()
head, kernels = rows[0], {}
for r in rows[1:]:
    d = dict(zip(head, r))
    name = d["Kernel Name"].split("<")[0]
    kernels.setdefault(d["ID"], (name, {}))[1][d["Metric Name"]] = d["Metric Value"]
for name, m in kernels.values():
    num = lambda k: float(m.get(k, "nan").replace(",", ""))
    stalls = sorted(((num(k), k.split("stalled_")[1].split("_per_")[0])
                     for k in m if "stalled_" in k), reverse=True)[:3]
    print(f"{rung:>3} {name[:40]:40} {num('gpu__time_duration.sum') / 1e6:9.3f} ms"
          f"  dram {num('dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
          f"  fma {num('sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active'):5.1f}%"
          f"  smem wavefronts {num('l1tex__data_pipe_lsu_wavefronts_mem_shared.sum'):.3g}"
          f"  conflicts ld {num('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum'):.3g}"
          f" st {num('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum'):.3g}"
          "  stalls " + ", ".join(f"{n} {v:.2f}" for v, n in stalls))
EOF
done | tee "$out/ncu.txt"
