#!/usr/bin/env bash
# Issue 23's photo benchmark of the loader alone, crema beside torchvision on the same files:
# 2000 ImageNet-like JPEGs (make_photo_jpegs.py: scikit-image's sample photographs cropped,
# scaled and colour-shifted to 300..600 px sides, quality 75..95; made into
# runs/datasets/photo_jpegs when missing) through random_resized_crop 224 + flip + normalize,
# batch 64 (photo_loader.yaml), against torchvision's DataLoader + PIL with the same transforms
# (peer_loader_torchvision.py). Each run times crema then torchvision, one after the other, so
# both see the same load on a shared machine; the summary gives the median of the runs per
# worker count and crema's ratio.
#
#   scripts/bench/photo_loader.sh [WORKERS] [BATCHES] [RUNS]     (default 1,2  30  3)
#
# Environment: CREMA (default build/bin/crema); MODES (default "true": the values of
# data.train.reduced_decoding to time, e.g. "true false"; "default" sets nothing, for a crema
# built before the key existed; "gpu": decode: gpu, nvJPEG and CUDA kernels on GPU 0, for a crema
# built with nvJPEG: MODES="true gpu" times both); PEER=0 leaves torchvision out. Installs python3-skimage (the
# photographs) and python3-torchvision (the peer) when missing, through scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
read -ra crema <<< "${CREMA:-build/bin/crema}"
workers=${1:-1,2}
batches=${2:-30}
runs=${3:-3}
peer=${PEER:-1}
data=runs/datasets/photo_jpegs
needed=(python3-skimage python3-pil python3-numpy)
[ "$peer" = 0 ] || needed+=(python3-torchvision)
scripts/setup.sh --packages-only "${needed[@]}" > /dev/null
[ -d "$data" ] || /usr/bin/python3 scripts/bench/make_photo_jpegs.py "$data"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for run in $(seq "$runs"); do
  for mode in ${MODES:-true}; do
    case $mode in
      default) set_mode=() ;;
      gpu) set_mode=(--decode gpu) ;;
      *) set_mode=(--set "+data.train.reduced_decoding=$mode") ;;
    esac
    echo "== run $run: crema, mode $mode (reduced_decoding, or gpu)"
    out=$("${crema[@]}" bench-loader scripts/bench/photo_loader.yaml --workers "$workers" \
      --batches "$batches" --set "data.train.source.root=$data" "${set_mode[@]}")
    echo "$out"
    awk -v mode="$mode" '$1 ~ /^[0-9]+$/ { print "crema(" mode ")", $1, $2 }' <<< "$out" >> "$log"
  done
  if [ "$peer" != 0 ]; then
    echo "== run $run: torchvision"
    out=$(/usr/bin/python3 scripts/bench/peer_loader_torchvision.py "$data" --workers "$workers" \
      --batches "$batches" --runs 1)
    echo "$out"
    awk '$1 ~ /^[0-9]+$/ { print "torchvision", $1, $2 }' <<< "$out" >> "$log"
  fi
done
/usr/bin/python3 - "$log" <<'EOF'
import collections, statistics, sys
rates = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, workers, rate = line.split()
    rates[who, int(workers)].append(float(rate))
who_list = sorted({who for who, _ in rates}, key=lambda w: w == "torchvision")
print("\nimages/s, median of runs (decode + augment + batch; photo_loader.yaml)")
print(f"{'workers':>8} " + " ".join(f"{w:>20}" for w in who_list) +
      ("  crema / torchvision" if "torchvision" in who_list else ""))
for n in sorted({n for _, n in rates}):
    medians = {w: statistics.median(rates[w, n]) for w in who_list if (w, n) in rates}
    ratio = ""
    if "torchvision" in medians:
        ratio = "  " + " ".join(f"{medians[w] / medians['torchvision']:.2f}x"
                                for w in who_list if w != "torchvision" and w in medians)
    print(f"{n:>8} " + " ".join(f"{medians.get(w, float('nan')):>20.0f}" for w in who_list) + ratio)
EOF
