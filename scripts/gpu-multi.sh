#!/usr/bin/env bash
# Runs on a machine with two or more GPUs, from the repo root, with the binaries in $BIN
# (default .gpu/bin: lb-bench and the multi_device test binary, as scripts/gpu-bundle.sh or a
# copy of target/release leaves them):
#   bash scripts/gpu-multi.sh [lb-bench arguments for the scaling run...]
# Checks the multi-device tests on every GPU (and under compute-sanitizer memcheck), then times
# SpMV + all-gather on all the GPUs against one. Logs go to $OUT (or .gpu/out).
set -uo pipefail
bin="${BIN:-.gpu/bin}"
out="${OUT:-.gpu/out}"
mkdir -p "$out"
# NVLink SHARP (multicast) stays off: lb does not use it, and a program that does can leave a
# shared host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH="/usr/local/cuda/bin:$PATH"
# NCCL ships as libnccl.so.2 (in a toolkit, or in Python's nvidia-nccl wheel); lb opens
# libnccl.so, so give it that name if only the versioned file exists.
lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so/ {print $NF; exit}')
if [ -z "$lib" ]; then
  lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
fi
if [ -n "$lib" ] && [ -f "$lib" ]; then
  mkdir -p /tmp/lb-nccl
  ln -sf "$lib" /tmp/lb-nccl/libnccl.so
  export LD_LIBRARY_PATH="/tmp/lb-nccl:${LD_LIBRARY_PATH:-}"
  echo "NCCL: $lib"
else
  echo "NCCL: not found"
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1
status=0
run() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "   ok"; else echo "   FAILED (exit $?)"; status=1; fi
  tail -n 12 "$out/$name.log"
}
tests=$(ls "$bin"/multi_device* | head -n 1)
run tests timeout 300 "$tests" --include-ignored --test-threads 1
# NCCL probes its kernels and peer access through calls that fail by design; only memory
# errors count.
run memcheck timeout 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$tests" \
  --include-ignored --test-threads 1 spmv_and_spmm_on_every_gpu
n=$(nvidia-smi -L | wc -l)
run bench timeout 420 "$bin/lb-bench" --devices "$n" --json "$out/multi.jsonl" "$@"
exit $status
