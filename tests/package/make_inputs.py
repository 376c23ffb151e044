#!/usr/bin/env python3
"""Writes tiny_net.yaml's weights (safetensors, values from a formula) and two 8 x 8 grey images
(PGM) into OUT, for package_test.sh. Standard library only.

    python3 tests/package/make_inputs.py OUT
"""
import json
import pathlib
import struct
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
shapes = {"conv1.weight": [4, 1, 3, 3], "conv1.bias": [4], "ip1.weight": [3, 64], "ip1.bias": [3]}
header, data = {}, b""
for index, (name, shape) in enumerate(shapes.items()):
    count = 1
    for d in shape:
        count *= d
    values = [((i * 37 + index * 11) % 23 - 11) / 16.0 for i in range(count)]
    blob = struct.pack("<%df" % count, *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header).encode()
(out / "tiny_net.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + data)
for k in range(2):
    pixels = bytes((x * 29 + y * 13 + k * 101) % 256 for y in range(8) for x in range(8))
    (out / ("image%d.pgm" % k)).write_bytes(b"P5\n8 8\n255\n" + pixels)
