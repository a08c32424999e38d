// Progress output.
#include "serve/progress.h"

#include <unistd.h>

namespace pagedattn::serve {

bool Progress::stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

void Progress::update(int step, int finished, int total, int running, double kv_usage) {
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = total > 0 ? finished * kWidth / total : kWidth;
    std::fprintf(stderr, "\r%s [%s%s] %d/%d requests, step %d, %d running, KV %3.0f%%",
                 label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), finished, total, step, running,
                 100 * kv_usage);
    drawn_ = true;
  } else if (every_ > 0 && step % every_ == 0) {
    std::fprintf(stderr, "%s: step %d, %d/%d requests finished, %d running, KV %.0f%%\n",
                 label_.c_str(), step, finished, total, running, 100 * kv_usage);
  }
  std::fflush(stderr);
}

void Progress::done() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace pagedattn::serve
