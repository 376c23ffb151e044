#!/usr/bin/env bash
# LeNet on Fashion-MNIST, batch 64, on the CPU: crema beside PyTorch (Debian's python3-torch) with
# the same recipe and the same number of threads, in one run. Prints images/s and the ratio.
#   scripts/bench_lenet_cpu.sh [EPOCHS=1] [THREADS=all cores]     (BUILD_DIR picks the build, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-1}
threads=${2:-$(nproc)}
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q && $sudo apt-get install -y -q python3-torch
}
build=${BUILD_DIR:-build}
[ -x "$build/bin/crema" ] || scripts/setup.sh

iters=$((epochs * 60000 / 64))
crema_log=$(mktemp)
"$build/bin/crema" train configs/lenet_fashion_mnist.yaml --threads "$threads" --out "$(mktemp -d)" \
  --set ++solver.max_iter="$iters" --set solver.test_interval=0 --set solver.display=200 | tee "$crema_log"
crema_ips=$(sed -n 's/^trained .*: \([0-9.]*\) img\/s.*/\1/p' "$crema_log")

torch_log=$(mktemp)
/usr/bin/python3 scripts/bench/pytorch_lenet_cpu.py "$epochs" "$threads" | tee "$torch_log"
torch_ips=$(awk '{gsub(/[()]/, "", $5); sum += $5; n++} END {printf "%.0f", sum / n}' "$torch_log")

echo
echo "LeNet batch 64, $threads thread(s), $epochs epoch(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
printf "crema    %8.0f img/s\n" "$crema_ips"
printf "pytorch  %8.0f img/s\n" "$torch_ips"
awk -v a="$crema_ips" -v b="$torch_ips" 'BEGIN {printf "ratio    %8.2fx (crema / pytorch)\n", a / b}'
