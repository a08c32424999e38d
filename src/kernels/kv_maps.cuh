// The two planes of the paged cache as TMA tensor maps (geometry: kernels/paged_kv_map.h): K and V
// lie at any two addresses, so each has a map of its own over the same geometry. Kernels take both
// as one __grid_constant__ parameter.
#pragma once

#include <cuda.h>

namespace pagedattn::kernels {

struct KvMaps {
  CUtensorMap k;
  CUtensorMap v;
};

}  // namespace pagedattn::kernels
