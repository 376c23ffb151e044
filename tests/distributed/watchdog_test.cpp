// The watchdog over the rendezvous connections, with the ranks as threads of this process and
// the failure recorded instead of ending the process: a rank whose connection closes is named by
// rank 0 and, through rank 0's notice, by the others; a rank that says goodbye is no alarm; a
// stale heartbeat and an asynchronous error of the collectives are failures too.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "apps/distributed/launcher.h"
#include "apps/distributed/watchdog.h"
#include "tests/support/error_text.h"

namespace crema::distributed {
namespace {

class FakeGroup : public ProcessGroup {
 public:
  explicit FakeGroup(Rendezvous rv) : ProcessGroup(rv.world), rv_(std::move(rv)) {}
  void all_reduce(void*, int64_t, DType, Reduce, gpu::Stream) override {}
  void broadcast(float*, int64_t, gpu::Stream) override {}
  std::string failure() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }
  void abort() override {}
  Rendezvous* liveness() override { return &rv_; }
  void set_failure(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = text;
  }

 private:
  Rendezvous rv_;
  std::mutex mutex_;
  std::string failure_;
};

// What a watchdog reported, waited for.
class Report {
 public:
  Watchdog::OnFailure sink() {
    return [this](const std::string& line) { promise_.set_value(line); };
  }
  std::string within(double seconds) {
    auto future = promise_.get_future();
    if (future.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
      return "";
    }
    return future.get();
  }

 private:
  std::promise<std::string> promise_;
};

// Three ranks joined over the rendezvous, each as a FakeGroup.
std::vector<std::unique_ptr<FakeGroup>> join_three() {
  const int port = free_port();
  std::vector<std::future<Rendezvous>> joins;
  for (int r = 0; r < 3; ++r) {
    joins.push_back(std::async(std::launch::async, [port, r] {
      World w;
      w.rank = r;
      w.size = 3;
      w.master_addr = "127.0.0.1";
      w.master_port = port;
      return rendezvous(w, 1, "id", 20);
    }));
  }
  std::vector<std::unique_ptr<FakeGroup>> groups;
  for (auto& j : joins) groups.push_back(std::make_unique<FakeGroup>(j.get()));
  return groups;
}

TEST(Watchdog, ARankWhoseConnectionClosesIsNamedByEveryOther) {
  auto groups = join_three();
  Report at0, at2;
  Watchdog dog0(*groups[0], 60, at0.sink());
  Watchdog dog2(*groups[2], 60, at2.sink());
  groups[1].reset();  // rank 1 dies: its connection to rank 0 closes
  EXPECT_EQ(at0.within(5), "rank 1 exited (lost its connection)");
  EXPECT_EQ(at2.within(5), "rank 1 exited (rank 0 lost its connection)");
}

TEST(Watchdog, ARankThatSaysGoodbyeIsNoAlarm) {
  auto groups = join_three();
  Report at0;
  Watchdog dog0(*groups[0], 60, at0.sink());
  {
    Watchdog dog1(*groups[1], 60);
    dog1.finish();
  }
  groups[1].reset();
  EXPECT_EQ(at0.within(0.5), "");
}

TEST(Watchdog, Rank0sDeathIsNamed) {
  auto groups = join_three();
  Report at1;
  Watchdog dog1(*groups[1], 60, at1.sink());
  groups[0].reset();
  EXPECT_EQ(at1.within(5), "rank 0 exited (lost its connection)");
}

TEST(Watchdog, AStaleHeartbeatAndAnAsyncErrorAreFailures) {
  auto groups = join_three();
  Report stale, async;
  {
    Watchdog dog(*groups[1], 0.3, stale.sink());
    EXPECT_CONTAINS(stale.within(5), "no step finished in 0 s (--timeout): a rank hung");
  }
  groups[2]->heartbeat();
  groups[2]->set_failure("NCCL reports: remote process exited or there was a network error");
  Watchdog dog(*groups[2], 60, async.sink());
  EXPECT_EQ(async.within(5), "NCCL reports: remote process exited or there was a network error");
}

}  // namespace
}  // namespace crema::distributed
