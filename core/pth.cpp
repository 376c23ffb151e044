#include "core/pth.h"

#include <zip.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/float16.h"
#include "core/shape.h"
#include "core/torch_pickle.h"

namespace crema {
namespace {

using torch_pickle::Kind;
using torch_pickle::StorageType;
using torch_pickle::Value;

// The keys under which training scripts commonly keep the state_dict beside other things.
constexpr const char* kNestingKeys[] = {"state_dict", "model", "model_state", "model_state_dict",
                                        "net"};
constexpr size_t kMaxDims = 16;

struct ZipDeleter {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileDeleter {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// A tensor's place in its storage, in elements.
struct View {
  std::vector<int64_t> sizes, strides;
  int64_t offset;
};

class PthReader {
 public:
  explicit PthReader(const std::string& path) : path_(path) {
    std::error_code ec;
    file_size_ = std::filesystem::file_size(path, ec);
    if (ec) throw Error("cannot read '" + path + "': " + ec.message());
    int code = 0;
    zip_.reset(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
    if (!zip_) {
      zip_error_t error;
      zip_error_init_with_code(&error, code);
      const std::string reason = zip_error_strerror(&error);
      zip_error_fini(&error);
      throw Error(path + ": a PyTorch checkpoint is a zip, but this one cannot be read (" + reason +
                  "; truncated or corrupt?)");
    }
    find_stem();
  }

  WeightsFile read() {
    const std::string pickle_bytes = entry(stem_ + "data.pkl");
    const torch_pickle::Pickle pickle(pickle_bytes, path_ + ": " + stem_ + "data.pkl");
    WeightsFile out;
    std::vector<std::string> notes;
    const Value& dict = state_dict(pickle.root(), notes);
    const std::string prefix = common_module_prefix(dict);
    if (!prefix.empty()) notes.push_back("'module.' prefixes removed");
    // A storage's bytes are dropped after the last tensor that views it: the peak is the
    // tensors plus one storage, not twice the model.
    std::map<std::string, int64_t> views;
    for (const auto& entry : dict.entries) ++views[entry.second->storage->text];
    for (const auto& [key, value] : dict.entries) {
      // The pickle refused duplicate keys; removing one common prefix keeps them apart.
      const std::string name = key->text.substr(prefix.size());
      out.tensors.emplace_back(name, tensor(name, *value));
      if (--views[value->storage->text] == 0) storages_.erase(value->storage->text);
    }
    const std::string widened_text = widened_.text();
    if (!widened_text.empty()) notes.insert(notes.begin(), widened_text);
    for (const std::string& n : notes) out.notes += (out.notes.empty() ? "" : "; ") + n;
    return out;
  }

 private:
  // The entries' common folder: "<stem>/" of the one "<stem>/data.pkl".
  void find_stem() {
    const zip_int64_t count = zip_get_num_entries(zip_.get(), 0);
    std::vector<std::string> found;
    for (zip_int64_t i = 0; i < count; ++i) {
      const char* name = zip_get_name(zip_.get(), zip_uint64_t(i), 0);
      if (!name) continue;
      const std::string n = name;
      const size_t slash = n.find('/');
      if (slash != std::string::npos && n.substr(slash + 1) == "data.pkl") found.push_back(n);
    }
    if (found.size() != 1) {
      throw Error(path_ + ": a zip but not a PyTorch checkpoint (" +
                  (found.empty() ? std::string("no <name>/data.pkl entry")
                                 : fmt::format("{} data.pkl entries", found.size())) +
                  "; crema reads files written by torch.save(model.state_dict(), F))");
    }
    stem_ = found[0].substr(0, found[0].size() - std::strlen("data.pkl"));
    if (zip_name_locate(zip_.get(), (stem_ + "byteorder").c_str(), 0) >= 0 &&
        entry(stem_ + "byteorder") != "little") {
      throw Error(path_ + ": its storages are big-endian; crema reads little-endian checkpoints");
    }
  }

  // The bytes of one entry, after checking that it is stored and no larger than the file.
  std::string entry(const std::string& name) {
    const zip_int64_t index = zip_name_locate(zip_.get(), name.c_str(), 0);
    if (index < 0) throw Error(path_ + ": the entry '" + name + "' is missing");
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip_.get(), zip_uint64_t(index), 0, &st) != 0) {
      throw Error(path_ + ": cannot read the entry '" + name + "': " + zip_strerror(zip_.get()));
    }
    if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE) {
      throw Error(path_ + ": the entry '" + name + "' is compressed; torch.save stores its " +
                  "entries uncompressed, so re-save the file with torch.save");
    }
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
      throw Error(path_ + ": the entry '" + name + "' is encrypted");
    }
    if (!(st.valid & ZIP_STAT_SIZE) || st.size > file_size_) {
      throw Error(path_ + ": the entry '" + name + "' claims " + std::to_string(st.size) +
                  " bytes but the file has " + std::to_string(file_size_) + " (corrupt)");
    }
    std::unique_ptr<zip_file_t, ZipFileDeleter> file(
        zip_fopen_index(zip_.get(), zip_uint64_t(index), 0));
    if (!file) {
      throw Error(path_ + ": cannot open the entry '" + name + "': " + zip_strerror(zip_.get()));
    }
    std::string bytes(st.size, '\0');
    const zip_int64_t n = zip_fread(file.get(), bytes.data(), st.size);
    if (n < 0 || zip_uint64_t(n) != st.size) {
      throw Error(path_ + ": the entry '" + name + "' cannot be read whole (" +
                  zip_file_strerror(file.get()) + "; truncated or corrupt?)");
    }
    return bytes;
  }

  // The dict of tensors: the pickle's root, or the dict under one of kNestingKeys.
  const Value& state_dict(const Value& root, std::vector<std::string>& notes) const {
    if (root.kind != Kind::dict) {
      throw Error(path_ + ": the pickle holds " + kind_name(root.kind) +
                  ", not a state_dict; save model.state_dict()");
    }
    if (all_tensors(root)) return root;
    for (const char* key : kNestingKeys) {
      for (const auto& [k, v] : root.entries) {
        if (k->kind == Kind::string && k->text == key && v->kind == Kind::dict && all_tensors(*v)) {
          notes.push_back(std::string("the state_dict under '") + key + "'");
          return *v;
        }
      }
    }
    std::string keys;
    for (size_t i = 0; i < root.entries.size() && i < 8; ++i) {
      const Value* k = root.entries[i].first;
      keys +=
          (i ? ", " : "") + (k->kind == Kind::string ? "'" + k->text + "'" : kind_name(k->kind));
    }
    if (root.entries.size() > 8) keys += fmt::format(" and {} more", root.entries.size() - 8);
    throw Error(path_ + ": no state_dict in it: its dict (" + keys +
                ") is not all tensors, and none of the keys 'state_dict', 'model', " +
                "'model_state', 'model_state_dict', 'net' holds one");
  }

  static bool all_tensors(const Value& dict) {
    for (const auto& [k, v] : dict.entries) {
      if (k->kind != Kind::string || v->kind != Kind::tensor) return false;
    }
    return true;
  }

  // "module." when every name starts with it (torch.nn.DataParallel's wrapper), else "".
  static std::string common_module_prefix(const Value& dict) {
    const std::string prefix = "module.";
    if (dict.entries.empty()) return "";
    for (const auto& entry : dict.entries) {
      if (entry.first->text.compare(0, prefix.size(), prefix) != 0) return "";
    }
    return prefix;
  }

  // A storage's bytes, read once however many tensors view it. Each persistent id states the
  // storage's type and size anew, so each is checked against the entry, not only the first.
  const std::string& storage(const std::string& name, const Value& s) {
    const std::string entry_name = stem_ + "data/" + s.text;
    auto it = storages_.find(s.text);
    if (it == storages_.end()) {
      if (zip_name_locate(zip_.get(), entry_name.c_str(), 0) < 0) {
        throw Error(path_ + ": tensor '" + name + "': its storage '" + entry_name +
                    "' is missing from the zip");
      }
      it = storages_.emplace(s.text, entry(entry_name)).first;
    }
    const std::string& bytes = it->second;
    if (uint64_t(s.integer) > bytes.size() / uint64_t(item_size(s.storage_type))) {
      throw Error(path_ + ": tensor '" + name + "': its storage claims " +
                  std::to_string(s.integer) + " " + storage_type_name(s.storage_type) +
                  " elements but the entry '" + entry_name + "' holds " +
                  std::to_string(bytes.size()) + " bytes");
    }
    return bytes;
  }

  Tensor tensor(const std::string& name, const Value& t) {
    const std::string where = path_ + ": tensor '" + name + "'";
    const Value& s = *t.storage;
    const std::string& bytes = storage(name, s);
    const int64_t storage_numel = s.integer;
    if (t.sizes.size() != t.strides.size() || t.sizes.size() > kMaxDims) {
      throw Error(where +
                  fmt::format(" has {} sizes and {} strides", t.sizes.size(), t.strides.size()));
    }
    if (t.integer < 0) throw Error(where + fmt::format(" has the storage offset {}", t.integer));
    int64_t numel = 1;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] < 0 || t.strides[d] < 0) {
        throw Error(where + " has the size " + shape_str(t.sizes) + " and stride " +
                    shape_str(t.strides) + "; negative sizes and strides are refused");
      }
      if (t.sizes[d] > 0 && numel > storage_numel / t.sizes[d]) {
        throw Error(where + " of size " + shape_str(t.sizes) + " has more elements than its " +
                    "storage's " + std::to_string(storage_numel));
      }
      numel *= t.sizes[d];
    }
    // The last element's index, offset + sum (size - 1) * stride, must lie inside the storage.
    if (numel > 0) {
      int64_t last = t.integer;
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        const int64_t steps = t.sizes[d] - 1;
        if (steps > 0 && t.strides[d] > (storage_numel - last) / steps) {
          last = storage_numel;
          break;
        }
        last += steps * t.strides[d];
      }
      if (last >= storage_numel) {
        throw Error(where + fmt::format(" (offset {}, size {}, stride {}) reaches past its "
                                        "storage of {} elements",
                                        t.integer, shape_str(t.sizes), shape_str(t.strides),
                                        storage_numel));
      }
    }
    // A dim of one element never steps: its stride, which may be anything, is not used.
    View view{t.sizes, t.strides, t.integer};
    for (size_t d = 0; d < view.sizes.size(); ++d) {
      if (view.sizes[d] == 1) view.strides[d] = 0;
    }
    switch (s.storage_type) {
      case StorageType::f32:
        return gather<float>(view, bytes, 4, [](const char* p) {
          float v;
          std::memcpy(&v, p, 4);
          return v;
        });
      case StorageType::f16:
        ++widened_.f16;
        return gather<float>(view, bytes, 2, [](const char* p) {
          uint16_t v;
          std::memcpy(&v, p, 2);
          return f16_to_f32(v);
        });
      case StorageType::bf16:
        ++widened_.bf16;
        return gather<float>(view, bytes, 2, [](const char* p) {
          uint16_t v;
          std::memcpy(&v, p, 2);
          return bf16_to_f32(v);
        });
      case StorageType::f64:
        return gather<double>(view, bytes, 8, [](const char* p) {
          double v;
          std::memcpy(&v, p, 8);
          return v;
        });
      case StorageType::i64:
        return gather<float>(view, bytes, 8, [](const char* p) {
          int64_t v;
          std::memcpy(&v, p, 8);
          return float(v);
        });
    }
    CREMA_CHECK(false, "load_pth: unknown storage type");
    return {};
  }

  // Copies the strided view (checked above) into a new contiguous tensor, element by element in
  // row-major order: an odometer over the indices that moves the source by each dim's stride.
  template <class T, class Convert>
  static Tensor gather(const View& t, const std::string& bytes, int64_t item, Convert convert) {
    Tensor out(t.sizes, std::is_same_v<T, double> ? DType::f64 : DType::f32);
    T* dst = out.data<T>();
    const int64_t numel = shape_numel(t.sizes);
    const int64_t dims = int64_t(t.sizes.size());
    std::vector<int64_t> index(size_t(dims), 0);
    int64_t src = t.offset;
    for (int64_t i = 0; i < numel; ++i) {
      dst[i] = convert(bytes.data() + src * item);
      for (int64_t d = dims - 1; d >= 0; --d) {
        src += t.strides[size_t(d)];
        if (++index[size_t(d)] < t.sizes[size_t(d)]) break;
        src -= t.strides[size_t(d)] * t.sizes[size_t(d)];
        index[size_t(d)] = 0;
      }
    }
    return out;
  }

  std::string path_;
  uint64_t file_size_ = 0;
  std::unique_ptr<zip_t, ZipDeleter> zip_;
  std::string stem_;
  std::map<std::string, std::string> storages_;
  Widened widened_;
};

}  // namespace

WeightsFile load_pth(const std::string& path) {
  return PthReader(path).read();
}

}  // namespace crema
