// JPEG decoding and encoding with libjpeg-turbo (Debian's libjpeg62-turbo-dev, the libjpeg API).
// data/image.cpp routes every file that starts with a JPEG SOI marker (FF D8) here, whatever its
// name; the other formats go to stb_image.
//
// Why the libjpeg API rather than TurboJPEG's: it decodes at 1/2, 1/4 and 1/8 scale (DCT scaling:
// the IDCT computes only the low frequencies, so a 1/4-scale decode costs a fraction of a full
// one), it reports the Adobe APP14 marker that says whether CMYK is stored inverted, it lets a
// warning (the truncation warning) become an error, and it bounds progressive scans through its
// progress monitor. Both APIs are the same SIMD code underneath.
//
// Errors: libjpeg's default error handler prints and calls exit(). Ours formats libjpeg's message
// and longjmps back to the decoder's frame, which throws crema::Error naming the file (no C++
// object lives in the frames a longjmp skips). Treated as errors besides libjpeg's own:
//   - a truncated file ("Premature end of JPEG file"; libjpeg would fill the rest with grey, PIL
//     raises on it by default); libjpeg's other warnings (extraneous bytes, a corrupt segment it
//     resynchronizes from) are ignored, as PIL ignores them;
//   - more than kMaxJpegScans progressive scans (libjpeg-turbo's fuzzers use the same limit: each
//     scan reprocesses the whole image, so a small file of many scans takes minutes);
//   - more pixels than the caller's limit (a decompression bomb), checked on the header before
//     any pixel is decoded.
//
// Colour: YCbCr and RGB files decode to RGB, or to gray as libjpeg computes it (for YCbCr the
// luma Y itself, 0.299 R + 0.587 G + 0.114 B); gray files are copied to RGB's three channels.
// CMYK and YCCK files (Photoshop's) are read as CMYK and converted as PIL does,
// R = (255 - C)(255 - K) / 255 (likewise G from M, B from Y); Adobe's files store the inks
// inverted (255 = no ink), which the APP14 marker tells. Gray from CMYK is stb's
// (77 R + 150 G + 29 B) >> 8 of that RGB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace crema::data {

inline constexpr int kMaxJpegScans = 500;

// Whether `bytes` start with the JPEG start-of-image marker FF D8.
bool is_jpeg(const uint8_t* bytes, size_t size);

// The {height, width} a JPEG's header declares; throws crema::Error naming `name` when the header
// does not parse.
Size2 jpeg_size(const uint8_t* bytes, size_t size, const std::string& name);

// Decodes a JPEG into `out` ({channels, H, W}, 0..255). `options.plan` is asked, with the
// header's size, for a reduction r (1, 2, 4 or 8: the image then decodes at ceil(H / r) x
// ceil(W / r)) and a window of that (rows [top, top + height), columns [left, left + width)):
// `out` holds the window, bit for bit the pixels a whole decode has there, and its reduction,
// top, left and the file's full size (see Image). Rows above the window are only entropy-decoded
// and rows below it not read, so a truncation below the window goes unnoticed. Throws
// crema::Error naming `name`.
void decode_jpeg(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                 const DecodeOptions& options, Image& out);

// Encodes interleaved H x W x C bytes (C = 1 gray or 3 RGB) at `quality` (1..100, libjpeg's
// scale; 4:2:0 chroma as libjpeg and PIL default to). Throws crema::Error naming `name`.
std::vector<uint8_t> encode_jpeg(const uint8_t* interleaved, int height, int width, int channels,
                                 int quality, const std::string& name);

}  // namespace crema::data
