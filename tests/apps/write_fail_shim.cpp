// An LD_PRELOAD library for tests: makes one kind of file-system call fail, as a full disk or a
// read-only directory would, on the files whose path ends with a given text.
//
//   CREMA_FAIL_CALL   write | fsync | rename | symlink | mkdir | open: the call that fails
//                     (write covers write/pwrite/writev, the calls behind every stream and
//                     stdio write of libstdc++; fsync covers fdatasync; rename and symlink
//                     match either path; open only counts opens for writing)
//   CREMA_FAIL_PATH   the suffix a path must end with to count
//   CREMA_FAIL_AT     the first matching call that fails (1-based); it and every later matching
//                     call fail, as a disk that stays full
//   CREMA_FAIL_ERRNO  the error returned (default ENOSPC)
//
// The path of a descriptor is read from /proc/self/fd. Without CREMA_FAIL_CALL nothing fails.
// Built as a shared library beside the tests (tests/CMakeLists.txt), loaded by
// write_failure_test.cpp into a `crema train` subprocess.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<long> matches{0};

bool ends_with(const char* path, const char* suffix) {
  const size_t n = std::strlen(path), m = std::strlen(suffix);
  return n >= m && std::strcmp(path + n - m, suffix) == 0;
}

// Whether this call of `call` on `path` (and `other`, for two-path calls) must fail; sets errno.
bool must_fail(const char* call, const char* path, const char* other = nullptr) {
  const char* wanted = std::getenv("CREMA_FAIL_CALL");
  const char* suffix = std::getenv("CREMA_FAIL_PATH");
  if (wanted == nullptr || suffix == nullptr || std::strcmp(wanted, call) != 0) return false;
  const bool match = (path != nullptr && ends_with(path, suffix)) ||
                     (other != nullptr && ends_with(other, suffix));
  if (!match) return false;
  const char* at = std::getenv("CREMA_FAIL_AT");
  if (matches.fetch_add(1) + 1 < (at != nullptr ? std::atol(at) : 1)) return false;
  const char* number = std::getenv("CREMA_FAIL_ERRNO");
  errno = number != nullptr ? std::atoi(number) : ENOSPC;
  return true;
}

bool fd_must_fail(const char* call, int fd) {
  if (std::getenv("CREMA_FAIL_CALL") == nullptr) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 0) return false;
  path[n] = '\0';
  return must_fail(call, path);
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* data, size_t bytes) {
  if (fd_must_fail("write", fd)) return -1;
  return next<ssize_t (*)(int, const void*, size_t)>("write")(fd, data, bytes);
}

ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) {
  if (fd_must_fail("write", fd)) return -1;
  return next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite")(fd, data, bytes, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  if (fd_must_fail("write", fd)) return -1;
  return next<ssize_t (*)(int, const struct iovec*, int)>("writev")(fd, iov, count);
}

int fsync(int fd) {
  if (fd_must_fail("fsync", fd)) return -1;
  return next<int (*)(int)>("fsync")(fd);
}

int fdatasync(int fd) {
  if (fd_must_fail("fsync", fd)) return -1;
  return next<int (*)(int)>("fdatasync")(fd);
}

int rename(const char* from, const char* to) {
  if (must_fail("rename", from, to)) return -1;
  return next<int (*)(const char*, const char*)>("rename")(from, to);
}

int symlink(const char* target, const char* link) {
  if (must_fail("symlink", link)) return -1;
  return next<int (*)(const char*, const char*)>("symlink")(target, link);
}

int mkdir(const char* path, mode_t mode) {
  if (must_fail("mkdir", path)) return -1;
  return next<int (*)(const char*, mode_t)>("mkdir")(path, mode);
}

// open and open64 (the same call where off_t is 64 bits): only opens for writing count.
int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = (flags & O_CREAT) != 0 ? mode_t(va_arg(args, int)) : 0;
  va_end(args);
  if ((flags & (O_WRONLY | O_RDWR)) != 0 && must_fail("open", path)) return -1;
  return next<int (*)(const char*, int, ...)>("open")(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = (flags & O_CREAT) != 0 ? mode_t(va_arg(args, int)) : 0;
  va_end(args);
  if ((flags & (O_WRONLY | O_RDWR)) != 0 && must_fail("open", path)) return -1;
  return next<int (*)(const char*, int, ...)>("open64")(path, flags, mode);
}

}  // extern "C"
