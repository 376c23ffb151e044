#!/usr/bin/env bash
# The whole GPU check of crema in one go, for a GPU machine where nothing can be built: the GPU
# tests, the same under compute-sanitizer memcheck, the LeNet benchmark beside PyTorch + cuDNN, a
# 10-epoch LeNet run on the GPU, CPU-vs-GPU losses over the first 100 iterations beside PyTorch's
# own drift (scripts/bench/pytorch_lenet_divergence.py), two same-seed GPU runs of 1,000
# iterations compared bit for bit, the issue-4 nets (VGG-BN, ResNet) trained to the end, the
# recurrent layers (`crema bench rnn` beside cuDNN, the row-LSTM trained and its step timed) and
# the convolution/GEMM speed of issue 8 (`crema bench conv|gemm` beside cuDNN/cuBLAS, whole VGG-BN
# and ResNet-18 steps, ResNet-18 in tf32 too; GEMM 8192^3 in every layout and math beside cuBLAS
# through scripts/bench/peer_gemm.py). Logs go to LOGS.
#
# Prepare here:  ../shared/tools/gpu-bundle .gpu build/bin/crema build/bin/crema_gpu_tests
#                cp scripts/bench/peer_lenet_cuda.py ../shared/bench/peer_cudnn.py .gpu/ &&
#                mkdir -p .gpu/data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu/data/
# Run there:     scripts/gpu_check.sh LOGS [all|tests|bench|train|nets|rnn|speed]
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:?usage: gpu_check.sh LOGS [all|tests|bench|train|nets|rnn|speed]}
what=${2:-all}
mkdir -p "$logs"
run=.gpu/run
data=.gpu/data
paths=(--set "data.train.source.images=$data/train-images-idx3-ubyte.gz"
       --set "data.train.source.labels=$data/train-labels-idx1-ubyte.gz"
       --set "data.test.source.images=$data/t10k-images-idx3-ubyte.gz"
       --set "data.test.source.labels=$data/t10k-labels-idx1-ubyte.gz")
lenet=configs/lenet_fashion_mnist.yaml

$run crema devices | tee "$logs/devices.txt"
if [ "$what" = all ] || [ "$what" = tests ]; then
  $run crema_gpu_tests 2>&1 | tail -n 40 > "$logs/gpu_tests.txt"
  tail -n 3 "$logs/gpu_tests.txt"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The out-of-memory test provokes a failing cudaMalloc on purpose, which memcheck would count.
  LD_LIBRARY_PATH=$PWD/.gpu/lib "$sanitizer" --tool memcheck --error-exitcode 1 \
    .gpu/bin/crema_gpu_tests --gtest_filter=-RuntimeCuda.OutOfMemorySaysHowMuch \
    > "$logs/memcheck.txt" 2>&1
  echo "memcheck exit code $?: $(grep -E 'ERROR SUMMARY' "$logs/memcheck.txt" | tail -n 1)"
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  scripts/bench_lenet_gpu.sh "$run crema" > "$logs/bench.txt" 2> "$logs/bench_detail.txt"
  cat "$logs/bench.txt"
fi
if [ "$what" = all ] || [ "$what" = train ]; then
  $run crema train $lenet --device cuda:0 "${paths[@]}" --out "$logs/run_gpu" > "$logs/train_gpu.txt" 2>&1
  tail -n 3 "$logs/train_gpu.txt"
  for device in cpu cuda:0; do
    $run crema train $lenet --device $device "${paths[@]}" --set ++solver.max_iter=100 \
      --set solver.display=1 --set solver.test_interval=0 --out "$logs/first100_${device%%:*}" \
      > "$logs/first100_${device%%:*}.txt" 2>&1
  done
  paste <(grep '^iter' "$logs/first100_cpu.txt" | awk '{print $4}') \
        <(grep '^iter' "$logs/first100_cuda.txt" | awk '{print $4}') |
    awk '{d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d; n++}
         END {printf "CPU vs GPU, first %d iterations: largest relative loss difference %.2e\n", n, m}'
  python3 scripts/bench/pytorch_lenet_divergence.py "$data" | tee "$logs/pytorch_divergence.txt"
  for k in 1 2; do
    $run crema train $lenet --device cuda:0 "${paths[@]}" --set ++solver.max_iter=1000 \
      --set solver.display=1 --set solver.test_interval=0 --out "$logs/repeat$k" > "$logs/repeat$k.txt" 2>&1
  done
  if cmp -s <(grep '^iter' "$logs/repeat1.txt" | awk '{print $4}') \
            <(grep '^iter' "$logs/repeat2.txt" | awk '{print $4}') &&
     cmp -s "$logs/repeat1/final.safetensors" "$logs/repeat2/final.safetensors"; then
    echo "two GPU runs, same seed, 1000 iterations: identical losses and bit-identical weights"
  else
    echo "two GPU runs, same seed, 1000 iterations: THEY DIFFER"
  fi
fi
if [ "$what" = all ] || [ "$what" = nets ]; then
  for net in vggbn resnet; do
    $run crema train configs/${net}_fashion_mnist.yaml --device cuda:0 "${paths[@]}" \
      --out "$logs/run_$net" > "$logs/train_$net.txt" 2>&1
    echo "$net: $(grep -E 'final test|data wait|img/s' "$logs/train_$net.txt" | tail -n 3 | tr '\n' ' ')"
  done
fi
if [ "$what" = all ] || [ "$what" = rnn ]; then
  $run crema bench rnn > "$logs/bench_rnn.txt" 2>&1
  python3 scripts/bench/peer_rnn.py > "$logs/peer_rnn.txt" 2>&1
  cat "$logs/bench_rnn.txt" "$logs/peer_rnn.txt"
  $run crema train configs/lstm_fashion_mnist.yaml --device cuda:0 "${paths[@]}" \
    --out "$logs/run_lstm" > "$logs/train_lstm.txt" 2>&1
  echo "lstm: $(grep -E 'final test|data wait|img/s' "$logs/train_lstm.txt" | tail -n 3 | tr '\n' ' ')"
  $run crema time configs/lstm_fashion_mnist.yaml --device cuda:0 --iterations 200 \
    > "$logs/time_lstm.txt" 2>&1
  grep -E '^training step' "$logs/time_lstm.txt"
fi
if [ "$what" = all ] || [ "$what" = speed ]; then
  python3 scripts/bench/compare_cudnn.py --crema "$run crema" --peer .gpu/peer_cudnn.py \
    --out "$logs/compare" > "$logs/compare.txt" 2>&1
  tail -n 40 "$logs/compare.txt"
  # GEMM 8192^3 in every layout, each math's production version at that size, beside cuBLAS.
  layouts=(--shape 8192,8192,8192 --shape 8192,8192,8192,NT --shape 8192,8192,8192,TN
           --shape 8192,8192,8192,TT)
  for mv in fp32:ffma_tuned tf32:wgmma_repacked bf16:wgmma_repacked; do
    $run crema bench gemm --math "${mv%%:*}" --version "${mv#*:}" --warmup 3 --repeats 10 \
      "${layouts[@]}" 2>&1 | grep -v '^device'
  done > "$logs/gemm_layouts.txt"
  python3 scripts/bench/peer_gemm.py > "$logs/peer_gemm.txt" 2>&1
  cat "$logs/gemm_layouts.txt" "$logs/peer_gemm.txt"
  for spec in "configs/vggbn_fashion_mnist.yaml --set data.train.batch_size=256" \
              "scripts/bench/resnet18_32x32.yaml" \
              "scripts/bench/resnet18_32x32.yaml --set +model.math=tf32"; do
    # shellcheck disable=SC2086
    $run crema time $spec --device cuda:0 --iterations 50 > "$logs/time_step.txt" 2>&1
    echo "$spec: $(grep -E '^training step' "$logs/time_step.txt" | tr '\n' ' ')"
  done
fi
