// A restricted reader of the pickle inside a PyTorch checkpoint (data.pkl of torch.save's zip):
// it understands what `torch.save(model.state_dict())` writes and refuses everything else.
//
// A pickle is a program for a small stack machine: opcodes push values (ints, strings, tuples,
// dicts), and GLOBAL names a Python callable that REDUCE calls with a tuple of arguments. Python's
// own unpickler imports and calls whatever the file names -- `os.system`, `builtins.eval` -- which
// is why loading an untrusted .pth with pickle runs code. This reader never calls out: it knows a
// fixed list of globals and builds crema's own description of each call:
//
//   collections.OrderedDict()                        an empty dict (filled by SETITEMS)
//   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])
//                                                    a tensor: a strided view of a storage
//   torch._utils._rebuild_parameter(tensor, requires_grad, hooks)
//                                                    the tensor itself
//   torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage, LongStorage
//                                                    storage types, named only inside the
//                                                    persistent id ('storage', type, key,
//                                                    location, numel) of BINPERSID; the bytes are
//                                                    the zip entry data/<key>
//
// Any other global is refused with one error naming it, before anything else happens. The opcodes
// are those of protocol 2 (torch's default) plus the few of protocols 3-4 a state_dict can use
// (SHORT_BINUNICODE, MEMOIZE, FRAME, STACK_GLOBAL). Every length is checked against the bytes
// left; the number of objects is capped, so a file cannot make the reader allocate without bound.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace crema::torch_pickle {

// The element types of the storages crema reads.
enum class StorageType { f32, f16, bf16, f64, i64 };
const char* storage_type_name(StorageType type);  // "f32", "f16", ...
int64_t item_size(StorageType type);              // bytes per element

enum class Kind {
  none,
  boolean,
  integer,
  floating,
  string,
  tuple,
  list,
  dict,
  global,
  storage,
  tensor
};
const char* kind_name(Kind kind);  // "an int", "a dict", ...

// One value of the pickle. The Pickle owns every Value; values point at each other (a memo lets
// one value appear in several places), so the graph may even hold cycles and is never walked
// recursively here.
struct Value {
  Kind kind = Kind::none;
  int64_t integer = 0;  // integer, boolean (0/1); storage: numel; tensor: storage offset
  double floating = 0;
  std::string text;                                // string; global "module.name"; storage key
  std::vector<Value*> items;                       // tuple, list
  std::vector<std::pair<Value*, Value*>> entries;  // dict, in insertion order
  StorageType storage_type = StorageType::f32;     // storage
  Value* storage = nullptr;                        // tensor: its storage
  std::vector<int64_t> sizes, strides;             // tensor
};

class Pickle {
 public:
  // Runs the pickle `bytes`; `where` starts every error message (e.g. "model.pth: data.pkl").
  // Throws crema::Error: a refused global, an opcode a state_dict does not use, a malformed
  // argument, a duplicate dict key, a pickle without STOP.
  Pickle(const std::string& bytes, const std::string& where);

  const Value& root() const { return *root_; }

 private:
  std::deque<Value> values_;
  const Value* root_ = nullptr;
  friend class Machine;
};

}  // namespace crema::torch_pickle
