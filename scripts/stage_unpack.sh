# Sourced by the device-side scripts: gpu_build.sh stages the shared library xz-compressed (the
# device tool carries at most 64 MiB with the tree, and the library with every head size's kernels
# is over 50), so the first script that runs on the device unpacks it beside itself, once.
#   unpack_stage DIR   (DIR: the staged folder, e.g. .device)
unpack_stage() {
  local packed=$1/lib/libpagedattn.so.0.xz lib=$1/lib/libpagedattn.so.0
  [[ -f $packed && ! -f $lib ]] || return 0
  if command -v xz >/dev/null; then
    xz -dc "$packed" >"$lib.part"
  else
    python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' \
      "$packed" "$lib.part"
  fi && mv "$lib.part" "$lib"
}
