// Hopper warpgroup tensor-core PTX wrappers (sm_90a only): wgmma.mma_async m64n64k16 and m64n128k16
// with f16/bf16 inputs (m64n64k32 / m64n128k32 with e4m3 inputs) and f32 accumulators, A from
// shared memory (SS) or registers (RS), B from shared memory; the fence / commit_group / wait_group
// that order them; and the shared-memory matrix descriptor for 128-byte-swizzled tiles.
//
// Layouts (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"). A warpgroup is 4
// consecutive warps; warp w of it owns rows 16w..16w+15 of the 64-row tile, and inside a warp the
// accumulator and register-A fragments are those of mma.sync m16n8k16: with g = lane / 4 and
// t = lane % 4, d[4j + {0,1}] = row g, columns 8j + 2t + {0,1}; d[4j + {2,3}] = row g + 8, same
// columns; a[0..3] = (g, 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..), two 16-bit values
// each with the lower column in bits 0-15.
//
// Shared-memory tiles are stored as panels of 64 16-bit columns (128-byte rows), 16-byte chunk c of
// row r at r * 128 + ((c ^ (r % 8)) * 16) (swizzle128_offset), each panel 1024-byte aligned: the
// layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace pagedattn::device {

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` inside a 128-byte-swizzled panel.
__host__ __device__ __forceinline__ uint32_t swizzle128_offset(uint32_t row, uint32_t chunk) {
  return row * 128u + ((chunk ^ (row & 7u)) << 4);
}

// Descriptor of a 128-byte-swizzled operand starting at shared address `smem_addr` (a panel base
// plus the offset of the first row group and k step). stride_bytes is the distance from one 8-row
// group to the next (1024 where a panel's rows lie together; more where each group holds its rows
// of several panels). K-major operands (the reduction dimension contiguous: Q and K for Q·Kᵀ):
// leading bytes unused. MN-major operands (V for P·V): the groups run along the keys, and
// leading_bytes is the distance between 64-column panels along N.
__host__ __device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr,
                                                              uint32_t leading_bytes,
                                                              uint32_t stride_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) |
         static_cast<uint64_t>((leading_bytes & 0x3FFFFu) >> 4) << 16 |
         static_cast<uint64_t>((stride_bytes & 0x3FFFFu) >> 4) << 32 |
         uint64_t{1} << 62;  // layout type 1: 128-byte swizzle; base offset 0 (aligned panels)
}

// The descriptor of the operand `bytes` (a multiple of 16) past the one `desc` describes. The
// address field holds the shared address / 16, and shared addresses stay below 2^18, so the add
// never carries out of the field: unrolled k steps cost one 32-bit add each, where a descriptor
// built per step costs a mask, a shift and an or on the issuing path.
__host__ __device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// Orders earlier register and shared-memory accesses before the next wgmma of this warpgroup.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses to an accumulator across the asynchronous region.
template <int kN>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Accumulator register lists of m64nNk16 (N / 2 floats per thread) for N = 64 and 128.
#define PAGEDATTN_WGMMA_D32                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define PAGEDATTN_WGMMA_D64                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define PAGEDATTN_WGMMA_D32_OPERANDS(d)                                                           \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define PAGEDATTN_WGMMA_D64_OPERANDS(d)                                                          \
  PAGEDATTN_WGMMA_D32_OPERANDS(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),           \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// m64n<N>k16 with input type TYPE ("bf16" or "f16"), A from shared memory (SS) or registers (RS):
// DLIST / DOPS are the accumulator list and constraints, PRED the operand number of `accumulate`
// and REST the operands after the accumulators (their numbers follow the N / 2 accumulators).
#define PAGEDATTN_WGMMA(N, TYPE, DLIST, DOPS, PRED, REST, ...)                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED                                            \
               ", 0;\n"                                                                            \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " DLIST ", " REST \
               ";\n}\n"                                                                            \
               : DOPS(d)                                                                           \
               : __VA_ARGS__)
#define PAGEDATTN_WGMMA_SS_INPUTS \
  "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB)
#define PAGEDATTN_WGMMA_RS_INPUTS                                                             \
  "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)), \
      "n"(kTransB)
#define PAGEDATTN_WGMMA_SS_N128(TYPE)                                                  \
  PAGEDATTN_WGMMA(128, TYPE, PAGEDATTN_WGMMA_D64, PAGEDATTN_WGMMA_D64_OPERANDS, "%66", \
                  "%64, %65, p, 1, 1, 0, %67", PAGEDATTN_WGMMA_SS_INPUTS)
#define PAGEDATTN_WGMMA_SS_N64(TYPE)                                                  \
  PAGEDATTN_WGMMA(64, TYPE, PAGEDATTN_WGMMA_D32, PAGEDATTN_WGMMA_D32_OPERANDS, "%34", \
                  "%32, %33, p, 1, 1, 0, %35", PAGEDATTN_WGMMA_SS_INPUTS)
#define PAGEDATTN_WGMMA_RS_N128(TYPE)                                                  \
  PAGEDATTN_WGMMA(128, TYPE, PAGEDATTN_WGMMA_D64, PAGEDATTN_WGMMA_D64_OPERANDS, "%69", \
                  "{%64, %65, %66, %67}, %68, p, 1, 1, %70", PAGEDATTN_WGMMA_RS_INPUTS)
#define PAGEDATTN_WGMMA_RS_N64(TYPE)                                                  \
  PAGEDATTN_WGMMA(64, TYPE, PAGEDATTN_WGMMA_D32, PAGEDATTN_WGMMA_D32_OPERANDS, "%37", \
                  "{%32, %33, %34, %35}, %36, p, 1, 1, %38", PAGEDATTN_WGMMA_RS_INPUTS)

template <typename T, int kRegs>
constexpr void check_wgmma_operands() {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "wgmma wrappers take f16 or bf16 inputs");
  static_assert(kRegs == 32 || kRegs == 64, "wgmma wrappers take N = 64 (32 floats) or 128 (64)");
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N], both from shared memory; N = 2 * kRegs (64 or 128).
// accumulate = false overwrites D. kTransB = 0: B is K-major (stored [n][k], as K for Q·Kᵀ); 1:
// MN-major (stored [k][n]).
template <typename T, int kTransB, int kRegs>
__device__ __forceinline__ void wgmma_k16_ss(float (&d)[kRegs], uint64_t desc_a, uint64_t desc_b,
                                             bool accumulate) {
  check_wgmma_operands<T, kRegs>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kRegs == 64 && bf16) PAGEDATTN_WGMMA_SS_N128("bf16");
  if constexpr (kRegs == 64 && !bf16) PAGEDATTN_WGMMA_SS_N128("f16");
  if constexpr (kRegs == 32 && bf16) PAGEDATTN_WGMMA_SS_N64("bf16");
  if constexpr (kRegs == 32 && !bf16) PAGEDATTN_WGMMA_SS_N64("f16");
#endif
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N], A from registers (the fragment described above).
template <typename T, int kTransB, int kRegs>
__device__ __forceinline__ void wgmma_k16_rs(float (&d)[kRegs], const uint32_t (&a)[4],
                                             uint64_t desc_b, bool accumulate) {
  check_wgmma_operands<T, kRegs>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kRegs == 64 && bf16) PAGEDATTN_WGMMA_RS_N128("bf16");
  if constexpr (kRegs == 64 && !bf16) PAGEDATTN_WGMMA_RS_N128("f16");
  if constexpr (kRegs == 32 && bf16) PAGEDATTN_WGMMA_RS_N64("bf16");
  if constexpr (kRegs == 32 && !bf16) PAGEDATTN_WGMMA_RS_N64("f16");
#endif
}

// m64n<N>k32 with e4m3 inputs (FP8 wgmma has no transpose: A and B K-major), f32 accumulators.
#define PAGEDATTN_WGMMA_E4M3(N, DLIST, DOPS, PRED, REST, ...)                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED                                    \
               ", 0;\n"                                                                    \
               "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " DLIST ", " REST \
               ";\n}\n"                                                                    \
               : DOPS(d)                                                                   \
               : __VA_ARGS__)
#define PAGEDATTN_WGMMA_E4M3_SS_INPUTS "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate))
#define PAGEDATTN_WGMMA_E4M3_RS_INPUTS \
  "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate))

#define PAGEDATTN_WGMMA_D4_OPERANDS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])

// FP8 (e4m3) forms, K = 32 per instruction. Register A fragment (the 8-bit one, four e4m3 per
// register, the lowest k in bits 0-7): a[0] = row g, k 4t..4t+3; a[1] = row g + 8, same k; a[2] =
// row g, k 16 + 4t..; a[3] = row g + 8, k 16 + 4t... The accumulator layout is the 16-bit forms'.
// Shared operands: K-major 128-byte-swizzled panels of 128 FP8 columns (the same byte layout as a
// panel of 64 16-bit columns), a k32 step = 32 bytes.
template <int kRegs>
__device__ __forceinline__ void wgmma_k32_e4m3_ss(float (&d)[kRegs], uint64_t desc_a,
                                                  uint64_t desc_b, bool accumulate) {
  static_assert(kRegs == 32 || kRegs == 64, "FP8 wgmma wrappers take N = 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kRegs == 64) {
    PAGEDATTN_WGMMA_E4M3(128, PAGEDATTN_WGMMA_D64, PAGEDATTN_WGMMA_D64_OPERANDS, "%66",
                         "%64, %65, p, 1, 1", PAGEDATTN_WGMMA_E4M3_SS_INPUTS);
  } else {
    PAGEDATTN_WGMMA_E4M3(64, PAGEDATTN_WGMMA_D32, PAGEDATTN_WGMMA_D32_OPERANDS, "%34",
                         "%32, %33, p, 1, 1", PAGEDATTN_WGMMA_E4M3_SS_INPUTS);
  }
#endif
}

template <int kRegs>
__device__ __forceinline__ void wgmma_k32_e4m3_rs(float (&d)[kRegs], const uint32_t (&a)[4],
                                                  uint64_t desc_b, bool accumulate) {
  static_assert(kRegs == 32 || kRegs == 64, "FP8 wgmma wrappers take N = 64 or 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kRegs == 64) {
    PAGEDATTN_WGMMA_E4M3(128, PAGEDATTN_WGMMA_D64, PAGEDATTN_WGMMA_D64_OPERANDS, "%69",
                         "{%64, %65, %66, %67}, %68, p, 1, 1", PAGEDATTN_WGMMA_E4M3_RS_INPUTS);
  } else {
    PAGEDATTN_WGMMA_E4M3(64, PAGEDATTN_WGMMA_D32, PAGEDATTN_WGMMA_D32_OPERANDS, "%37",
                         "{%32, %33, %34, %35}, %36, p, 1, 1", PAGEDATTN_WGMMA_E4M3_RS_INPUTS);
  }
#endif
}

// m64n8k32 e4m3 with A from registers: four accumulators per thread (rows g and g + 8, columns 2t,
// 2t + 1). With B a block of ones it sums the rows of A (the FP8 attention's row sums of P).
__device__ __forceinline__ void wgmma_k32_e4m3_rs_n8(float (&d)[4], const uint32_t (&a)[4],
                                                     uint64_t desc_b, bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  PAGEDATTN_WGMMA_E4M3(8, "{%0, %1, %2, %3}", PAGEDATTN_WGMMA_D4_OPERANDS, "%9",
                       "{%4, %5, %6, %7}, %8, p, 1, 1", PAGEDATTN_WGMMA_E4M3_RS_INPUTS);
#endif
}

#undef PAGEDATTN_WGMMA_E4M3
#undef PAGEDATTN_WGMMA_E4M3_SS_INPUTS
#undef PAGEDATTN_WGMMA_E4M3_RS_INPUTS
#undef PAGEDATTN_WGMMA_D4_OPERANDS
#undef PAGEDATTN_WGMMA
#undef PAGEDATTN_WGMMA_SS_INPUTS
#undef PAGEDATTN_WGMMA_RS_INPUTS
#undef PAGEDATTN_WGMMA_SS_N128
#undef PAGEDATTN_WGMMA_SS_N64
#undef PAGEDATTN_WGMMA_RS_N128
#undef PAGEDATTN_WGMMA_RS_N64
#undef PAGEDATTN_WGMMA_D32
#undef PAGEDATTN_WGMMA_D64
#undef PAGEDATTN_WGMMA_D32_OPERANDS
#undef PAGEDATTN_WGMMA_D64_OPERANDS

}  // namespace pagedattn::device
