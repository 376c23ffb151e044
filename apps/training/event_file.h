// TensorBoard event files: scalars a TensorBoard (or tf.summary_iterator) reads, written without
// TensorFlow or protobuf.
//
// A file is a sequence of TFRecords:
//   uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)
// (little-endian; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, CRC-32C being the Castagnoli
// polynomial, not zlib's CRC-32). Each record's data is a serialized tensorflow.Event protobuf.
// The few fields used are encoded by hand (protobuf wire format: key = field << 3 | wire type;
// wire type 0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record is an Event with file_version "brain.Event:2", as TensorFlow writes.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace crema {

// CRC-32C (Castagnoli) of `size` bytes, table-driven, and the masked form TFRecords store.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

class EventFileWriter {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<host> and writes the file_version record.
  explicit EventFileWriter(const std::string& dir);
  const std::string& path() const { return path_; }
  // One Event at `step` holding one scalar per (tag, value); flushed at once. A failed write
  // throws crema::Error naming the file and the system's reason.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::ofstream out_;
};

// Rewrites the event file at `path` keeping only the records whose step is <= max_step (a run
// resumed from an earlier checkpoint replaces what came after it). Stops at the first record
// that is damaged (a write cut short by a crash) and drops it and what follows.
void truncate_event_file(const std::string& path, int64_t max_step);

}  // namespace crema
