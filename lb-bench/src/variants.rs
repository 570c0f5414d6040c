//! Tuned SpMV variants (`--variants`): the knobs of single schedules that the `auto` list does
//! not cover — `multi_phase`'s iteration factor, `consolidate`'s block and warp levels and
//! threshold, `binning`'s thresholds, the work-oriented schedules' items per thread — timed like
//! the schedules and excluded from `auto`'s oracle.

use lb::prelude::*;

/// An SpMV kernel, `y = A·x`, generated with the attribute keys given.
macro_rules! spmv_variant {
    ($(#[$doc:meta])* $name:ident: $($key:ident = $value:literal),+) => {
        $(#[$doc])*
        #[load_balanced($($key = $value),+, reduce = "sum", output = "y")]
        fn $name(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
            a.values[nz] * x[a.col_indices[nz] as usize]
        }
    };
}

spmv_variant! {
    /// `multi_phase` with two rounds per block (B&B §3.2's `IS`; the default is 1); 32-bit
    /// offsets so that every factor keeps seven items per thread.
    spmv_is2: schedule = "multi_phase", iteration_factor = 2, index = "u32"
}
spmv_variant! {
    /// `multi_phase` with four rounds per block.
    spmv_is4: schedule = "multi_phase", iteration_factor = 4, index = "u32"
}
spmv_variant! {
    /// `consolidate` at the levels below the grid (Li, Wu & Becchi §2).
    spmv_levels: schedule = "consolidate(block), consolidate(warp)"
}
spmv_variant! {
    /// `consolidate` (grid) that buffers only tiles of 256 atoms or more.
    spmv_consolidate_256: schedule = "consolidate", consolidate_threshold = 256
}
spmv_variant! {
    /// `binning` with a warp from 8 atoms and the whole block from 1024.
    spmv_binning_8_1024: schedule = "binning", warp_threshold = 8, block_threshold = 1024
}

spmv_variant! {
    /// `merge_path` with 11 and 15 work items per thread (the default is 7).
    spmv_merge_11: schedule = "merge_path", items_per_thread = 11
}
spmv_variant! {
    /// `merge_path` with 15 work items per thread.
    spmv_merge_15: schedule = "merge_path", items_per_thread = 15
}
spmv_variant! {
    /// `multi_phase` with 11 atoms per thread (the default is 7).
    spmv_multi_11: schedule = "multi_phase", items_per_thread = 11
}

/// Launches one variant: `y = A·x`.
type Launcher =
    fn(&Device, &DeviceCsr<f32>, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>) -> lb::Result<Launch>;

/// One tuned variant: its name in the reports and its launcher.
pub struct Variant {
    pub name: &'static str,
    pub launch: Launcher,
}

/// Every SpMV variant.
pub const SPMV: &[Variant] = &[
    Variant {
        name: "multi_phase[IS=2]",
        launch: |d, a, x, y| spmv_is2::launch_with(d, Schedule::MultiPhase, a, x, y),
    },
    Variant {
        name: "multi_phase[IS=4]",
        launch: |d, a, x, y| spmv_is4::launch_with(d, Schedule::MultiPhase, a, x, y),
    },
    Variant {
        name: "consolidate(block)",
        launch: |d, a, x, y| spmv_levels::launch_with(d, Schedule::ConsolidateBlock, a, x, y),
    },
    Variant {
        name: "consolidate(warp)",
        launch: |d, a, x, y| spmv_levels::launch_with(d, Schedule::ConsolidateWarp, a, x, y),
    },
    Variant {
        name: "consolidate[threshold=256]",
        launch: |d, a, x, y| spmv_consolidate_256::launch_with(d, Schedule::Consolidate, a, x, y),
    },
    Variant {
        name: "binning[warp=8,block=1024]",
        launch: |d, a, x, y| spmv_binning_8_1024::launch_with(d, Schedule::Binning, a, x, y),
    },
    Variant {
        name: "merge_path[items=11]",
        launch: |d, a, x, y| spmv_merge_11::launch_with(d, Schedule::MergePath, a, x, y),
    },
    Variant {
        name: "merge_path[items=15]",
        launch: |d, a, x, y| spmv_merge_15::launch_with(d, Schedule::MergePath, a, x, y),
    },
    Variant {
        name: "multi_phase[items=11]",
        launch: |d, a, x, y| spmv_multi_11::launch_with(d, Schedule::MultiPhase, a, x, y),
    },
];

/// The suffix of the rows that `--unchecked` adds: a schedule run through the unsafe
/// `launch_with_unchecked`, whose kernels test no index.
pub const UNCHECKED: &str = "+unchecked";

/// The suffix of the rows that `--host-loop` adds: a graph op through the host-driven loop
/// that the device-resident drivers replaced (`crate::host_loop`).
pub const HOST_LOOP: &str = "+host_loop";

/// Whether `name` is a variant's, an unchecked or host-loop run's, or a schedule written outside
/// lb (`--custom`): not a schedule `auto` can pick.
pub fn is_variant(name: &str) -> bool {
    name.ends_with(UNCHECKED)
        || name.ends_with(HOST_LOOP)
        || SPMV.iter().any(|v| v.name == name)
        || lb_custom_schedules::ALL.iter().any(|s| s.name() == name)
}
