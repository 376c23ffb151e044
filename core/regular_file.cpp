#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace crema {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    throw Error("cannot open " + what + " '" + path + "' (" + std::strerror(errno) + ")");
  }
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd_);
    throw Error("cannot open " + what + " '" + path + "' (" + reason + ")");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw Error(what + " '" + path + "' is " + kind_of(info.st_mode) + ", not a regular file");
  }
  size_ = uint64_t(info.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string read_small_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  RegularFile file(path, what);
  auto too_large = [&](uint64_t size) {
    return Error(what + " '" + path + "' is " + std::to_string(size) + " bytes, more than the " +
                 std::to_string(max_bytes) + " crema reads");
  };
  if (file.size() > max_bytes) throw too_large(file.size());
  std::string text(size_t(file.size()) + 1, '\0');  // one byte more: a file that grew shows
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error("cannot read " + what + " '" + path + "' (" + std::strerror(errno) + ")");
    if (n == 0) break;
    done += size_t(n);
    if (done == text.size() && done <= max_bytes)
      text.resize(std::min<uint64_t>(2 * done, max_bytes + 1));
  }
  if (done > max_bytes) throw too_large(done);
  text.resize(done);
  return text;
}

}  // namespace crema
