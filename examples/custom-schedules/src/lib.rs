//! Three schedules written outside lb, with nothing but its public schedule API
//! (`lb::schedule`): the searches of Busato & Bombieri §2.4.1–§2.4.3, which give every thread an
//! even share of atoms and differ in how a thread finds the tiles of its share.
//!
//! - [`DirectSearch`]: every thread binary-searches the tile offsets in global memory;
//! - [`LocalWarpSearch`]: a warp holds 32 tile offsets in registers and searches them with
//!   shuffles;
//! - [`BlockSearch`]: a block stages its tile offsets in shared memory and searches there.
//!
//! A kernel runs under one with its generated `launch_custom`:
//!
//! ```
//! use lb::prelude::*;
//! use lb_custom_schedules::BlockSearch;
//!
//! #[load_balanced(schedule = "merge_path", reduce = "sum", output = "y")]
//! fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
//!     a.values[nz] * x[a.col_indices[nz] as usize]
//! }
//!
//! # fn main() -> lb::Result<()> {
//! let a = Csr::new(2, 2, vec![0, 2, 3], vec![0, 1, 1], vec![1.0f32, 2.0, 3.0])?;
//! let dev = Device::simulator();
//! let (da, dx) = (DeviceCsr::upload(&dev, &a)?, dev.upload(&[1.0f32, 1.0])?);
//! let mut dy = dev.zeros::<f32>(2)?;
//! spmv::launch_custom(&dev, &BlockSearch, &da, &dx, &mut dy)?;
//! assert_eq!(dev.download(&dy)?, [3.0, 3.0]);
//! # Ok(())
//! # }
//! ```
//!
//! docs/custom-schedules.md (in lb's repository) walks through `direct_search`.

use lb::schedule::builder::KernelBuilder;
use lb::schedule::ir::{Operand, Reg};
use lb::schedule::plan::Plan;
use lb::schedule::primitives::partition::{tiles_ending_by, Search};
use lb::schedule::primitives::work_oriented::{global_end, narrow, Frame};
use lb::schedule::GenError;

/// Declares a work-oriented schedule's type, its name as the constant `NAME`, and its
/// [`lb::schedule::UserSchedule`] implementation. Every schedule here builds its kernels with
/// `work_oriented::build` from a share, which is what the safety argument below rests on.
macro_rules! work_oriented_schedule {
    ($(#[$doc:meta])* $ty:ident => NAME = $name:literal) => {
        /// The schedule's name: in its plans, its kernels' entries and error messages.
        const NAME: &str = $name;

        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $ty;

        // SAFETY: the kernels are lb's work-oriented family's (`work_oriented::build`), which
        // call the body only for atoms of the tile set and the tiles holding them, and store
        // through the layout; the schedule's share gives every thread a range within
        // `0 ..= atoms` and the tiles that end it within `0 ..= tiles` (the tests of this crate
        // check it on adversarial tile sets).
        unsafe impl lb::schedule::UserSchedule for $ty {
            fn name(&self) -> &'static str {
                NAME
            }
        }
    };
}

/// The first of a schedule's plans (its 32-bit-index plan): what `ScheduleTemplate::plan` of
/// every schedule here returns.
fn first_plan(plans: Vec<Plan>) -> Result<Plan, GenError> {
    plans
        .into_iter()
        .next()
        .ok_or_else(|| GenError::Unsupported("a work-oriented schedule without plans".into()))
}

/// The number of tiles whose end offset is at most `a` (width `Frame::w`), by a lower-bound
/// binary search of the whole offset array in global memory: direct search's search, and local
/// warp search's for a warp's first tile.
fn global_search(b: &mut KernelBuilder, f: &Frame, a: Reg) -> Reg {
    let w = f.w;
    let lo = b.mov(w, Operand::Imm(0));
    let hi = narrow(b, w, f.layout.tiles);
    let mut end = |b: &mut KernelBuilder, i: Reg| global_end(b, f, i);
    tiles_ending_by(b, w, Search::LowerBound, a, (lo, hi), &mut end)
}

mod block_search;
mod direct_search;
pub mod ell;
mod local_warp_search;

pub use block_search::BlockSearch;
pub use direct_search::DirectSearch;
pub use local_warp_search::LocalWarpSearch;

/// The three schedules, for code that tries each (benchmarks, tests).
pub const ALL: [&dyn lb::schedule::UserSchedule; 3] =
    [&DirectSearch, &LocalWarpSearch, &BlockSearch];
