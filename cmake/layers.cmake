# The layers of src/ and what each may include. Every source compiles against a view of src/ that
# holds only its own folder and the folders below it (links under build/src/layer_views/<layer>/), so
# an include of a layer above fails to compile ("file not found"); tests/layers.cmake proves it.
# Headers are included as "<folder>/<file>", as everywhere in src/.
#
#   backends  ->  plan, ops, dcp  ->  kernels  ->  device, runtime  ->  common
#   core      ->  runtime, common                 (the public API's types, validation, selector)
#   dcp       ->  runtime, common                 (decode context parallelism: communicators, sharding, combine)
#   testing   ->  reference  ->  common           (the oracle and test support, not installed)
set(pagedattn_layer_uses_common "")
set(pagedattn_layer_uses_runtime common)
set(pagedattn_layer_uses_device common)
set(pagedattn_layer_uses_kernels device runtime common)
set(pagedattn_layer_uses_plan kernels device runtime common)
set(pagedattn_layer_uses_ops kernels device runtime common)
set(pagedattn_layer_uses_core runtime common)
set(pagedattn_layer_uses_dcp runtime common)  # DCP (docs/dcp.md)
set(pagedattn_layer_uses_backends plan ops dcp kernels device runtime common)
set(pagedattn_layer_uses_reference common)
set(pagedattn_layer_uses_testing reference runtime common)

# Sets <out_var> to the include folder through which <layer>'s sources see src/.
function(pagedattn_layer_view layer out_var)
  if(NOT DEFINED pagedattn_layer_uses_${layer})
    message(FATAL_ERROR "pagedattn_layer_view: unknown layer ${layer}")
  endif()
  set(view ${PROJECT_BINARY_DIR}/src/layer_views/${layer})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(folder IN ITEMS ${layer} ${pagedattn_layer_uses_${layer}})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${view}/${folder} SYMBOLIC)
  endforeach()
  set(${out_var} ${view} PARENT_SCOPE)
endfunction()

# Gives <target> the include folders of <layer>: the public headers, the configured header, the
# layer's view of src/ and, where kernels are visible, the generated kernel headers.
function(pagedattn_use_layer target layer)
  pagedattn_layer_view(${layer} view)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include
                             ${PROJECT_BINARY_DIR}/include ${view})
  if(layer STREQUAL "kernels" OR "kernels" IN_LIST pagedattn_layer_uses_${layer})
    target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/src/generated)
  endif()
endfunction()
