#!/usr/bin/env bash
# Builds the release test and example binaries and lb-bench here (no CUDA needed: cudarc loads the driver at
# run time), strips them and copies them with scripts/gpu-run.sh into .gpu/, the ignored folder
# that travels to the GPU machine (kept under 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
rm -rf "$out"
mkdir -p "$out/bin"
# Test binaries that exercise a device: they take the GPU through Device::default() there.
gpu_tests=(kernels tile_sets apps device_launch device gpu tuning offsets bounds misuse)
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
' "${gpu_tests[@]}" | while read -r name exe; do
  cp "$exe" "$out/bin/test-$name"
done
for ex in target/release/examples/*; do
  case "$ex" in *.d | *-*) continue ;; esac
  [ -x "$ex" ] && cp "$ex" "$out/bin/example-$(basename "$ex")"
done
strip "$out"/bin/* 2>/dev/null || true
du -sh "$out"
ls -l "$out/bin"
size=$(du -sm "$out" | cut -f1)
if [ "$size" -gt 64 ]; then
  echo "gpu-bundle: $size MiB is over the 64 MiB budget of .gpu/" >&2
  exit 1
fi
