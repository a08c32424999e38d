# Our code builds warning-free.
add_library(pagedattn_warnings INTERFACE)
target_compile_options(pagedattn_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
