// check_output_file: the directory, then an open for writing (what the run will do at its end).
#include "serve/output_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pagedattn::serve {

Status check_output_file(const std::string& flag, const std::string& path,
                         const std::string& extension) {
  namespace fs = std::filesystem;
  if (path.empty()) return ok_status();
  if (!extension.empty() && fs::path(path).extension() != extension) {
    return invalid_argument(flag + ": '" + path + "' does not end in " + extension +
                            " (allowed: a " + extension + " file name, or '' for none)");
  }
  auto cannot = [&](const std::string& why) {
    return invalid_argument(flag + ": cannot write '" + path + "': " + why);
  };
  const fs::path folder = fs::path(path).parent_path();
  std::error_code error;
  if (folder == kOutputDir) fs::create_directory(folder, error);
  if (!folder.empty() && !fs::exists(folder, error)) {
    return cannot("the directory '" + folder.string() + "' does not exist");
  }
  if (!folder.empty() && !fs::is_directory(folder, error)) {
    return cannot("the path '" + folder.string() + "' is not a directory");
  }
  if (fs::is_directory(path, error)) return cannot("it is a directory");
  const bool existed = fs::exists(path, error);
  // No O_TRUNC: an existing file keeps its content until the run writes the new one.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return cannot(std::strerror(errno));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
  return ok_status();
}

}  // namespace pagedattn::serve
