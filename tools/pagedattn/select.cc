// `pagedattn select`: which backend serves a model on a device, why each other one cannot, and the
// KV-cache geometry to allocate for the choice.
#include <iostream>
#include <limits>
#include <memory>

#include "commands.h"
#include "common.h"
#include "pagedattn/device_info.h"
#include "pagedattn/kv_cache.h"
#include "pagedattn/selector.h"

namespace pagedattn::cli {
namespace {

// The case-file limits, so that a model `select` takes is one a case file could describe.
constexpr int64_t kMaxHeads = testing::kMaxCaseHeads;
constexpr int64_t kMaxHeadSize = testing::kMaxCaseHeadSize;
constexpr int64_t kMaxBlockSize = testing::kMaxCaseBlockSize;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();  // block ids, window sizes

struct SelectOptions {
  std::string case_file;
  int head_size = 128;
  int num_heads = 32;
  int num_kv_heads = 8;
  std::string dtype = "bf16";
  std::string kv_cache_dtype = "auto";
  std::optional<int> block_size;
  bool sinks = false;
  bool alibi = false;
  std::optional<int> sliding_window;
  std::optional<double> soft_cap;
  bool non_causal = false;
  std::string attn_type = "decoder";
  bool per_head_scales = false;
  std::string device;
  std::string compute_capability;
  std::string backend = "auto";
  std::optional<int64_t> num_blocks;
};

void print_reasons(const std::string& backend, const std::vector<std::string>& reasons) {
  std::cout << "  " << backend << ":\n";
  for (const std::string& reason : reasons) std::cout << "    - " << reason << "\n";
}

int run_select(const SelectOptions& o) {
  AttentionSelectorConfig config;
  if (!o.case_file.empty()) {
    StatusOr<testing::CaseSpec> spec = testing::load_case_file(o.case_file);
    if (!spec.ok()) return bad_input(spec.status());
    config = selector_config_for(*spec, Device::cpu());
  } else {
    config.head_size = o.head_size;
    config.num_heads = o.num_heads;
    config.num_kv_heads = o.num_kv_heads;
    config.dtype = *parse_dtype(o.dtype);
    config.kv_cache_dtype = *parse_kv_cache_dtype(o.kv_cache_dtype);
    config.block_size = o.block_size;
    config.has_sinks = o.sinks;
    config.use_alibi = o.alibi;
    config.use_sliding_window = o.sliding_window.has_value();
    config.use_soft_cap = o.soft_cap.has_value();
    config.causal = !o.non_causal;
    config.attn_type = *parse_attention_type(o.attn_type);
    config.use_per_head_quant_scales = o.per_head_scales;
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return bad_input("--num-kv-heads " + std::to_string(config.num_kv_heads) +
                     " must divide --num-heads " + std::to_string(config.num_heads));
  }

  // The device: as asked, else what this machine has; a capability alone implies CUDA.
  if (o.device == "cpu") {
    config.device = Device::cpu();
  } else if (o.device == "cuda" || !o.compute_capability.empty()) {
    config.device = Device::cuda(0);
  } else {
    config.device = default_device();
  }
  if (!o.compute_capability.empty()) {
    if (config.device.is_cpu()) return bad_input("--compute-capability needs --device cuda");
    config.compute_capability = *parse_compute_capability(o.compute_capability);
  } else if (config.device.is_cuda()) {
    const std::vector<CudaDeviceInfo> devices = cuda_devices();
    if (devices.empty()) {
      return bad_input(
          "--device cuda: no CUDA device on this machine; give --compute-capability "
          "X.Y to explain a choice for another machine");
    }
    config.compute_capability = devices[0].capability;
  }

  std::cout << "model: head_size=" << config.head_size << " num_heads=" << config.num_heads
            << " num_kv_heads=" << config.num_kv_heads << " dtype=" << dtype_name(config.dtype)
            << " kv_cache_dtype=" << kv_cache_dtype_name(config.kv_cache_dtype) << " block_size="
            << (config.block_size ? std::to_string(*config.block_size) : "(backend's choice)")
            << "\n";
  std::cout << "features:" << (config.has_sinks ? " sinks" : "")
            << (config.use_alibi ? " alibi" : "")
            << (config.use_sliding_window ? " sliding-window" : "")
            << (config.use_soft_cap ? " soft-cap" : "")
            << (config.causal ? " causal" : " non-causal")
            << (config.use_per_head_quant_scales ? " per-head-scales" : "")
            << " attn_type=" << attention_type_name(config.attn_type) << "\n";
  std::cout << "device: " << device_name(config.device);
  if (config.compute_capability) {
    std::cout << " (compute capability " << compute_capability_name(*config.compute_capability)
              << ")";
  }
  std::cout << "\n";

  StatusOr<BackendSelection> selection = select_backend(config, forced_backend(o.backend));
  if (!selection.ok()) {
    if (selection.status().code() == StatusCode::kNotFound) return bad_input(selection.status());
    // Nothing (or not the forced backend) can serve: every candidate's reasons, said here once
    // (the status message repeats them, so it is not printed too).
    std::cout << "selected: none\nrejected:\n";
    std::vector<std::string> names;
    if (o.backend != "auto") {
      names.push_back(std::string(find_backend(o.backend)->name()));
    } else {
      for (const AttentionBackend* backend : registered_backends()) {
        names.emplace_back(backend->name());
      }
    }
    for (const std::string& name : names) {
      print_reasons(name, find_backend(name)->validate_configuration(config));
    }
    return kExitFailed;
  }
  const BackendSelection& s = *selection;
  std::cout << "selected: " << s.backend->name() << "\n";
  if (const std::string g = s.backend->kernel_generation_for(config); !g.empty()) {
    std::cout << "kernel generation: " << g << "\n";
  }
  std::cout << "rejected:" << (s.rejected.empty() ? " none" : "") << "\n";
  for (const BackendRejection& r : s.rejected) print_reasons(r.backend, r.reasons);

  const DType storage = kv_cache_storage_dtype(config.kv_cache_dtype, config.dtype);
  const int64_t num_blocks = o.num_blocks.value_or(1);
  StatusOr<KVCacheShape> shape = s.backend->get_kv_cache_shape(
      num_blocks, s.block_size, config.num_kv_heads, config.head_size, config.kv_cache_dtype);
  if (!shape.ok()) return bad_input(shape.status());
  const KVCacheStrideOrder order = s.backend->get_kv_cache_stride_order(s.kv_cache_layout);
  std::string shape_text = format_shape(*shape);
  if (!o.num_blocks) shape_text = "(num_blocks" + shape_text.substr(shape_text.find(','));
  StatusOr<int64_t> bytes_per_block =
      kv_cache_bytes_per_block(s.block_size, config.num_kv_heads, config.head_size, storage);
  if (!bytes_per_block.ok()) return bad_input(bytes_per_block.status());
  const int64_t per_block = *bytes_per_block;
  std::cout << "kv cache (one layer):\n"
            << "  logical shape: " << shape_text << " = (num_blocks, 2, block_size, num_kv_heads, "
            << "head_size)\n"
            << "  stride order:  " << format_order(order) << "\n"
            << "  layout:        " << kv_cache_layout_name(s.kv_cache_layout)
            << (s.backend->required_kv_cache_layout() ? " (required by the backend)" : "") << "\n"
            << "  storage dtype: " << dtype_name(storage) << "\n"
            << "  block size:    " << s.block_size << " tokens\n"
            << "  bytes/block:   " << per_block << " (" << format_bytes(per_block) << ")\n";
  if (o.num_blocks) {
    std::cout << "  total:         " << format_bytes(static_cast<double>(per_block) * num_blocks)
              << " for " << num_blocks << " blocks\n";
  }
  return kExitOk;
}

}  // namespace

void add_select_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SelectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "select",
      "Choose the backend for a model on a device, list every rejection and its reasons, "
      "and show the KV-cache shape, stride order, layout and bytes per block");
  CLI::Option* case_opt =
      cmd->add_option("--case", o->case_file, "Take the model from a case file (cases.md)")
          ->check(non_empty("file name"));
  std::vector<CLI::Option*> model = {
      cmd->add_option("--head-size", o->head_size, "Head size")
          ->capture_default_str()
          ->check(integer_in_range(1, kMaxHeadSize)),
      cmd->add_option("--num-heads", o->num_heads, "Query heads")
          ->capture_default_str()
          ->check(integer_in_range(1, kMaxHeads)),
      cmd->add_option("--num-kv-heads", o->num_kv_heads, "KV heads")
          ->capture_default_str()
          ->check(integer_in_range(1, kMaxHeads)),
      cmd->add_option("--dtype", o->dtype, "Model dtype: f32, f16, bf16")
          ->capture_default_str()
          ->check(dtype_validator()),
      cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype,
                      "KV-cache dtype: auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2")
          ->capture_default_str()
          ->check(kv_cache_dtype_validator()),
      cmd->add_option("--block-size", o->block_size, "Tokens per KV block (default: backend's)")
          ->check(integer_in_range(1, kMaxBlockSize)),
      cmd->add_flag("--sinks", o->sinks, "Attention sinks (gpt-oss)"),
      cmd->add_flag("--alibi", o->alibi, "ALiBi position bias"),
      cmd->add_option("--sliding-window", o->sliding_window, "Sliding window size in tokens")
          ->check(integer_in_range(1, kMaxInt32)),
      cmd->add_option("--soft-cap", o->soft_cap, "Logits soft cap")->check(finite_above(0.0)),
      cmd->add_flag("--non-causal", o->non_causal, "Bidirectional attention"),
      cmd->add_option("--attn-type", o->attn_type,
                      "decoder, encoder, encoder_only, encoder_decoder")
          ->capture_default_str()
          ->check(attn_type_validator()),
      cmd->add_flag("--per-head-scales", o->per_head_scales, "Per-KV-head FP8 scales")};
  for (CLI::Option* opt : model) case_opt->excludes(opt);
  cmd->add_option("--device", o->device, "cpu or cuda (default: the best device here)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--compute-capability", o->compute_capability,
                  "CUDA compute capability to select for, e.g. 9.0 (implies --device cuda)")
      ->check(compute_capability_validator());
  cmd->add_option("--backend", o->backend, "Force a backend (auto = the selector's choice)")
      ->capture_default_str()
      ->check(backend_validator(true));
  cmd->add_option("--num-blocks", o->num_blocks, "Also show the size of a cache of N blocks")
      ->check(integer_in_range(1, kMaxInt32));
  cmd->callback([o, &exit_code] { exit_code = run_select(*o); });
}

}  // namespace pagedattn::cli
