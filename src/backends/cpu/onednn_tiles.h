// The bf16 tile products of prefill on oneDNN's matmul (float32 results), where the build has
// oneDNN and it runs bf16 dot products in hardware; the attention kernel asks before it uses them.
#pragma once

#include <cstdint>
#include <string>

namespace pagedattn::cpu {

// Whether matmul_abt / matmul_ab run here (oneDNN built in, with bf16 dot products or AMX).
bool onednn_tiles_available();

// oneDNN's version and the instruction set its matmul uses ("oneDNN 2.6.3, avx512_core_bf16"), or
// why it is not used.
std::string onednn_tiles_description();

// c[m, n] = a[m, k] . b[n, k]^T: bf16 rows, contiguous.
void matmul_abt(const uint16_t* a, const uint16_t* b, int m, int n, int k, float* c);

// c[m, k] = a[m, n] . b[n, k]: bf16 rows, contiguous.
void matmul_ab(const uint16_t* a, const uint16_t* b, int m, int n, int k, float* c);

}  // namespace pagedattn::cpu
