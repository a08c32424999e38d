// oneDNN matmuls for the prefill tiles: one primitive per shape and thread, cached, each run on
// the calling pool thread alone (the pool already spreads tasks over the cores).
#include "backends/cpu/onednn_tiles.h"

#ifdef PAGEDATTN_WITH_ONEDNN
#include <omp.h>

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#endif

namespace pagedattn::cpu {

#ifdef PAGEDATTN_WITH_ONEDNN
namespace {

bool has_bf16_dot_products() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

struct Matmuls {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<bool, int, int, int>, dnnl::matmul> cache;  // (transposed b, m, n, k)

  Matmuls() { omp_set_num_threads(1); }  // this thread's parallel regions: itself alone

  void run(bool transposed_b, const uint16_t* a, const uint16_t* b, int m, int n, int k,
           float* c) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    // a [m, inner], b [inner, cols] (stored [cols, inner] when transposed), c [m, cols].
    const int inner = transposed_b ? k : n, cols = transposed_b ? n : k;
    const dnnl::memory::desc a_md({m, inner}, dt::bf16, tag::ab);
    const dnnl::memory::desc b_md({inner, cols}, dt::bf16, transposed_b ? tag::ba : tag::ab);
    const dnnl::memory::desc c_md({m, cols}, dt::f32, tag::ab);
    auto [it, fresh] = cache.try_emplace({transposed_b, m, n, k});
    if (fresh) it->second = dnnl::matmul(dnnl::matmul::primitive_desc(
                                             dnnl::matmul::desc(a_md, b_md, c_md), engine));
    dnnl::memory am(a_md, engine, const_cast<uint16_t*>(a));
    dnnl::memory bm(b_md, engine, const_cast<uint16_t*>(b));
    dnnl::memory cm(c_md, engine, c);
    it->second.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  }
};

Matmuls& matmuls() {
  thread_local Matmuls m;
  return m;
}

}  // namespace

bool onednn_tiles_available() {
  static const bool available = has_bf16_dot_products();
  return available;
}

std::string onednn_tiles_description() {
  const dnnl_version_t* v = dnnl_version();
  const std::string name = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                           "." + std::to_string(v->patch);
  if (!onednn_tiles_available()) return name + " (no bf16 dot products here: not used)";
  return name + ", " +
         (dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx ? "avx512_core_amx"
                                                                           : "avx512_core_bf16");
}

void matmul_abt(const uint16_t* a, const uint16_t* b, int m, int n, int k, float* c) {
  matmuls().run(true, a, b, m, n, k, c);
}

void matmul_ab(const uint16_t* a, const uint16_t* b, int m, int n, int k, float* c) {
  matmuls().run(false, a, b, m, n, k, c);
}

#else

bool onednn_tiles_available() { return false; }

std::string onednn_tiles_description() { return "not built with oneDNN (libdnnl-dev)"; }

void matmul_abt(const uint16_t*, const uint16_t*, int, int, int, float*) {}

void matmul_ab(const uint16_t*, const uint16_t*, int, int, int, float*) {}

#endif

}  // namespace pagedattn::cpu
