// Opening a user's file for reading without trusting what the name points at.
//
// A path may name a FIFO (open() would wait for a writer forever), a device such as /dev/zero
// (reading never ends) or a directory. RegularFile opens with O_NONBLOCK, so that nothing waits,
// then checks with fstat on the open descriptor (no window between a check and the open in
// which the name could be swapped) that it holds a regular file, and keeps its size: a reader
// compares what a header promises with that size before allocating anything.
#pragma once

#include <cstdint>
#include <string>

namespace crema {

class RegularFile {
 public:
  // Throws crema::Error "cannot open <what> '<path>' (<strerror>)", or "<what> '<path>' is a
  // directory|FIFO|character device|..., not a regular file".
  RegularFile(const std::string& path, const std::string& what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Hands the descriptor over (to gzdopen, which closes it); the destructor then leaves it open.
  int release();

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole contents of a regular file of at most `max_bytes` bytes. Throws crema::Error as
// RegularFile does, or "<what> '<path>' is <size> bytes, more than the <max_bytes> crema reads"
// (also when the file grows past the bound while it is read).
std::string read_small_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace crema
