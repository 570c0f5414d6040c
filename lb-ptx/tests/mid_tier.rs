//! The split's mid tier over many segments of 32 tiles: its list is placed in tile order (the
//! list kernel counts per segment, the scan turns the counts into starts, the place kernel
//! writes each tile's slot), and SpMM with lanes still matches an f64 reference, on tile sets
//! whose mid tiles sit at segment boundaries, fill whole segments, or are absent from most. The
//! split's walks stop their grids at a resident wave up to 32 lanes.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::plan::{DeviceLimits, Grid, OffsetWidth, ProblemSize};
use lb_ptx::primitives::huge::{MID_CEILING, MID_THRESHOLD, PIECE};
use lb_ptx::{generate, Generated, IndexWidth, Schedule};
use support::*;

/// Plans with the mid tier: the group family, `lrb` and `binning`.
const SCHEDULES: [Schedule; 3] = [Schedule::WarpMapped, Schedule::Lrb, Schedule::Binning];

/// Segments of 32 tiles, more than one round of the scan (128 segments a round): short tiles,
/// mid tiles at both ends of segments, a segment of mid tiles only, one past the mid tier (the
/// huge tier's) and mid tiles of random sizes at random places, among empty tiles.
fn tile_sizes(rng: &mut Rng) -> Vec<usize> {
    let (mt, ceiling) = (MID_THRESHOLD as usize, MID_CEILING as usize);
    let tiles = 32 * rng.range(129, 160) + rng.range(1, 32);
    let mut sizes: Vec<usize> = (0..tiles).map(|_| rng.range(0, 3)).collect();
    let last = tiles - 1;
    for (at, size) in [
        (0, mt),
        (31, ceiling - 1),
        (32, mt + 1),
        (63, PIECE as usize),
        (last, PIECE as usize + 1),
        (last - 1, ceiling),
    ] {
        sizes[at] = size;
    }
    let full = 32 * rng.range(3, tiles / 32 - 1);
    for size in &mut sizes[full..full + 32] {
        *size = rng.range(mt, 3 * mt);
    }
    for _ in 0..rng.range(30, 60) {
        let at = rng.range(64, last - 1);
        sizes[at] = rng.range(mt, ceiling);
    }
    sizes
}

/// SpMM's module for `s` with lanes (`k`, parameter 2), blocks of 128 threads.
fn spmm_with_lanes(s: Schedule) -> Generated {
    let o = lb_ptx::Options {
        lanes: Some(2),
        ..opts(s, 128, 1, IndexWidth::U64)
    };
    generate(&spmm(), &o).unwrap()
}

#[test]
fn the_mid_list_is_in_tile_order_and_the_sums_match() {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let sizes = tile_sizes(&mut rng);
    let m = Matrix::from_lengths(&sizes);
    let mid: Vec<u64> = (0..sizes.len() as u64)
        .filter(|&t| (MID_THRESHOLD..MID_CEILING).contains(&(sizes[t as usize] as u64)))
        .collect();
    let mut starts = vec![0u64];
    for &t in &mid {
        let pieces = (sizes[t as usize] as u64).div_ceil(PIECE);
        starts.push(starts.last().unwrap() + pieces);
    }
    for s in SCHEDULES {
        let g = spmm_with_lanes(s);
        let plan = &g.plans[0];
        assert!(
            plan.kernels.iter().any(|k| k.entry.ends_with("_mid_place")),
            "{}: a plan with the mid tier",
            s.name()
        );
        let temp = |name: &str| plan.temps.iter().position(|t| t.name == name).unwrap();
        // The walk in parts up to 64 lanes: threads a part and parts a warp, 2 and 4 (16 and 8
        // parts of 2 and 4 threads), 8 and 32 (four parts of 8), 64 (two of 16), 33 (one of 9);
        // the walk without parts above: 65 and 100.
        for k in [2, 4, 8, 32, 33, 64, 65, 100] {
            let what = format!(
                "{}, {} tiles, lanes {k}, seed {seed}",
                s.name(),
                sizes.len()
            );
            let (got, temps, mem) = run_reduce_keeping(&g, plan, &m, (Some(k), 0));
            check_sum(&got, &m, Some(k), &what);
            let count = read_u64(&mem, temps[temp("huge_count")], 3)[2];
            assert_eq!(count, mid.len() as u64, "{what}: mid entries");
            let list = read_u64(&mem, temps[temp("mid_list")], mid.len());
            assert_eq!(list, mid, "{what}: the mid list in tile order");
            let placed = read_u64(&mem, temps[temp("mid_starts")], mid.len() + 1);
            assert_eq!(
                placed, starts,
                "{what}: first pieces, the total after the last"
            );
            let pieces = *starts.last().unwrap() as usize;
            let entries = read_u32(&mem, temps[temp("mid_entries")], pieces);
            for (e, w) in starts.windows(2).enumerate() {
                let owner = &entries[w[0] as usize..w[1] as usize];
                assert!(
                    owner.iter().all(|&x| x as usize == e),
                    "{what}: pieces {w:?} belong to entry {e}, got {owner:?}"
                );
            }
        }
    }
}

/// The split's walks with lanes take one block per run of atoms, but their work is a count on
/// the device, so with at most 32 lanes their grids stop at one resident wave and the blocks
/// stride over the rest; with more lanes they keep a block per run (docs/spmm.md, "The walks'
/// grids"). A small tile set's grid is its own size, an empty one's a block.
#[test]
fn the_walks_grids_stop_at_a_resident_wave_up_to_32_lanes() {
    // (Its body is below the next test.)
    walks_grids();
}

/// The mid walk is built twice, in parts (`_mid_parts`, up to 64 lanes) and whole
/// (`_mid_walk`, above): for every lane count exactly one of them is launched.
#[test]
fn one_mid_walk_runs_for_each_lane_count() {
    for s in SCHEDULES {
        let g = spmm_with_lanes(s);
        let plan = &g.plans[0];
        for lanes in (0..300).chain([1 << 20, u64::MAX]) {
            let size = ProblemSize {
                tiles: 1000,
                atoms: 100_000,
                lanes,
                max_tile_atoms: 500,
                offsets: OffsetWidth::U32,
            };
            let run: Vec<&str> = plan
                .kernels
                .iter()
                .filter(|k| k.entry.ends_with("_mid_walk") || k.entry.ends_with("_mid_parts"))
                .filter(|k| k.needed(&size, 1))
                .map(|k| k.entry.as_ref())
                .collect();
            let want = if lanes <= 64 {
                "_mid_parts"
            } else {
                "_mid_walk"
            };
            assert!(
                run.len() == 1 && run[0].ends_with(want),
                "{}, {lanes} lanes: {run:?}",
                s.name()
            );
        }
    }
}

fn walks_grids() {
    let limits = DeviceLimits {
        sm_count: 10,
        blocks_per_sm: 3,
    };
    let size = |atoms: u64, lanes: u64| ProblemSize {
        tiles: 1000,
        atoms,
        lanes,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    };
    for s in SCHEDULES {
        let g = spmm_with_lanes(s);
        let plan = &g.plans[0];
        let walks: Vec<_> = plan
            .kernels
            .iter()
            .filter(|k| {
                ["_mid_walk", "_mid_parts", "_huge_walk"]
                    .iter()
                    .any(|w| k.entry.ends_with(w))
            })
            .collect();
        assert_eq!(
            walks.len(),
            3,
            "{}: the mid walks and the huge walk",
            s.name()
        );
        for k in walks {
            let what = format!("{} {}", s.name(), k.entry);
            let Grid::PerAtoms { atoms: run } = k.grid else {
                panic!("{what}: a grid per run of atoms, got {:?}", k.grid);
            };
            let blocks = |atoms, lanes| k.grid.blocks(&size(atoms, lanes), k.block, &limits);
            let all = 1u64 << 30;
            for lanes in [1, 8, 32] {
                assert_eq!(blocks(all, lanes), 30, "{what}, lanes {lanes}");
            }
            for lanes in [33, 128, 1000] {
                let per_run = all.div_ceil(u64::from(run)) as u32;
                assert_eq!(blocks(all, lanes), per_run, "{what}, lanes {lanes}");
            }
            assert_eq!(blocks(0, 32), 1, "{what}: an empty tile set");
            let few = u64::from(run) * 5 / 2;
            assert_eq!(blocks(few, 32), 3, "{what}: two and a half runs");
        }
    }
}
