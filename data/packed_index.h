// The index of a packed dataset (`crema pack`, data/packed.h): where each sample's encoded bytes
// lie in the shard files, its label and checksum, and the class list. A packed dataset is a
// folder:
//
//   DIR/index.crema        this index
//   DIR/shard-00000.bin    the samples' encoded files (JPEG, PNG, ...), back to back in sample
//   DIR/shard-00001.bin    order, nothing between them; a new shard begins where the next sample
//   ...                    would pass the shard size, so each holds whole samples
//
// The index, every integer little-endian, every string a u32 byte count then the bytes:
//
//   "CREMAPAK"            8 bytes   magic
//   version               u32       1
//   shard count S         u32
//   sample count N        u64
//   class count K         u32
//   named                 u32       1: the source named its classes (an image folder), 0: the
//                                   names are the labels as text (a list file)
//   S x u64                         each shard's size in bytes
//   K x string                      the class names, in label order
//   N x sample record:
//     shard u32, label u32, offset u64, length u32, crc32 u32, height u32, width u32,
//     path string                   the sample's file, relative to the source's root
//   crc32                 u32       zlib's CRC-32 of every byte before it
//
// `crc32` of a record is zlib's CRC-32 of its `length` bytes; height and width are the stored
// image's (its header's), which give the dataset's sample shape without a read.
//
// The index is untrusted: every count is bounded by the bytes left before anything is allocated
// (a record is at least 36 bytes, a string 4), every record must lie inside its shard's size and
// name a shard and a label that exist, and the trailing CRC-32 must match. The structure is
// checked before the CRC so that each check reports what it found (and so that a fuzzer, which
// cannot forge a CRC, reaches every check; tests/fuzz/packed_index_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crema::data {

inline constexpr char kPackIndexName[] = "index.crema";

struct PackedSample {
  uint32_t shard = 0;
  int32_t label = 0;
  uint64_t offset = 0;  // in the shard
  uint32_t length = 0;  // bytes
  uint32_t crc32 = 0;   // zlib's CRC-32 of the bytes
  uint32_t height = 0, width = 0;
  std::string path;  // the source file, relative to the source's root
};

struct PackedIndex {
  std::vector<uint64_t> shard_sizes;     // [S]
  std::vector<std::string> class_names;  // [K]
  bool named = true;
  std::vector<PackedSample> samples;  // [N]
};

// "shard-00007.bin".
std::string shard_file_name(size_t shard);

// zlib's CRC-32 of `size` bytes.
uint32_t crc32_of(const void* bytes, size_t size);

// The index as bytes (the format above).
std::string encode_pack_index(const PackedIndex& index);

// Parses index bytes; throws crema::Error naming `name` and what is wrong (a bad magic or
// version, a count larger than the bytes allow, a record outside its shard, a bad label, a
// CRC-32 that does not match, bytes after the end).
PackedIndex parse_pack_index(const uint8_t* bytes, size_t size, const std::string& name);

// Reads and parses DIR/index.crema.
PackedIndex read_pack_index(const std::string& dir);

}  // namespace crema::data
