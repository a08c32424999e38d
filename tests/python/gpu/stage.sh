#!/usr/bin/env bash
# Stages what h200_acceptance.py needs on a GPU machine into DEST: the package built in BUILD
# (a CUDA build of the library and the module, for the GPU machine's Python), libpagedattn and
# libcudart, the script and the case files (head size 128 ones). Then, there:
#   cd DEST && LD_LIBRARY_PATH=$PWD/lib PYTHONPATH=$PWD python3 h200_acceptance.py OUT.json cases/*.json
set -euo pipefail
build=${1:?usage: stage.sh BUILD DEST [CASE_DIR ...]}
dest=${2:?usage: stage.sh BUILD DEST [CASE_DIR ...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dest" && mkdir -p "$dest/lib" "$dest/cases"
cp -r "$build/python/pagedattn" "$dest/"
rm -rf "$dest/pagedattn/__pycache__"
cp -L "$build/src/libpagedattn.so.0" "$dest/lib/"
cudart=$(ldd "$build/src/libpagedattn.so.0" | awk '/libcudart/ {print $3}')
[[ -n "$cudart" ]] && cp -L "$cudart" "$dest/lib/"
strip --strip-unneeded "$dest/lib/"*.so* "$dest"/pagedattn/_C*.so
cp "$here/h200_acceptance.py" "$here/paged_batch.py" "$dest/"
# The module's sources, to rebuild it there if its Python differs from the one it was built for.
mkdir -p "$dest/fallback/include/pagedattn"
cp -r "$here/../../../python/src" "$dest/fallback/"
cp "$here/../../../include/pagedattn/"*.h "$build/include/pagedattn/config.h" "$dest/fallback/include/pagedattn/"
for dir in "$@"; do
  for f in "$dir"/*.json; do
    if python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(c.get('head_size', 128) != 128)" "$f"; then
      cp "$f" "$dest/cases/"
    fi
  done
done
du -sh "$dest"
