#!/usr/bin/env bash
# Data parallelism's scaling: crema on 1 GPU against N GPUs (`crema train --gpus`), at the same
# batch per GPU, beside PyTorch DDP (peer_ddp_resnet50.py, a copy of the issue's peer, torchrun) on
# ResNet-50. Prints img/s (all GPUs together), the N-to-1 ratios and crema's N-GPU ResNet-50
# against PyTorch DDP's (which always runs bf16 autocast + channels_last).
#
#   scripts/bench/ddp_scaling.sh [N] [PRECISION]   (default N=2, PRECISION=tf32; needs N GPUs)
#
# PRECISION: tf32 (--set ++model.math=tf32: f32 tensors, tf32 products) or bf16 (--set
# ++model.precision=bf16: bf16 activations, f32 master weights; core/net_precision.h), for both
# crema nets. LAYOUT=nhwc adds ++model.layout=nhwc (channels-last, as the peer);
# REDUCE_DTYPE=bf16 adds distributed.reduce_dtype: bf16 (the gradients' all-reduce in bf16).
#
# Nets (random data: the loader must not be what is measured):
#   resnet50    configs/zoo/resnet50.yaml at 224 x 224, batch 128 per GPU, 1,024 random images
#               in an IDX file
#   fmnist      configs/resnet_fashion_mnist.yaml, batch 128 per GPU, the Fashion-MNIST files
# crema's rate is the last display window's (rank 0's images/s x N), after 40 warm-up steps.
# Environment: CREMA (the binary, default build/bin/crema), PEER (the DDP peer script, default
# scripts/bench/peer_ddp_resnet50.py), CREMA_NCCL_LIBRARY (else PyTorch's libnccl.so.2 is
# used). NCCL_NVLS_ENABLE=0 always (NVLink multicast stays off on the lent machines).
set -euo pipefail
N=${1:-2}
PRECISION=${2:-tf32}
case $PRECISION in
  tf32) PRECISION_SET=(--set ++model.math=tf32) ;;
  bf16) PRECISION_SET=(--set ++model.precision=bf16) ;;
  *) echo "ddp_scaling.sh: PRECISION must be tf32 or bf16, got '$PRECISION'" >&2; exit 2 ;;
esac
[ -n "${LAYOUT:-}" ] && PRECISION_SET+=(--set "++model.layout=$LAYOUT")
[ -n "${REDUCE_DTYPE:-}" ] && PRECISION_SET+=(--set "+distributed={reduce_dtype: $REDUCE_DTYPE}")
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

ratio() { python3 -c "print(f'{$2 / $1:.2f}x' if $1 and $2 else '-')"; }
label="$PRECISION${LAYOUT:+ $LAYOUT}${REDUCE_DTYPE:+ reduce $REDUCE_DTYPE}"
r1=$(crema_run resnet50 "$WORK/resnet50_random.yaml" 1 "${PRECISION_SET[@]}")
rn=$(crema_run resnet50 "$WORK/resnet50_random.yaml" "$N" "${PRECISION_SET[@]}")
fm=(--set +solver.max_iter=300 --set solver.display=100 --set solver.test_interval=0)
f1=$(crema_run fmnist "$ROOT/configs/resnet_fashion_mnist.yaml" 1 "${fm[@]}" "${PRECISION_SET[@]}")
fn=$(crema_run fmnist "$ROOT/configs/resnet_fashion_mnist.yaml" "$N" "${fm[@]}" "${PRECISION_SET[@]}")
p1=0 pn=0
if [ -f "$PEER" ]; then
  p1=$(torchrun --standalone --nproc-per-node 1 "$PEER" 2>/dev/null | sed -n 's/.* \([0-9]*\) img\/s total/\1/p' || true)
  pn=$(torchrun --standalone --nproc-per-node "$N" "$PEER" 2>/dev/null | sed -n 's/.* \([0-9]*\) img\/s total/\1/p' || true)
fi
printf "%-36s %10s %10s %7s %12s\n" "net" "1 GPU" "$N GPUs" "$N / 1" "/ PyTorch $N"
printf "%-36s %10s %10s %7s %12s\n" "crema resnet50 224 $label" "$r1" "$rn" "$(ratio "$r1" "$rn")" \
  "$(ratio "${pn:-0}" "$rn")"
printf "%-36s %10s %10s %7s %12s\n" "crema fmnist resnet $label" "$f1" "$fn" "$(ratio "$f1" "$fn")" "-"
printf "%-36s %10s %10s %7s %12s\n" "PyTorch DDP resnet50 bf16 cl" "${p1:-0}" "${pn:-0}" \
  "$(ratio "${p1:-0}" "${pn:-0}")" "1.00x"
