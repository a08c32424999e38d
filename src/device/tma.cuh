// Tensor Memory Accelerator (TMA, sm_90) tile copies: the host encodes a tensor map (a
// CUtensorMap, passed to the kernel as a __grid_constant__ parameter), one device thread issues a
// copy of a whole box into shared memory, and the copy's bytes complete on an mbarrier
// (mbarrier.cuh). Only the 128-byte-swizzle forms the Hopper kernels need: boxes of 128 bytes of
// columns, written as the swizzled panels described in wgmma.cuh. Also the plain bulk copy of
// contiguous bytes (bulk_load), for data already laid out as shared memory wants it.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>

namespace pagedattn::device {

// Copies the box at `coords` (innermost dimension first, in elements) into shared memory at `dst`
// (1024-byte aligned for the swizzle) and signals its bytes on `bar`. Coordinates outside the
// tensor read as zeros.
template <int kRank>
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map,
                                         const int32_t (&coords)[kRank], uint64_t* bar) {
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map,
                                  coords, bar);
}

// Copies `bytes` contiguous bytes (a multiple of 16; both addresses 16-byte aligned) from global
// memory into shared memory at `dst` and signals them on `bar`: a plain bulk copy, no tensor map.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

// Makes ordinary shared-memory writes of this thread (st.shared, cp.async) visible to the async
// proxy (wgmma, TMA) once a barrier orders the threads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
}

// The driver's cuTensorMapEncodeTiled, found through the runtime (no link against libcuda);
// nullptr when the driver does not have it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return PFN_cuTensorMapEncodeTiled_v12000{nullptr};
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}

// Encodes a map of `type` elements whose dimension 0 is contiguous: dims[i] elements in dimension
// i, strides_bytes[i - 1] between neighbours in dimension i >= 1 (multiples of 16), boxes of box[i]
// elements (box[0] elements <= 128 bytes), 128-byte swizzle, zeros outside, L2 fetches of
// `promotion`. Returns the driver's result (CUDA_ERROR_NOT_SUPPORTED when there is no encoder).
inline CUresult encode_tensor_map_sw128(CUtensorMap* map, CUtensorMapDataType type,
                                        const void* base, int rank, const uint64_t* dims,
                                        const uint64_t* strides_bytes, const uint32_t* box,
                                        CUtensorMapL2promotion promotion) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  return encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims,
                strides_bytes, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// 16-bit elements with 256-byte L2 fetches.
inline CUresult encode_tensor_map_16bit_sw128(CUtensorMap* map, const void* base, int rank,
                                              const uint64_t* dims, const uint64_t* strides_bytes,
                                              const uint32_t* box) {
  return encode_tensor_map_sw128(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, base, rank, dims,
                                 strides_bytes, box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

}  // namespace pagedattn::device
