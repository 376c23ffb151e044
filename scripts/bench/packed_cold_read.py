#!/usr/bin/env python3
"""The reading half of the loader, cold: how fast an image folder's files and the same samples in
its packed form (`crema pack FOLDER PACKED`) come off the disk, bytes only, no decoding. Before
each run every file's cached pages are dropped (posix_fadvise DONTNEED on the files themselves: no
root, nothing else evicted); then the samples are read in batches of 64, shuffled (or in sample
order with --sequential): the folder a file at a time (open, read, close), the packed form with
one pread per sample, with and without handing each batch's ranges to the kernel first
(posix_fadvise WILLNEED, what data/packed.cpp's will_read does).

    /usr/bin/python3 scripts/bench/packed_cold_read.py FOLDER PACKED [--sequential] [--runs 3]

Standard library only; reads index.crema as data/packed_index.h describes it.
"""
import argparse
import os
import random
import struct
import time


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def read_index(path):
    """[(shard, offset, length)] per sample."""
    data = open(path, "rb").read()
    _, shards, samples, classes, _ = struct.unpack_from("<IIQII", data, 8)
    at = 32 + 8 * shards
    for _ in range(classes):
        at += 4 + struct.unpack_from("<I", data, at)[0]
    records = []
    for _ in range(samples):
        shard, _, offset, length, _, _, _, path_length = struct.unpack_from("<IIQIIIII", data, at)
        records.append((shard, offset, length))
        at += 36 + path_length
    return records


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("packed")
    parser.add_argument("--sequential", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(args.folder) for f in names)
    records = read_index(os.path.join(args.packed, "index.crema"))
    shards = sorted(os.path.join(args.packed, f) for f in os.listdir(args.packed)
                    if f.startswith("shard-"))
    assert len(files) == len(records), "the packed form holds other samples than the folder"
    order = list(range(len(files)))
    if not args.sequential:
        random.Random(1).shuffle(order)
    batches = [order[b:b + 64] for b in range(0, len(order), 64)]

    def folder():
        for batch in batches:
            for i in batch:
                with open(files[i], "rb") as f:
                    f.read()

    def packed(hint):
        fds = [os.open(s, os.O_RDONLY) for s in shards]
        for batch in batches:
            if hint:  # neighbours in a shard merged into one range, as will_read merges them
                ranges = []
                for i in batch:
                    shard, offset, length = records[i]
                    if ranges and ranges[-1][0] == shard and ranges[-1][2] == offset:
                        ranges[-1][2] += length
                    else:
                        ranges.append([shard, offset, offset + length])
                for shard, begin, end in ranges:
                    os.posix_fadvise(fds[shard], begin, end - begin, os.POSIX_FADV_WILLNEED)
            for i in batch:
                shard, offset, length = records[i]
                os.pread(fds[shard], length, offset)
        for fd in fds:
            os.close(fd)

    modes = {"folder": folder, "packed": lambda: packed(False),
             "packed+will_read": lambda: packed(True)}
    print(f"{len(files)} samples, {'in order' if args.sequential else 'shuffled'}, cold")
    for run in range(args.runs):
        for name, read in modes.items():
            for path in files + shards:
                drop_cache(path)
            start = time.perf_counter()
            read()
            seconds = time.perf_counter() - start
            print(f"run {run + 1}  {name:17s} {seconds * 1e3:8.1f} ms {len(files) / seconds:9.0f} samples/s")


if __name__ == "__main__":
    main()
