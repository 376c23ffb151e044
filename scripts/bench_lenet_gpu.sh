#!/usr/bin/env bash
# LeNet training step on one NVIDIA GPU: crema (its own kernels; launched one by one and replayed as
# a CUDA graph) beside PyTorch + cuDNN (eager and CUDA graph), batch 64 and 256, in one run on the
# same GPU. Prints milliseconds per step, images/s and the ratios crema / PyTorch.
#   scripts/bench_lenet_gpu.sh [CREMA_COMMAND]   (default build/bin/crema; on a GPU machine with a
#                                                  bundle: ".gpu/run crema")
set -euo pipefail
cd "$(dirname "$0")/.."
crema=${1:-build/bin/crema}
peer=$(dirname "$0")/bench/peer_lenet_cuda.py
[ -f "$peer" ] || peer=.gpu/peer_lenet_cuda.py
results=$(mktemp)
log=$(mktemp)
for batch in 64 256; do
  $crema time configs/lenet_fashion_mnist.yaml --device cuda:0 --iterations 200 \
    --set data.train.batch_size=$batch > "$log"
  cat "$log" >&2
  awk -v b=$batch '/^training step: /{print "crema eager b" b, $3}
                   /^training step, CUDA graph: /{print "crema graph b" b, $5}' "$log" >> "$results"
done
python3 "$peer" 64 256 > "$log"
cat "$log" >&2
awk '{print $1, $2, $3, $4}' "$log" >> "$results"
echo
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
awk '{t[$1 " " $2 " " $3] = $4}
     END {
       for (i = 1; i <= 2; i++) {
         b = i == 1 ? "b64" : "b256"; n = i == 1 ? 64 : 256
         ce = t["crema eager " b]; cg = t["crema graph " b]; pe = t["pytorch eager " b]; pg = t["pytorch graph " b]
         printf "batch %3d  crema %.4f ms (%.0f img/s)  graph %.4f ms (%.0f img/s) | pytorch eager %.4f ms, graph %.4f ms\n", n, ce, n / ce * 1e3, cg, n / cg * 1e3, pe, pg
         printf "           crema graph / pytorch eager = %.3f   crema graph / pytorch graph = %.3f\n", cg / pe, cg / pg
       }
     }' "$results"
