//! Writing a schedule outside lb: the trait it implements and the building blocks lb's own
//! schedules are made of.
//!
//! A schedule decides which thread takes which atoms; everything else (loading the tile set,
//! calling the body on an atom, reducing, the carry-out and fix-up of split tiles, storing the
//! output) comes from [`primitives`], the layer every built-in schedule stands on. A schedule is
//! a type implementing [`ScheduleTemplate`] (its plans and their kernels, written with
//! [`builder::KernelBuilder`]) and [`UserSchedule`] (its name). A kernel runs under it with the
//! `launch_custom` function `#[load_balanced]` generates: lb builds the schedule's PTX from the
//! kernel's embedded body IR at the first launch and keeps it for the process.
//!
//! `docs/custom-schedules.md` walks through a whole crate of such schedules
//! (`examples/custom-schedules`: direct, local-warp and block search). The smallest real one is
//! Busato & Bombieri's direct search (§2.4.1): an even share of atoms per thread, each thread
//! finding the tiles at both ends of its share by its own binary search of the tile offsets.
//! Its plans and kernels are the work-oriented family's, given the thread's share:
//!
//! ```
//! use lb::prelude::*;
//! use lb::schedule::builder::KernelBuilder;
//! use lb::schedule::ir::{BinOp, Cmp, Kernel, Operand, Type};
//! use lb::schedule::plan::Plan;
//! use lb::schedule::primitives::partition::{tiles_ending_by, Search};
//! use lb::schedule::primitives::work_oriented::{self, global_end, narrow, Frame, Share, TileEnds};
//! use lb::schedule::{Body, GenError, Options, ScheduleTemplate, UserSchedule};
//!
//! struct DirectSearch;
//!
//! impl ScheduleTemplate for DirectSearch {
//!     fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
//!         Ok(self.plans(body, opts)?.remove(0))
//!     }
//!
//!     fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
//!         work_oriented::plans(body, opts, "direct_search", false)
//!     }
//!
//!     fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
//!         work_oriented::build(body, opts, plan, false, share)
//!     }
//! }
//!
//! // SAFETY: the kernels are the work-oriented family's, which give the body only atoms and
//! // tiles of the tile set; the share below stays within `0 ..= atoms` and `0 ..= tiles`.
//! unsafe impl UserSchedule for DirectSearch {
//!     fn name(&self) -> &'static str {
//!         "direct_search"
//!     }
//! }
//!
//! /// Thread `t` takes atoms `[t·n, (t + 1)·n)`; the tiles at both ends by binary searches.
//! fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
//!     let w = f.w;
//!     let first = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.block));
//!     let thread = b.bin(BinOp::Add, Type::U64, first, f.tid);
//!     let start = b.bin(BinOp::Mul, Type::U64, thread, f.per_thread.clone());
//!     let a0 = b.bin(BinOp::Min, Type::U64, start, f.atoms);
//!     let stop = b.bin(BinOp::Add, Type::U64, a0, f.per_thread.clone());
//!     let a1 = b.bin(BinOp::Min, Type::U64, stop, f.atoms);
//!     let (a0, a1) = (narrow(b, w, a0), narrow(b, w, a1));
//!     let mut search = |b: &mut KernelBuilder, a| {
//!         let lo = b.mov(w, Operand::Imm(0));
//!         let hi = narrow(b, w, f.layout.tiles);
//!         let mut end = |b: &mut KernelBuilder, i| global_end(b, f, i);
//!         tiles_ending_by(b, w, Search::LowerBound, a, (lo, hi), &mut end)
//!     };
//!     let (after, i1) = (search(b, a0), search(b, a1));
//!     // Thread 0 also finishes the empty tiles in front of the first atom.
//!     let front = b.setp(Cmp::Eq, Type::U64, thread, Operand::Imm(0));
//!     let zero = b.mov(w, Operand::Imm(0));
//!     let i0 = b.selp(w, zero, after, front);
//!     Share { i0, j0: a0, i1, j1: a1, ends: TileEnds::Global, block_atoms: None, values: None }
//! }
//!
//! #[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
//! fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
//!     a.values[nz] * x[a.col_indices[nz] as usize]
//! }
//!
//! # fn main() -> lb::Result<()> {
//! let a = Csr::new(3, 3, vec![0, 2, 2, 3], vec![0, 2, 1], vec![1.0f32, 2.0, 3.0])?;
//! let dev = Device::simulator();
//! let (da, dx) = (DeviceCsr::upload(&dev, &a)?, dev.upload(&[1.0f32, 10.0, 100.0])?);
//! let mut dy = dev.zeros::<f32>(3)?;
//! spmv::launch_custom(&dev, &DirectSearch, &da, &dx, &mut dy)?;
//! assert_eq!(dev.download(&dy)?, [201.0, 0.0, 30.0]);
//! # Ok(())
//! # }
//! ```
//!
//! These modules are lb-ptx's own: the same code builds the built-in schedules, so a user
//! schedule gets their index widths, cache policies, collectives and fix-ups. The names here are
//! the public surface; what lb-ptx keeps private is not reachable.

pub use lb_ptx::body::Body;
/// ptxas, for a schedule's tests: [`ptxas::assert_assembles`] checks that a module assembles for
/// sm_75, sm_80 and sm_90 without spills (the check every built-in schedule passes).
pub use lb_ptx::ptxas;
pub use lb_ptx::user::UserSchedule;
pub use lb_ptx::{body, builder, ir, plan, primitives};
pub use lb_ptx::{GenError, IndexWidth, Options, ScheduleTemplate, Tuning};

/// The parameters a generated kernel declares for a plan ([`codegen::KernelParams`]), and the
/// body's emission for one atom, which [`primitives::walker`] calls.
pub mod codegen {
    pub use lb_ptx::codegen::{reduce_combine, reduce_identity, KernelParams};
}
