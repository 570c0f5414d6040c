mod codegen_common;
mod support;
use codegen_common::*;
use lb_ptx::{generate, IndexWidth, Schedule};
use support::*;
#[test]
fn dump() {
    for (s, n) in [(Schedule::GroupMapped(8), "gm8"), (Schedule::Lrb, "lrb")] {
        let o = lb_ptx::Options {
            lanes: Some(2),
            target: "sm_90".into(),
            ..opts(s, 256, 1, IndexWidth::U64)
        };
        let g = generate(&spmm(), &o).unwrap();
        std::fs::write(format!("/tmp/{n}.ptx"), &g.ptx).unwrap();
    }
}
