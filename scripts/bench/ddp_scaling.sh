#!/usr/bin/env bash
# Data parallelism's scaling: crema on 1 GPU against N GPUs (`crema train --gpus`), at the same
# batch per GPU, beside PyTorch DDP (peer_ddp_resnet50.py, a copy of the issue's peer, torchrun) on
# ResNet-50. Prints img/s (all GPUs together) and the N-to-1 ratios.
#
#   scripts/bench/ddp_scaling.sh [N]        (default N=2; needs N GPUs on this host)
#
# Nets (random data: the loader must not be what is measured):
#   resnet50    configs/zoo/resnet50.yaml at 224 x 224, batch 128 per GPU, model.math tf32
#               (crema's bf16 training is not done), 1,024 random images in an IDX file
#   fmnist      configs/resnet_fashion_mnist.yaml, batch 128 per GPU, the Fashion-MNIST files
# crema's rate is the last display window's (rank 0's images/s x N), after 40 warm-up steps.
# Environment: CREMA (the binary, default build/bin/crema), PEER (the DDP peer script, default
# scripts/bench/peer_ddp_resnet50.py), CREMA_NCCL_LIBRARY (else PyTorch's libnccl.so.2 is
# used). NCCL_NVLS_ENABLE=0 always (NVLink multicast stays off on the lent machines).
set -euo pipefail
N=${1:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CREMA=${CREMA:-$ROOT/build/bin/crema}
PEER=${PEER:-$ROOT/scripts/bench/peer_ddp_resnet50.py}
WORK=${WORK:-/tmp/crema_ddp_scaling}
export NCCL_NVLS_ENABLE=0
if [ -z "${CREMA_NCCL_LIBRARY:-}" ]; then
  CREMA_NCCL_LIBRARY=$(python3 -c 'import glob, os, torch; print((glob.glob(os.path.dirname(torch.__file__) + "/../nvidia/nccl/lib/libnccl.so.2") + [""])[0])')
  export CREMA_NCCL_LIBRARY
fi
mkdir -p "$WORK"

# 1,024 random 3 x 224 x 224 images and labels 0..999 as IDX (crema reads [N, C, H, W] IDX).
if [ ! -f "$WORK/images.idx" ]; then
  python3 - "$WORK" <<'PY'
import os, random, struct, sys
d, n = sys.argv[1], 1024
random.seed(0)
with open(f"{d}/images.idx", "wb") as f:
    f.write(struct.pack(">BBBB4I", 0, 0, 8, 4, n, 3, 224, 224))
    f.write(random.randbytes(n * 3 * 224 * 224))
with open(f"{d}/labels.idx", "wb") as f:
    f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n))
    f.write(bytes(i % 256 for i in range(n)))
PY
fi
cat > "$WORK/resnet50_random.yaml" <<YAML
_base_: $ROOT/configs/zoo/resnet50.yaml
data:
  _replace_: true
  train:
    source: {format: idx, images: $WORK/images.idx, labels: $WORK/labels.idx}
    batch_size: 128
    shuffle: true
    transform: [{scale: 0.00392157}]
    workers: 6
  test:
    source: {format: idx, images: $WORK/images.idx, labels: $WORK/labels.idx}
    batch_size: 128
    transform: [{scale: 0.00392157}]
model:
  append_layers: [{name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}]
solver: {type: sgd, base_lr: 0.0001, momentum: 0.9, weight_decay: 0.0001, max_iter: 80,
         display: 20, test_interval: 0}
YAML

# img/s of all GPUs: rank 0's last display line x the number of GPUs.
rate() {  # log gpus
  awk -v n="$2" '/^iter .* img\/s/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "img/s") r = $i }
                 END { printf "%.0f", r * n }' "$1"
}
crema_run() {  # name config gpus extra...
  local name=$1 config=$2 gpus=$3; shift 3
  local where=(--device cuda:0)
  [ "$gpus" -gt 1 ] && where=(--gpus "$(seq -s, 0 $((gpus - 1)))")
  local log=$WORK/${name}_$gpus.log
  if ! "$CREMA" train "$config" "${where[@]}" --out "$WORK/run_${name}_$gpus" "$@" > "$log" 2>&1; then
    # Should the step with NCCL inside a CUDA graph fail, the step launched call by call.
    echo "crema $name on $gpus GPU(s) failed: $(grep -m1 'error' "$log"); again without a CUDA graph" >&2
    "$CREMA" train "$config" "${where[@]}" --out "$WORK/run_${name}_$gpus" "$@" \
      --set ++solver.cuda_graph=false > "$log" 2>&1 || { tail -3 "$log" >&2; echo 0; return; }
  fi
  rate "$log" "$gpus"
}

printf "%-28s %10s %10s %7s\n" "net" "1 GPU" "$N GPUs" "ratio"
one=$(crema_run resnet50 "$WORK/resnet50_random.yaml" 1 --set ++model.math=tf32)
many=$(crema_run resnet50 "$WORK/resnet50_random.yaml" "$N" --set ++model.math=tf32)
ratio() { python3 -c "print(f'{$2 / $1:.2f}x' if $1 else '-')"; }
printf "%-28s %10s %10s %7s\n" "crema resnet50 224 tf32" "$one" "$many" "$(ratio "$one" "$many")"
fm=(--set +solver.max_iter=300 --set solver.display=100 --set solver.test_interval=0)
one=$(crema_run fmnist "$ROOT/configs/resnet_fashion_mnist.yaml" 1 "${fm[@]}")
many=$(crema_run fmnist "$ROOT/configs/resnet_fashion_mnist.yaml" "$N" "${fm[@]}")
printf "%-28s %10s %10s %7s\n" "crema fmnist resnet" "$one" "$many" "$(ratio "$one" "$many")"
if [ -f "$PEER" ]; then
  p1=$(torchrun --standalone --nproc-per-node 1 "$PEER" 2>/dev/null | sed -n 's/.* \([0-9]*\) img\/s total/\1/p' || true)
  pn=$(torchrun --standalone --nproc-per-node "$N" "$PEER" 2>/dev/null | sed -n 's/.* \([0-9]*\) img\/s total/\1/p' || true)
  printf "%-28s %10s %10s %7s\n" "PyTorch DDP resnet50 bf16" "$p1" "$pn" "$(ratio "${p1:-0}" "${pn:-0}")"
fi
