#include "apps/distributed/socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::distributed {
namespace {

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30)));
}

void no_delay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

int Socket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::shut() {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

void Socket::send_all(const void* data, size_t bytes, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) {
      throw Error(fmt::format("{} exited or is unreachable (lost the connection: {})", peer,
                              strerror(errno)));
    }
    p += sent;
    bytes -= size_t(sent);
  }
}

void Socket::receive_all(void* data, size_t bytes, Clock::time_point deadline,
                         const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = poll(&pfd, 1, milliseconds_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) throw Error(fmt::format("{} sent nothing before the timeout", peer));
    const ssize_t got = ::recv(fd_, p, bytes, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) throw Error(fmt::format("{} exited (its connection closed)", peer));
    if (got < 0) {
      throw Error(fmt::format("{} exited or is unreachable (lost the connection: {})", peer,
                              strerror(errno)));
    }
    p += got;
    bytes -= size_t(got);
  }
}

bool Socket::readable(int milliseconds) const {
  pollfd pfd{fd_, POLLIN, 0};
  return poll(&pfd, 1, milliseconds) > 0;
}

Socket listen_on(int port) {
  Socket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw Error(fmt::format("cannot open a socket: {}", strerror(errno)));
  const int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int error = errno;
    throw Error(
        fmt::format("MASTER_PORT {}: rank 0 cannot listen there: {}{}", port, strerror(error),
                    error == EADDRINUSE ? " (another job? set MASTER_PORT to a free port)" : ""));
  }
  if (listen(s.fd(), 128) != 0) {
    throw Error(fmt::format("MASTER_PORT {}: cannot listen: {}", port, strerror(errno)));
  }
  return s;
}

Socket accept_until(const Socket& listener, Clock::time_point deadline) {
  while (true) {
    if (!listener.readable(milliseconds_until(deadline))) {
      if (Clock::now() >= deadline) return Socket();
      continue;
    }
    const int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      no_delay(fd);
      return Socket(fd);
    }
    if (errno != EINTR && errno != ECONNABORTED) {
      throw Error(fmt::format("rendezvous: accept failed: {}", strerror(errno)));
    }
  }
}

Socket connect_until(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0) {
    throw Error(fmt::format("MASTER_ADDR {}: {}", host, gai_strerror(status)));
  }
  std::string reason;
  while (true) {
    Socket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.valid() && connect(s.fd(), found->ai_addr, found->ai_addrlen) == 0) {
      freeaddrinfo(found);
      no_delay(s.fd());
      return s;
    }
    reason = strerror(errno);
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  freeaddrinfo(found);
  throw Error(
      fmt::format("rendezvous: nobody answered at {}:{} before the timeout ({}); is rank 0 "
                  "running, and are MASTER_ADDR and MASTER_PORT its?",
                  host, port, reason));
}

}  // namespace crema::distributed
