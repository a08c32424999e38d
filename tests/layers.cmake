# CTest entries: the layers of src/ are enforced by the build (cmake/layers.cmake). Each probe
# compiles one include with the include folders of a library layer's own target: an include of a
# layer above must fail with "not found", one of a layer below must compile.
set(layer_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/layer_probes)

# add_layer_probe(<layer> <header> UPWARD|ALLOWED)
function(add_layer_probe layer header kind)
  string(MAKE_C_IDENTIFIER "${layer}_includes_${header}" name)
  set(probe ${layer_probe_dir}/${name}.cc)
  file(WRITE ${probe} "#include \"${header}\"\n")
  add_test(NAME layers.${name}
           COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only
                   "-I$<JOIN:$<TARGET_PROPERTY:pagedattn_${layer},INCLUDE_DIRECTORIES>,;-I>" ${probe}
           COMMAND_EXPAND_LISTS)
  if(kind STREQUAL "UPWARD")
    string(REPLACE "." "\\." header_regex "${header}")
    set_tests_properties(layers.${name} PROPERTIES PASS_REGULAR_EXPRESSION
                         "${header_regex}'?:? (No such file or directory|file not found)")
  endif()
endfunction()

add_layer_probe(kernels backends/layer_spec.h UPWARD)
add_layer_probe(kernels plan/split_kv.h UPWARD)
add_layer_probe(core backends/factories.h UPWARD)
add_layer_probe(plan backends/builder_base.h UPWARD)
add_layer_probe(reference kernels/attention/paged_attention.h UPWARD)
add_layer_probe(dcp backends/factories.h UPWARD)
add_layer_probe(kernels common/mask.h ALLOWED)
add_layer_probe(backends plan/split_kv.h ALLOWED)
add_layer_probe(reference common/mask.h ALLOWED)
add_layer_probe(backends dcp/collective_checks.h ALLOWED)
