#!/usr/bin/env bash
# Issue 23's photo benchmark of the loader alone: JPEGs of about 500 x 375 (quality 90, made by
# make_photo_jpegs.py into runs/datasets/photo_jpegs when missing) through random_resized_crop 224
# + flip + normalize, batch 64 (photo_loader.yaml), decoded with reduced decoding on and off.
#
#   scripts/bench/photo_loader.sh [WORKERS] [BATCHES] [RUNS]     (default 1,2  30  3)
#
# Environment: CREMA (default build/bin/crema); MODES (default "true false": the values of
# data.train.reduced_decoding to time; "default" sets nothing, for a crema built before the key
# existed, e.g. the stb_image decoder).
set -euo pipefail
cd "$(dirname "$0")/../.."
read -ra crema <<< "${CREMA:-build/bin/crema}"
workers=${1:-1,2}
batches=${2:-30}
runs=${3:-3}
data=runs/datasets/photo_jpegs
[ -d "$data" ] || /usr/bin/python3 scripts/bench/make_photo_jpegs.py "$data"
for mode in ${MODES:-true false}; do
  set_mode=()
  [ "$mode" = default ] || set_mode=(--set "+data.train.reduced_decoding=$mode")
  for run in $(seq "$runs"); do
    echo "== reduced_decoding: $mode, run $run"
    "${crema[@]}" bench-loader scripts/bench/photo_loader.yaml --workers "$workers" \
      --batches "$batches" --set "data.train.source.root=$data" "${set_mode[@]}"
  done
done
