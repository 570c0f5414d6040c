//! SIMT simulator: parses the PTX subset that lb emits and runs whole grids on the CPU, with
//! checked global and shared memory, warp collectives, barriers and load-balance statistics.
//!
//! Semantics choices that the GPU leaves open are documented on [`launch`].

mod interp;
mod memory;
mod parse;

pub use memory::Memory;
pub use parse::{parse, ParseError};

use crate::ir;

/// The default step limit of [`launch`]: total thread-instructions before [`SimError::StepLimit`].
pub const DEFAULT_STEP_LIMIT: u64 = 1 << 32;

/// The most threads one launch may have: per-thread statistics are kept for each.
pub const MAX_THREADS: u64 = 1 << 28;

/// A 1-D launch: `grid` blocks of `block` threads, plus the byte size of the dynamic
/// (`.extern .shared`) shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: u32,
    pub block: u32,
    pub dynamic_shared: u32,
}

/// Work counters of one or more launches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Threads launched.
    pub threads: u64,
    /// Thread-instructions executed (a guarded-off instruction counts: it was issued).
    pub instructions: u64,
    /// Thread-instructions by global thread id (`ctaid.x * ntid.x + tid.x`).
    pub per_thread_instructions: Vec<u64>,
    /// Warp-instruction issues.
    pub warp_issues: u64,
    /// Sum over issues of the lanes that took part in the issue.
    pub active_lanes: u64,
}

impl Stats {
    /// The average fraction of a warp's 32 lanes that did useful work per issue (1 when no issue).
    pub fn warp_efficiency(&self) -> f64 {
        if self.warp_issues == 0 {
            1.0
        } else {
            self.active_lanes as f64 / (32.0 * self.warp_issues as f64)
        }
    }

    /// Adds `other`'s counters (`threads` too); per-thread counts are added element-wise by id.
    pub fn merge(&mut self, other: &Stats) {
        self.threads += other.threads;
        self.instructions += other.instructions;
        self.warp_issues += other.warp_issues;
        self.active_lanes += other.active_lanes;
        if self.per_thread_instructions.len() < other.per_thread_instructions.len() {
            self.per_thread_instructions
                .resize(other.per_thread_instructions.len(), 0);
        }
        for (a, b) in self
            .per_thread_instructions
            .iter_mut()
            .zip(&other.per_thread_instructions)
        {
            *a += b;
        }
    }
}

/// Everything that can stop a simulated launch, with what a user needs to find the cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("out-of-bounds access of {bytes} bytes at {addr:#x} by block {block} thread {thread} in `{instr}`: the range is not inside one live allocation (or shared variable)")]
    OutOfBounds {
        addr: u64,
        bytes: u32,
        block: u32,
        thread: u32,
        instr: String,
    },
    #[error("use after free: access of {bytes} bytes at {addr:#x} by block {block} thread {thread} in `{instr}` hits a freed allocation")]
    UseAfterFree {
        addr: u64,
        bytes: u32,
        block: u32,
        thread: u32,
        instr: String,
    },
    #[error("misaligned access of {bytes} bytes at {addr:#x} by block {block} thread {thread} in `{instr}`: the address must be a multiple of {bytes}")]
    Misaligned {
        addr: u64,
        bytes: u32,
        block: u32,
        thread: u32,
        instr: String,
    },
    #[error("host access of {bytes} bytes at {addr:#x} failed: {why}")]
    HostAccess { addr: u64, bytes: u64, why: String },
    #[error("deadlock: {0}")]
    Deadlock(String),
    #[error("step limit of {0} thread-instructions reached: the kernel may be hung (spinning on a flag nobody sets?), or the problem is larger than the simulator is meant for (it runs about 10^7 thread-instructions a second): run it on a GPU, or shrink it")]
    StepLimit(u64),
    #[error("no kernel named `{0}` in the module")]
    UnknownEntry(String),
    #[error("kernel `{kernel}` takes {expected} parameters but {got} arguments were given")]
    BadArgs {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error("bad launch configuration: {0}")]
    BadLaunch(String),
    #[error("invalid kernel: {0}")]
    Invalid(String),
    #[error("unsupported by the simulator: {0}")]
    Unsupported(String),
    #[error("simulated allocation of {bytes} bytes is too large: the simulator allocates at most {max} bytes per buffer; use a smaller size or a GPU")]
    AllocTooLarge { bytes: u64, max: u64 },
    #[error("the host could not provide the {bytes} bytes of a simulated allocation: use a smaller size or a GPU")]
    AllocFailed { bytes: u64 },
}

/// Runs `entry` over the whole grid with the [`DEFAULT_STEP_LIMIT`].
///
/// `args` holds one `u64` per kernel `.param`: the value's bits zero-extended (f32 via `to_bits`,
/// pointers as [`Memory`] addresses).
///
/// Semantics where PTX leaves a choice:
/// - integer `div` by zero gives all ones (unsigned and signed, like the GPU's unsigned result);
///   `rem` by zero gives the dividend; signed `MIN / -1` wraps to `MIN` and `MIN rem -1` is 0;
/// - `shl`/`shr` with an amount ≥ the width give 0 (`shr.s*` fills with the sign bit);
/// - float `min`/`max` return the non-NaN operand and order `-0.0` below `+0.0`;
/// - SIMT: each warp issues the lowest program counter among its runnable threads, so divergent
///   paths reconverge at the lowest common point;
/// - `bar.sync 0` releases when every non-exited thread of the block waits at a barrier; if they
///   wait at different `bar.sync` instructions that is reported as a deadlock (undefined in CUDA);
/// - `shfl.sync`/`vote.sync` execute when every non-exited thread of the mask waits at the same
///   instruction; a source lane outside the mask supplies its current register value;
/// - blocks are admitted in order into a window of up to 64 resident blocks, and resident warps
///   are scheduled round-robin, 32 warp issues at a time, so a block may spin on a flag that an
///   earlier block sets;
/// - atomics of one warp apply in lane order.
pub fn launch(
    module: &ir::Module,
    entry: &str,
    cfg: LaunchConfig,
    args: &[u64],
    mem: &mut Memory,
) -> Result<Stats, SimError> {
    launch_with_limit(module, entry, cfg, args, mem, DEFAULT_STEP_LIMIT)
}

/// [`launch`] with a limit on the total thread-instructions, after which it returns
/// [`SimError::StepLimit`] (memory keeps whatever the kernel wrote until then).
pub fn launch_with_limit(
    module: &ir::Module,
    entry: &str,
    cfg: LaunchConfig,
    args: &[u64],
    mem: &mut Memory,
    step_limit: u64,
) -> Result<Stats, SimError> {
    let kernel = module
        .kernel(entry)
        .ok_or_else(|| SimError::UnknownEntry(entry.to_string()))?;
    if args.len() != kernel.params.len() {
        return Err(SimError::BadArgs {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    if cfg.block == 0 || cfg.block > 1024 {
        return Err(SimError::BadLaunch(format!(
            "block size {} is not in 1..=1024",
            cfg.block
        )));
    }
    // The GPU refuses such a launch too (`.maxntid`).
    if let Some(o) = kernel.occupancy.filter(|o| cfg.block > o.max_threads) {
        return Err(SimError::BadLaunch(format!(
            "block size {} is above the {} threads `{}` declares (`.maxntid`)",
            cfg.block, o.max_threads, kernel.name
        )));
    }
    if u64::from(cfg.grid) * u64::from(cfg.block) > MAX_THREADS {
        return Err(SimError::BadLaunch(format!(
            "{} blocks of {} threads is more than the simulator's {MAX_THREADS} threads",
            cfg.grid, cfg.block
        )));
    }
    if cfg.grid == 0 {
        return Err(SimError::BadLaunch(
            "grid size 0: launch at least one block".into(),
        ));
    }
    let prepared = interp::Prepared::new(kernel, cfg, args)?;
    interp::run(&prepared, cfg, mem, step_limit)
}
