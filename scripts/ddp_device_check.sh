#!/usr/bin/env bash
# Training on two GPUs, checked on a machine that has them (issue 16's bars), after building
# crema, crema_tests and crema_gpu_tests:
#
#   [BIN=.gpu/bin] scripts/ddp_device_check.sh [OUT] [SECTIONS]
#                                  (default BIN=build/bin, OUT=/tmp/ddp_check, SECTIONS=1234)
#
# About 8 minutes for 1234; SECTIONS picks some (e.g. 12, then 34 in a second call; 5 and 6
# are 3 to 4 minutes each).
#
#   1. crema_gpu_tests DataParallelCuda.*: 2 GPUs at batch 8 = 1 GPU at 16 (within 1e-3), two
#      2-GPU runs bit-identical, sockets only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) = NVLink,
#      SIGKILL of rank 1 -> rank 0 exits 5 naming it within the timeout, SyncBatchNorm on 2 GPUs
#      = BatchNorm on 1 at the global batch (graph and eager) with the global display loss on both
#      ranks, the bf16 all-reduce within bf16 rounding of the f32 one; SyncBatchNormCuda.* (the
#      kernels against the CPU); and the CPU ranks' tests
#   2. SIGKILL mid-run of the Fashion-MNIST ResNet, then the last checkpoint resumes on 1 GPU
#   3. Fashion-MNIST VGG-BN and ResNet: 1 GPU at batch 128 against 2 GPUs at 64 (same global
#      batch): the final test accuracies
#   4. scripts/bench/ddp_scaling.sh 2: img/s on 1 and 2 GPUs, crema (tf32) and PyTorch DDP (bf16)
#   5. the same with crema in bf16 channels-last (model.precision bf16, model.layout nhwc)
#   6. the same in bf16 with the gradients' all-reduce in bf16 too (distributed.reduce_dtype)
# NCCL comes from PyTorch's wheel (CREMA_NCCL_LIBRARY) unless set; NCCL_NVLS_ENABLE=0 always.
# Each step goes on after a failure (no -e): one call of the device shows every result.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/ddp_check}
SECTIONS=${2:-1234}
BIN=$(cd "${BIN:-build/bin}" && pwd)
# A bundle (../shared/tools/gpu-bundle) keeps its libraries beside bin/; the tests start the
# crema binary named by CREMA_TEST_CREMA.
[ -d "$BIN/../lib" ] && export LD_LIBRARY_PATH="$BIN/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CREMA_TEST_CREMA=$BIN/crema
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
if [ -z "${CREMA_NCCL_LIBRARY:-}" ]; then
  CREMA_NCCL_LIBRARY=$(python3 -c 'import glob, os, torch; print((glob.glob(os.path.dirname(torch.__file__) + "/../nvidia/nccl/lib/libnccl.so.2") + [""])[0])')
  export CREMA_NCCL_LIBRARY
fi
echo "NCCL: ${CREMA_NCCL_LIBRARY:-(linker search)}"
"$BIN/crema" devices
elapsed() { python3 -c "import time; print(round(time.time() - $1, 1))"; }

if [[ $SECTIONS == *1* ]]; then
echo "== 1. tests"
timeout 360 "$BIN/crema_gpu_tests" --gtest_filter='DataParallelCuda.*:SyncBatchNormCuda.*' 2>&1 | tail -20
timeout 200 "$BIN/crema_tests" --gtest_filter='TrainRanks.*:Rendezvous.*:SocketGroup.*:World.*:GpuList.*:BucketPlan.*:Shard.*:NcclLibrary.*:SyncBatchNorm*' --gtest_brief=1 2>&1 | tail -5

fi
if [[ $SECTIONS == *2* ]]; then
echo "== 2. SIGKILL of rank 1, then resume on 1 GPU"
R=$OUT/kill
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$BIN/crema" train configs/resnet_fashion_mnist.yaml --out "$R" --timeout 60 \
    --set data.train.batch_size=64 --set +solver.snapshot_interval=100 > "$OUT/kill_$r.log" 2>&1 &
  eval "pid$r=$!"
done
sleep 12
kill -9 "$pid1"; t=$(date +%s.%N)
wait "$pid0"; echo "rank 0 exit $? after $(elapsed "$t") s: $(grep -h 'crema: error' "$OUT/kill_0.log")"
ls "$R/checkpoints"
timeout 120 "$BIN/crema" train configs/resnet_fashion_mnist.yaml --device cuda:0 --resume "$R" \
  --set data.train.batch_size=128 --stop-after $(( $(readlink "$R/checkpoints/last" | sed 's/.*iter_0*//') + 20 )) \
  > "$OUT/resume.log" 2>&1
echo "resume on 1 GPU: exit $?; $(grep -E 'resumed from|stopped after' "$OUT/resume.log" | tr '\n' ' ')"

fi
if [[ $SECTIONS == *3* ]]; then
echo "== 3. Fashion-MNIST accuracy, 1 GPU x 128 against 2 GPUs x 64"
for net in vggbn resnet; do
  s=$(date +%s.%N)
  timeout 150 "$BIN/crema" train configs/${net}_fashion_mnist.yaml --device cuda:0 --out "$OUT/${net}_1" > "$OUT/${net}_1.log" 2>&1
  echo "$net 1 GPU : exit $? $(elapsed "$s") s $(grep 'final test' "$OUT/${net}_1.log")"
  s=$(date +%s.%N)
  timeout 150 "$BIN/crema" train configs/${net}_fashion_mnist.yaml --gpus 0,1 --set data.train.batch_size=64 --out "$OUT/${net}_2" > "$OUT/${net}_2.log" 2>&1
  echo "$net 2 GPUs: exit $? $(elapsed "$s") s $(grep 'final test' "$OUT/${net}_2.log")"
done

if ! grep -q 'final test' "$OUT/resnet_2.log"; then  # the fallback: the step without a graph
  s=$(date +%s.%N)
  timeout 150 "$BIN/crema" train configs/resnet_fashion_mnist.yaml --gpus 0,1 --set data.train.batch_size=64 \
    --set ++solver.cuda_graph=false --out "$OUT/resnet_2_eager" > "$OUT/resnet_2_eager.log" 2>&1
  echo "resnet 2 GPUs, no CUDA graph: exit $? $(elapsed "$s") s $(grep 'final test' "$OUT/resnet_2_eager.log")"
fi

fi
if [[ $SECTIONS == *4* ]]; then
echo "== 4. scaling"
WORK=$OUT/scaling CREMA=$BIN/crema timeout 400 scripts/bench/ddp_scaling.sh 2
fi
if [[ $SECTIONS == *5* ]]; then
echo "== 5. scaling, crema bf16 channels-last"
LAYOUT=nhwc WORK=$OUT/scaling CREMA=$BIN/crema timeout 400 scripts/bench/ddp_scaling.sh 2 bf16
fi
if [[ $SECTIONS == *6* ]]; then
echo "== 6. scaling, crema bf16 channels-last, gradients all-reduced in bf16"
LAYOUT=nhwc REDUCE_DTYPE=bf16 WORK=$OUT/scaling CREMA=$BIN/crema timeout 400 scripts/bench/ddp_scaling.sh 2 bf16
fi
