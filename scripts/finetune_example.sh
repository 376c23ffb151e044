#!/usr/bin/env bash
# The fine-tuning example of README.md: a LeNet pretrained on the seven Fashion-MNIST classes that
# are not footwear, fine-tuned to sandal / sneaker / ankle boot from 300 PNG files (100 per
# class), beside the same net trained from scratch on the same files. Prints both accuracies on
# the 3,000 footwear images of the test set.
#
#   scripts/finetune_example.sh [DEVICE]          DEVICE: cpu (default) or cuda:N
#
# Environment: CREMA, the crema command (default build/bin/crema; e.g. ".gpu/run crema" for a
# bundle); FMNIST, the folder of the Fashion-MNIST IDX files (default
# /usr/share/datasets/fashion-mnist, where the configs read the test set). Runs go to runs/.
set -euo pipefail
cd "$(dirname "$0")/.."
device=${1:-cpu}
read -ra crema <<< "${CREMA:-build/bin/crema}"
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
names=tshirt_top,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,ankle_boot
footwear=runs/datasets/footwear_png/train

if [ ! -d "$footwear" ]; then
  "${crema[@]}" export-images --images "$fmnist/train-images-idx3-ubyte.gz" \
    --labels "$fmnist/train-labels-idx1-ubyte.gz" --classes 5,7,9 --per-class 100 \
    --class-names "$names" --out "$footwear"
fi

# Each run's last line "final test: accuracy=A loss=L"; prints the run's log as it goes.
train() {
  local log
  log=$(mktemp)
  "${crema[@]}" train "$@" --device "$device" | tee "$log" >&2
  grep '^final test:' "$log" | sed 's/.*accuracy=\([0-9.]*\).*/\1/'
  rm -f "$log"
}

echo "== 1/3 pretraining on the 7 non-footwear classes" >&2
pretrain=$(train configs/finetune_footwear_pretrain.yaml --out runs/finetune_footwear_pretrain)
echo "== 2/3 fine-tuning to the 3 footwear classes from 300 images" >&2
finetuned=$(train configs/finetune_footwear.yaml --out runs/finetune_footwear \
  --weights runs/finetune_footwear_pretrain/final.safetensors)
echo "== 3/3 the same net from scratch on the same 300 images" >&2
scratch=$(train configs/footwear_scratch.yaml --out runs/footwear_scratch)

echo "pretrained net, 7 non-footwear classes (7,000 test images): accuracy $pretrain"
echo "footwear, 3,000 test images: fine-tuned $finetuned, from scratch $scratch"
awk -v f="$finetuned" -v s="$scratch" \
  'BEGIN { printf "fine-tuning gains %.2f points of test accuracy\n", 100 * (f - s) }'
