// Blocking TCP sockets with deadlines, for the rendezvous and the liveness channel: connect with
// retries, listen, accept, and whole-message send and receive. Every failure is a crema::Error
// naming the peer (a rank) and the system's reason.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace crema::distributed {

using Clock = std::chrono::steady_clock;

// An owned socket descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  // Closes both directions now (a peer blocked on it sees the end at once).
  void shut();

  // Sends or receives exactly `bytes`, or throws naming `peer`; a receive that meets the end of
  // the stream or passes `deadline` throws too.
  void send_all(const void* data, size_t bytes, const std::string& peer);
  void receive_all(void* data, size_t bytes, Clock::time_point deadline, const std::string& peer);
  // Whether something (or the end of the stream) can be read within `milliseconds`.
  bool readable(int milliseconds) const;

 private:
  int fd_ = -1;
};

// Listens on every interface at `port` (0: a free port the system picks; `bound_port` says which);
// "port in use" and other failures are one line.
Socket listen_on(int port);
int bound_port(const Socket& s);
// The listener rank 0 serves the rendezvous on: the one `crema train --gpus` opened before starting
// the ranks and handed to rank 0 (kListenerFdVariable names its descriptor), else listen_on(port).
// Opening it before any rank runs leaves no moment in which the port is free for another socket
// to take (a joining rank's own connect included).
inline constexpr const char* kListenerFdVariable = "CREMA_RENDEZVOUS_FD";
Socket rendezvous_listener(int port);
// The next connection on `listener`, or an invalid Socket when `deadline` passes first.
Socket accept_until(const Socket& listener, Clock::time_point deadline);
// Connects to host:port, retrying while nobody listens yet, until `deadline`. A connection to
// itself (on one host, the system may pick the very port as the connect's own while nobody listens
// there yet: TCP's simultaneous open) is dropped and retried: it would hold the port rank 0 needs.
Socket connect_until(const std::string& host, int port, Clock::time_point deadline);

}  // namespace crema::distributed
