#!/usr/bin/env bash
# Builds the release test and example binaries and lb-bench here (no CUDA needed: cudarc loads the driver at
# run time), strips them into .gpu/bin and packs them into .gpu/bin.tgz, the file that travels to
# the GPU machine (under 64 MiB; the run scripts there unpack it with scripts/gpu-unpack.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
pack() {
  tar -C "$out" -czf "$out/bin.tgz" bin
  du -sh "$out/bin.tgz"
  size=$(du -sm "$out/bin.tgz" | cut -f1)
  if [ "$size" -gt 60 ]; then
    echo "gpu-bundle: $size MiB packed is over the 64 MiB budget of .gpu/" >&2
    exit 1
  fi
}
if [ "${1:-}" = "--pack-only" ]; then
  pack
  exit 0
fi
rm -rf "$out"
mkdir -p "$out/bin"
# Test binaries that exercise a device: they take the GPU through Device::default() there.
gpu_tests=(kernels tile_sets apps device_launch device gpu tuning offsets bounds misuse streams cg autotune spmm_lanes epilogue body_language generic graph_apps near_far safety half multi_device searches ell)
cargo build --release --examples
# The benchmark tool (docs/benchmarks.md).
cargo build --release -p lb-bench
cp target/release/lb-bench "$out/bin/lb-bench"
cargo test --release --workspace --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
wanted = set(sys.argv[1:])
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in wanted and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])
    # The macro crate'"'"'s unit tests: the long fuzz run (scripts/fuzz-long.sh) uses the cores there.
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "lb_macros" and m["profile"]["test"]:
        print("lb_macros", m["executable"])
' "${gpu_tests[@]}" | while read -r name exe; do
  cp "$exe" "$out/bin/test-$name"
done
# The proc-macro crate's test binary links the toolchain's libstd dynamically: it travels beside
# it (scripts/fuzz-long.sh puts the binary's own folder on the library path).
if [ -x "$out/bin/test-lb_macros" ]; then
  cp "$(rustc --print target-libdir)"/libstd-*.so "$out/bin/"
fi
for ex in target/release/examples/*; do
  case "$ex" in *.d | *-*) continue ;; esac
  [ -x "$ex" ] && cp "$ex" "$out/bin/example-$(basename "$ex")"
done
strip "$out"/bin/* 2>/dev/null || true
ls -l "$out/bin"
# The binaries embed their PTX as text, which compresses about fourfold: they travel packed
# (scripts/gpu-unpack.sh unpacks them there; an extra binary such as lb-bench-base for
# scripts/gpu-ab.sh can be added to .gpu/bin and packed again with `--pack-only`).
pack
