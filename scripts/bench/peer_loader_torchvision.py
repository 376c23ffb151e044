#!/usr/bin/env python3
"""torchvision's peer of `crema bench-loader` (issue 23): the plain PyTorch input pipeline most
people run, on the same image folder and with the same transforms as scripts/bench/photo_loader.yaml:

    ImageFolder (PIL decoding) -> RandomResizedCrop(224) -> RandomHorizontalFlip()
      -> ToTensor() -> Normalize(imagenet mean, std), DataLoader(batch 64, shuffle, drop_last)

For each worker count (DataLoader's num_workers; 0 decodes in the main process) the loader is
started, one batch is taken untimed (the workers start and fill their prefetch queues, as crema's
bench-loader takes one untimed batch), then BATCHES batches are taken back to back; images/s is
the images of those batches over their wall time. With RUNS > 1 each count is timed RUNS times
and the median is reported. The last line, `median img/s: W=R ...`, is what photo_loader.sh reads.

    /usr/bin/python3 scripts/bench/peer_loader_torchvision.py FOLDER [--workers 1,2]
        [--batches 30] [--runs 3] [--batch-size 64] [--size 224]

Needs Debian's python3-torch and python3-torchvision (0.14 here), which bring PIL.
"""
import argparse
import statistics
import time

import torch
import torchvision
from torchvision import transforms

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def images_per_second(folder, size, batch_size, workers, batches, seed):
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(size),  # bilinear, antialiased (PIL)
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    dataset = torchvision.datasets.ImageFolder(folder, transform=pipeline)
    if len(dataset) < (batches + 1) * batch_size:
        raise SystemExit(f"{folder}: {len(dataset)} images, fewer than the {batches + 1} "
                         f"batches of {batch_size} asked for")
    generator = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                         drop_last=True, num_workers=workers,
                                         generator=generator)
    stream = iter(loader)
    next(stream)  # untimed: starts the workers
    images = 0
    start = time.perf_counter()
    for _ in range(batches):
        data, _ = next(stream)
        images += data.shape[0]
    seconds = time.perf_counter() - start
    del stream
    return images / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the main process only receives batches, as crema's consumer
    counts = [int(w) for w in args.workers.split(",")]
    print(f"torchvision {torchvision.__version__} DataLoader + PIL on {args.folder}: "
          f"RandomResizedCrop({args.size}) + flip + ToTensor + Normalize, batch "
          f"{args.batch_size}, {args.batches} batches timed, {args.runs} run(s)", flush=True)
    print(f"{'workers':>8} {'images/s':>12}  (runs)", flush=True)
    medians = []
    for workers in counts:
        rates = [images_per_second(args.folder, args.size, args.batch_size, workers,
                                   args.batches, seed=run) for run in range(args.runs)]
        medians.append(statistics.median(rates))
        print(f"{workers:>8} {medians[-1]:>12.0f}  ({', '.join(f'{r:.0f}' for r in rates)})",
              flush=True)
    print("median img/s: " + " ".join(f"{w}={r:.1f}" for w, r in zip(counts, medians)))


if __name__ == "__main__":
    main()
