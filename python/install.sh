#!/usr/bin/env bash
# Builds the library and the Python package with what this machine has (CUDA too when nvcc is
# installed; no downloads at build time) and installs the package, with libpagedattn beside its
# module, into the interpreter's user site-packages (or PAGEDATTN_PYTHON_INSTALL_DIR).
# PYTHON: the interpreter to build for (default /usr/bin/python3, where Debian's python3-torch
# and python3-numpy live). Other knobs as scripts/test.sh: PAGEDATTN_CUDA_ARCHS, PAGEDATTN_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps
python=${PYTHON:-/usr/bin/python3}
args=(-DCMAKE_BUILD_TYPE=Release -DPAGEDATTN_PYTHON=ON "-DPython3_EXECUTABLE=$python")
[[ -n "${PAGEDATTN_CUDA_ARCHS:-}" ]] && args+=("-DPAGEDATTN_CUDA_ARCHS=${PAGEDATTN_CUDA_ARCHS}")
[[ -n "${PAGEDATTN_PYTHON_INSTALL_DIR:-}" ]] && args+=("-DPAGEDATTN_PYTHON_INSTALL_DIR=${PAGEDATTN_PYTHON_INSTALL_DIR}")
# shellcheck disable=SC2206
args+=(${PAGEDATTN_CMAKE_ARGS:-})
cmake -S . -B build "${args[@]}"
cmake --build build --target pagedattn_python -j "$(nproc)"
cmake --install build --component python
site=$(sed -n 's/^PAGEDATTN_PYTHON_INSTALL_DIR:[A-Z]*=//p' build/CMakeCache.txt)
(cd / && PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$python" -c "import pagedattn as pa
print('pagedattn', pa.__version__, 'installed in', pa.__path__[0], '; backends:',
      [b.name for b in pa.registered_backends()], '; default device:', pa.default_device())")
