//! The `schedule = "auto"` heuristic: picks one of the generated schedules per launch from a
//! tile set's [`TileStats`].
//!
//! The starting point is the thesis's SpMV rule (§4.5.2): merge-path, unless the rows or the
//! columns number fewer than α and the nonzeros fewer than β, where thread- or group-mapped
//! wins because a work-oriented schedule's searches and fix-up cost more than the imbalance
//! they remove. Our H200 measurements (docs/gpu.md) refine the large case: on heavy-tailed rows
//! block_mapped beat merge_path (2.2 ms vs 6.1 ms at 52 M nonzeros, because our fix-up is
//! sequential per row), and on regular rows thread_mapped / warp_mapped were fastest. Every
//! number lives in [`Rule`], so `lb-bench` results can refine them without touching the logic.

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
    /// Longest tile from which a whole block per batch of tiles pays off on heavy-tailed rows.
    pub block_max_atoms: u64,
}

/// The rule `launch` uses: α = 500 and β = 10 000 from the thesis, the rest from docs/gpu.md.
pub const DEFAULT_RULE: Rule = Rule {
    small_dim: 500,
    small_atoms: 10_000,
    heavy_imbalance: 32.0,
    warp_mean_atoms: 24.0,
    block_max_atoms: 4_096,
};

impl Rule {
    /// The schedules to try in order of preference for `stats`; the first that was generated
    /// wins, so a function that lists only some schedules still gets a sensible one.
    pub fn preference(&self, stats: &TileStats) -> [Schedule; 4] {
        use Schedule::*;
        let small = (stats.tiles < self.small_dim || stats.cols < self.small_dim)
            && stats.atoms < self.small_atoms;
        if small {
            // Launch overhead dominates: the cheapest kernel, or a group when rows are long.
            return if stats.mean_atoms >= self.warp_mean_atoms {
                [WarpMapped, GroupMapped(8), ThreadMapped, MergePath]
            } else {
                [ThreadMapped, GroupMapped(4), WarpMapped, MergePath]
            };
        }
        if stats.imbalance() >= self.heavy_imbalance {
            return if stats.max_atoms >= self.block_max_atoms {
                [BlockMapped, MergePath, NonzeroSplit, WarpMapped]
            } else {
                [MergePath, NonzeroSplit, BlockMapped, WarpMapped]
            };
        }
        if stats.mean_atoms >= self.warp_mean_atoms {
            [WarpMapped, BlockMapped, MergePath, ThreadMapped]
        } else {
            [ThreadMapped, GroupMapped(8), MergePath, WarpMapped]
        }
    }

    /// The schedule among `generated` for `stats`: the first preferred one that was generated,
    /// else the first generated. `None` only when `generated` is empty.
    pub fn choose(&self, generated: &[Schedule], stats: &TileStats) -> Option<Schedule> {
        self.preference(stats)
            .into_iter()
            .find(|s| generated.contains(s))
            .or_else(|| generated.first().copied())
    }
}

/// [`DEFAULT_RULE`]'s pick among `generated` (what the generated `launch` of a function with
/// several schedules calls). Falls back to `ThreadMapped` for an empty list, which
/// `launch_with` then reports as not generated.
pub fn choose_schedule(generated: &[Schedule], stats: &TileStats) -> Schedule {
    DEFAULT_RULE
        .choose(generated, stats)
        .unwrap_or(Schedule::ThreadMapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thesis_rule_small_problems_avoid_merge_path() {
        let s = TileStats::new(100, 100, 1_000, 20);
        assert_eq!(choose_schedule(Schedule::ALL, &s), Schedule::ThreadMapped);
    }

    #[test]
    fn heavy_tails_go_to_block_or_merge_path() {
        let power = TileStats::new(6_500_000, 6_500_000, 52_000_000, 252_007);
        assert_eq!(
            choose_schedule(Schedule::ALL, &power),
            Schedule::BlockMapped
        );
        let moderate = TileStats::new(100_000, 100_000, 800_000, 1_000);
        assert_eq!(
            choose_schedule(Schedule::ALL, &moderate),
            Schedule::MergePath
        );
    }

    #[test]
    fn regular_rows_go_to_thread_or_warp() {
        let short = TileStats::new(1_000_000, 1_000_000, 8_000_000, 8);
        assert_eq!(
            choose_schedule(Schedule::ALL, &short),
            Schedule::ThreadMapped
        );
        let long = TileStats::new(100_000, 100_000, 6_400_000, 64);
        assert_eq!(choose_schedule(Schedule::ALL, &long), Schedule::WarpMapped);
    }

    #[test]
    fn only_generated_schedules_are_picked() {
        let power = TileStats::new(6_500_000, 6_500_000, 52_000_000, 252_007);
        let only = [Schedule::NonzeroSplit, Schedule::ThreadMapped];
        assert_eq!(choose_schedule(&only, &power), Schedule::NonzeroSplit);
        let none_preferred = [Schedule::DynamicVirtualWarps];
        assert_eq!(
            choose_schedule(&none_preferred, &power),
            Schedule::DynamicVirtualWarps
        );
    }
}
