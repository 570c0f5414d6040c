use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn row_len(a: &Csr<f32>, #[tile] row: usize) -> u64 {
    (a.row_offsets[row + 1] - a.row_offsets[row]) as u64
}

fn main() {}
