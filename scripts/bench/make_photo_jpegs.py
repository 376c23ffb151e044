#!/usr/bin/env python3
"""Writes a folder of photo-like JPEGs for the loader benchmark (scripts/bench/photo_loader.sh):
OUT/<class>/<n>.jpg, 500 x 375 (one in four 375 x 500, portrait), quality 90, as issue 23's
benchmark describes. Nothing is downloaded: each image is drawn from a seed, a smooth background
of a few colour gradients, 10-30 filled ellipses, rectangles and polygons, a slight blur (edges
as a lens gives them) and pixel noise (sensor grain), so the JPEG holds detail at every
frequency and decodes at a photo's cost (about 1.9 bits per pixel, 45 KB a file).

    /usr/bin/python3 scripts/bench/make_photo_jpegs.py OUT [COUNT] [CLASSES]   (2000, 10)

Needs Debian's python3-pil and python3-numpy (PIL is torchvision's decoder too). The same
arguments give the same files. Keep OUT out of git (runs/ is ignored).
"""
import pathlib
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def photo(rng, width, height):
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.zeros((height, width, 3), np.float32)
    for _ in range(3):  # smooth colour gradients in random directions
        angle = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(angle) * x + np.sin(angle) * y) / max(width, height)
        base += ramp[..., None] * rng.uniform(-120, 120, 3) + rng.uniform(20, 90, 3)
    image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(10, 31))):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x0, y0 = int(rng.integers(-50, width)), int(rng.integers(-50, height))
        w, h = int(rng.integers(10, width // 2)), int(rng.integers(10, height // 2))
        kind = rng.integers(0, 3)
        if kind == 0:
            draw.ellipse([x0, y0, x0 + w, y0 + h], fill=colour)
        elif kind == 1:
            draw.rectangle([x0, y0, x0 + w, y0 + h], fill=colour)
        else:
            points = [(x0 + int(rng.integers(0, w)), y0 + int(rng.integers(0, h))) for _ in range(5)]
            draw.polygon(points, fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.6, 1.5))))
    pixels = np.asarray(image, np.float32) + rng.normal(0, 6, (height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    classes = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    total = 0
    for n in range(count):
        rng = np.random.default_rng(n)
        width, height = (375, 500) if n % 4 == 3 else (500, 375)
        folder = out / f"class{n % classes:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{n:05d}.jpg"
        photo(rng, width, height).save(path, "JPEG", quality=90)
        total += path.stat().st_size
    print(f"{count} JPEGs in {out}, {total / count / 1024:.1f} KB each on average")


if __name__ == "__main__":
    main()
