#include "core/torch_pickle.h"

#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::torch_pickle {
namespace {

// A state_dict of N tensors makes about 20 N objects; a million is a model of 50,000 tensors.
constexpr size_t kMaxValues = 1'000'000;

// The globals a state_dict names, and the storage types among them.
struct Known {
  const char* name;
  bool storage;
  StorageType type;
};
constexpr Known kKnown[] = {
    {"collections.OrderedDict", false, StorageType::f32},
    {"torch._utils._rebuild_tensor_v2", false, StorageType::f32},
    {"torch._utils._rebuild_parameter", false, StorageType::f32},
    {"torch.FloatStorage", true, StorageType::f32},
    {"torch.HalfStorage", true, StorageType::f16},
    {"torch.BFloat16Storage", true, StorageType::bf16},
    {"torch.DoubleStorage", true, StorageType::f64},
    {"torch.LongStorage", true, StorageType::i64},
};

const Known* known_global(const std::string& name) {
  for (const Known& k : kKnown) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

}  // namespace

const char* storage_type_name(StorageType type) {
  switch (type) {
    case StorageType::f32:
      return "f32";
    case StorageType::f16:
      return "f16";
    case StorageType::bf16:
      return "bf16";
    case StorageType::f64:
      return "f64";
    case StorageType::i64:
      return "i64";
  }
  return "?";
}

int64_t item_size(StorageType type) {
  switch (type) {
    case StorageType::f16:
    case StorageType::bf16:
      return 2;
    case StorageType::f32:
      return 4;
    case StorageType::f64:
    case StorageType::i64:
      return 8;
  }
  return 0;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::none:
      return "None";
    case Kind::boolean:
      return "a bool";
    case Kind::integer:
      return "an int";
    case Kind::floating:
      return "a float";
    case Kind::string:
      return "a string";
    case Kind::tuple:
      return "a tuple";
    case Kind::list:
      return "a list";
    case Kind::dict:
      return "a dict";
    case Kind::global:
      return "a global";
    case Kind::storage:
      return "a storage";
    case Kind::tensor:
      return "a tensor";
  }
  return "?";
}

// The stack machine; one per Pickle, gone when the constructor returns.
class Machine {
 public:
  Machine(Pickle& out, const std::string& bytes, const std::string& where)
      : out_(out), bytes_(bytes), where_(where) {}

  Value* run() {
    if (bytes_.size() < 2 || uint8_t(bytes_[0]) != 0x80) {
      fail("it does not start with a pickle's PROTO opcode");
    }
    while (pos_ < bytes_.size()) {
      op_pos_ = pos_;
      const uint8_t op = byte();
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || !marks_.empty()) fail("STOP leaves a malformed stack");
        return stack_.back();
      }
      step(op);
    }
    op_pos_ = bytes_.size();
    fail("the pickle ends without STOP (truncated)");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{} byte {}: {}", where_, op_pos_, what));
  }

  // --- reading the opcode's arguments, each bounded by the bytes left ---
  std::string_view take(size_t n) {
    if (n > bytes_.size() - pos_) fail("an argument runs past the end of the pickle (truncated)");
    std::string_view v(bytes_.data() + pos_, n);
    pos_ += n;
    return v;
  }
  uint8_t byte() { return uint8_t(take(1)[0]); }
  uint64_t le(size_t n) {
    const std::string_view v = take(n);
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= uint64_t(uint8_t(v[i])) << (8 * i);
    return x;
  }
  std::string line() {
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string::npos) fail("a GLOBAL name runs past the end of the pickle");
    std::string s = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  // --- values ---
  Value* make(Kind kind) {
    if (out_.values_.size() >= kMaxValues) {
      fail(fmt::format("the pickle builds more than {} objects, far more than a state_dict needs",
                       kMaxValues));
    }
    Value& v = out_.values_.emplace_back();
    v.kind = kind;
    return &v;
  }
  Value* integer(int64_t i, Kind kind = Kind::integer) {
    Value* v = make(kind);
    v->integer = i;
    return v;
  }
  void push(Value* v) { stack_.push_back(v); }
  Value* pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the stack is empty");
    return stack_.back();
  }
  // The values above the topmost MARK, which is removed.
  std::vector<Value*> pop_to_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    std::vector<Value*> items(stack_.begin() + std::ptrdiff_t(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value* tuple(const std::vector<Value*>& items) {
    Value* v = make(Kind::tuple);
    v->items = items;
    return v;
  }

  void memo_put(uint64_t index) { memo_[index] = top(); }
  Value* memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(fmt::format("memo entry {} was never stored", index));
    return it->second;
  }

  void global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (!known_global(full)) {
      fail("the pickle names the global '" + full +
           "', which a state_dict never holds; refused, nothing was run (crema reads only "
           "collections.OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter and "
           "torch's Float/Half/BFloat16/Double/Long storages: save model.state_dict())");
    }
    Value* v = make(Kind::global);
    v->text = full;
    push(v);
  }

  void set_item(Value* dict, Value* key, Value* value) {
    if (dict->kind != Kind::dict) fail(std::string("SETITEM on ") + kind_name(dict->kind));
    if (key->kind == Kind::string && !string_keys_[dict].insert(key->text).second) {
      fail("the key '" + key->text + "' appears twice in one dict");
    }
    dict->entries.emplace_back(key, value);
  }

  int64_t int_arg(const Value* v, const char* what) {
    if (v->kind != Kind::integer) fail(std::string(what) + " is " + kind_name(v->kind));
    return v->integer;
  }
  std::vector<int64_t> ints_arg(const Value* v, const char* what) {
    if (v->kind != Kind::tuple) fail(std::string(what) + " is " + kind_name(v->kind));
    std::vector<int64_t> out;
    for (Value* item : v->items) out.push_back(int_arg(item, what));
    return out;
  }

  // REDUCE: one of the known callables applied to `args`.
  Value* call(Value* callable, Value* args) {
    if (callable->kind != Kind::global)
      fail(std::string("REDUCE calls ") + kind_name(callable->kind));
    if (args->kind != Kind::tuple)
      fail(std::string("REDUCE's arguments are ") + kind_name(args->kind));
    const std::string& name = callable->text;
    const auto& a = args->items;
    if (name == "collections.OrderedDict") {
      if (!a.empty()) fail("collections.OrderedDict is called with arguments");
      return make(Kind::dict);
    }
    if (name == "torch._utils._rebuild_parameter") {
      if (a.size() != 3 || a[0]->kind != Kind::tensor) {
        fail("torch._utils._rebuild_parameter is not called with (tensor, requires_grad, hooks)");
      }
      return a[0];
    }
    if (name == "torch._utils._rebuild_tensor_v2") {
      if (a.size() != 6 && a.size() != 7) {
        fail(fmt::format("torch._utils._rebuild_tensor_v2 takes 6 or 7 arguments, not {}",
                         a.size()));
      }
      if (a[0]->kind != Kind::storage) {
        fail(std::string("the tensor's storage is ") + kind_name(a[0]->kind));
      }
      Value* t = make(Kind::tensor);
      t->storage = a[0];
      t->integer = int_arg(a[1], "the tensor's storage offset");
      t->sizes = ints_arg(a[2], "the tensor's size");
      t->strides = ints_arg(a[3], "the tensor's stride");
      return t;
    }
    fail("REDUCE calls " + name + ", which builds no value here");
  }

  // BINPERSID: ('storage', storage type, key, location, numel).
  Value* persistent(Value* pid) {
    if (pid->kind != Kind::tuple || pid->items.size() != 5 || pid->items[0]->kind != Kind::string ||
        pid->items[0]->text != "storage") {
      fail("a persistent id is not ('storage', type, key, location, numel)");
    }
    Value* type = pid->items[1];
    const Known* known = type->kind == Kind::global ? known_global(type->text) : nullptr;
    if (!known || !known->storage) {
      fail(std::string("a storage's type is ") +
           (type->kind == Kind::global ? "'" + type->text + "'" : kind_name(type->kind)) +
           ", not one of torch's Float/Half/BFloat16/Double/Long storages");
    }
    if (pid->items[2]->kind != Kind::string) fail("a storage's key is not a string");
    const int64_t numel = int_arg(pid->items[4], "a storage's size");
    if (numel < 0) fail(fmt::format("a storage has {} elements", numel));
    Value* s = make(Kind::storage);
    s->storage_type = known->type;
    s->text = pid->items[2]->text;
    s->integer = numel;
    return s;
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (byte() > 5) fail("unknown pickle protocol");
        return;
      case 0x95:  // FRAME: a length hint only
        take(8);
        return;
      case '(':
        marks_.push_back(stack_.size());
        return;  // MARK
      case '}':
        push(make(Kind::dict));
        return;  // EMPTY_DICT
      case ']':
        push(make(Kind::list));
        return;  // EMPTY_LIST
      case ')':
        push(tuple({}));
        return;  // EMPTY_TUPLE
      case 't':
        push(tuple(pop_to_mark()));
        return;  // TUPLE
      case 0x85:
        push(tuple({pop()}));
        return;     // TUPLE1
      case 0x86: {  // TUPLE2
        Value* b = pop();
        Value* a = pop();
        push(tuple({a, b}));
        return;
      }
      case 0x87: {  // TUPLE3
        Value* c = pop();
        Value* b = pop();
        Value* a = pop();
        push(tuple({a, b, c}));
        return;
      }
      case 'N':
        push(make(Kind::none));
        return;  // NONE
      case 0x88:
        push(integer(1, Kind::boolean));
        return;  // NEWTRUE
      case 0x89:
        push(integer(0, Kind::boolean));
        return;  // NEWFALSE
      case 'K':
        push(integer(int64_t(le(1))));
        return;  // BININT1
      case 'M':
        push(integer(int64_t(le(2))));
        return;  // BININT2
      case 'J':
        push(integer(int64_t(int32_t(le(4)))));
        return;     // BININT
      case 0x8a: {  // LONG1
        const size_t n = byte();
        if (n > 8) fail(fmt::format("an integer of {} bytes", n));
        uint64_t x = le(n);
        if (n > 0 && n < 8 && (x >> (8 * n - 1)) & 1) x |= ~uint64_t(0) << (8 * n);  // sign
        push(integer(int64_t(x)));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const std::string_view v = take(8);
        uint64_t bits = 0;
        for (char c : v) bits = (bits << 8) | uint8_t(c);
        Value* f = make(Kind::floating);
        std::memcpy(&f->floating, &bits, 8);
        push(f);
        return;
      }
      case 'X':     // BINUNICODE
      case 0x8c: {  // SHORT_BINUNICODE
        const size_t n = size_t(le(op == 'X' ? 4 : 1));
        Value* s = make(Kind::string);
        s->text = std::string(take(n));
        push(s);
        return;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string module = line();
        global(module, line());
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        Value* name = pop();
        Value* module = pop();
        if (module->kind != Kind::string || name->kind != Kind::string) {
          fail("STACK_GLOBAL on values that are not strings");
        }
        global(module->text, name->text);
        return;
      }
      case 'R': {  // REDUCE
        Value* args = pop();
        push(call(pop(), args));
        return;
      }
      case 'Q':
        push(persistent(pop()));
        return;    // BINPERSID
      case 'b': {  // BUILD: the state of an object
        Value* state = pop();
        Value* object = top();
        // An OrderedDict's state is its attributes: a state_dict's `_metadata` (versions).
        if (object->kind != Kind::dict ||
            (state->kind != Kind::dict && state->kind != Kind::none)) {
          fail(std::string("BUILD sets the state of ") + kind_name(object->kind));
        }
        return;
      }
      case 'q':
        memo_put(le(1));
        return;  // BINPUT
      case 'r':
        memo_put(le(4));
        return;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        return;  // MEMOIZE
      case 'h':
        push(memo_get(le(1)));
        return;  // BINGET
      case 'j':
        push(memo_get(le(4)));
        return;    // LONG_BINGET
      case 's': {  // SETITEM
        Value* value = pop();
        Value* key = pop();
        set_item(top(), key, value);
        return;
      }
      case 'u': {  // SETITEMS
        const std::vector<Value*> items = pop_to_mark();
        if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values");
        Value* dict = top();
        for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
        return;
      }
      case 'a': {  // APPEND
        Value* item = pop();
        append(top(), {item});
        return;
      }
      case 'e': {  // APPENDS
        const std::vector<Value*> items = pop_to_mark();
        append(top(), items);
        return;
      }
      default:
        fail(fmt::format("opcode 0x{:02x} is not one a state_dict uses; refused", op));
    }
  }

  void append(Value* list, const std::vector<Value*>& items) {
    if (list->kind != Kind::list) fail(std::string("APPEND to ") + kind_name(list->kind));
    list->items.insert(list->items.end(), items.begin(), items.end());
  }

  Pickle& out_;
  const std::string& bytes_;
  const std::string& where_;
  size_t pos_ = 0, op_pos_ = 0;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  std::unordered_map<const Value*, std::unordered_set<std::string>> string_keys_;  // per dict
};

Pickle::Pickle(const std::string& bytes, const std::string& where) {
  root_ = Machine(*this, bytes, where).run();
}

}  // namespace crema::torch_pickle
