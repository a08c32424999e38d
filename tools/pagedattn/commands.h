// The subcommands of the `pagedattn` tool. Each add_* registers one subcommand on `app`; its
// callback stores the process exit status in `exit_code` (0 ok, 1 a failed check, 2 bad input).
#pragma once

#include <CLI/CLI.hpp>

namespace pagedattn::cli {

void add_info_command(CLI::App& app, int& exit_code);
void add_select_command(CLI::App& app, int& exit_code);
void add_check_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_demo_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace pagedattn::cli
