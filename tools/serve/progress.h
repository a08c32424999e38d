// Progress on stderr while a backend runs: a bar redrawn in place when stderr is a terminal,
// otherwise a plain line every `every` steps (logs stay readable).
#pragma once

#include <cstdio>
#include <string>

namespace pagedattn::serve {

class Progress {
 public:
  Progress(std::string label, bool terminal, int every)
      : label_(std::move(label)), terminal_(terminal), every_(every) {}
  static bool stderr_is_terminal();
  void update(int step, int finished, int total, int running, double kv_usage);
  void done();  // ends the bar's line

 private:
  std::string label_;
  bool terminal_;
  int every_;
  bool drawn_ = false;
};

}  // namespace pagedattn::serve
