//! Every schedule at both tile-offset widths: each plan reads the offsets at its
//! `Plan::offsets` width (the tile set uploaded at that width) and matches the CPU, sums and
//! visits (tile and rank) alike; a forced 64-bit index has a plan for 32-bit offsets too.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::plan::OffsetWidth;
use lb_ptx::{generate, IndexWidth, Schedule};
use support::*;

const WORK_ORIENTED: [Schedule; 4] = [
    Schedule::MergePath,
    Schedule::NonzeroSplit,
    Schedule::TwoPhase,
    Schedule::MultiPhase,
];

fn schedules() -> Vec<Schedule> {
    let mut all = Schedule::ALL.to_vec();
    all.extend([
        Schedule::GroupMapped(2),
        Schedule::GroupMapped(64),
        Schedule::ConsolidateBlock,
        Schedule::ConsolidateWarp,
    ]);
    all
}

#[test]
fn every_plan_at_either_offset_width_matches_the_cpu() {
    let m = Matrix::from_lengths(&[3, 0, 40, 1, 0, 0, 7, 130, 2, 5, 0, 33, 0, 1]);
    for s in schedules() {
        let indices: &[IndexWidth] = if WORK_ORIENTED.contains(&s) {
            &[IndexWidth::Auto, IndexWidth::U64]
        } else {
            &[IndexWidth::Auto]
        };
        for &index in indices {
            let o = opts(s, 128, 1, index);
            let g = generate(&spmv(), &o).unwrap();
            for width in [OffsetWidth::U32, OffsetWidth::U64] {
                assert!(
                    g.plans.iter().any(|p| p.offsets == width),
                    "{} ({index:?}) has no plan for {width:?} offsets",
                    s.name()
                );
            }
            let mut entries: Vec<&str> = g
                .plans
                .iter()
                .flat_map(|p| p.kernels.iter().map(|k| k.entry.as_ref()))
                .collect();
            entries.sort_unstable();
            for (i, plan) in g.plans.iter().enumerate() {
                if plan.offsets == OffsetWidth::U32 {
                    assert!(
                        plan.kernels
                            .iter()
                            .all(|k| k.entry.contains("_u32") || k.entry.contains("_o32")),
                        "{}: 32-bit-offset entries are suffixed: {:?}",
                        s.name(),
                        plan.kernels
                    );
                }
                let what = format!("{} ({index:?}) plan {i} ({:?})", s.name(), plan.offsets);
                let got = run_reduce(&spmv(), &o, i, &m, None);
                check_sum(&got, &m, None, &what);
                check_visits(&o, i, &m, &what);
            }
        }
    }
}
