#!/usr/bin/env bash
# The whole test suite (the README's test command): format, lints, every crate's tests, the doc
# tests, the example on the simulator, `cargo package` of the library crates, and a crate
# outside the workspace that depends on lb by path.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LB_PTXAS:-}" ]; then
  LB_PTXAS=$(./scripts/install-ptxas.sh)
  export LB_PTXAS
fi
# A fresh seed per run: lb-fuzz-bodies compiles new random kernels (docs/fuzzing.md); the same
# value for the lint and test steps, so they build one set.
export LB_FUZZ_SEED="${LB_FUZZ_SEED:-$(date +%s)}"
echo "generated kernel bodies: LB_FUZZ_SEED=$LB_FUZZ_SEED" >&2
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
# The interop features are off by default: lint and test them on the one crate they touch (all
# workspace features would also pull in every other crate's options).
cargo clippy -p lb-runtime --features sprs,nalgebra-sparse --all-targets -- -D warnings
cargo test -p lb-runtime --features sprs,nalgebra-sparse --test interop
cargo test --workspace --doc
# The guide's interop example (docs/guide/formats.md) compiles only with the feature.
cargo test -p lb --features sprs --doc
# The API docs, the guide's pages included (what docs.rs builds), free of warnings.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo run --release --example spmv
# The crates a user would depend on package and build from their packages alone (path
# dependencies resolved through a local registry of the packages themselves).
# Cargo takes a registry crate of a given name and version to be immutable: it reuses the copy
# it unpacked into $CARGO_HOME/registry/src/-<hash>/ (only local registries' directories start
# with `-`; crates.io's are left alone) and what it compiled from it. So that a run verifies
# today's sources, not an earlier run's, both are removed first; the verification builds in
# its own target directory, whose other dependencies stay cached.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/lb-*0.1.0
verify="$PWD/target/package-verify"
rm -rf "$verify"/debug/.fingerprint/lb-* "$verify"/debug/deps/liblb_* "$verify"/debug/deps/lb_*
cargo package -p lb-ptx -p lb-macros -p lb-runtime -p lb --allow-dirty --target-dir "$verify"
CARGO_TARGET_DIR="$PWD/target" cargo run --release --manifest-path tests/external/Cargo.toml
