//! The PTX the macro generates: insta snapshots of four bodies, and every module of the test
//! kernels assembled by ptxas for sm_75, sm_80 and sm_90 with no spills.
//!
//! The snapshots hold the module header and the thread_mapped kernel, where the body's lowering is
//! easiest to read; every other schedule's kernels have their own snapshots in lb-ptx's tests.

mod common;

use common::*;
use lb::prelude::*;

/// Half-precision storage: f16 values and a bf16 input widen to f32 where loaded, the sum is
/// f32 and the f16 output rounds once.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn hspmv(a: &Csr<f16>, x: &[bf16], #[atom] nz: usize) -> f16 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// Stores that round an f32 to each half type (bf16 by integer arithmetic on every target).
#[load_balanced(schedule = "auto")]
fn hstore(a: &Csr<f32>, h: &mut [f16], b: &mut [bf16], #[atom] nz: usize) {
    h[nz] = a.values[nz];
    b[nz] = a.values[nz] * 2.0;
}

/// The module header (everything before the first kernel) and the kernel named `entry`.
fn header_and_entry(ptx: &str, entry: &str) -> String {
    let first = ptx.find(".visible .entry").expect("the module has kernels");
    let start = ptx
        .find(&format!(".visible .entry {entry}("))
        .expect("the entry is in the module");
    let end = start
        + ptx[start..]
            .find("\n}\n")
            .expect("kernels end with a brace")
        + 3;
    format!("{}{}", &ptx[..first], &ptx[start..end])
}

#[test]
fn spmv_ptx_snapshot() {
    insta::assert_snapshot!("spmv", header_and_entry(spmv::PTX, "spmv_thread_mapped"));
}

#[test]
fn atomics_without_reduce_ptx_snapshot() {
    insta::assert_snapshot!(
        "scatter",
        header_and_entry(scatter::PTX, "scatter_thread_mapped")
    );
}

#[test]
fn branches_casts_and_f64_ptx_snapshot() {
    insta::assert_snapshot!("mixed", header_and_entry(mixed::PTX, "mixed_thread_mapped"));
}

#[test]
fn half_precision_ptx_snapshot() {
    insta::assert_snapshot!("hspmv", header_and_entry(hspmv::PTX, "hspmv_thread_mapped"));
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
        ("gather", gather::PTX),
        ("frontier_spmv", frontier_spmv::PTX),
        ("positives", positives::PTX),
        ("coo_spmv", coo_spmv::PTX),
        ("csc_spmv_t", csc_spmv_t::PTX),
        ("coo_spmm", coo_spmm::PTX),
        ("repeat_push", repeat_push::PTX),
        ("coo_frontier_rows", coo_frontier_rows::PTX),
        ("csc_frontier_rows", csc_frontier_rows::PTX),
        ("sssp_relax", lb::algorithms::sssp_relax::PTX),
        ("bfs_visit", lb::algorithms::bfs_visit::PTX),
        ("dobfs_push", lb::algorithms::dobfs_push::PTX),
        ("dobfs_pull", lb::algorithms::dobfs_pull::PTX),
        ("cc_hook", lb::algorithms::cc_hook::PTX),
        ("pagerank_pull", lb::algorithms::pagerank_pull::PTX),
        ("near_far_relax", lb::algorithms::near_far_relax::PTX),
        ("near_far_divide", lb::algorithms::near_far_divide::PTX),
        ("weight_sum", lb::algorithms::weight_sum::PTX),
        (
            "collect_rows_marked",
            lb::algorithms::collect_rows_marked::PTX,
        ),
        ("absorb_claims", lb::algorithms::absorb_claims::PTX),
        ("sssp_relax_rows", lb::algorithms::sssp_relax_rows::PTX),
        ("sssp_relax_claim", lb::algorithms::sssp_relax_claim::PTX),
        (
            "collect_rows_improved",
            lb::algorithms::collect_rows_improved::PTX,
        ),
        ("pack_claimed", lb::algorithms::pack_claimed::PTX),
        ("absorb_distances", lb::algorithms::absorb_distances::PTX),
        ("hspmv", hspmv::PTX),
        ("hstore", hstore::PTX),
    ];
    for (name, ptx) in modules {
        lb_ptx::ptxas::assert_assembles(name, ptx);
    }
}
