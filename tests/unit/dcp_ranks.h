// Test support for DCP: an in-process group whose ranks each run on their own thread.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "pagedattn/communicator.h"

namespace pagedattn::testing {

// Runs `body(communicator)` for every rank of `ranks`, each on its own thread, and returns each
// rank's Status (index = rank).
inline std::vector<Status> run_on_ranks(std::vector<std::unique_ptr<Communicator>>& ranks,
                                        const std::function<Status(Communicator&)>& body) {
  std::vector<Status> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = body(*ranks[r]); });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

}  // namespace pagedattn::testing
