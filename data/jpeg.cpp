// libjpeg-turbo behind crema's image codec (data/jpeg.h says what and why).
//
// libjpeg reports an error by calling error_exit, which must not return. Ours longjmps to the
// setjmp in `guarded`, whose caller then throws. C++ forbids a longjmp across a frame whose
// objects need destructors, so everything guarded runs as a lambda that only calls libjpeg and
// writes through references, while the objects with destructors (the libjpeg structs' owners,
// the output buffers) live in the caller, above the setjmp.
#include "data/jpeg.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"

namespace crema::data {
namespace {

struct ErrorHandler {
  jpeg_error_mgr manager;  // first: libjpeg hands us &manager as cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
};

[[noreturn]] void fail_with(j_common_ptr info, const char* message) {
  auto* handler = reinterpret_cast<ErrorHandler*>(info->err);
  std::snprintf(handler->message, sizeof(handler->message), "%s", message);
  std::longjmp(handler->jump, 1);
}

[[noreturn]] void on_error(j_common_ptr info) {
  char message[JMSG_LENGTH_MAX];
  info->err->format_message(info, message);
  fail_with(info, message);
}

// level -1 is a warning: the truncation warning fails the decode, the others are ignored (PIL's
// choice); levels >= 0 are trace messages.
void on_message(j_common_ptr info, int level) {
  if (level == -1 && info->err->msg_code == JWRN_JPEG_EOF) {
    fail_with(info, "the file is truncated (premature end of JPEG file)");
  }
}

void on_progress(j_common_ptr info) {
  const auto* decompress = reinterpret_cast<j_decompress_ptr>(info);
  if (info->is_decompressor && decompress->input_scan_number > kMaxJpegScans) {
    char message[64];  // no std::string: the longjmp would skip its destructor
    std::snprintf(message, sizeof(message), "more than %d progressive scans", kMaxJpegScans);
    fail_with(info, message);
  }
}

// Before jpeg_create_*, which keeps `err` and clears the rest.
void install(ErrorHandler& handler, j_common_ptr info) {
  info->err = jpeg_std_error(&handler.manager);
  handler.manager.error_exit = on_error;
  handler.manager.emit_message = on_message;
}

// Runs `step`; false when libjpeg failed in it (the message is in handler.message).
template <typename Step>
bool guarded(ErrorHandler& handler, Step&& step) {
  if (setjmp(handler.jump) != 0) return false;
  step();
  return true;
}

// A decompressor reading `bytes`, destroyed on every path.
struct Decompressor {
  Decompressor(const uint8_t* bytes, size_t size, const std::string& name_) : name(name_) {
    install(errors, reinterpret_cast<j_common_ptr>(&info));
    created = guarded(errors, [&] {
      jpeg_create_decompress(&info);
      jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
    });
    progress.progress_monitor = on_progress;
    info.progress = &progress;
  }
  ~Decompressor() { jpeg_destroy_decompress(&info); }
  [[noreturn]] void fail() const {
    throw Error("cannot decode JPEG image '" + name + "': " + errors.message);
  }
  void read_header() {
    if (!created || !guarded(errors, [&] { jpeg_read_header(&info, TRUE); })) fail();
  }

  jpeg_decompress_struct info{};
  ErrorHandler errors;
  jpeg_progress_mgr progress{};
  std::string name;
  bool created = false;
};

// One decoded row of `in_row` (libjpeg's output components) into row `y` of the planar `out`;
// `values` has room for one row of floats (3 x width).
void store_row(const uint8_t* in_row, bool cmyk, bool inverted, int64_t y, Image& out,
               float* values) {
  const int64_t width = out.width(), plane = out.height() * width;
  float* dst = out.pixels.data() + y * width;
  if (!cmyk && out.channels() == 1) {
    for (int64_t x = 0; x < width; ++x) dst[x] = float(in_row[x]);
    return;
  }
  if (!cmyk) {
    // Bytes to floats, then the floats dealt to three planes: two loops the compiler vectorizes
    // (one loop reading bytes three apart it does not, at twice the time).
    for (int64_t i = 0; i < 3 * width; ++i) values[i] = float(in_row[i]);
    float* green = dst + plane;
    float* blue = green + plane;
    for (int64_t x = 0; x < width; ++x) {
      dst[x] = values[3 * x];
      green[x] = values[3 * x + 1];
      blue[x] = values[3 * x + 2];
    }
    return;
  }
  for (int64_t x = 0; x < width; ++x) {
    const uint8_t* ink = in_row + 4 * x;
    const int k = inverted ? ink[3] : 255 - ink[3];  // 255 - K
    int rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = ((inverted ? ink[c] : 255 - ink[c]) * k + 127) / 255;
    if (out.channels() == 1) {
      dst[x] = float((77 * rgb[0] + 150 * rgb[1] + 29 * rgb[2]) >> 8);
    } else {
      for (int c = 0; c < 3; ++c) dst[c * plane + x] = float(rgb[c]);
    }
  }
}

// The plan's reduction must be one libjpeg scales by here: 1, 2, 4 or 8.
DecodePlan checked_plan(DecodePlan plan, const std::string& name) {
  const int r = plan.reduction;
  if (r != 1 && r != 2 && r != 4 && r != 8) {
    throw Error("image '" + name + "': decode reduction " + std::to_string(r) +
                " is not 1, 2, 4 or 8");
  }
  return plan;
}

// The plan's window must lie inside the `height` x `width` image libjpeg gives at its reduction;
// an empty window (height 0) becomes the whole image.
void check_window(DecodePlan& plan, int64_t height, int64_t width, const std::string& name) {
  if (plan.height == 0) {
    plan.top = plan.left = 0;
    plan.height = height;
    plan.width = width;
  }
  if (plan.top < 0 || plan.left < 0 || plan.height < 1 || plan.width < 1 ||
      plan.top + plan.height > height || plan.left + plan.width > width) {
    throw Error("image '" + name + "': the decode window [" + std::to_string(plan.top) + ", " +
                std::to_string(plan.left) + ", " + std::to_string(plan.height) + ", " +
                std::to_string(plan.width) + "] is not inside its " + std::to_string(height) +
                " x " + std::to_string(width) + " pixels at 1/" + std::to_string(plan.reduction));
  }
}

}  // namespace

bool is_jpeg(const uint8_t* bytes, size_t size) {
  return size >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8;
}

Size2 jpeg_size(const uint8_t* bytes, size_t size, const std::string& name) {
  Decompressor jpeg(bytes, size, name);
  jpeg.read_header();
  return {int64_t(jpeg.info.image_height), int64_t(jpeg.info.image_width)};
}

void decode_jpeg(const uint8_t* bytes, size_t size, int channels, const std::string& name,
                 const DecodeOptions& options, Image& out) {
  Decompressor jpeg(bytes, size, name);
  jpeg_decompress_struct& info = jpeg.info;
  jpeg.read_header();
  const Size2 full{int64_t(info.image_height), int64_t(info.image_width)};
  check_image_pixels(full.width, full.height, options.max_pixels, name);
  DecodePlan plan = options.plan ? checked_plan(options.plan(full), name) : DecodePlan{};
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  const bool inverted = cmyk && info.saw_Adobe_marker;
  info.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  info.scale_num = 1;
  info.scale_denom = unsigned(plan.reduction);
  if (!guarded(jpeg.errors, [&] { jpeg_calc_output_dimensions(&info); })) jpeg.fail();
  const int64_t height = info.output_height, width = info.output_width;
  check_window(plan, height, width, name);
  out.reset({channels, plan.height, plan.width});
  if (plan.reduction > 1 || plan.height < height || plan.width < width) {
    out.reduction = plan.reduction;
    out.top = plan.top;
    out.left = plan.left;
    out.full = full;
  }
  // The window's columns: libjpeg moves the left edge down to an iMCU boundary (8 or 16 pixels)
  // and treats the decoded span's edges as the image's when it upsamples chroma, which changes
  // the edge column; asking for kMargin more columns each side keeps the window's own pixels
  // those of a whole decode (tests/data/jpeg_window_test.cpp checks it bit for bit).
  constexpr int64_t kMargin = 2;
  JDIMENSION span_left = JDIMENSION(std::max<int64_t>(plan.left - kMargin, 0));
  JDIMENSION span_width =
      JDIMENSION(std::min(plan.left + plan.width + kMargin, width) - int64_t(span_left));
  // Up to kRows rows a call: libjpeg upsamples chroma two rows at a time, and fewer calls.
  constexpr int kRows = 8;
  std::vector<uint8_t> rows;
  std::vector<float> values(size_t(3 * plan.width));
  Image& image = out;
  const int64_t end = plan.top + plan.height;
  const bool ok = guarded(jpeg.errors, [&] {
    jpeg_start_decompress(&info);
    if (span_width < info.output_width) jpeg_crop_scanline(&info, &span_left, &span_width);
    // Rows above the window are entropy-decoded only (no IDCT, no colour conversion).
    if (plan.top > 0) jpeg_skip_scanlines(&info, JDIMENSION(plan.top));
  });
  if (!ok) jpeg.fail();
  const size_t row_bytes = size_t(info.output_width) * size_t(info.out_color_components);
  const size_t skip = size_t(plan.left - int64_t(span_left)) * size_t(info.out_color_components);
  rows.resize(kRows * row_bytes);
  const bool read = guarded(jpeg.errors, [&] {
    JSAMPROW pointers[kRows];
    for (int i = 0; i < kRows; ++i) pointers[i] = rows.data() + i * row_bytes;
    while (int64_t(info.output_scanline) < end) {
      const int64_t y = int64_t(info.output_scanline) - plan.top;
      const JDIMENSION want = JDIMENSION(std::min<int64_t>(kRows, end - info.output_scanline));
      const JDIMENSION got = jpeg_read_scanlines(&info, pointers, want);
      for (JDIMENSION i = 0; i < got; ++i) {
        store_row(pointers[i] + skip, cmyk, inverted, y + int64_t(i), image, values.data());
      }
    }
    // Rows below the window are not decoded at all: a truncation there goes unnoticed.
    if (info.output_scanline < info.output_height) {
      jpeg_skip_scanlines(&info, info.output_height - info.output_scanline);
    }
    jpeg_finish_decompress(&info);
  });
  if (!read) jpeg.fail();
}

std::vector<uint8_t> encode_jpeg(const uint8_t* interleaved, int height, int width, int channels,
                                 int quality, const std::string& name) {
  struct Compressor {
    ~Compressor() {
      jpeg_destroy_compress(&info);
      std::free(buffer);
    }
    jpeg_compress_struct info{};
    ErrorHandler errors;
    unsigned char* buffer = nullptr;  // jpeg_mem_dest's, malloc'ed by libjpeg
    unsigned long size = 0;
  } jpeg;
  jpeg_compress_struct& info = jpeg.info;
  install(jpeg.errors, reinterpret_cast<j_common_ptr>(&info));
  const bool ok = guarded(jpeg.errors, [&] {
    jpeg_create_compress(&info);
    jpeg_mem_dest(&info, &jpeg.buffer, &jpeg.size);
    info.image_width = JDIMENSION(width);
    info.image_height = JDIMENSION(height);
    info.input_components = channels;
    info.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, quality, TRUE);
    jpeg_start_compress(&info, TRUE);
    while (info.next_scanline < info.image_height) {
      JSAMPROW row[1] = {const_cast<JSAMPLE*>(interleaved + size_t(info.next_scanline) *
                                                                size_t(width) * channels)};
      jpeg_write_scanlines(&info, row, 1);
    }
    jpeg_finish_compress(&info);
  });
  if (!ok) throw Error("cannot encode JPEG image '" + name + "': " + jpeg.errors.message);
  return std::vector<uint8_t>(jpeg.buffer, jpeg.buffer + jpeg.size);
}

}  // namespace crema::data
