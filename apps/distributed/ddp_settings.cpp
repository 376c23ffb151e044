#include "apps/distributed/ddp_settings.h"

#include <string>

#include <fmt/format.h>

namespace crema::distributed {
namespace {

int64_t mebibytes(const ConfigNode& node, const char* key, int64_t fallback) {
  if (!node.has(key)) return fallback;
  const double mb = node.get<double>(key);
  if (!(mb > 0.0 && mb <= 1 << 20)) {
    node.fail_at_key(
        key, fmt::format("distributed.{}: must be a size in MiB in (0, 1048576], got {}", key, mb));
  }
  return int64_t(mb * double(1 << 20));
}

}  // namespace

DdpSettings read_ddp_settings(const ConfigNode& root) {
  DdpSettings s;
  if (!root.has("distributed")) return s;
  const ConfigNode& node = root.at("distributed");
  const std::string dtype = node.get<std::string>("reduce_dtype", "f32");
  if (dtype == "bf16") {
    s.reduce_dtype = DType::bf16;
  } else if (dtype != "f32") {
    node.fail_at_key("reduce_dtype",
                     "distributed.reduce_dtype: must be f32 or bf16, got '" + dtype + "'");
  }
  s.bucket_bytes = mebibytes(node, "bucket_cap_mb", s.bucket_bytes);
  s.first_bucket_bytes = mebibytes(node, "first_bucket_mb", s.first_bucket_bytes);
  node.check_no_unknown_keys("distributed");
  return s;
}

}  // namespace crema::distributed
