#include "backends/cpu/last_level_cache.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace pagedattn::cpu {
namespace {

// "32768K" or "1M" as sysfs writes them; 0 when absent or unreadable.
int64_t sysfs_size(const std::string& path) {
  std::ifstream in(path);
  int64_t value = 0;
  std::string unit;
  if (!(in >> value)) return 0;
  in >> unit;
  if (unit.starts_with("K")) return value << 10;
  if (unit.starts_with("M")) return value << 20;
  return value;
}

int64_t read_last_level_cache_bytes() {
  // sysfs first: inside virtual machines sysconf may report the whole socket's cache.
  int best_level = 0;
  int64_t bytes = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level");
    int level = 0;
    if (!(level_file >> level)) break;
    std::ifstream type_file(dir + "/type");
    std::string type;
    type_file >> type;
    if (type == "Instruction" || level < best_level) continue;
    best_level = level;
    bytes = sysfs_size(dir + "/size");
  }
  if (bytes > 0) return bytes;
#ifdef _SC_LEVEL3_CACHE_SIZE
  return std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#else
  return 0;
#endif
}

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = read_last_level_cache_bytes();
  return bytes;
}

}  // namespace pagedattn::cpu
