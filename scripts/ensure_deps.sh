# Sourced by scripts/test.sh and scripts/demo.sh: installs missing Debian packages and finds nvcc.
# Debian 12: g++ 12, CMake 3.25; CUDA (optional) from NVIDIA's toolkit in /usr/local/cuda.

pagedattn_packages=(cmake g++ make libcli11-dev libhwy-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
                    python3-numpy pybind11-dev python3-dev python3-torch)

# Only for scripts/sanitize.sh: clang and its libFuzzer / sanitizer runtimes.
pagedattn_sanitize_packages=(clang-14 libclang-rt-14-dev)

# Installs pagedattn_packages and any extra packages given as arguments.
pagedattn_ensure_deps() {
  local missing=()
  for pkg in "${pagedattn_packages[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} > 0)); then
    echo "installing: ${missing[*]}"
    local sudo=""
    if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then sudo="sudo"; fi
    $sudo apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
  # The toolkit is often installed without being on PATH; CMake finds nvcc through CUDACXX.
  if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
}

# Configures and builds ./build with every target. Extra CMake arguments come from
# PAGEDATTN_CMAKE_ARGS; PAGEDATTN_CUDA_ARCHS / PAGEDATTN_HEAD_SIZES narrow the CUDA build.
pagedattn_build() {
  local args=(-DCMAKE_BUILD_TYPE=Release)
  [[ -n "${PAGEDATTN_CUDA_ARCHS:-}" ]] && args+=("-DPAGEDATTN_CUDA_ARCHS=${PAGEDATTN_CUDA_ARCHS}")
  [[ -n "${PAGEDATTN_HEAD_SIZES:-}" ]] && args+=("-DPAGEDATTN_HEAD_SIZES=${PAGEDATTN_HEAD_SIZES}")
  # shellcheck disable=SC2206
  args+=(${PAGEDATTN_CMAKE_ARGS:-})
  cmake -S . -B build "${args[@]}"
  cmake --build build -j "$(nproc)"
}
