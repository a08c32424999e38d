#include "support/cpu_run.h"

#include <cstring>
#include <memory>

namespace pagedattn::cpu_test {
namespace {

testing::HostTensor copy_of(const testing::HostTensor& t) {
  const TensorView& v = t.view();
  testing::HostTensor out(v.dtype(), std::vector<int64_t>(v.shape().begin(), v.shape().end()));
  std::memcpy(out.view().data(), v.data(), static_cast<size_t>(v.nbytes()));
  return out;
}

StatusOr<RunResult> run(testing::HostBatch& batch, const RunOptions& options, bool write_cache) {
  const AttentionBackend* backend = find_backend("CPU_ATTN");
  if (backend == nullptr) return not_found("CPU_ATTN is not registered");
  testing::StepOptions step;
  step.cascade = options.cascade;
  step.attn_type = options.attn_type;
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<testing::StepRunner> runner,
                             testing::StepRunner::for_batch(batch, *backend, Device::cpu(), step));
  PAGEDATTN_RETURN_IF_ERROR(runner->run_step(write_cache, options.want_lse));
  RunResult result;
  PAGEDATTN_ASSIGN_OR_RETURN(result.comparison, runner->verify());
  result.cascade_prefix_len = runner->cascade_prefix_len();
  result.output = copy_of(runner->output());
  result.lse = copy_of(runner->lse());
  return result;
}

}  // namespace

StatusOr<RunResult> run_against_reference(testing::HostBatch& batch, const RunOptions& options) {
  return run(batch, options, /*write_cache=*/true);
}

StatusOr<RunResult> run_forward_only(testing::HostBatch& batch, const RunOptions& options) {
  return run(batch, options, /*write_cache=*/false);
}

}  // namespace pagedattn::cpu_test
