# CTest entries that run the built `pagedattn` tool: help everywhere, bad input exits 2, the
# select examples of issue 2, and `check --backend cpu` on the project's own cases (cases/*.json).

# tests/unit/test_parameters_doc.cc holds docs/parameters.md to the public headers, both read from
# the source tree.
target_compile_definitions(pagedattn_unit_tests PRIVATE PAGEDATTN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# The serve loop's unit tests (tests/unit/test_serve_*.cc) link its library, which is built with
# the tools; without the tools they are left out.
if(TARGET pagedattn_serve)
  target_link_libraries(pagedattn_unit_tests PRIVATE pagedattn_serve)
else()
  get_target_property(unit_sources_now pagedattn_unit_tests SOURCES)
  list(FILTER unit_sources_now EXCLUDE REGEX "test_serve_")
  set_property(TARGET pagedattn_unit_tests PROPERTY SOURCES ${unit_sources_now})
endif()
# tools/bench_report.py (the joined peer table and the roofline) on its fixtures; needs no build.
# Debian's python3 (python3-matplotlib draws the PNG; without it that test is skipped, and says so).
find_program(pagedattn_tools_python NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(pagedattn_tools_python)
  add_test(NAME tools.bench_report
           COMMAND ${pagedattn_tools_python} -m unittest -v test_bench_report
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/tools)
  set_tests_properties(tools.bench_report PROPERTIES LABELS cli
                       ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endif()
if(NOT TARGET pagedattn_cli)
  return()
endif()

# Runs CMD (arguments separated by '|'), expects exit status EXPECT and, if given, MATCH in the
# output (stdout and stderr together).
set(pagedattn_expect_exit ${CMAKE_CURRENT_BINARY_DIR}/pagedattn_expect_exit.cmake)
file(WRITE ${pagedattn_expect_exit} [=[
string(REPLACE "|" ";" command "${CMD}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT}: ${CMD}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match '${MATCH}'")
endif()
]=])

function(pagedattn_cli_test name expect args)
  set(match "")
  if(ARGC GREATER 3)
    set(match "-DMATCH=${ARGV3}")
  endif()
  string(REPLACE ";" "|" joined "${args}")
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:pagedattn_cli>|${joined}"
                   -DEXPECT=${expect} ${match} -P ${pagedattn_expect_exit})
  set_tests_properties(cli.${name} PROPERTIES LABELS cli)
endfunction()

pagedattn_cli_test(help 0 "--help" "info.*select.*check.*bench.*demo")
foreach(sub info select check bench demo)
  pagedattn_cli_test(${sub}_help 0 "${sub};--help" "Usage")
endforeach()
pagedattn_cli_test(no_subcommand 2 "")
pagedattn_cli_test(unknown_flag 2 "select;--bogus" "pagedattn: error")
pagedattn_cli_test(unknown_dtype 2 "select;--dtype;fp64" "dtype.*allowed")
pagedattn_cli_test(unknown_kv_cache_dtype 2 "select;--kv-cache-dtype;int4" "int4")
pagedattn_cli_test(bad_compute_capability 2 "select;--compute-capability;nine" "nine")
set(own ${PROJECT_SOURCE_DIR}/cases)
pagedattn_cli_test(unknown_backend 2 "check;--backend;nope;${own}/decode_gqa4.json"
                   "unknown backend")
# A GPU kernel generation where the backend has none: an error, as --generation's help says.
foreach(generation v2 v3)
  pagedattn_cli_test(check_cpu_generation_${generation} 2
                     "check;--backend;cpu;--generation;${generation};${own}/decode_gqa4.json"
                     "kernel_generation = [23] is not served by CPU_ATTN")
endforeach()
pagedattn_cli_test(missing_case 2 "check;/nonexistent/case.json" "cannot read.*does not exist")
pagedattn_cli_test(dump_needs_one_case 2
  "check;--dump;dump;${own}/decode_gqa4.json;${own}/softcap_50.json"
  "one case")
# Bad case files: each is exit 2 with a message naming the field.
set(bad_cases ${CMAKE_CURRENT_BINARY_DIR}/cli_bad_cases)
file(WRITE ${bad_cases}/unknown_field.json [=[{"seq_lens": [4], "query_lens": [1], "colour": 3}]=])
file(WRITE ${bad_cases}/bad_dtype.json [=[{"seq_lens": [4], "query_lens": [1], "dtype": "fp64"}]=])
file(WRITE ${bad_cases}/too_few_blocks.json
     [=[{"seq_lens": [40], "query_lens": [1], "num_blocks": 1}]=])
pagedattn_cli_test(case_unknown_field 2 "check;--backend;cpu;${bad_cases}/unknown_field.json"
                   "'colour'")
pagedattn_cli_test(case_bad_dtype 2 "check;--backend;cpu;${bad_cases}/bad_dtype.json"
                   "'dtype'.*f16, bf16, f32")
pagedattn_cli_test(case_too_few_blocks 2 "check;--backend;cpu;${bad_cases}/too_few_blocks.json"
                   "num_blocks = 1 is too small")
pagedattn_cli_test(info 0 "info" "backends.*CPU_ATTN")

# Hostile inputs (issue 12): every one is exit 2 with one line naming the field, the value and the
# allowed range; none crashes, none runs a different case.
set(hostile ${CMAKE_CURRENT_BINARY_DIR}/cli_hostile_cases)
set(base [=["seq_lens": [4], "query_lens": [1]]=])
foreach(probe IN ITEMS
    "scale_1e400|\"scale\": 1e400|out of range"
    "soft_cap_1e400|\"logits_soft_cap\": 1e400|out of range"
    "num_blocks_1e12|\"num_blocks\": 1000000000000|'num_blocks' = 1000000000000: expected an integer in .1, 2147483647."
    "num_heads_2e32|\"num_heads\": 4294967328|'num_heads' = 4294967328: expected an integer in .1, 65536."
    "window_2e32|\"sliding_window\": [4294967296, 0]|'sliding_window' = .4294967296,0."
    "duplicate_key|\"num_heads\": 8, \"num_heads\": 16|duplicate key 'num_heads'"
    "scale_nan|\"scale\": NaN|not valid JSON"
    "seed_negative|\"seed\": -1|'seed' = -1"
    "scale_3e38|\"scale\": 3e38|scale = 3e.38 is not allowed .allowed: finite, at most 1e.06")
  string(REPLACE "|" ";" parts "${probe}")
  list(GET parts 0 name)
  list(GET parts 1 fields)
  list(GET parts 2 match)
  file(WRITE ${hostile}/${name}.json "{${base}, ${fields}}")
  pagedattn_cli_test(hostile_${name} 2 "check;--backend;cpu;${hostile}/${name}.json" "${match}")
endforeach()
string(REPEAT "9" 100000 digits)
file(WRITE ${hostile}/huge_integer.json "{${base}, \"seed\": ${digits}}")
pagedattn_cli_test(hostile_huge_integer 2 "check;--backend;cpu;${hostile}/huge_integer.json"
                   "out of range.*characters")
string(REPEAT "[" 400000 open)
string(REPEAT "]" 400000 close)
file(WRITE ${hostile}/deep_name.json "{${base}, \"name\": ${open}${close}}")
pagedattn_cli_test(hostile_deep_name 2 "check;--backend;cpu;${hostile}/deep_name.json"
                   "nested deeper than 8 levels")
file(WRITE ${hostile}/billion_tokens.json
     [=[{"seq_lens": [1000000000], "query_lens": [1000000000]}]=])
pagedattn_cli_test(hostile_billion_tokens 2 "check;--backend;cpu;${hostile}/billion_tokens.json"
                   "MiB of host memory.*allowed at most 65536 MiB")
pagedattn_cli_test(hostile_select_case 2 "select;--case;${hostile}/scale_1e400.json" "out of range")
pagedattn_cli_test(hostile_select_missing_case 2 "select;--case;/nonexistent.json" "does not exist")
pagedattn_cli_test(check_directory 2 "check;/tmp" "is a directory")
pagedattn_cli_test(check_dev_zero 2 "check;/dev/zero" "larger than 1048576 bytes")
pagedattn_cli_test(unknown_command 2 "frobnicate"
                   "unknown command 'frobnicate'; commands: info, select, check, bench, demo")
pagedattn_cli_test(select_head_size_0 2 "select;--head-size;0"
                   "--head-size: '0' is not an integer in .1, 65536.")
pagedattn_cli_test(select_head_size_2e32 2 "select;--head-size;4294967424" "not an integer in")
pagedattn_cli_test(select_soft_cap_nan 2 "select;--soft-cap;nan" "'nan' is not a finite number > 0")
pagedattn_cli_test(select_soft_cap_inf 2 "select;--soft-cap;-inf" "not a finite number")
pagedattn_cli_test(select_num_blocks_2e32 2 "select;--num-blocks;4294967296" "not an integer in")
pagedattn_cli_test(dump_not_creatable 2 "check;--dump;/proc/pagedattn_dump;${own}/decode_gqa4.json"
                   "cannot create '/proc/pagedattn_dump'")
file(WRITE ${hostile}/a_file "")
pagedattn_cli_test(dump_onto_a_file 2 "check;--dump;${hostile}/a_file;${own}/decode_gqa4.json"
                   "--dump: cannot create")
# An empty argument does not survive a CMake list, so this one goes through the shell.
add_test(NAME cli.dump_empty
         COMMAND sh -c "\"$0\" check --backend cpu --dump '' \"$1\" 2>&1; echo exit=$?"
                 $<TARGET_FILE:pagedattn_cli> ${own}/decode_gqa4.json)
set_tests_properties(cli.dump_empty PROPERTIES LABELS cli
                     PASS_REGULAR_EXPRESSION "--dump: an empty directory name is not allowed.*exit=2")

set(select_example --head-size 128 --num-heads 32 --num-kv-heads 8 --dtype bf16
    --kv-cache-dtype fp8_e4m3 --block-size 16)
pagedattn_cli_test(select_example 0 "select;${select_example}"
                   "selected: [A-Z_]+.*bytes/block: +32768")
pagedattn_cli_test(select_cpu 0 "select;${select_example};--device;cpu" "selected: CPU_ATTN")
if(PAGEDATTN_WITH_CUDA)
  set(cuda_expect 0)
else()
  set(cuda_expect 1)  # FLASH_ATTN and FLASHINFER are not built: nothing can serve CUDA
endif()
pagedattn_cli_test(select_cuda_sm90 ${cuda_expect}
                   "select;${select_example};--device;cuda;--compute-capability;9.0" "FLASH")
if(PAGEDATTN_WITH_CUDA AND "90a" IN_LIST PAGEDATTN_CUDA_ARCHS)
  pagedattn_cli_test(select_generation_sm90 0
    "select;${select_example};--device;cuda;--compute-capability;9.0"
    "selected: FLASH_ATTN.kernel generation: v3 where it serves the launch, v2 for the rest")
  pagedattn_cli_test(select_generation_flashinfer_sm90 0
    "select;${select_example};--device;cuda;--compute-capability;9.0;--backend;flashinfer"
    "selected: FLASHINFER.kernel generation: the decode kernel for decodes; prefills v3 where it serves")
endif()
if(PAGEDATTN_WITH_CUDA)
  pagedattn_cli_test(select_generation_sm80 0
    "select;${select_example};--device;cuda;--compute-capability;8.0"
    "selected: FLASH_ATTN.kernel generation: v2.rejected")
  pagedattn_cli_test(select_generation_flashinfer_sm80 0
    "select;${select_example};--device;cuda;--compute-capability;8.0;--backend;flashinfer"
    "selected: FLASHINFER.kernel generation: the decode kernel for decodes, v2 for prefills")
endif()
pagedattn_cli_test(info_generations 0 "info" "CPU_ATTN.*kernel generations: cpu")
string(REPLACE "--block-size;16" "--block-size;24" select_block_24 "${select_example}")
pagedattn_cli_test(select_block_24 1
  "select;${select_block_24};--device;cuda;--compute-capability;9.0"
  "FLASH_ATTN:[^:]*- block_size not supported .24")
# Nothing can serve (no backend runs sm_70): each reason is said once, in the rejection list.
add_test(NAME cli.select_none_says_reasons_once
         COMMAND sh -c "\"$0\" select --compute-capability 7.0 2>&1; echo exit=$?"
                 $<TARGET_FILE:pagedattn_cli>)
set_tests_properties(cli.select_none_says_reasons_once PROPERTIES LABELS cli
  PASS_REGULAR_EXPRESSION "selected: none.*CPU_ATTN:\n +- device cuda not supported\nexit=1\n$"
  FAIL_REGULAR_EXPRESSION "device cuda not supported.*device cuda not supported")
# On a CPU machine the GPU backends are still explained.
pagedattn_cli_test(select_block_24_on_cpu 0 "select;${select_block_24};--device;cpu"
  "selected: CPU_ATTN.*FLASH_ATTN.*block_size not supported .24")
pagedattn_cli_test(select_case_file 0 "select;--case;${own}/hnd_layout.json;--device;cpu"
                   "selected: CPU_ATTN")

file(GLOB pagedattn_own_cases CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cases/*.json)
foreach(case_file IN LISTS pagedattn_own_cases)
  get_filename_component(case_name ${case_file} NAME_WE)
  pagedattn_cli_test(check_${case_name} 0 "check;--backend;cpu;${case_file}" "PASS")
endforeach()
pagedattn_cli_test(check_dump 0
  "check;--backend;cpu;--dump;${CMAKE_CURRENT_BINARY_DIR}/dump_all;${own}/everything_f16.json"
  "PASS")

# The README's main job, and a short benchmark run (JSON written, ceilings measured).
pagedattn_cli_test(demo 0 "demo;--repeats;1" "all steps passed")
pagedattn_cli_test(bench_quick 0
  "bench;--quick;--suite;decode;--repeats;2;--json;${CMAKE_CURRENT_BINARY_DIR}/bench_quick.json"
  "decode_[0-9]+x[0-9]+ .*%")
# On the CPU, the read rate of scattered blocks beside the sequential one.
pagedattn_cli_test(bench_cpu_paged_read 0
  "bench;--quick;--backend;cpu;--suite;decode;--repeats;1;--warmup;0"
  "paged read [1-9][0-9.]* GB/s .read of 32 KiB blocks in random order")
# The standard suite (the peer tool's shapes, lengths / 16) and the overhead suite on the CPU, each
# written as JSON that bench_report.py turns into the table; then the new flags' bad values.
set(bench_std_json ${CMAKE_CURRENT_BINARY_DIR}/bench_standard_quick.json)
pagedattn_cli_test(bench_standard_quick 0
  "bench;--suite;standard;--quick;--backend;cpu;--repeats;1;--warmup;0;--json;${bench_std_json}"
  "prefill_1x512_h32-8_d128_noncausal +CPU_ATTN.* 128 .*prefill_1x512_h16-4_d256_causal .*decode_8x2048_h32-8_d128 .* 16 .*decode_32x512_h32-32_d128 ")
pagedattn_cli_test(bench_overhead_quick 0
  "bench;--suite;overhead;--quick;--backend;cpu,cpu:auto;--repeats;1;--warmup;0;--json;${CMAKE_CURRENT_BINARY_DIR}/bench_overhead_quick.json"
  "launch_decode_4x256 .*host [0-9.]+ us/forward, device [0-9.]+ us.*build_decode_1024x16-16 .*build.. [0-9.]+ us host.*mixed_16x512.chunk256@768 on CPU_ATTN .cpu.: [0-9.]+ ms together / [0-9.]+ ms for its parts alone .chunk256@768 [0-9.]+ . decode_16x512 [0-9.]+. = [0-9.]+.*mixed_16x512")
# The FP8 prefill suite with the FP8 tensor cores permitted (CPU_ATTN computes as without them).
pagedattn_cli_test(bench_fp8_prefill_quick 0
  "bench;--suite;fp8-prefill;--quick;--fp8-tensor-cores;--backend;cpu;--repeats;1;--warmup;0"
  "fp8_e4m3_prefill_1x256_noncausal_d128 +CPU_ATTN .* 128 .*fp8_e4m3_prefill_1x256_causal_d256 +CPU_ATTN")
pagedattn_cli_test(bench_block_sizes 0
  "bench;--suite;standard;--quick;--backend;cpu;--repeats;1;--warmup;0;--filter;^decode_64x;--block-size;16,32"
  "decode_64x256_h32-8_d128 +CPU_ATTN .cpu. +64 +16 .*decode_64x256_h32-8_d128 +CPU_ATTN .cpu. +64 +32 ")
if(pagedattn_tools_python)
  add_test(NAME cli.bench_report_from_bench
           COMMAND ${pagedattn_tools_python} ${PROJECT_SOURCE_DIR}/tools/bench_report.py ${bench_std_json})
  set_tests_properties(cli.bench_report_from_bench PROPERTIES LABELS cli DEPENDS cli.bench_standard_quick
    PASS_REGULAR_EXPRESSION "\\| prefill 16x32, 32/8 heads, D 128, causal \\| 128 \\| TFLOP/s \\| [0-9.]+ \\(cpu\\) \\| - \\| - \\| - \\|.*\\| decode 32, 32/32 heads, D 128, ctx 512 \\| 16 \\| GB/s \\| [0-9.]+ \\(cpu\\)")
endif()
# The standard suite is the peer tool's (the team's shared tools sit beside the checkout).
set(peer_sdpa ${PROJECT_SOURCE_DIR}/../shared/tools/peer_sdpa.py)
if(pagedattn_tools_python AND EXISTS ${peer_sdpa})
  add_test(NAME cli.bench_standard_is_the_peers
           COMMAND ${pagedattn_tools_python} ${PROJECT_SOURCE_DIR}/tests/tools/check_standard_shapes.py
                   $<TARGET_FILE:pagedattn_cli> ${peer_sdpa})
  set_tests_properties(cli.bench_standard_is_the_peers PROPERTIES LABELS cli)
endif()
foreach(probe IN ITEMS
    "generation|flash_attn:v9|'flash_attn:v9': unknown kernel generation 'v9'; allowed: auto, v2, v3"
    "backend|nope,cpu|unknown backend 'nope'; allowed: auto, "
    "empty_entry|cpu,,cpu|an empty entry in 'cpu,,cpu' .write BACKEND.:GEN.,BACKEND.:GEN.,....")
  string(REPLACE "|" ";" parts "${probe}")
  list(GET parts 0 name)
  list(GET parts 1 value)
  list(GET parts 2 match)
  pagedattn_cli_test(bench_bad_${name} 2 "bench;--backend;${value}" "--backend: ${match}")
endforeach()
pagedattn_cli_test(bench_two_devices 2 "bench;--backend;cpu,flash_attn"
                   "'cpu' runs on cpu but 'flash_attn' on cuda:0: one bench run times one device")
pagedattn_cli_test(bench_block_size_0 2 "bench;--block-size;16,0"
                   "--block-size: '0' is not an integer in .1, 1048576.")
pagedattn_cli_test(bench_bad_filter 2 "bench;--filter;(" "--filter: '.' is not a regular expression")
pagedattn_cli_test(bench_filter_matches_nothing 2
  "bench;--suite;standard;--backend;cpu;--filter;^nothing"
  "--filter: '.nothing' matches no case of the standard suite")
pagedattn_cli_test(bench_json_not_writable 2
  "bench;--suite;decode;--backend;cpu;--json;/proc/pagedattn_bench.json"
  "--json: cannot write '/proc/pagedattn_bench.json'")
pagedattn_cli_test(bench_unknown_suite 2 "bench;--suite;peer" "--suite: peer not in")

# examples/ built against the installed package (find_package) and run: the engine-side sequence.
set(pagedattn_example_script ${CMAKE_CURRENT_BINARY_DIR}/pagedattn_build_example.cmake)
file(WRITE ${pagedattn_example_script} [=[
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "example: ${name} failed (${rc})")
  endif()
endfunction()
file(REMOVE_RECURSE ${WORK_DIR})
# The C++ package only: the python component goes to an absolute site-packages outside any prefix.
step(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
     --component Unspecified)
step(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(run ${WORK_DIR}/build/engine_step)
]=])
add_test(NAME example.engine_step
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/examples
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/example_engine_step
                 -DGENERATOR=${CMAKE_GENERATOR} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 -P ${pagedattn_example_script})
set_tests_properties(example.engine_step PROPERTIES LABELS cli TIMEOUT 300)

# The dump's .npy files load in NumPy with the dtypes and shapes cases.md lists (when NumPy is here).
set_tests_properties(cli.check_dump PROPERTIES FIXTURES_SETUP cli_dump)
find_program(pagedattn_numpy_python NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(pagedattn_numpy_python)
  execute_process(COMMAND ${pagedattn_numpy_python} -c "import numpy" RESULT_VARIABLE no_numpy
                  OUTPUT_QUIET ERROR_QUIET)
  if(no_numpy EQUAL 0)
    add_test(NAME cli.dump_loads_in_numpy
             COMMAND ${pagedattn_numpy_python} -c [=[
import json, sys, numpy as np
d = sys.argv[1]
meta = json.load(open(d + "/meta.json"))
c = meta["case"]
T, Hq, Hkv, D = sum(c["query_lens"]), c["num_heads"], c["num_kv_heads"], c["head_size"]
B = len(c["seq_lens"])
want = {"query": ("float32", (T, Hq, D)), "key": ("float32", (T, Hkv, D)),
        "value": ("float32", (T, Hkv, D)), "output": ("float32", (T, Hq, D)),
        "lse": ("float32", (Hq, T)), "seq_lens": ("int32", (B,)),
        "query_start_loc": ("int32", (B + 1,)), "slot_mapping": ("int64", (T,)),
        "kv_cache": ("float32", (meta["num_blocks"], 2, c["block_size"], Hkv, D)),
        "kv_cache_raw": ("uint8", (meta["num_blocks"], 2, c["block_size"], Hkv, D)),
        "k_scale": ("float32", (Hkv,)), "sinks": ("float32", (Hq,)),
        "alibi_slopes": ("float32", (Hq,))}
for name, (dtype, shape) in want.items():
    a = np.load(d + "/" + name + ".npy")
    assert (str(a.dtype), a.shape) == (dtype, shape), (name, a.dtype, a.shape, dtype, shape)
assert np.load(d + "/block_table.npy").shape[0] == B
assert np.isfinite(np.load(d + "/output.npy")).all()
print("dump ok")
]=] ${CMAKE_CURRENT_BINARY_DIR}/dump_all)
    set_tests_properties(cli.dump_loads_in_numpy PROPERTIES FIXTURES_REQUIRED cli_dump LABELS cli)
  endif()
endif()

# `pagedattn serve`: bad input exits 2 naming the value; a short CPU run passes its oracle checks
# and writes the table, the SVG plot and the JSON (by default into serve-out/); `--backend all`
# runs what this machine can; bad output paths are refused before anything runs.
pagedattn_cli_test(serve_help 0 "serve;--help" "--preset.*llama3-8b")
pagedattn_cli_test(serve_unknown_preset 2 "serve;--preset;gpt5" "unknown model preset 'gpt5'")
pagedattn_cli_test(serve_bad_lengths 2 "serve;--prompt-lens;normal:3" "prompt_lens = 'normal:3'")
pagedattn_cli_test(serve_unknown_backend 2 "serve;--backend;nope" "unknown backend 'nope'")
pagedattn_cli_test(serve_missing_trace 2 "serve;--trace;/nonexistent/trace.json" "cannot read")
pagedattn_cli_test(serve_trace_directory 2 "serve;--trace;/tmp" "cannot read trace '/tmp': it is a directory")
pagedattn_cli_test(serve_trace_dev_zero 2 "serve;--trace;/dev/zero" "larger than 67108864 bytes")
file(WRITE ${hostile}/trace_2e32.json [=[{"requests": [{"prompt_len": 4294967312, "output_len": 4}]}]=])
pagedattn_cli_test(serve_trace_2e32 2 "serve;--trace;${hostile}/trace_2e32.json"
                   "request 0: 'prompt_len' must be an integer in .1, 2.31 - 1.")
file(WRITE ${hostile}/trace_duplicate.json
     [=[{"requests": [{"prompt_len": 40, "output_len": 4, "prompt_len": 50}]}]=])
pagedattn_cli_test(serve_trace_duplicate 2 "serve;--trace;${hostile}/trace_duplicate.json"
                   "duplicate key 'prompt_len'")
# The caches of every layer are counted before any is allocated (the kernel would kill the process).
pagedattn_cli_test(serve_too_many_layers 2 "serve;--backend;cpu;--num-layers;100000000"
                   "100000000 layers need .* MiB .* available; use fewer --num-blocks or --num-layers")
set(serve_short --requests 10 --num-layers 2 --prompt-lens uniform:16:200 --output-lens 8
    --check-every 3 --no-ceiling)
pagedattn_cli_test(serve_cpu 0
  "serve;--backend;cpu;${serve_short};--plot;serve_cpu.svg;--json;serve_cpu.json"
  "tokens/s of attention.*cascade steps.*oracle checks +[0-9]+ passed.*plot: serve_cpu.svg.*json: serve_cpu.json")
# Its plot, read by Python's XML parser: text as text, plain tick labels, a marker per step by kind.
if(pagedattn_tools_python)
  set_tests_properties(cli.serve_cpu PROPERTIES FIXTURES_SETUP serve_svg)
  add_test(NAME tools.serve_svg
           COMMAND ${pagedattn_tools_python} ${PROJECT_SOURCE_DIR}/tests/tools/check_svg.py
                   ${CMAKE_CURRENT_BINARY_DIR}/serve_cpu.svg ${CMAKE_CURRENT_BINARY_DIR}/serve_cpu.json)
  set_tests_properties(tools.serve_svg PROPERTIES FIXTURES_REQUIRED serve_svg LABELS cli)
endif()
# The outputs' defaults: serve-out/ under the working directory.
pagedattn_cli_test(serve_all 0 "serve;--backend;all;${serve_short}"
  "CPU_ATTN \\(cpu\\).*plot: serve-out/serve.svg.json: serve-out/serve.json.every oracle check passed")
# serve has no --compute-capability: its skip reasons must not point at one.
set_tests_properties(cli.serve_all PROPERTIES FAIL_REGULAR_EXPRESSION "give one|compute capability unknown")
# The KV read share is against bench's read ceiling, printed with how it was measured.
pagedattn_cli_test(serve_read_ceiling 0
  "serve;--backend;cpu;--requests;2;--num-layers;1;--output-lens;4;--check-every;0;--plot;serve_ceiling.svg;--json;serve_ceiling.json"
  "share of read ceiling +[0-9]+% of [0-9]+ GB/s.decode-only KV read GB/s +[0-9.]+ .[0-9]+%.*read ceiling of cpu: [0-9.]+ GB/s .read of a [0-9]+ MiB buffer by")
# `serve --dcp N`: N simulated ranks on CPU_ATTN beside N = 1, every rank's heads checked against
# N = 1's at each oracle check; a rank's KV cache is 1/N of N = 1's. Another backend (the GPU
# backends serve DCP through the API), a combine path other than ag_rs or a2a, and heads that do
# not split over N are exit 2 naming the flag.
pagedattn_cli_test(serve_dcp_ag_rs 0
  "serve;--dcp;2;${serve_short};--plot;serve_dcp.svg;--json;serve_dcp.json"
  "oracle checks +[0-9]+ passed.*CPU_ATTN DCP 2 ranks .ag_rs. beside N = 1:.*KV cache per rank MiB +8.0 +16.0.*received per rank/step KiB mean +[1-9].*every oracle check passed")
pagedattn_cli_test(serve_dcp_a2a 0
  "serve;--dcp;4;--dcp-comm;a2a;${serve_short};--plot;serve_dcp_a2a.svg;--json;serve_dcp_a2a.json"
  "CPU_ATTN DCP 4 ranks .a2a. beside N = 1:.*KV cache per rank MiB +4.0 +16.0.*every oracle check passed")
pagedattn_cli_test(serve_dcp_gpu_backend 2 "serve;--dcp;2;--backend;cpu,flash_attn"
  "--dcp 2: serve's ranks run CPU_ATTN in one process, not FLASH_ATTN .--backend cpu; the GPU backends serve DCP through the API with a device group")
pagedattn_cli_test(serve_dcp_comm 2 "serve;--dcp;2;--dcp-comm;ring"
  "--dcp-comm: dcp_comm_backend = 'ring' is not one of: ag_rs, a2a")
pagedattn_cli_test(serve_dcp_heads 2 "serve;--dcp;3;${serve_short}"
  "--dcp 3: the model's 8 query heads do not split evenly over 3 ranks")
if(NOT PAGEDATTN_WITH_CUDA)
  pagedattn_cli_test(serve_backend_not_built 2 "serve;--backend;cpu,flash_attn"
    "--backend: 'flash_attn' cannot run on this machine: not built in this version")
endif()
# Output paths are checked before the run: exit 2 naming the flag, the path and why, and no run.
file(MAKE_DIRECTORY ${hostile}/a_dir.svg)
foreach(probe IN ITEMS
    "plot_png|--plot;x.png|--plot: 'x.png' does not end in .svg .allowed: a .svg file name, or '' for none."
    "plot_no_dir|--plot;/nonexistent/x.svg|--plot: cannot write '/nonexistent/x.svg': the directory '/nonexistent' does not exist"
    "plot_directory|--plot;${hostile}/a_dir.svg|--plot: cannot write '.*/a_dir.svg': it is a directory"
    "json_proc|--json;/proc/pagedattn_serve.json|--json: cannot write '/proc/pagedattn_serve.json': "
    "json_directory|--json;/tmp|--json: cannot write '/tmp': it is a directory")
  string(REPLACE "|" ";" parts "${probe}")
  list(GET parts 0 name)
  list(GET parts -1 match)
  list(SUBLIST parts 1 2 flag_and_path)
  pagedattn_cli_test(serve_${name} 2 "serve;--backend;cpu;${flag_and_path}" "${match}")
  set_tests_properties(cli.serve_${name} PROPERTIES FAIL_REGULAR_EXPRESSION "workload:")
endforeach()
