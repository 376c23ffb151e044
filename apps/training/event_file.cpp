#include "apps/training/event_file.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/serialization.h"

namespace crema {
namespace {

// Table of the reflected Castagnoli polynomial 0x82F63B78: entry b is the CRC of the byte b.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[b] = c;
  }
  return table;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Protobuf wire format, the pieces an Event needs.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, uint64_t(field << 3 | wire_type));
}
void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((bits >> (8 * i)) & 0xff));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_key(out, field, 1);
  put_fixed(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_key(out, field, 5);
  put_fixed(out, bits, 4);
}

std::string event_header(int64_t step) {
  std::string event;
  put_double(event, 1, unix_seconds());
  put_key(event, 2, 0);
  put_varint(event, uint64_t(step));
  return event;
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// The step of a serialized Event (0 when absent, as in the file_version record); false when the
// bytes do not parse.
bool event_step(const std::string& data, int64_t& step) {
  step = 0;
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && i < data.size(); shift += 7) {
      const unsigned char byte = static_cast<unsigned char>(data[i++]);
      v |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  while (i < data.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) return false;
    switch (key & 7) {
      case 0:
        if (!varint(v)) return false;
        if ((key >> 3) == 2) step = int64_t(v);
        break;
      case 1:
        i += 8;
        break;
      case 5:
        i += 4;
        break;
      case 2:
        if (!varint(v)) return false;
        i += v;
        break;
      default:
        return false;
    }
  }
  return i == data.size();
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static constexpr std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = fmt::format("{}/events.out.tfevents.{}.{}", dir, int64_t(unix_seconds()), host);
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) {
    throw Error("cannot write the TensorBoard event file '" + path_ + "': " + std::strerror(errno));
  }
  std::string event = event_header(0);
  put_bytes(event, 3, "brain.Event:2");
  write_record(event);
}

void EventFileWriter::scalars(int64_t step,
                              const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, float(value));
    put_bytes(summary, 1, v);
  }
  std::string event = event_header(step);
  put_bytes(event, 5, summary);
  write_record(event);
}

void EventFileWriter::write_record(const std::string& data) {
  std::string record;
  put_fixed(record, data.size(), 8);
  const uint32_t length_crc = masked_crc32c(record.data(), 8);
  put_fixed(record, length_crc, 4);
  record += data;
  put_fixed(record, masked_crc32c(data.data(), data.size()), 4);
  out_.write(record.data(), std::streamsize(record.size()));
  out_.flush();
  if (!out_) {
    throw Error("writing the TensorBoard event file '" + path_ +
                "' failed: " + std::strerror(errno));
  }
}

void truncate_event_file(const std::string& path, int64_t max_step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t at = 0;
  std::string kept;
  while (at + 12 <= bytes.size()) {
    const uint64_t length = get_le(p + at, 8);
    if (uint32_t(get_le(p + at + 8, 4)) != masked_crc32c(p + at, 8)) break;
    if (length > bytes.size() - at - 16) break;
    const std::string data = bytes.substr(at + 12, length);
    if (uint32_t(get_le(p + at + 12 + length, 4)) != masked_crc32c(data.data(), data.size())) break;
    int64_t step = 0;
    if (!event_step(data, step)) break;
    if (step <= max_step) kept.append(bytes, at, 16 + length);
    at += 16 + length;
  }
  if (kept.size() != bytes.size()) write_file_atomic(path, kept);
}

}  // namespace crema
