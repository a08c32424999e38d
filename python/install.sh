#!/usr/bin/env bash
# Installs the Python package for PYTHON (default /usr/bin/python3, where Debian's python3-numpy and
# python3-torch live: README.md, Python) after the Debian packages the build needs. The build is
# pip's (pyproject.toml, python/build_backend/), so both ways give the same package: the module and
# libpagedattn in the user site-packages (in the venv when PYTHON is a venv's), CUDA only when
# nvidia-smi lists a GPU unless PAGEDATTN_CUDA=ON|OFF|AUTO says otherwise. PAGEDATTN_CUDA_ARCHS,
# PAGEDATTN_HEAD_SIZES and PAGEDATTN_CMAKE_ARGS work as for scripts/test.sh. Says which build it
# replaced, if any.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps
python=${PYTHON:-/usr/bin/python3}
echo "building for $python ($("$python" -c 'import sys; print(sys.version.split()[0])'))"
describe='import pagedattn as pa
i = pa.build_info()
print("pagedattn %s from %s at %s%s, CUDA %s, in %s" % (i["version"], i["source_dir"], i["commit"][:7],
      " (dirty)" if i["dirty"] else "", "on" if i["cuda"] else "off", i["package_dir"]))'
before=$(cd / && "$python" -c "$describe" 2>/dev/null) || before=""
# Outside a venv: the user site, past Debian's externally-managed marker (it guards /usr, which a
# --user install leaves alone).
flags=()
if "$python" -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then
  flags=(--user --break-system-packages)
fi
"$python" -m pip install --no-build-isolation "${flags[@]}" .
after=$(cd / && "$python" -c "$describe")
echo "installed: $after"
if [[ -n "$before" && "$before" != "$after" ]]; then
  echo "replaced:  $before"
fi
