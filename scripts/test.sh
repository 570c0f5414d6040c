#!/usr/bin/env bash
# The whole test suite (the README's test command): format, lints, every crate's tests, the doc
# tests, the example on the simulator, and a crate outside the workspace that depends on lb by path.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LB_PTXAS:-}" ]; then
  LB_PTXAS=$(./scripts/install-ptxas.sh)
  export LB_PTXAS
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
cargo test --workspace --doc
cargo run --release --example spmv
CARGO_TARGET_DIR="$PWD/target" cargo run --release --manifest-path tests/external/Cargo.toml
