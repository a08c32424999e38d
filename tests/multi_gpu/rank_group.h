// This process's place in a group of processes started by scripts/dcp_multi_gpu.sh: its rank, the
// group's size, and an NCCL communicator made from an id rank 0 publishes in a file. Each process
// sees one GPU (the script sets CUDA_VISIBLE_DEVICES), which is cuda:0 here.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "pagedattn/communicator.h"
#include "pagedattn/nccl_communicator.h"

namespace pagedattn::test {

struct RankEnv {
  int rank = -1;  // -1: not started by the script
  int world_size = 0;
  std::string rendezvous_file;
};

inline RankEnv rank_env() {
  const char* rank = std::getenv("PAGEDATTN_RANK");
  const char* size = std::getenv("PAGEDATTN_WORLD_SIZE");
  const char* file = std::getenv("PAGEDATTN_RENDEZVOUS_FILE");
  if (rank == nullptr || size == nullptr || file == nullptr) return {};
  return {std::atoi(rank), std::atoi(size), file};
}

// Rank 0 makes the group's id and publishes it by an atomic rename; the others wait for it.
inline StatusOr<NcclUniqueId> exchange_unique_id(const RankEnv& env) {
  NcclUniqueId id;
  if (env.rank == 0) {
    PAGEDATTN_ASSIGN_OR_RETURN(id, make_nccl_unique_id());
    const std::string partial = env.rendezvous_file + ".partial";
    std::ofstream(partial, std::ios::binary).write(id.bytes.data(), id.bytes.size());
    std::filesystem::rename(partial, env.rendezvous_file);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(env.rendezvous_file)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return invalid_argument("rank " + std::to_string(env.rank) + ": no NCCL id in " +
                              env.rendezvous_file + " after 60 s (did rank 0 start?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream(env.rendezvous_file, std::ios::binary).read(id.bytes.data(), id.bytes.size());
  return id;
}

// The group's NCCL communicator for this rank on cuda:0. Every test of a program makes its own
// group, in the same order on every rank, so each needs its own rendezvous file: `tag` names it.
inline StatusOr<std::unique_ptr<Communicator>> join_rank_group(const RankEnv& env,
                                                               const std::string& tag) {
  RankEnv tagged = env;
  tagged.rendezvous_file += "." + tag;
  PAGEDATTN_ASSIGN_OR_RETURN(const NcclUniqueId id, exchange_unique_id(tagged));
  return make_nccl_communicator(id, env.world_size, env.rank, /*device=*/0);
}

}  // namespace pagedattn::test
