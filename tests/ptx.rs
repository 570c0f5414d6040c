//! The PTX the macro generates: insta snapshots of three bodies, and every module of the test
//! kernels assembled by ptxas for sm_75, sm_80 and sm_90 with no spills.

mod common;

use common::*;

#[test]
fn spmv_ptx_snapshot() {
    insta::assert_snapshot!("spmv", spmv::PTX);
}

#[test]
fn atomics_without_reduce_ptx_snapshot() {
    insta::assert_snapshot!("scatter", scatter::PTX);
}

#[test]
fn branches_casts_and_f64_ptx_snapshot() {
    insta::assert_snapshot!("mixed", mixed::PTX);
}

#[test]
fn every_module_assembles_without_spills() {
    let modules = [
        ("spmv", spmv::PTX),
        ("row_min", row_min::PTX),
        ("row_max_col", row_max_col::PTX),
        ("scatter", scatter::PTX),
        ("mixed", mixed::PTX),
        ("relax", relax::PTX),
        ("spmv_checked", spmv_checked::PTX),
        ("spmm", spmm::PTX),
    ];
    for (name, ptx) in modules {
        lb_ptx::ptxas::assert_assembles(name, ptx);
    }
}
