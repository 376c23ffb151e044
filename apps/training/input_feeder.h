// InputFeeder: moves host batches from the data loader into a net's `data` and `label` inputs
// (`label` gets the batch's soft targets when it has them, else its class indices).
//
// On a GPU the copies overlap the computation: stage(batch i+1) copies the batch into one of two
// device staging slots on a separate copy stream while step i runs on the compute stream; feed()
// then makes the compute stream wait for that copy and moves the slot into the net's inputs
// (a device-to-device copy of a few hundred KB). The loader hands out pinned host memory, so the
// host-to-device copies are truly asynchronous. On the CPU, feed() simply copies. Training times
// the compute stream's wait with a DataWaitMeter (data_wait.h).
#pragma once

#include <array>

#include "apps/training/data_wait.h"
#include "core/context.h"
#include "core/net.h"
#include "data/loader.h"

namespace crema {

class InputFeeder {
 public:
  explicit InputFeeder(Context& ctx);
  ~InputFeeder();
  InputFeeder(const InputFeeder&) = delete;
  InputFeeder& operator=(const InputFeeder&) = delete;

  // Starts moving `batch` towards the device; it is the batch the next feed() delivers.
  void stage(data::Batch batch);
  // Delivers the staged batch into net's `data` and `label` (resizing the net for a short batch).
  // On a GPU, `wait` (when given) times the compute stream's wait for the batch's copy.
  void feed(Net& net, training::DataWaitMeter* wait = nullptr);

 private:
  struct Slot {
    data::Batch host;               // kept alive until its copy has completed
    Tensor data, labels;            // device copies
    gpu::Event ready = nullptr;     // the copy into this slot finished (copy stream)
    gpu::Event consumed = nullptr;  // the net's inputs were taken from it (compute stream)
    bool used = false;
  };

  Context& ctx_;
  gpu::Stream copy_stream_ = nullptr;
  std::array<Slot, 2> slots_;
  size_t next_stage_ = 0, next_feed_ = 0;
};

}  // namespace crema
