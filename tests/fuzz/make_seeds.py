#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into corpus/<target>/: small valid files of each
format (a few hundred bytes to 3 KB; no dataset), so the fuzzer starts from inputs crema accepts
and mutates its way into the error paths. Run from anywhere with any python3 (standard library
only): python3 tests/fuzz/make_seeds.py. The files are committed; rerunning rewrites them the same."""
import base64
import gzip
import json
import pathlib
import struct
import zlib

corpus = pathlib.Path(__file__).resolve().parent / "corpus"
repo = corpus.parent.parent.parent


def put(target, name, data):
    folder = corpus / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data.encode() if isinstance(data, str) else data)


# safetensors: 8-byte little-endian header length, the JSON header padded with spaces to a
# multiple of 8, the data.
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


put("safetensors", "two_f32.safetensors", safetensors({
    "conv1.weight": ("F32", [2, 1, 2, 2], struct.pack("<8f", *[0.5 * i for i in range(8)])),
    "conv1.bias": ("F32", [2], struct.pack("<2f", 1.0, -1.0))}))
put("safetensors", "f64_i64_meta.safetensors", safetensors({
    "bn1.running_mean": ("F64", [3], struct.pack("<3d", 0.25, 0.5, 0.75)),
    "bn1.num_batches_tracked": ("I64", [], struct.pack("<q", 7))}, {"format": "pt"}))
put("safetensors", "empty_tensor.safetensors", safetensors({"empty": ("F32", [0, 3], b"")}))
put("safetensors", "f16_bf16.safetensors", safetensors({
    "h": ("F16", [2], struct.pack("<2H", 0x3c00, 0x8001)),
    "b": ("BF16", [2], struct.pack("<2H", 0x3f80, 0xc0a0))}))

# pth: torch.save's zip (stored entries, a protocol-2 pickle, raw storages), as written by
# tests/fixtures/make_pth_fixtures.py with torch: a state_dict with a transposed view and an int64
# scalar, the same in bfloat16, and one nested under 'model' with 'module.' prefixes.
for name in ("tiny_f32.pth", "tiny_bf16.pth", "nested.pth"):
    put("pth", name, (repo / "tests" / "fixtures" / "pth" / name).read_bytes())


# IDX: 0x00 0x00, type 0x08 (uint8), D, D big-endian uint32 extents, the bytes.
def idx(dims, values):
    return bytes([0, 0, 8, len(dims)]) + struct.pack(">%dI" % len(dims), *dims) + bytes(values)


images = idx([2, 3, 4], range(24))
put("idx", "images_2x3x4.idx", images)
put("idx", "labels_5.idx", idx([5], [0, 1, 2, 3, 9]))
put("idx", "images_2x3x4.idx.gz", gzip.compress(images, mtime=0))

# CIFAR: records of label byte(s) then 3072 planar pixel bytes.
pixels = bytes((7 * i) % 256 for i in range(3072))
put("cifar", "cifar10_one_record.bin", bytes([3]) + pixels)
put("cifar", "cifar100_one_record.bin", bytes([4, 42]) + pixels)

# Configs: crema's smallest shipped config, and one with every kind of YAML node crema reads.
put("config", "lenet_fashion_mnist.yaml", (repo / "configs" / "lenet_fashion_mnist.yaml").read_text())
put("config", "shapes.yaml", """name: shapes  # a comment
seed: 7
model:
  layers:
    - {name: data, type: Input, top: [data, label], shape: [2, 1, 8, 8]}
    - name: conv1
      type: Convolution
      bottom: data
      top: conv1
      num_output: 4
      kernel_size: 3
      weight_filler: {type: gaussian, std: 0.01}
solver: {type: SGD, base_lr: 1e-2, momentum: 0.9, max_iter: 10, nesterov: true}
list: [1, -2, 3.5, "four", null, ~, yes]
""")
put("config", "base.yaml", "_base_: [missing_a.yaml, missing_b.yaml]\nsolver:\n  base_lr: 0.1\n")

# --set overrides, one a line, on the target's own base config.
put("config_set", "set_scalars", "solver.base_lr=0.5\nname=other\n")
put("config_set", "set_by_name_and_index", "model.layers.conv1.num_output=8\nmodel.layers.2.num_output=[3]\n")
put("config_set", "add_and_replace", "+solver.momentum=0.9\n++solver={type: Adam, base_lr: 0.001}\n")

# state.json as crema writes it (apps/training/checkpoint.cpp, state_to_json).
state = {"format": 1, "iteration": 500,
         "data": {"position": 500, "epoch": 0, "index_in_epoch": 500, "batch_size": 64,
                  "batches_per_epoch": 938, "iter_size": 1, "seed": 1},
         "rng": "1 2 3 4", "loss_window": {"sum": 12.5, "iterations": 20, "images": 1280},
         "test_pending": False, "best": None, "solver_type": "SGD",
         "model": "layers:\n  - {name: data, type: Input}\n"}
put("checkpoint_state", "state.json", json.dumps(state, indent=2) + "\n")
state["best"] = {"metric": "accuracy", "mode": "max", "value": 0.875, "iteration": 400,
                 "checkpoint": "iter_000400"}
put("checkpoint_state", "state_with_best.json", json.dumps(state, indent=2) + "\n")
# A count written as a float too large for int64: once undefined behaviour (a CI fuzz run found
# it), now refused by name.
state["iteration"] = 5.11111e22
put("checkpoint_state", "float_iteration.json", json.dumps(state, indent=2) + "\n")


# Images: a 3 x 2 PNG (RGB and grayscale), BMP, PGM and PPM.
def png(width, height, color_type, rows):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\x00" + row for row in rows)
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


put("image", "rgb_3x2.png", png(3, 2, 2, [bytes(range(9)), bytes(range(100, 109))]))
put("image", "gray_3x2.png", png(3, 2, 0, [b"\x00\x80\xff", b"\x10\x20\x30"]))
bmp_rows = b"".join(bytes(range(r * 9, r * 9 + 9)) + b"\x00" * 3 for r in range(2))  # rows padded to 4
put("image", "rgb_3x2.bmp", b"BM" + struct.pack("<IHHI", 54 + len(bmp_rows), 0, 0, 54) +
    struct.pack("<IiiHHIIiiII", 40, 3, 2, 1, 24, 0, len(bmp_rows), 2835, 2835, 0, 0) + bmp_rows)
put("image", "gray_3x2.pgm", b"P5 3 2 255\n" + bytes([0, 50, 100, 150, 200, 250]))
put("image", "rgb_2x2.ppm", b"P6\n2 2\n255\n" + bytes(range(12)))
# JPEGs (libjpeg-turbo's path): an 8 x 8 gray baseline, a 16 x 16 RGB progressive one (4:2:0),
# an 8 x 8 Adobe CMYK. Made once with PIL 9.4 (python3-pil; Image.save(..., "JPEG", quality=75
# or 80, optimize=True, progressive for the second) and kept here, so that this script needs the
# standard library only.
put("image", "gray_8x8.jpg", base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwc"
    "KDcpLDAxNDQ0Hyc5PTgyPC4zNDL/wAALCAAIAAgBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAAAv/EABwQAAMBAAIDAAAA"
    "AAAAAAAAAAECAwQRIQAHEv/aAAgBAQAAPwAeq8McuddGh5xhJPulKMFVFA5JJPQAHfPn/9k="))
put("image", "rgb_16x16_progressive.jpg", base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYW"
    "ICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgo"
    "KCgoKCgoKCgoKCgoKCgoKCgoKCj/wgARCAAQABADASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAABQb/xAAVAQEB"
    "AAAAAAAAAAAAAAAAAAABAv/aAAwDAQACEAMQAAABjXGHKP/EABYQAAMAAAAAAAAAAAAAAAAAAAADBP/aAAgBAQABBQJM"
    "4mcTOJnP/8QAFREBAQAAAAAAAAAAAAAAAAAABQD/2gAIAQMBAT8BNSv/xAAWEQADAAAAAAAAAAAAAAAAAAAAAgP/2gAI"
    "AQIBAT8Bmx//xAAUEAEAAAAAAAAAAAAAAAAAAAAg/9oACAEBAAY/Ah//xAAWEAADAAAAAAAAAAAAAAAAAAAAITH/2gAI"
    "AQEAAT8hiiKIoij/2gAMAwEAAgADAAAAEFf/xAAWEQADAAAAAAAAAAAAAAAAAAAAITH/2gAIAQMBAT8Qgz//xAAUEQEA"
    "AAAAAAAAAAAAAAAAAAAA/9oACAECAQE/ED//xAAVEAEBAAAAAAAAAAAAAAAAAAAA8f/aAAgBAQABPxCampqa/9k="))
put("image", "cmyk_8x8_adobe.jpg", base64.b64decode(
    "/9j/7gAOQWRvYmUAZAAAAAAA/9sAQwAIBgYHBgUIBwcHCQkICgwUDQwLCwwZEhMPFB0aHx4dGhwcICQuJyAiLCMcHCg3"
    "KSwwMTQ0NB8nOT04MjwuMzQy/8AAFAgACAAIBEMRAE0RAFkRAEsRAP/EABYAAQEBAAAAAAAAAAAAAAAAAAUGB//EAB0Q"
    "AAECBwAAAAAAAAAAAAAAAAAFBxciMkNkgaH/2gAOBEMATQBZAEsAAD8AWdu/sWi3kdNDLleXqpz/2Q=="))


# Packed dataset indexes (data/packed_index.h): magic, version, counts, shard sizes, class names,
# sample records (shard, label, offset, length, crc32, height, width, path), the CRC-32 of it all.
def pack_index(shard_sizes, class_names, named, samples):
    def string(text):
        return struct.pack("<I", len(text)) + text.encode()
    out = b"CREMAPAK" + struct.pack("<IIQII", 1, len(shard_sizes), len(samples), len(class_names),
                                    1 if named else 0)
    out += b"".join(struct.pack("<Q", size) for size in shard_sizes)
    out += b"".join(string(name) for name in class_names)
    for shard, label, offset, length, crc, height, width, path in samples:
        out += struct.pack("<IIQIIII", shard, label, offset, length, crc, height, width) + string(path)
    return out + struct.pack("<I", zlib.crc32(out))


put("packed_index", "folder_two_shards.crema", pack_index(
    [300, 120], ["cat", "dog"], True,
    [(0, 0, 0, 200, 0x1234abcd, 8, 6, "cat/0.jpg"), (0, 1, 200, 100, 7, 3, 2, "dog/1.png"),
     (1, 1, 0, 120, 99, 16, 16, "dog/deeper/2.jpg")]))
put("packed_index", "list_unnamed.crema", pack_index(
    [64], ["0", "1", "2"], False, [(0, 2, 0, 64, 1, 1, 1, "/abs/x.bmp")]))
