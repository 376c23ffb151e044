// The process group of a run on several processes: the world, and the two collectives training
// needs (an all-reduce, in place, and a broadcast from rank 0). It belongs to the run, beside the
// Context, never to a global; it is also the run's Collective (core/collective.h), through which
// SyncBatchNorm all-reduces its statistics.
//
//   NCCL (a CUDA device): each call is queued on the given stream and returns at once; NCCL
//     chooses NVLink, PCIe, shared memory or sockets. The communicator is made from rank 0's
//     unique id, which the TCP rendezvous handed to every rank.
//   Sockets (the CPU): for tests without a GPU and for CPU runs. Rank 0 gathers every rank's
//     values over the rendezvous connections, adds them in rank order in double (so the result
//     is the same on every run), rounds once to the values' type and sends the result back; each
//     call blocks until it is done.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "apps/distributed/rendezvous.h"
#include "core/collective.h"
#include "core/cuda_runtime.h"
#include "core/device.h"
#include "core/tensor.h"

namespace crema::distributed {

enum class Reduce { sum, average };

class ProcessGroup : public Collective {
 public:
  const World& world() const { return world_; }
  int rank() const { return world_.rank; }
  int size() const { return world_.size; }

  // data[0, count) <- the sum (or mean) over the ranks of their data[0, count): `dtype` (f32, f64
  // or bf16) on this group's device, ordered on `stream` (null on the CPU). bf16 is NCCL's
  // (each addition rounded) on a GPU, summed in double and rounded once on the CPU.
  virtual void all_reduce(void* data, int64_t count, DType dtype, Reduce op,
                          gpu::Stream stream) = 0;
  void all_reduce(float* data, int64_t count, Reduce op, gpu::Stream stream) {
    all_reduce(data, count, DType::f32, op, stream);
  }
  // data[0, count) <- rank 0's.
  virtual void broadcast(float* data, int64_t count, gpu::Stream stream) = 0;
  // The first asynchronous failure of the collectives ("" while none): a dead peer, a network
  // error. Polled by the watchdog.
  virtual std::string failure() = 0;
  // Makes every collective in flight or queued return (a rank died): the run cannot go on.
  virtual void abort() = 0;

  // Collective, for the layers that reach the other ranks through their Context.
  int ranks() const override { return size(); }
  void all_reduce_sum(Tensor& t, gpu::Stream stream) override {
    all_reduce(t.raw(), t.numel(), t.dtype(), Reduce::sum, stream);
  }

  // The rendezvous connections the watchdog may read (null where the collectives use them).
  virtual Rendezvous* liveness() { return nullptr; }

  // The training loop's sign of life (each step, each test pass), read by the watchdog.
  void heartbeat() { heartbeat_ = std::chrono::steady_clock::now().time_since_epoch().count(); }
  std::chrono::steady_clock::time_point last_heartbeat() const {
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(heartbeat_));
  }

 protected:
  explicit ProcessGroup(World world) : world_(std::move(world)) { heartbeat(); }
  World world_;
  std::atomic<std::chrono::steady_clock::rep> heartbeat_{0};
};

// Joins the job of `world` on `device`: the rendezvous (checking `hash`, the resolved config's),
// then NCCL's communicator on a CUDA device or the sockets' group on the CPU. Throws
// crema::Error, one line, for anything that keeps the job from starting (NCCL missing, a port in
// use, a rank that does not come within `timeout_seconds`, mismatched configs).
std::unique_ptr<ProcessGroup> join_process_group(const World& world, const Device& device,
                                                 uint64_t hash, double timeout_seconds);

}  // namespace crema::distributed
