//! The `schedule = "auto"` heuristic: picks one of the generated schedules per launch from a
//! tile set's [`TileStats`] and the lane count.
//!
//! The starting point is the thesis's SpMV rule (§4.5.2): merge-path, unless the rows or the
//! columns number fewer than α and the nonzeros fewer than β, where thread- or group-mapped
//! wins because a work-oriented schedule's searches and fix-up cost more than the imbalance
//! they remove. The refinements come from one `lb-bench` run on an H200 (docs/benchmarks.md,
//! medium and large corpora): on heavy-tailed rows merge_path was fastest or within 25% of the
//! fastest for SpMV on every matrix (block_mapped was 3–4.5× slower at 130 M nonzeros); with
//! lanes (SpMM) lrb was fastest on every heavy-tailed matrix and thread_mapped on every balanced
//! one; balanced SpMV rows of 16 nonzeros ran 18–49% faster with a warp per row than with a
//! thread. Every number lives in [`Rule`], so later runs can refine them without touching the
//! logic.
//!
//! SpMV rows of at least `warp_mean_atoms` that are not a heavy tail (docs/benchmarks.md,
//! forty-ninth session: the large corpus on an H200 and an H100, the medium one on the H100): a
//! warp per tile took 6–35% longer than `merge_path` on the three large members of that shape
//! (83–128 M atoms) on both GPUs. Among the medium members (3–4 M atoms, in the L2) it was 16%
//! faster on even rows of 16 and 11% faster on `banded`, but 45% slower on `bimodal`, whose
//! lengths are as mixed as `banded`'s (standard deviation about three times the mean):
//! [`Rule::warp_max_atoms`] and [`Rule::warp_max_spread`] send both mixed shapes to
//! `merge_path`, trading the 11% for the 45%.
//!
//! SpMM at the lane counts' ends (two H100 runs of the medium corpus at k = 8, 32 and 128,
//! docs/benchmarks.md, sixteenth session): with at most [`NARROW_LANES`] lanes a thread owns one
//! lane, and on rows of a few atoms `group_mapped(4)` (four threads per tile, two lanes each)
//! beat `thread_mapped` and `lrb` by 10–20% (road, 7-point stencil, and the heavy-tailed
//! matrices whose rows are mostly that short), where rows of 8 or 16 atoms kept the old choice;
//! from [`WIDE_LANES`] lanes, on balanced rows of at least `warp_mean_atoms`, `group_mapped(8)`
//! beat `thread_mapped` by 22% (rows of 16 atoms) and lost on shorter rows.
//!
//! SpMM on rows of a few hundred atoms that are not a heavy tail (H200, thirty-fourth session:
//! matrices of 200 000 rows whose longest row is 17–25 times the mean, most atoms in rows of 40
//! to 700): `thread_mapped`, which has no split and walks each row as one chain, took 2.0–4.7×
//! the time of `lrb` at k = 8 and 32. With lanes, a longest tile of [`Rule::lane_chain_atoms`]
//! counts as heavy-tailed whatever the mean.

use lb_ptx::Schedule;

use crate::stats::TileStats;

/// The heuristic's thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// α of thesis §4.5.2: fewer rows or columns than this makes a problem "small"…
    pub small_dim: u64,
    /// …when it also has fewer atoms than β.
    pub small_atoms: u64,
    /// Longest tile over the mean above which rows count as heavy-tailed.
    pub heavy_imbalance: f64,
    /// Mean atoms per tile from which a warp per tile beats a thread per tile on balanced rows.
    pub warp_mean_atoms: f64,
    /// Atoms from which rows of at least `warp_mean_atoms` go to `merge_path`, not a warp per
    /// tile: the atom arrays (8 bytes an atom) outgrow the L2 and stream from DRAM, where a
    /// warp on a row of fewer than 32 atoms keeps too few loads in flight.
    pub warp_max_atoms: u64,
    /// Standard deviation of the atoms per tile, over their mean, above which rows of at least
    /// `warp_mean_atoms` go to `merge_path`: among rows of mixed lengths a warp per tile leaves
    /// most lanes idle on the short ones (0 when the spread is unknown counts as even).
    pub warp_max_spread: f64,
    /// Mean atoms per tile from which a whole block per tile pays off on a small problem.
    pub block_mean_atoms: f64,
    /// With at most [`NARROW_LANES`] lanes, mean atoms per tile below which `group_mapped(4)`
    /// comes first (0 never).
    pub narrow_mean_atoms: f64,
    /// With lanes, a longest tile of at least this many atoms makes the rows heavy-tailed
    /// whatever the mean: the lane-parallel `thread_mapped` would walk it as one chain of
    /// dependent steps, where the schedules with the split's tiers cut it.
    pub lane_chain_atoms: u64,
}

/// Lane counts up to this are narrow (see [`Rule::narrow_mean_atoms`]).
pub const NARROW_LANES: u64 = 8;
/// Lane counts from this on are wide: on balanced rows of at least `warp_mean_atoms` atoms,
/// `group_mapped(8)` comes first.
pub const WIDE_LANES: u64 = 128;

/// The rule `launch` uses: α = 500 and β = 10 000 from the thesis, the rest from the H200 run.
pub const DEFAULT_RULE: Rule = Rule {
    small_dim: 500,
    small_atoms: 10_000,
    heavy_imbalance: 32.0,
    warp_mean_atoms: 12.0,
    warp_max_atoms: 8 << 20,
    warp_max_spread: 1.0,
    block_mean_atoms: 256.0,
    narrow_mean_atoms: 7.5,
    lane_chain_atoms: lb_ptx::primitives::huge::LANE_THRESHOLD,
};

impl Rule {
    /// The schedules to try in order of preference for `stats` with `lanes` lanes per atom; the
    /// first that was generated wins, so a function that lists only some schedules still gets a
    /// sensible one.
    pub fn preference(&self, stats: &TileStats, lanes: u64) -> [Schedule; 4] {
        use Schedule::*;
        let small = (stats.tiles < self.small_dim || stats.cols < self.small_dim)
            && stats.atoms < self.small_atoms;
        if small {
            // Launch overhead dominates: the cheapest kernel that keeps the longest rows busy.
            return if stats.mean_atoms >= self.block_mean_atoms {
                [BlockMapped, Binning, WarpMapped, ThreadMapped]
            } else if stats.mean_atoms >= self.warp_mean_atoms {
                [WarpMapped, GroupMapped(8), ThreadMapped, MergePath]
            } else {
                [ThreadMapped, GroupMapped(4), WarpMapped, MergePath]
            };
        }
        let narrow =
            (2..=NARROW_LANES).contains(&lanes) && stats.mean_atoms < self.narrow_mean_atoms;
        let wide = lanes >= WIDE_LANES && stats.mean_atoms >= self.warp_mean_atoms;
        let lanes = lanes > 1;
        let long_chain = lanes && stats.max_atoms >= self.lane_chain_atoms;
        if stats.imbalance() >= self.heavy_imbalance || long_chain {
            return if narrow {
                [GroupMapped(4), Lrb, MergePath, BlockMapped]
            } else if lanes {
                [Lrb, MergePath, BlockMapped, ThreadMapped]
            } else {
                [MergePath, NonzeroSplit, BlockMapped, WarpMapped]
            };
        }
        if narrow {
            [GroupMapped(4), ThreadMapped, Lrb, WarpMapped]
        } else if wide {
            [GroupMapped(8), ThreadMapped, Lrb, WarpMapped]
        } else if lanes {
            // Threads side by side over a tile's lanes read a row of B coalesced across a warp.
            [ThreadMapped, Lrb, MergePath, WarpMapped]
        } else if stats.mean_atoms >= self.warp_mean_atoms {
            let even = stats.std_atoms <= self.warp_max_spread * stats.mean_atoms;
            if even && stats.atoms < self.warp_max_atoms {
                [WarpMapped, BlockMapped, ThreadMapped, MergePath]
            } else {
                [MergePath, WarpMapped, BlockMapped, ThreadMapped]
            }
        } else {
            [ThreadMapped, GroupMapped(8), MergePath, WarpMapped]
        }
    }

    /// The schedule among `generated` for `stats` and `lanes`: the first preferred one that was
    /// generated, else the first generated. `None` only when `generated` is empty.
    pub fn choose(
        &self,
        generated: &[Schedule],
        stats: &TileStats,
        lanes: u64,
    ) -> Option<Schedule> {
        self.preference(stats, lanes)
            .into_iter()
            .find(|s| generated.contains(s))
            .or_else(|| generated.first().copied())
    }
}

impl Rule {
    /// Every schedule among `generated` that [`Rule::choose`] can pick for a frontier of `len`
    /// entries over a tile set with statistics `whole`, whatever tiles the frontier holds, in
    /// the order of `generated`. One schedule: the frontier's own statistics cannot
    /// change the choice, so they need not be measured ([`crate::frontier_schedule`]).
    ///
    /// A frontier of `len` entries (tiles may repeat) holds `F` atoms, `len × whole.min_atoms ≤
    /// F ≤ len × whole.max_atoms`, and its longest tile `M` lies in `max(⌈F / len⌉,
    /// whole.min_atoms) ..= min(F, whole.max_atoms)`. The rule compares `F` and the mean `F / len` with thresholds and `M`
    /// with `lane_chain_atoms` and with `heavy_imbalance × F / len`; between the `F` at which
    /// any of those comparisons, or the order of `M`'s bounds and thresholds, changes, every
    /// comparison holds the same, so the choices at those `F` (and one either side), each with
    /// `M` at its bounds and at its thresholds (and one either side), are every choice there is.
    pub fn frontier_picks(
        &self,
        generated: &[Schedule],
        whole: &TileStats,
        len: u64,
        lanes: u64,
    ) -> Vec<Schedule> {
        let pick = |atoms: u64, max: u64| {
            self.choose(
                generated,
                &TileStats::new(len, whole.cols, atoms, max),
                lanes,
            )
        };
        if len == 0 {
            return pick(0, 0).into_iter().collect();
        }
        let longest = whole.max_atoms;
        let shortest = whole.min_atoms.min(longest);
        let least = len.saturating_mul(shortest);
        let most = len.saturating_mul(longest);
        let per_entry = |mean: f64| (mean * len as f64).ceil() as u64;
        let heavy = self.heavy_imbalance;
        let chain = self.lane_chain_atoms;
        let thresholds = [
            self.small_atoms,
            self.warp_max_atoms,
            per_entry(self.block_mean_atoms),
            per_entry(self.warp_mean_atoms),
            per_entry(self.narrow_mean_atoms),
            longest,
            ((longest as f64) * len as f64 / heavy) as u64,
            chain,
            chain.saturating_mul(len),
            ((chain as f64) * len as f64 / heavy) as u64,
        ];
        let mut atoms: Vec<u64> = vec![least, least.saturating_add(1), most];
        for t in thresholds {
            atoms.extend([t.saturating_sub(1), t, t.saturating_add(1)]);
        }
        let mut picks: Vec<Schedule> = Vec::new();
        for f in atoms.into_iter().filter(|f| (least..=most).contains(f)) {
            let lo = f.div_ceil(len).max(shortest);
            let hi = f.min(longest);
            let heavy_at = ((heavy * f as f64) / len as f64).ceil() as u64;
            let mut maxes = vec![lo, hi];
            for t in [chain, heavy_at] {
                maxes.extend([t.saturating_sub(1), t, t.saturating_add(1)]);
            }
            for m in maxes.into_iter().filter(|m| (lo..=hi).contains(m)) {
                if let Some(s) = pick(f, m) {
                    if !picks.contains(&s) {
                        picks.push(s);
                    }
                }
            }
        }
        picks.sort_by_key(|s| generated.iter().position(|g| g == s));
        picks
    }
}

/// [`DEFAULT_RULE`]'s pick among `generated` (what the generated `launch` of a function with
/// several schedules calls). Falls back to `ThreadMapped` for an empty list, which
/// `launch_with` then reports as not generated.
pub fn choose_schedule(generated: &[Schedule], stats: &TileStats, lanes: u64) -> Schedule {
    DEFAULT_RULE
        .choose(generated, stats, lanes)
        .unwrap_or(Schedule::ThreadMapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thesis_rule_small_problems_avoid_merge_path() {
        let s = TileStats::new(100, 100, 1_000, 20);
        assert_eq!(
            choose_schedule(Schedule::ALL, &s, 1),
            Schedule::ThreadMapped
        );
        let one_long_row = TileStats::new(1, 1_000, 1_000, 1_000);
        assert_eq!(
            choose_schedule(Schedule::ALL, &one_long_row, 1),
            Schedule::BlockMapped
        );
    }

    #[test]
    fn heavy_tails_go_to_merge_path_or_lrb_with_lanes() {
        let power = TileStats::new(6_500_000, 6_500_000, 52_000_000, 252_007);
        assert_eq!(
            choose_schedule(Schedule::ALL, &power, 1),
            Schedule::MergePath
        );
        assert_eq!(choose_schedule(Schedule::ALL, &power, 32), Schedule::Lrb);
        let moderate = TileStats::new(100_000, 100_000, 800_000, 1_000);
        assert_eq!(
            choose_schedule(Schedule::ALL, &moderate, 1),
            Schedule::MergePath
        );
    }

    #[test]
    fn regular_rows_go_to_thread_or_warp() {
        let short = TileStats::new(1_000_000, 1_000_000, 8_000_000, 8);
        assert_eq!(
            choose_schedule(Schedule::ALL, &short, 1),
            Schedule::ThreadMapped
        );
        let long = TileStats::new(100_000, 100_000, 1_600_000, 16);
        assert_eq!(
            choose_schedule(Schedule::ALL, &long, 1),
            Schedule::WarpMapped
        );
        assert_eq!(
            choose_schedule(Schedule::ALL, &long, 8),
            Schedule::ThreadMapped
        );
    }

    /// Rows of a warp's mean go to `merge_path` once the matrix outgrows the L2 (8 M rows of
    /// 16, `regular-8000000x16`), or when their lengths are mixed (rows of 5 with every 16th of
    /// 400, `banded`'s shape), whatever the size; even rows that fit stay with a warp.
    #[test]
    fn rows_of_a_warp_mean_leave_warp_mapped_when_large_or_mixed() {
        let large = TileStats::new(8_000_000, 8_000_000, 128_000_000, 16);
        assert_eq!(
            choose_schedule(Schedule::ALL, &large, 1),
            Schedule::MergePath
        );
        let mixed: Vec<usize> = (0..120_000)
            .map(|r| if r % 16 == 0 { 400 } else { 5 })
            .scan(0, |end, n| {
                *end += n;
                Some(*end)
            })
            .collect();
        let offsets: Vec<usize> = std::iter::once(0).chain(mixed).collect();
        let banded = TileStats::of_offsets(120_000, &offsets);
        assert!(banded.mean_atoms >= DEFAULT_RULE.warp_mean_atoms);
        assert!(banded.imbalance() < DEFAULT_RULE.heavy_imbalance);
        assert_eq!(
            choose_schedule(Schedule::ALL, &banded, 1),
            Schedule::MergePath
        );
        let even =
            TileStats::of_offsets(250_000, &(0..=250_000).map(|r| 16 * r).collect::<Vec<_>>());
        assert_eq!(
            choose_schedule(Schedule::ALL, &even, 1),
            Schedule::WarpMapped
        );
    }

    #[test]
    fn narrow_lanes_on_short_rows_go_to_four_threads_per_tile() {
        let road = TileStats::new(1_000_000, 1_000_000, 1_960_000, 3);
        assert_eq!(
            choose_schedule(Schedule::ALL, &road, 8),
            Schedule::GroupMapped(4)
        );
        assert_eq!(
            choose_schedule(Schedule::ALL, &road, 32),
            Schedule::ThreadMapped
        );
        let giant_row = TileStats::new(1_000_000, 3_000_000, 4_000_000, 3_000_000);
        assert_eq!(
            choose_schedule(Schedule::ALL, &giant_row, 8),
            Schedule::GroupMapped(4)
        );
        assert_eq!(
            choose_schedule(Schedule::ALL, &giant_row, 32),
            Schedule::Lrb
        );
        // Heavy-tailed rows of 8 atoms on average stay with `lrb`, and SpMV is unchanged.
        let power = TileStats::new(500_000, 500_000, 3_946_664, 11_245);
        assert_eq!(choose_schedule(Schedule::ALL, &power, 8), Schedule::Lrb);
        assert_eq!(
            choose_schedule(Schedule::ALL, &road, 1),
            Schedule::ThreadMapped
        );
    }

    #[test]
    fn wide_lanes_on_rows_of_a_warp_mean_go_to_eight_threads_per_tile() {
        let regular16 = TileStats::new(250_000, 250_000, 4_000_000, 16);
        assert_eq!(
            choose_schedule(Schedule::ALL, &regular16, 128),
            Schedule::GroupMapped(8)
        );
        assert_eq!(
            choose_schedule(Schedule::ALL, &regular16, 32),
            Schedule::ThreadMapped
        );
        let regular4 = TileStats::new(250_000, 250_000, 1_000_000, 4);
        assert_eq!(
            choose_schedule(Schedule::ALL, &regular4, 128),
            Schedule::ThreadMapped
        );
    }

    #[test]
    fn rows_of_hundreds_of_atoms_leave_thread_mapped_with_lanes() {
        // Every 16th row 40–700 atoms among rows of 2–8 (the longest 25 times the mean), and
        // 10% of the rows 60–600 atoms among rows of 1–4 (17 times).
        let banded = TileStats::new(200_000, 200_000, 5_542_839, 700);
        let bimodal = TileStats::new(200_000, 200_000, 7_040_839, 600);
        for stats in [banded, bimodal] {
            assert!(stats.imbalance() < DEFAULT_RULE.heavy_imbalance);
            for k in [8, 32] {
                assert_eq!(choose_schedule(Schedule::ALL, &stats, k), Schedule::Lrb);
            }
            assert_eq!(choose_schedule(Schedule::ALL, &stats, 128), Schedule::Lrb);
            // SpMV keeps its choice: a thread per row there is not a chain over lanes.
            assert_eq!(
                choose_schedule(Schedule::ALL, &stats, 1),
                Schedule::WarpMapped
            );
        }
        // Just below the chain length the balanced rule stands.
        let below = TileStats::new(
            200_000,
            200_000,
            2_000_000,
            DEFAULT_RULE.lane_chain_atoms - 1,
        );
        assert_eq!(
            choose_schedule(Schedule::ALL, &below, 32),
            Schedule::ThreadMapped
        );
    }

    #[test]
    fn only_generated_schedules_are_picked() {
        let power = TileStats::new(6_500_000, 6_500_000, 52_000_000, 252_007);
        let only = [Schedule::NonzeroSplit, Schedule::ThreadMapped];
        assert_eq!(choose_schedule(&only, &power, 1), Schedule::NonzeroSplit);
        let none_preferred = [Schedule::DynamicVirtualWarps];
        assert_eq!(
            choose_schedule(&none_preferred, &power, 1),
            Schedule::DynamicVirtualWarps
        );
    }

    /// Whatever tiles a frontier holds, the rule's choice from its statistics is one of
    /// `frontier_picks`: random tile sets, frontier lengths and lane counts, each with random
    /// feasible frontiers (atoms up to `len ×` the longest tile, the frontier's longest tile
    /// between the mean and the tile set's longest), many at the thresholds' edges.
    #[test]
    fn every_frontier_picks_one_of_the_frontier_picks() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x17);
        let generated: &[Schedule] = Schedule::ALL;
        for _ in 0..3_000 {
            let longest = match rng.random_range(0..4) {
                0 => rng.random_range(0..4),
                1 => rng.random_range(0..64),
                2 => rng.random_range(0..5_000),
                _ => rng.random_range(0..3_000_000),
            };
            let cols = if rng.random_bool(0.2) {
                rng.random_range(1..600)
            } else {
                1 << 20
            };
            let mut whole = TileStats::new(1 << 20, cols, 1 << 24, longest);
            whole.min_atoms = if rng.random_bool(0.5) {
                0
            } else {
                rng.random_range(0..=longest)
            };
            let shortest = whole.min_atoms;
            let len = match rng.random_range(0..3) {
                0 => rng.random_range(1..40),
                1 => rng.random_range(1..2_000),
                _ => rng.random_range(1..2_000_000),
            };
            let lanes = [1, 4, 8, 32, 128][rng.random_range(0..5)];
            let picks = DEFAULT_RULE.frontier_picks(generated, &whole, len, lanes);
            assert!(!picks.is_empty());
            let (least, most) = (len * shortest, len * longest);
            for _ in 0..40 {
                let atoms = match rng.random_range(0..3) {
                    0 => rng.random_range(least..=most),
                    1 => rng.random_range(least..=most.min(least + 20_000)),
                    _ => {
                        least
                            + (rng.random_range(0.0..300.0) * len as f64) as u64
                                % (most - least + 1)
                    }
                };
                let (lo, hi) = (atoms.div_ceil(len).max(shortest), atoms.min(longest));
                if lo > hi {
                    continue;
                }
                for max in [lo, hi, rng.random_range(lo..=hi)] {
                    let stats = TileStats::new(len, cols, atoms, max);
                    let s = choose_schedule(generated, &stats, lanes);
                    assert!(
                        picks.contains(&s),
                        "{s:?} for {atoms} atoms, longest {max}, {len} entries, {lanes} lanes \
                         (longest tile {longest}, {cols} columns) is not in {picks:?}"
                    );
                }
            }
        }
    }

    /// A frontier over a tile set whose tiles all hold 1 to 4 atoms cannot be heavy-tailed: one
    /// pick; with empty tiles it can (a few atoms among many empty entries), and over a tile set
    /// with a hub a frontier can be either.
    #[test]
    fn frontier_picks_are_one_on_short_tiles_and_several_with_a_hub() {
        let mut road = TileStats::new(1_000_000, 1_000_000, 2_500_000, 4);
        road.min_atoms = 1;
        assert_eq!(
            DEFAULT_RULE.frontier_picks(Schedule::ALL, &road, 5_000, 1),
            vec![Schedule::ThreadMapped]
        );
        road.min_atoms = 0;
        assert!(
            DEFAULT_RULE
                .frontier_picks(Schedule::ALL, &road, 5_000, 1)
                .len()
                > 1
        );
        let hub = TileStats::new(6_500_000, 6_500_000, 52_000_000, 1_000_000);
        let picks = DEFAULT_RULE.frontier_picks(Schedule::ALL, &hub, 5_000, 1);
        assert!(picks.contains(&Schedule::MergePath), "{picks:?}");
        assert!(picks.contains(&Schedule::ThreadMapped), "{picks:?}");
        assert!(picks.len() > 1);
        let empty = DEFAULT_RULE.frontier_picks(Schedule::ALL, &hub, 0, 1);
        assert_eq!(empty.len(), 1);
    }
}
