#!/usr/bin/env bash
# Sourced by the GPU check scripts (scripts/gpu-check-*.sh) from the repo root on the GPU
# machine: unpacks the binaries, puts CUDA on the paths, and defines `step NAME CMD...`, which
# runs CMD with a 300 s limit, logs it to $o/NAME.txt, prints ok or FAILED and sets `status`.
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
b=.gpu/bin
o="${OUT:-.gpu/out}"
mkdir -p "$o"
status=0
step() {
  local name=$1
  shift
  if timeout 300 "$@" >"$o/$name.txt" 2>&1; then echo "ok      $name"; else echo "FAILED  $name"; status=1; fi
}
