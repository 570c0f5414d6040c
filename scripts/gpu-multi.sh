#!/usr/bin/env bash
# Runs on a machine with two or more GPUs, from the repo root, with the binaries in $BIN
# (default .gpu/bin, unpacked from .gpu/bin.tgz: lb-bench and the multi_device test binary, as
# scripts/gpu-bundle.sh leaves them):
#   bash scripts/gpu-multi.sh [lb-bench arguments for the scaling run...]
# Times SpMV + all-gather on the GPUs against one (lb-bench --devices, default: every GPU;
# DEVICES=2,4 for several counts), then checks the multi-device tests on every GPU (BFS and SSSP
# on an R-MAT graph of 2^RMAT_SCALE vertices, default 21) and under compute-sanitizer memcheck
# (MEMCHECK=0 skips it). OVERSIZE=F adds SpMV on a matrix F times larger than one GPU's memory
# on OVERSIZE_DEVICES GPUs (default every one).
# Logs go to $OUT (or .gpu/out) and are packed into $OUT/multi.tgz after every step, so a run
# cut off by a time limit still returns what it finished.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
bin="${BIN:-.gpu/bin}"
out="${OUT:-.gpu/out}"
logs="$out/multi"
mkdir -p "$logs"
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
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpus.txt"
nvidia-smi topo -m > "$logs/topo.txt" 2>&1
n=$(nvidia-smi -L | wc -l)
status=0
pack() { tar -C "$out" -czf "$out/multi.tgz" multi; }
run() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then echo "   ok ($((SECONDS - t0)) s)"; else echo "   FAILED (exit $?, $((SECONDS - t0)) s)"; status=1; fi
  tail -n 40 "$logs/$name.log"
  pack
}
run bench timeout "${BENCH_TIMEOUT:-300}" "$bin/lb-bench" --devices "${DEVICES:-$n}" --json "$logs/multi.jsonl" --quiet "$@"
if [ -n "${OVERSIZE:-}" ]; then
  run oversize timeout 400 "$bin/lb-bench" --devices "${OVERSIZE_DEVICES:-$n}" --no-corpus --oversize "$OVERSIZE" \
    --reps 3 --json "$logs/oversize.jsonl" --quiet
fi
tests=$(ls "$bin"/test-multi_device* "$bin"/multi_device* 2>/dev/null | head -n 1)
LB_RMAT_SCALE="${RMAT_SCALE:-21}" run tests timeout 300 "$tests" --include-ignored --test-threads 1 --nocapture
if [ "${MEMCHECK:-1}" != 0 ]; then
  # NCCL probes its kernels and peer access through calls that fail by design; only memory
  # errors count.
  run memcheck timeout 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$tests" \
    --include-ignored --test-threads 1 spmv_and_spmm_on_every_gpu
fi
exit $status
