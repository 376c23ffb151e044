#include "apps/distributed/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "apps/distributed/socket.h"
#include "core/error.h"

namespace crema::distributed {
namespace {

volatile std::sig_atomic_t g_signal = 0;  // the signal the parent received; forwarded once

void on_signal(int sig) {
  g_signal = sig;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with {}", WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

[[noreturn]] void exec_child(const std::vector<std::string>& args, const std::string& device,
                             int rank, int size, int port, int listener) {
  setpgid(0, 0);
  if (rank == 0) {  // rank 0 serves the rendezvous on the listener opened for it
    fcntl(listener, F_SETFD, 0);
    setenv(kListenerFdVariable, std::to_string(listener).c_str(), 1);
  }
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(size).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(size).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  std::vector<std::string> full = {"crema"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("--device");
  full.push_back(device);
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::cerr << "crema: error: cannot start rank " << rank << ": " << strerror(errno) << "\n";
  _exit(2);
}

}  // namespace

std::vector<std::string> without_gpus_option(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--gpus") {
      ++i;
      continue;
    }
    if (args[i].rfind("--gpus=", 0) == 0) continue;
    kept.push_back(args[i]);
  }
  return kept;
}

int free_port() {
  Socket s = listen_on(0);
  return bound_port(s);
}

int launch_per_gpu(const std::vector<int>& gpus, const std::vector<std::string>& args,
                   const std::string& device_format) {
  // The rendezvous' port is bound and listening before any rank starts (rank 0 inherits it):
  // MASTER_PORT where set, else one the system picks. A port in use fails here, in one line.
  const char* port_text = std::getenv("MASTER_PORT");
  Socket listener = listen_on(port_text != nullptr ? std::atoi(port_text) : 0);
  const int port = bound_port(listener);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction previous_int {
  }, previous_term{};
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);

  std::vector<pid_t> children;
  for (size_t rank = 0; rank < gpus.size(); ++rank) {
    const std::string device = fmt::format(fmt::runtime(device_format), gpus[rank]);
    const pid_t pid = fork();
    if (pid < 0) throw Error(fmt::format("--gpus: cannot start a process: {}", strerror(errno)));
    if (pid == 0) exec_child(args, device, int(rank), int(gpus.size()), port, listener.fd());
    children.push_back(pid);
  }
  listener = Socket();  // rank 0 holds it now
  int forwarded = 0, first_failure = 0;
  size_t running = children.size();
  std::vector<bool> alive(children.size(), true);  // a reaped pid may be reused: never signalled
  while (running > 0) {
    if (g_signal != 0 && forwarded == 0) {
      forwarded = g_signal;
      for (size_t r = 0; r < children.size(); ++r) {
        if (alive[r]) kill(children[r], forwarded);
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno != EINTR) break;
      continue;  // a signal: passed on at the top of the loop
    }
    size_t rank = 0;
    while (rank < children.size() && children[rank] != pid) ++rank;
    if (rank == children.size()) continue;
    alive[rank] = false;
    --running;
    const int code = exit_code(status);
    const bool stopped_as_asked = forwarded != 0 && code == 128 + forwarded;
    if (code != 0 && !stopped_as_asked) {
      std::cerr << fmt::format("crema: error: rank {} (cuda:{}) {}\n", rank, gpus[rank],
                               describe(status));
      if (first_failure == 0) {
        first_failure = code;
        // The others cannot go on without it: one still in the rendezvous would wait for the
        // timeout. SIGTERM ends those at once; a training rank's watchdog has seen the loss.
        for (size_t other = 0; other < children.size(); ++other) {
          if (alive[other]) kill(children[other], SIGTERM);
        }
      }
    }
  }
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  if (first_failure != 0) return first_failure;
  return forwarded != 0 ? 128 + forwarded : 0;
}

}  // namespace crema::distributed
