// Dump of one case run (cases.md "Dump files").
#include "dump.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/numeric.h"
#include "testing/npy.h"

namespace pagedattn::cli {
namespace {

// A contiguous host tensor of any float dtype, upcast to f32.
std::vector<float> to_f32(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.numel()));
  for (int64_t i = 0; i < view.numel(); ++i) out[i] = load_as_float(view.data(), view.dtype(), i);
  return out;
}

std::vector<int64_t> shape_of(const TensorView& view) {
  return {view.shape().begin(), view.shape().end()};
}

// The cache in logical order: dequantized f32, and for FP8 the raw bytes too.
Status dump_cache(const std::string& dir, const testing::HostBatch& batch) {
  const TensorView& cache = batch.kv_cache.view();
  const bool fp8 = is_fp8(cache.dtype());
  const std::vector<int64_t> shape = shape_of(cache);
  std::vector<float> values(static_cast<size_t>(cache.numel()));
  std::vector<uint8_t> raw(fp8 ? values.size() : 0);
  const float* scale[2] = {batch.k_scale.data<float>(), batch.v_scale.data<float>()};
  const bool per_head = batch.k_scale.view().numel() > 1;
  int64_t i = 0;
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t plane = 0; plane < 2; ++plane) {
      for (int64_t s = 0; s < shape[2]; ++s) {
        for (int64_t h = 0; h < shape[3]; ++h) {
          for (int64_t e = 0; e < shape[4]; ++e, ++i) {
            const int64_t at = b * cache.stride(0) + plane * cache.stride(1) + s * cache.stride(2) +
                               h * cache.stride(3) + e * cache.stride(4);
            float x = load_as_float(cache.data(), cache.dtype(), at);
            if (fp8) {
              raw[i] = cache.data_as<uint8_t>()[at];
              x *= scale[plane][per_head ? h : 0];
            }
            values[i] = x;
          }
        }
      }
    }
  }
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy_f32(dir + "/kv_cache.npy", shape, values));
  if (!fp8) return ok_status();
  TensorView raw_view(raw.data(), DType::kU8, Device::cpu(), std::span<const int64_t>(shape));
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy(dir + "/kv_cache_raw.npy", raw_view));
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy(dir + "/k_scale.npy", batch.k_scale.view()));
  return testing::write_npy(dir + "/v_scale.npy", batch.v_scale.view());
}

}  // namespace

Status prepare_dump_dir(const std::string& dir) {
  if (dir.empty()) return invalid_argument("--dump: the directory name is empty");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return not_found("--dump: cannot create '" + dir + "': " + error.message());
  if (!std::filesystem::is_directory(dir, error)) {
    return invalid_argument("--dump: '" + dir + "' exists and is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return invalid_argument("--dump: cannot write to '" + dir + "': " + std::strerror(errno));
  }
  return ok_status();
}

Status dump_case(const std::string& dir, const StepRunner& run,
                 const reference::Comparison& result) {
  PAGEDATTN_RETURN_IF_ERROR(prepare_dump_dir(dir));
  std::error_code error;
  // Files another case may have left that this one does not write (a stale sinks.npy would change
  // what the checker computes).
  for (const char* name : {"kv_cache_raw.npy", "k_scale.npy", "v_scale.npy", "sinks.npy",
                           "alibi_slopes.npy", "lse.npy"}) {
    std::filesystem::remove(dir + "/" + name, error);
  }
  const testing::HostBatch& batch = run.batch();

  nlohmann::json meta;
  meta["case"] = nlohmann::json::parse(testing::case_to_json(batch.spec));
  meta["backend"] = std::string(run.backend().name());
  meta["kernel_generation"] = std::string(run.kernel_generation());
  meta["cascade_prefix_len"] = run.cascade_prefix_len();
  meta["device"] = device_name(run.device());
  meta["scale"] = batch.params.resolved_scale();
  meta["kv_layout"] = std::string(kv_cache_layout_name(batch.layout));
  const KVCacheStrideOrder order = run.backend().get_kv_cache_stride_order(batch.layout);
  meta["stride_order"] = std::vector<int>(order.begin(), order.end());
  meta["num_blocks"] = batch.num_blocks;
  meta["max_abs_error"] = result.max_abs_error;
  meta["rel_frobenius"] = result.rel_frobenius;
  meta["pass"] = result.pass;
  {
    std::ofstream out(dir + "/meta.json", std::ios::trunc);
    out << meta.dump(1) << "\n";
    if (!out.flush()) return not_found("--dump: cannot write '" + dir + "/meta.json'");
  }

  auto f32 = [&](const std::string& name, const TensorView& view) {
    return testing::write_npy_f32(dir + "/" + name, shape_of(view), to_f32(view));
  };
  PAGEDATTN_RETURN_IF_ERROR(f32("query.npy", batch.query.view()));
  PAGEDATTN_RETURN_IF_ERROR(f32("key.npy", batch.key.view()));
  PAGEDATTN_RETURN_IF_ERROR(f32("value.npy", batch.value.view()));
  PAGEDATTN_RETURN_IF_ERROR(dump_cache(dir, batch));
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy(dir + "/block_table.npy", batch.block_table.view()));
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy(dir + "/seq_lens.npy", batch.seq_lens.view()));
  PAGEDATTN_RETURN_IF_ERROR(
      testing::write_npy(dir + "/query_start_loc.npy", batch.query_start_loc.view()));
  PAGEDATTN_RETURN_IF_ERROR(
      testing::write_npy(dir + "/slot_mapping.npy", batch.slot_mapping.view()));
  PAGEDATTN_RETURN_IF_ERROR(f32("output.npy", run.output().view()));
  PAGEDATTN_RETURN_IF_ERROR(testing::write_npy(dir + "/lse.npy", run.lse().view()));
  const int64_t hq = batch.spec.num_heads;
  if (!batch.params.sinks.empty()) {
    PAGEDATTN_RETURN_IF_ERROR(testing::write_npy_f32(dir + "/sinks.npy", {hq}, batch.params.sinks));
  }
  if (!batch.params.alibi_slopes.empty()) {
    PAGEDATTN_RETURN_IF_ERROR(
        testing::write_npy_f32(dir + "/alibi_slopes.npy", {hq}, batch.params.alibi_slopes));
  }
  return ok_status();
}

}  // namespace pagedattn::cli
