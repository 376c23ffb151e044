#include "apps/distributed/process_group.h"

#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "apps/distributed/nccl_library.h"
#include "core/error.h"
#include "core/float16.h"

namespace crema::distributed {
namespace {

int nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return kNcclFloat32;
    case DType::f64:
      return kNcclFloat64;
    case DType::bf16:
      return kNcclBfloat16;
    default:
      throw Error(std::string("all-reduce: no NCCL type for ") + dtype_name(dtype));
  }
}

class NcclGroup : public ProcessGroup {
 public:
  NcclGroup(Rendezvous rv, const Device& device)
      : ProcessGroup(rv.world), nccl_(nccl_library()), rv_(std::move(rv)), device_(device) {
    NcclUniqueId id{};
    if (rv_.unique_id.size() != sizeof id.bytes) {
      throw Error("rendezvous: rank 0 sent no NCCL id (is it running on the CPU?)");
    }
    std::memcpy(id.bytes, rv_.unique_id.data(), sizeof id.bytes);
    gpu::DeviceGuard guard(device_.index);
    nccl_.check(nccl_.comm_init_rank(&comm_, world_.size, id, world_.rank), "ncclCommInitRank");
  }
  ~NcclGroup() override {
    if (comm_ != nullptr) {
      gpu::DeviceGuard guard(device_.index);
      (aborted_ ? nccl_.comm_abort : nccl_.comm_destroy)(comm_);
    }
  }

  void all_reduce(void* data, int64_t count, DType dtype, Reduce op, gpu::Stream stream) override {
    gpu::DeviceGuard guard(device_.index);
    nccl_.check(nccl_.all_reduce(data, data, size_t(count), nccl_type(dtype),
                                 op == Reduce::sum ? kNcclSum : kNcclAvg, comm_, stream),
                "ncclAllReduce");
  }
  void broadcast(float* data, int64_t count, gpu::Stream stream) override {
    gpu::DeviceGuard guard(device_.index);
    nccl_.check(nccl_.broadcast(data, data, size_t(count), kNcclFloat32, 0, comm_, stream),
                "ncclBroadcast");
  }
  std::string failure() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return "";
    int error = kNcclSuccess;
    if (nccl_.comm_get_async_error(comm_, &error) != kNcclSuccess) return "";
    if (error == kNcclSuccess || error == kNcclInProgress) return "";
    return fmt::format("NCCL reports: {}", nccl_.get_error_string(error));
  }
  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    gpu::DeviceGuard guard(device_.index);
    nccl_.comm_abort(comm_);
    comm_ = nullptr;
  }
  Rendezvous* liveness() override { return &rv_; }

 private:
  const NcclLibrary& nccl_;
  Rendezvous rv_;
  Device device_;
  NcclComm comm_ = nullptr;
  std::mutex mutex_;
  bool aborted_ = false;
};

// Rank 0 is the hub: it receives each rank's values in rank order, adds them, and sends back.
class SocketGroup : public ProcessGroup {
 public:
  SocketGroup(Rendezvous rv, double timeout_seconds)
      : ProcessGroup(rv.world), rv_(std::move(rv)), timeout_(timeout_seconds) {}

  void all_reduce(void* data, int64_t count, DType dtype, Reduce op, gpu::Stream) override {
    const size_t bytes = size_t(count) * dtype_size(dtype);
    if (rank() != 0) {
      rv_.peers[0].send_all(data, bytes, "rank 0");
      rv_.peers[0].receive_all(data, bytes, deadline(), "rank 0");
      return;
    }
    std::vector<double> sum(static_cast<size_t>(count));
    add_values(data, dtype, sum, true);
    std::vector<char> other(bytes);
    for (int r = 1; r < size(); ++r) {
      rv_.peers[size_t(r)].receive_all(other.data(), bytes, deadline(), peer(r));
      add_values(other.data(), dtype, sum, false);
    }
    for (int64_t i = 0; i < count; ++i) {
      const double v = op == Reduce::average ? sum[size_t(i)] / double(size()) : sum[size_t(i)];
      store_value(data, dtype, i, v);
    }
    for (int r = 1; r < size(); ++r) rv_.peers[size_t(r)].send_all(data, bytes, peer(r));
  }
  void broadcast(float* data, int64_t count, gpu::Stream) override {
    const size_t bytes = size_t(count) * sizeof(float);
    if (rank() != 0) {
      rv_.peers[0].receive_all(data, bytes, deadline(), "rank 0");
      return;
    }
    for (int r = 1; r < size(); ++r) rv_.peers[size_t(r)].send_all(data, bytes, peer(r));
  }
  // A lost peer is found by the blocking calls themselves (the connection ends).
  std::string failure() override { return ""; }
  void abort() override {
    for (Socket& s : rv_.peers) s.shut();
  }

 private:
  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::milliseconds(int64_t(timeout_ * 1000.0));
  }
  static std::string peer(int r) { return fmt::format("rank {}", r); }
  // sum[i] (= or +=) the i-th value of `values`, a `dtype` array.
  static void add_values(const void* values, DType dtype, std::vector<double>& sum, bool first) {
    for (size_t i = 0; i < sum.size(); ++i) {
      double v = 0.0;
      switch (dtype) {
        case DType::f32:
          v = double(static_cast<const float*>(values)[i]);
          break;
        case DType::f64:
          v = static_cast<const double*>(values)[i];
          break;
        case DType::bf16:
          v = double(to_f32(static_cast<const bf16_t*>(values)[i]));
          break;
        default:
          throw Error(std::string("all-reduce over sockets: no ") + dtype_name(dtype));
      }
      sum[i] = first ? v : sum[i] + v;
    }
  }
  static void store_value(void* values, DType dtype, int64_t i, double v) {
    if (dtype == DType::f32) static_cast<float*>(values)[i] = float(v);
    if (dtype == DType::f64) static_cast<double*>(values)[i] = v;
    if (dtype == DType::bf16) static_cast<bf16_t*>(values)[i] = to_bf16(float(v));
  }
  Rendezvous rv_;
  double timeout_;
};

}  // namespace

std::unique_ptr<ProcessGroup> join_process_group(const World& world, const Device& device,
                                                 uint64_t hash, double timeout_seconds) {
  if (!device.is_cuda()) {
    return std::make_unique<SocketGroup>(rendezvous(world, hash, "", timeout_seconds),
                                         timeout_seconds);
  }
  const NcclLibrary& nccl = nccl_library();  // before the rendezvous: a missing NCCL fails fast
  std::string id;
  if (world.rank == 0) {
    NcclUniqueId unique{};
    nccl.check(nccl.get_unique_id(&unique), "ncclGetUniqueId");
    id.assign(unique.bytes, sizeof unique.bytes);
  }
  return std::make_unique<NcclGroup>(rendezvous(world, hash, id, timeout_seconds), device);
}

}  // namespace crema::distributed
