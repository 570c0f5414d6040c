//! lb-runtime: devices (CUDA through cudarc, or lb-ptx's simulator), typed device buffers,
//! validated sparse formats, Matrix Market I/O, seeded generators, host intrinsics and the
//! execution of the plans that lb-ptx generates.
//!
//! The surface that macro-generated code calls is fixed in `docs/runtime-contract.md`.

// Every unsafe block and impl says why it is sound, in a `// SAFETY:` comment above it.
#![warn(clippy::undocumented_unsafe_blocks)]

mod buffer;
mod builtin;
mod cache;
mod coo;
mod csc;
mod cuda;
mod device;
mod error;
mod formats;
mod frontier;
pub mod generate;
pub mod heuristic;
mod host;
#[cfg(any(feature = "sprs", feature = "nalgebra-sparse"))]
mod interop;
pub mod intrinsics;
mod launch;
mod levels;
pub mod mtx;
pub mod multi;
mod precision;
mod queue;
mod stats;
mod stream;
mod tiles;
mod tune;
mod user;

pub use buffer::{DeviceBuffer, Element};
pub use cache::TempCache;
pub use coo::{Coo, DeviceCoo};
pub use csc::{Csc, DeviceCsc};
/// The cudarc this crate is built on, for interop ([`Device::from_cudarc`],
/// [`DeviceBuffer::from_cudarc`], [`Stream::from_cudarc`]) without a version mismatch.
pub use cudarc;
pub use device::{Device, Transferred};
pub use error::{Error, Result};
pub use formats::{Csr, DeviceCsr, DeviceOffsets, TileSet};
pub use frontier::frontier_schedule;
/// The 16-bit float types of the `half` crate, which device buffers and kernels take as
/// storage for f32 arithmetic ([`HalfElement`]).
pub use half;
pub use half::{bf16, f16};
pub use heuristic::choose_schedule;
pub use host::{HostBuffer, HostDestination};
pub use launch::{
    execute, execute_cached, submit, ArgValue, Job, KernelArg, KernelLaunch, Launch, Submit,
};
/// The width of a device tile set's offsets (`DeviceCsr::offset_width`, `upload_with_offsets`).
pub use lb_ptx::plan::OffsetWidth;
/// The trait of a schedule written outside lb.
pub use lb_ptx::user::UserSchedule;
pub use levels::{bfs_block_levels, sssp_block_levels, BlockLevels, LevelQueues, LevelRun};
pub use mtx::{
    parse_mtx, parse_mtx_bytes, parse_mtx_dense, parse_mtx_dense_bytes, read_mtx, read_mtx_dense,
    write_mtx, DenseMatrix, MtxValue,
};
/// The nalgebra-sparse the conversions are built against (feature `nalgebra-sparse`).
#[cfg(feature = "nalgebra-sparse")]
pub use nalgebra_sparse;
pub use precision::{narrow_into, narrowed, widen, HalfElement};
pub use queue::{DeviceQueue, Queue};
/// The sprs the conversions are built against (feature `sprs`).
#[cfg(feature = "sprs")]
pub use sprs;
pub use stats::TileStats;
pub use stream::{Graph, Pending, Stream, Workspace};
pub use tiles::{DeviceTileSet, DeviceTiles, Tiles};
pub use tune::{pick_schedule, scratch_copy, AutoKernel, Picked, RunFn, Tuning};
pub use user::{plan_names, user_kernels, UserKernels};
