#!/usr/bin/env bash
# The data loader's throughput (README.md, data/README.md): decoded and augmented images per
# second for several worker counts, on Fashion-MNIST as 28 x 28 PNG files, as JPEG files written
# from them, and from the IDX files in memory for comparison. The image folders are exported
# into runs/datasets/ first when missing.
#
#   scripts/bench_loader.sh [WORKERS] [BATCHES]   WORKERS: e.g. 1,2,8 (default 1,2,N with N the
#                                                 number of cores, 4 on a machine of 2 or fewer)
#
# Environment: CREMA (default build/bin/crema), FMNIST (default /usr/share/datasets/fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/.."
read -ra crema <<< "${CREMA:-build/bin/crema}"
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
cores=$(nproc)
workers=${1:-1,2,$([ "$cores" -gt 2 ] && echo "$cores" || echo 4)}
batches=${2:-300}
names=tshirt_top,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,ankle_boot
png=runs/datasets/fashion_mnist_png/train
jpg=runs/datasets/fashion_mnist_jpg/train

if [ ! -d "$png" ]; then
  "${crema[@]}" export-images --images "$fmnist/train-images-idx3-ubyte.gz" \
    --labels "$fmnist/train-labels-idx1-ubyte.gz" --class-names "$names" --out "$png"
fi
if [ ! -d "$jpg" ]; then
  "${crema[@]}" export-images configs/lenet_fashion_mnist_png.yaml --split train --format jpg \
    --quality 95 --out "$jpg"
fi

# The augmentation of a typical small-image recipe, applied to every sample.
augment='data.train.transform=[{random_crop: {size: 28, padding: 2}}, horizontal_flip, {scale: 0.00390625}]'
echo "== PNG files ($png)"
"${crema[@]}" bench-loader configs/lenet_fashion_mnist_png.yaml --workers "$workers" \
  --batches "$batches" --set "$augment"
echo "== JPEG files ($jpg, quality 95)"
"${crema[@]}" bench-loader configs/lenet_fashion_mnist_png.yaml --workers "$workers" \
  --batches "$batches" --set "$augment" --set "data.train.source.root=$jpg"
echo "== IDX, decoded in memory"
"${crema[@]}" bench-loader configs/lenet_fashion_mnist.yaml --workers "$workers" \
  --batches "$batches" --set "$augment"
