//! `warp_threshold` at or above `block_threshold`: binning needs warp < block.
use lb::prelude::*;

#[load_balanced(schedule = "binning", reduce = "sum", output = "y", block_threshold = 32, warp_threshold = 64)]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
