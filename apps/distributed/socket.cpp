#include "apps/distributed/socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
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

// Whether a connected socket's two ends are one address (see connect_until).
bool connected_to_itself(int fd) {
  sockaddr_in self{}, peer{};
  socklen_t self_length = sizeof self, peer_length = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_length) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    return false;
  }
  return self.sin_port == peer.sin_port && self.sin_addr.s_addr == peer.sin_addr.s_addr;
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

int bound_port(const Socket& s) {
  sockaddr_in addr{};
  socklen_t length = sizeof addr;
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    throw Error(fmt::format("rendezvous: cannot read the listening port: {}", strerror(errno)));
  }
  return ntohs(addr.sin_port);
}

Socket rendezvous_listener(int port) {
  const char* inherited = std::getenv(kListenerFdVariable);
  if (inherited == nullptr) return listen_on(port);
  char* end = nullptr;
  const long fd = std::strtol(inherited, &end, 10);
  int listening = 0;
  socklen_t length = sizeof listening;
  if (end == inherited || *end != '\0' || fd < 0 || fd > INT32_MAX ||
      getsockopt(int(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening) {
    throw Error(fmt::format("{}={}: not a listening socket handed down by crema train --gpus",
                            kListenerFdVariable, inherited));
  }
  Socket s{int(fd)};
  if (const int bound = bound_port(s); bound != port) {
    s.release();  // left as it was found
    throw Error(fmt::format("{}: the handed-down listener is on port {}, MASTER_PORT says {}",
                            kListenerFdVariable, bound, port));
  }
  unsetenv(kListenerFdVariable);
  fcntl(s.fd(), F_SETFD, FD_CLOEXEC);  // not handed on to anything this rank starts
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
      if (!connected_to_itself(s.fd())) {
        freeaddrinfo(found);
        no_delay(s.fd());
        return s;
      }
      reason = "connected to itself";
    } else {
      reason = strerror(errno);
    }
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
