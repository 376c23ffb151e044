#!/usr/bin/env bash
# Issue 23's last bar, on one GPU: ResNet-50 at 224 trained from a folder of JPEG files waits on
# data at most 3% of the time. Trains configs/zoo/resnet50_finetune.yaml (batch 128, STEPS steps,
# from scratch) on the photo JPEG set twice, with data.train.decode: cpu and: gpu, and prints for
# each the share of time the GPU's training stream stalled for data (apps/training/data_wait.h:
# CUDA events around the stream's waits; the last display window's and the whole run's), the
# host's time blocked in the loader (the old, wrong measure on a GPU), img/s, beside `crema time`
# of the same net on random data (the step with no loader at all). One command, for one device
# call: the JPEGs are made when missing.
#
#   scripts/bench/r50_jpeg_wait.sh [PRECISION] [STEPS]          (default tf32 60)
#
# PRECISION: model.precision, fp32, tf32, bf16 or fp16 (configs/README.md: bf16 and fp16 store
# activations in 16 bits, channels-last on a GPU). Environment: CREMA (default
# build/bin/crema); DATA (the JPEG folder, default runs/datasets/photo_jpegs_r50, made by
# make_photo_jpegs.py when missing: COUNT images, default 4000, in 10 classes; where scikit-image
# is missing set CREMA_PHOTO_SOURCES to the folder `make_photo_jpegs.py --export-sources` wrote);
# CPU_WORKERS (decode: cpu, default the cores less 2), GPU_WORKERS (decode: gpu, default 2:
# each worker makes its own nvJPEG handle, 0.5-1 s that nvJPEG serializes, before its first batch);
# DECODES (default "cpu gpu": which runs to make);
# LOADER=1 also times the loader alone (`crema bench-loader --decode gpu`) at 4 and 8 workers
# over 200 and 2000 batches of 64, to tell a start-up cost inside a short timed window from a
# steady slowdown with more workers. Logs stay in WORK (default /tmp/crema_r50_jpeg_wait).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PRECISION=${1:-tf32}
STEPS=${2:-60}
CREMA=${CREMA:-$ROOT/build/bin/crema}
DATA=${DATA:-$ROOT/runs/datasets/photo_jpegs_r50}
WORK=${WORK:-/tmp/crema_r50_jpeg_wait}
CPU_WORKERS=${CPU_WORKERS:-$(($(nproc) > 3 ? $(nproc) - 2 : 1))}
GPU_WORKERS=${GPU_WORKERS:-2}
case $PRECISION in
  fp32 | tf32 | bf16 | fp16) precision=(--set "++model.precision=$PRECISION") ;;
  *) echo "PRECISION must be fp32, tf32, bf16 or fp16, got '$PRECISION'" >&2; exit 2 ;;
esac
mkdir -p "$WORK"
if [ ! -d "$DATA" ]; then  # with a python that has PIL and numpy: Debian's, else the first
  python=python3
  /usr/bin/python3 -c "import numpy, PIL" 2> /dev/null && python=/usr/bin/python3
  "$python" "$ROOT/scripts/bench/make_photo_jpegs.py" "$DATA" "${COUNT:-4000}" 10
fi

cat > "$WORK/r50_jpeg.yaml" <<YAML
_base_: $ROOT/configs/zoo/resnet50_finetune.yaml
data:
  _replace_: true
  train:
    source: {format: image_folder, root: $DATA, channels: 3}
    batch_size: 128
    shuffle: true
    transform: [{random_resized_crop: 224}, {horizontal_flip: 0.5}, {scale: 0.00392157},
                {normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}]
    workers: $CPU_WORKERS
solver: {max_iter: $STEPS, display: 20, test_interval: 0}
YAML

# "decode  workers  img/s (run)  img/s (last window)  stall % (run)  stall % (last window)
#  host in loader %": from the display lines' "N img/s" and "data wait N%", and the last line's
# "N img/s, the GPU stalled on data N% of the time (the host waited in the loader N%)".
train() {  # decode workers
  local log=$WORK/train_$1.log
  if ! "$CREMA" train "$WORK/r50_jpeg.yaml" --device cuda:0 --out "$WORK/run_$1" "${precision[@]}" \
      --set "++data.train.decode=$1" --set "data.train.workers=$2" > "$log" 2>&1; then
    echo "crema train (decode $1) failed; the end of $log:" >&2
    tail -5 "$log" >&2
    return
  fi
  awk -v decode="$1" -v workers="$2" '
    /^iter .* img\/s/ { for (i = 1; i <= NF; ++i) {
                          if ($(i + 1) == "img/s") window_rate = $i
                          if ($i == "wait") { window_stall = $(i + 1); sub("%", "", window_stall) } } }
    /^trained .* iterations/ { run_rate = $4
                               for (i = 1; i <= NF; ++i) {
                                 if ($i == "data" && $(i - 1) == "on") { run_stall = $(i + 1); sub("%", "", run_stall) }
                                 if ($i == "loader") { host = $(i + 1); sub("%.*", "", host) } } }
    END { printf "%-7s %8d %12.0f %12.0f %12.1f %12.1f %12.1f\n", decode, workers, run_rate,
          window_rate, run_stall, window_stall, host }' "$log"
}

echo "ResNet-50 224, batch 128, $STEPS steps, $PRECISION; $(ls "$DATA"/*/ | grep -c jpg) JPEGs in $DATA"
printf "%-7s %8s %12s %12s %12s %12s %12s\n" decode workers "img/s run" "img/s last" \
  "stall% run" "stall% last" "host wait%"
for decode in ${DECODES:-cpu gpu}; do
  if [ "$decode" = cpu ]; then train cpu "$CPU_WORKERS"; else train gpu "$GPU_WORKERS"; fi
done
"$CREMA" time "$WORK/r50_jpeg.yaml" --device cuda:0 --iterations 20 "${precision[@]}" \
  > "$WORK/time.log" 2>&1 || { tail -5 "$WORK/time.log" >&2; }
grep "^training step" "$WORK/time.log" | sed 's/^/random data, crema time: /'
grep -h "decode: gpu on" "$WORK"/train_gpu.log || true

if [ "${LOADER:-0}" = 1 ]; then
  echo "the loader alone, decode: gpu, batch 64 (scripts/bench/photo_loader.yaml)"
  for batches in 200 2000; do
    echo "$batches batches:"
    "$CREMA" bench-loader "$ROOT/scripts/bench/photo_loader.yaml" --decode gpu --workers 4,8 \
      --batches "$batches" --set "data.train.source.root=$DATA" 2>&1 | grep -E "^ +[0-9]+ "
  done
fi
