// Choosing and naming the SIMD target: Highway's "supported targets" mask, narrowed to one target
// and below, decides what HWY_DYNAMIC_DISPATCH runs (cpu_simd.cc).
#include "backends/cpu/simd_target.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "backends/cpu/cpu_simd.h"

namespace pagedattn::cpu {
namespace {

std::mutex& target_mutex() {
  static std::mutex m;
  return m;
}

// The supported-targets mask dispatch obeys (0: the CPU's own); guarded by target_mutex.
int64_t forced_mask = 0;

// Makes dispatch choose among `mask` (SupportedTargets may reset the choice, so it is redone).
void obey(int64_t mask) {
  forced_mask = mask;
  hwy::SetSupportedTargetsForTest(mask);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

// Targets of this build the CPU supports, as bits; the lowest bit is the best target.
int64_t usable_targets() {
  hwy::SetSupportedTargetsForTest(0);
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  obey(forced_mask);
  return usable;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string simd_target() {
  return hwy::TargetName(dispatched_simd_target());
}

std::vector<std::string> simd_targets_available() {
  std::lock_guard<std::mutex> lock(target_mutex());
  std::vector<std::string> names;
  for (int64_t t = usable_targets(); t != 0; t &= t - 1) names.push_back(hwy::TargetName(t & -t));
  return names;
}

namespace {

Status choose(std::string_view name) {
  std::lock_guard<std::mutex> lock(target_mutex());
  const std::string wanted = lower(name);
  const int64_t usable = usable_targets();
  std::string choices = "best, generic";
  int64_t chosen = 0;
  if (wanted == "best") chosen = usable & -usable;
  if (wanted == "generic") chosen = HWY_STATIC_TARGET;
  for (int64_t t = usable; t != 0; t &= t - 1) {
    const int64_t bit = t & -t;
    choices += std::string(", ") + lower(hwy::TargetName(bit));
    if (lower(hwy::TargetName(bit)) == wanted) chosen = bit;
  }
  if (chosen == 0) {
    return invalid_argument("SIMD target '" + std::string(name) +
                            "' is not available in this build on this CPU; choices: " + choices);
  }
  // The baseline stays in the mask: dispatch needs it as the fallback of every table.
  obey(chosen == (usable & -usable) ? 0 : chosen | HWY_STATIC_TARGET);
  return ok_status();
}

}  // namespace

Status force_simd_target(std::string_view name) {
  apply_simd_target_from_environment();  // first, so that it cannot undo this choice later
  return choose(name);
}

void apply_simd_target_from_environment() {
  static const bool applied = [] {
    const char* env = std::getenv("PAGEDATTN_CPU_SIMD");
    if (env == nullptr || *env == '\0') return true;
    const Status s = choose(env);
    if (!s.ok()) std::cerr << "pagedattn: PAGEDATTN_CPU_SIMD ignored: " << s.message() << "\n";
    return true;
  }();
  (void)applied;
}

}  // namespace pagedattn::cpu
