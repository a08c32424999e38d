# Sourced by the device-side scripts: gpu_build.sh stages the large shared libraries xz-compressed
# (the device tool carries at most 64 MiB with the tree, and the library with every head size's
# kernels is over 50), so the first script that runs on the device unpacks them beside themselves,
# once (not from two scripts at the same time).
#   unpack_stage DIR   (DIR: the staged folder, e.g. .device)
unpack_stage() {
  local packed lib
  for packed in "$1"/lib/*.xz; do
    lib=${packed%.xz}
    [[ -f $packed && ! -f $lib ]] || continue
    if command -v xz >/dev/null; then
      xz -dc "$packed" >"$lib.part"
    else
      python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' \
        "$packed" "$lib.part"
    fi && mv "$lib.part" "$lib"
  done
}
