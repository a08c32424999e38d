# oneDNN (Debian: libdnnl-dev), optional: when found, CPU_ATTN runs the Q.K^T and P.V tile products
# of prefill as oneDNN bf16 matmuls (vdpbf16ps, AMX tiles where present); without it the Highway
# kernel does them. OpenMP (oneDNN's threading in Debian) lets each pool thread run it on one thread.
find_package(dnnl CONFIG QUIET)
find_package(OpenMP QUIET COMPONENTS CXX)

add_library(pagedattn_onednn INTERFACE)
if(dnnl_FOUND AND OpenMP_CXX_FOUND)
  target_link_libraries(pagedattn_onednn INTERFACE DNNL::dnnl OpenMP::OpenMP_CXX)
  target_compile_definitions(pagedattn_onednn INTERFACE PAGEDATTN_WITH_ONEDNN=1)
  message(STATUS "CPU_ATTN: oneDNN ${dnnl_VERSION} for the prefill tile products")
else()
  message(STATUS "CPU_ATTN: no oneDNN (libdnnl-dev); the prefill tile products stay on Highway")
endif()
