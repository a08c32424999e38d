// `pagedattn`: inspect the build and the machine, choose a backend, check and time cases, and run
// the serving demo. One file per subcommand; this one wires them into a CLI11 app.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "common.h"
#include "pagedattn/config.h"

int main(int argc, char** argv) {
  CLI::App app{"pagedattn " PAGEDATTN_VERSION
               ": paged-KV attention backends for LLM serving (vLLM v1's attention layer in C++)",
               "pagedattn"};
  app.require_subcommand(1);
  app.set_version_flag("--version", PAGEDATTN_VERSION);
  int exit_code = pagedattn::cli::kExitOk;
  pagedattn::cli::add_info_command(app, exit_code);
  pagedattn::cli::add_select_command(app, exit_code);
  pagedattn::cli::add_check_command(app, exit_code);
  pagedattn::cli::add_bench_command(app, exit_code);
  pagedattn::cli::add_demo_command(app, exit_code);
  pagedattn::cli::add_serve_command(app, exit_code);
  // CLI11 calls an unknown first word "not expected" or asks for a subcommand; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->check_name(argv[1]);
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      return pagedattn::cli::bad_input("unknown command '" +
                                       pagedattn::testing::clip_for_message(argv[1], 40) +
                                       "'; commands: " + known + " (see pagedattn --help)");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, status 2, whatever CLI11 would have returned.
    std::cerr << "pagedattn: error: " << e.what() << " (see pagedattn --help)\n";
    return pagedattn::cli::kExitBadInput;
  }
  return exit_code;
}
