#!/usr/bin/env python3
"""Writes an ImageNet-like folder of JPEGs for the loader benchmark (scripts/bench/photo_loader.sh,
issue 23 item 6): OUT/<class>/<n>.jpg with real photographic content, so decoding costs what it
costs on photos (texture, edges and noise at every frequency, not smooth synthetic shapes).

Nothing is downloaded: the content comes from the sample photographs scikit-image ships (Debian's
python3-skimage: astronaut, coffee, chelsea the cat, the motorcycle pair, rocket, retina, the
Hubble deep field, immunohistochemistry, and the grayscale camera, grass, gravel, brick, moon and
coins, tinted). Image n is drawn from a generator seeded with (SEED, n):
  - a source photograph, then a random crop of 25-100% of its area (aspect ratio 3/5..5/3),
    mirrored with probability 1/2;
  - resized (PIL's bicubic) to a random width and height in 300..600 px (ImageNet's typical
    sides; the aspect ratio follows the crop's, within the range);
  - a colour shift: per-channel gains 0.8..1.2, a gamma 0.75..1.33, a brightness offset -20..20;
  - saved at a random JPEG quality 75..95 (4:2:0 chroma, PIL's default, as most cameras and
    ImageNet's files).
The same SEED, COUNT and CLASSES give the same files, byte for byte (with the same PIL/libjpeg).
Class c of CLASSES holds the images n with n mod CLASSES = c.

    /usr/bin/python3 scripts/bench/make_photo_jpegs.py OUT [COUNT] [CLASSES] [SEED]
                                                                        (2000, 10, 1)

Needs Debian's python3-skimage, python3-pil and python3-numpy (photo_loader.sh installs
python3-skimage when it is missing). Keep OUT out of git (runs/ is ignored). Where scikit-image is
missing (a GPU machine), `--export-sources DIR` writes the photographs as PNG files here and
CREMA_PHOTO_SOURCES=DIR makes the same set there without it.
"""
import os
import pathlib
import sys

import numpy as np
from PIL import Image

COLOUR = ["astronaut", "coffee", "chelsea", "rocket", "retina", "hubble_deep_field",
          "immunohistochemistry"]
GRAY = ["camera", "grass", "gravel", "brick", "moon", "coins"]


def sources():
    folder = os.environ.get("CREMA_PHOTO_SOURCES")
    if folder:  # the same photographs, written by --export-sources where skimage is installed
        return [Image.open(path).convert("RGB") for path in sorted(pathlib.Path(folder).glob("*.png"))]
    import skimage.data
    photos = [Image.fromarray(getattr(skimage.data, name)()).convert("RGB") for name in COLOUR]
    left, right, _ = skimage.data.stereo_motorcycle()
    photos += [Image.fromarray(left), Image.fromarray(right)]
    photos += [Image.fromarray(getattr(skimage.data, name)()).convert("RGB") for name in GRAY]
    return photos


def side_sizes(rng, aspect):
    """A width and height in [300, 600] with width / height close to `aspect`."""
    width = int(rng.integers(300, 601))
    height = int(round(width / aspect))
    if not 300 <= height <= 600:
        height = int(np.clip(height, 300, 600))
        width = int(np.clip(round(height * aspect), 300, 600))
    return width, height


def photo(rng, photos):
    source = photos[int(rng.integers(len(photos)))]
    width, height = source.size
    area = width * height * rng.uniform(0.25, 1.0)
    aspect = np.exp(rng.uniform(np.log(3 / 5), np.log(5 / 3)))
    w = int(min(width, round(np.sqrt(area * aspect))))
    h = int(min(height, round(np.sqrt(area / aspect))))
    left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
    image = source.crop((left, top, left + w, top + h))
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = image.resize(side_sizes(rng, w / h), Image.Resampling.BICUBIC)
    pixels = np.asarray(image, np.float32) / 255.0
    pixels = pixels ** rng.uniform(0.75, 1.33) * rng.uniform(0.8, 1.2, 3)
    pixels = pixels * 255.0 + rng.uniform(-20, 20)
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--export-sources":
        folder = pathlib.Path(sys.argv[2])
        folder.mkdir(parents=True, exist_ok=True)
        for n, image in enumerate(sources()):
            image.save(folder / f"{n:02d}.png", optimize=True)
        return
    out = pathlib.Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    classes = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    photos = sources()
    total_bytes = total_pixels = 0
    for n in range(count):
        rng = np.random.default_rng([seed, n])
        image = photo(rng, photos)
        folder = out / f"class{n % classes:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{n:05d}.jpg"
        image.save(path, "JPEG", quality=int(rng.integers(75, 96)))
        total_bytes += path.stat().st_size
        total_pixels += image.size[0] * image.size[1]
    print(f"{count} JPEGs in {out}: {total_pixels / count / 1e3:.0f} k pixels and "
          f"{total_bytes / count / 1024:.1f} KB each on average, "
          f"{8 * total_bytes / total_pixels:.2f} bits per pixel")


if __name__ == "__main__":
    main()
