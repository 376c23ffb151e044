// PyTorch checkpoints written by `torch.save(model.state_dict(), F)` (torch >= 1.6), read without
// running any of the file's code.
//
// The file is a zip (stored, not compressed) whose entries share one top folder, the file's stem:
//   <stem>/data.pkl         the pickle of the state_dict: an OrderedDict of name -> tensor, each
//                           tensor a strided view (offset, size, stride) of a storage
//   <stem>/data/<key>       each storage's raw little-endian elements
//   <stem>/version          the format version ("3"); <stem>/byteorder ("little", newer torch)
// The zip is read by libzip; the pickle by crema's restricted unpickler (core/torch_pickle.h),
// which knows only the globals a state_dict needs and refuses any other by name.
//
// Every size comes from the file and is checked against it before anything is allocated: a
// storage's elements must fit its entry; a tensor's offset + (size - 1) . stride must lie inside
// its storage; sizes, strides and offsets are never negative. Strided views (a transposed weight)
// are copied element by element into a contiguous tensor. f16 and bf16 become f32, i64 (a batch
// norm's num_batches_tracked) f32, f64 stays f64.
//
// Checkpoints that hold more than the weights are understood too: a state_dict under one of the
// keys 'state_dict', 'model', 'model_state', 'model_state_dict' or 'net' (the other keys, such as
// an optimizer's state, are ignored), and the 'module.' prefix of every name that
// torch.nn.DataParallel adds is removed.
#pragma once

#include <string>

#include "core/weights_file.h"

namespace crema {

// Throws crema::Error naming the file and what is wrong with it.
WeightsFile load_pth(const std::string& path);

}  // namespace crema
