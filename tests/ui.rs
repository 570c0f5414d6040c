//! The `#[load_balanced]` macro's compile errors: one rule per file under `tests/ui/`, each
//! with the exact message in its `.stderr` (regenerate with `TRYBUILD=overwrite cargo test --test ui`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
