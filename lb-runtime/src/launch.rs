//! Plan execution: arguments, temporaries, grids, launches, timing and error flags.

use cudarc::driver::sys;
use lb_ptx::plan::{DeviceLimits, KernelPlan, Plan, ProblemSize, TempCount, TempRole};
use lb_ptx::sim::{LaunchConfig, Stats};

use std::sync::Arc;

use crate::buffer::{DeviceBuffer, Element, RawBuffer};
use crate::cache::TempCache;
use crate::coo::DeviceCoo;
use crate::csc::DeviceCsc;
use crate::device::{Backend, Device, SIM_LIMITS};
use crate::error::{Error, Result};
use crate::formats::DeviceCsr;
use crate::queue::DeviceQueue;

/// One kernel parameter's value, in the type of its `.param`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl ArgValue {
    /// The parameter's bits, zero-extended to 64 (floats by `to_bits`).
    pub fn bits(self) -> u64 {
        match self {
            ArgValue::U32(v) => u64::from(v),
            ArgValue::I32(v) => u64::from(v as u32),
            ArgValue::U64(v) => v,
            ArgValue::I64(v) => v as u64,
            ArgValue::F32(v) => u64::from(v.to_bits()),
            ArgValue::F64(v) => v.to_bits(),
        }
    }
}

/// A launch argument: appends the `.param` values it stands for, in order.
pub trait KernelArg {
    fn push_args(&self, out: &mut Vec<ArgValue>);

    /// Whether the argument's device memory, if it has any, belongs to `dev`. A launch checks
    /// every argument first and refuses one of another device (`Error::DeviceMismatch`): its
    /// addresses mean nothing, or another allocation, in `dev`'s address space.
    fn on_device(&self, dev: &Device) -> bool {
        let _ = dev;
        true
    }
}

impl<A: KernelArg + ?Sized> KernelArg for &A {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        (**self).push_args(out);
    }

    fn on_device(&self, dev: &Device) -> bool {
        (**self).on_device(dev)
    }
}

impl<A: KernelArg + ?Sized> KernelArg for &mut A {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        (**self).push_args(out);
    }

    fn on_device(&self, dev: &Device) -> bool {
        (**self).on_device(dev)
    }
}

/// Address, then length in elements.
impl<T: Element> KernelArg for DeviceBuffer<T> {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.device_addr()));
        out.push(ArgValue::U64(self.len() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

/// Row offsets, column indices and values (addresses), then rows, columns and nonzeros.
impl<T: Element> KernelArg for DeviceCsr<T> {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.row_offsets.device_addr()));
        out.push(ArgValue::U64(self.col_indices.device_addr()));
        out.push(ArgValue::U64(self.values.device_addr()));
        out.push(ArgValue::U64(self.num_rows() as u64));
        out.push(ArgValue::U64(self.num_cols() as u64));
        out.push(ArgValue::U64(self.nnz() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

/// Column offsets, row indices and values (addresses), then rows, columns and nonzeros.
impl<T: Element> KernelArg for DeviceCsc<T> {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.col_offsets.device_addr()));
        out.push(ArgValue::U64(self.row_indices.device_addr()));
        out.push(ArgValue::U64(self.values.device_addr()));
        out.push(ArgValue::U64(self.num_rows() as u64));
        out.push(ArgValue::U64(self.num_cols() as u64));
        out.push(ArgValue::U64(self.nnz() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

/// The row offsets computed at upload, row indices, column indices and values (addresses),
/// then rows, columns and nonzeros.
impl<T: Element> KernelArg for DeviceCoo<T> {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.row_offsets.device_addr()));
        out.push(ArgValue::U64(self.row_indices.device_addr()));
        out.push(ArgValue::U64(self.col_indices.device_addr()));
        out.push(ArgValue::U64(self.values.device_addr()));
        out.push(ArgValue::U64(self.num_rows() as u64));
        out.push(ArgValue::U64(self.num_cols() as u64));
        out.push(ArgValue::U64(self.nnz() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

/// Items address, counter address, capacity.
impl KernelArg for DeviceQueue {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.items.device_addr()));
        out.push(ArgValue::U64(self.count.device_addr()));
        out.push(ArgValue::U64(self.capacity() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $v:ident),*) => {$(
        impl KernelArg for $t {
            fn push_args(&self, out: &mut Vec<ArgValue>) {
                out.push(ArgValue::$v(*self));
            }
        }
    )*};
}

scalar_arg!(f32 => F32, f64 => F64, i32 => I32, u32 => U32, i64 => I64, u64 => U64);

impl KernelArg for usize {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(*self as u64));
    }
}

/// `bool` travels as a 32-bit 0 or 1.
impl KernelArg for bool {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U32(u32::from(*self)));
    }
}

/// One kernel as it was launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    pub entry: String,
    pub grid: u32,
    pub block: u32,
    pub dynamic_shared: u32,
}

/// What a plan's execution did.
#[derive(Clone, Debug)]
pub struct Launch {
    pub schedule: String,
    pub kernels: Vec<KernelLaunch>,
    /// GPU time of all kernels together (CUDA events), `None` on the simulator.
    pub elapsed_ms: Option<f32>,
    /// Work statistics summed over the kernels, on the simulator only.
    pub sim: Option<Stats>,
    /// [`Device::name`] of the device it ran on.
    pub device: String,
    /// How the plan ran where that is a choice: for a schedule with a device-launch twin
    /// ([`Plan::device_launch_entry`]), whether its child kernels were launched from the device
    /// or by the host (the fallback), and why.
    pub notes: Vec<String>,
}

/// The kernels to launch for `plan`: its device-launch twin alone (with the first kernel's
/// block and grid) when `ptx` has one and the loaded module kept it, else `plan.kernels`; and
/// a note saying which path runs. `kept`: `Ok` when the module has the twin, else why not.
fn choose_path(
    ptx: &str,
    plan: &Plan,
    kept: std::result::Result<(), String>,
) -> (Vec<KernelPlan>, Vec<String>) {
    let twin = plan.device_launch_entry();
    if !ptx.contains(&format!(".entry {twin}(")) {
        return (plan.kernels.to_vec(), Vec::new());
    }
    match (kept, plan.kernels.first()) {
        (Ok(()), Some(first)) => {
            let note = format!("device-side launch: `{twin}` launches its child kernels (CUDA dynamic parallelism)");
            let kernel = KernelPlan {
                entry: twin.into(),
                ..first.clone()
            };
            (vec![kernel], vec![note])
        }
        (kept, _) => {
            let why = kept
                .err()
                .unwrap_or_else(|| "the plan has no kernels".into());
            let note = format!(
                "host fallback: the host launches the child kernels after the parent ({why})"
            );
            (plan.kernels.to_vec(), vec![note])
        }
    }
}

/// Elements of a temporary for this problem and first-kernel grid.
fn temp_elements(count: TempCount, size: &ProblemSize, first_grid: u32) -> Option<u64> {
    match count {
        TempCount::Fixed(n) => Some(n),
        TempCount::PerTile { per_tile, extra } => {
            per_tile.checked_mul(size.tiles)?.checked_add(extra)
        }
        TempCount::PerBlock { extra } => u64::from(first_grid).checked_add(extra),
    }
}

/// Runs `plan` from the module `ptx` on `dev`; see docs/runtime-contract.md.
///
/// `args` are the body's parameters (and output) as the kernels take them; one pointer per
/// temporary is appended here. Waits for the kernels to finish, so a fault or a raised error
/// flag is reported by this call.
pub fn execute(
    dev: &Device,
    ptx: &'static str,
    plan: &Plan,
    param_names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: ProblemSize,
) -> Result<Launch> {
    execute_cached(dev, ptx, plan, param_names, args, size, None)
}

/// [`execute`], keeping the plan's `TempRole::Cached` temporaries in `cache` (the tile set's):
/// the first launch runs every kernel and stores them; later launches reuse them and skip the
/// kernels that produce them (they are absent from `Launch::kernels`). Pass `None` when the
/// launch's tiles are not the tile set's own (a frontier).
pub fn execute_cached(
    dev: &Device,
    ptx: &'static str,
    plan: &Plan,
    param_names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: ProblemSize,
    cache: Option<&TempCache>,
) -> Result<Launch> {
    // A plan reads the tile offsets at one width: never launch it over the other.
    if plan.offsets != size.offsets {
        return Err(Error::OffsetWidthMismatch {
            schedule: plan.schedule.to_string(),
            entry: plan
                .kernels
                .first()
                .map_or_else(String::new, |k| k.entry.to_string()),
            plan_bits: plan.offsets.bytes() * 8,
            tile_set_bits: size.offsets.bytes() * 8,
        });
    }
    // Grids first: per-block temporaries are sized by the first kernel's grid.
    let mut kernels = Vec::with_capacity(plan.kernels.len());
    let mut gpu_functions = Vec::new();
    let gpu_module = match dev.backend() {
        Backend::Gpu(gpu) => Some(gpu.module(ptx)?),
        Backend::Sim(_) => None,
    };
    let kept = match &gpu_module {
        Some(module) => module.without_device_launch.clone().map_or(Ok(()), Err),
        None => Err("the simulator has no device-side launch".to_string()),
    };
    // The device-launch twin has no huge-tile split: a tile set with a huge tile takes the host
    // path, whose split kernels spread that tile over the grid.
    let huge = plan
        .kernels
        .iter()
        .any(|k| k.min_tile_atoms.is_some() && k.needed(&size));
    let kept = match kept {
        Ok(()) if huge => Err("a tile is large enough for the huge-tile split".to_string()),
        kept => kept,
    };
    let (kernel_plans, notes) = choose_path(ptx, plan, kept);
    for k in &kernel_plans {
        let limits = match (dev.backend(), &gpu_module) {
            (Backend::Gpu(gpu), Some(module)) => {
                let f = module.function(&k.entry, k.dynamic_shared)?;
                gpu_functions.push(f);
                let blocks_per_sm = module.blocks_per_sm(f, k.block, k.dynamic_shared)?;
                if blocks_per_sm == 0 {
                    return Err(Error::Shape(format!(
                        "kernel `{}` cannot run: no block of {} threads with {} bytes of dynamic shared memory fits on an SM",
                        k.entry, k.block, k.dynamic_shared
                    )));
                }
                DeviceLimits {
                    sm_count: gpu.sm_count,
                    blocks_per_sm,
                }
            }
            _ => SIM_LIMITS,
        };
        kernels.push(KernelLaunch {
            entry: k.entry.to_string(),
            grid: k.grid.blocks(&size, k.block, &limits),
            block: k.block,
            dynamic_shared: k.dynamic_shared,
        });
    }
    let first_grid = kernels.first().map_or(1, |k| k.grid);

    let producers = plan.cache_producers();
    let cache_key = match (cache, producers) {
        (Some(_), 1..) => plan.kernels.first().map(|k| TempCache::key(ptx, &k.entry)),
        _ => None,
    };
    let mut warm = cache
        .zip(cache_key.as_ref())
        .and_then(|(c, key)| c.get(key))
        .map(Vec::into_iter);
    let mut temps: Vec<Arc<RawBuffer>> = Vec::with_capacity(plan.temps.len());
    for t in plan.temps.iter() {
        if let (TempRole::Cached { .. }, Some(cached)) = (t.role, warm.as_mut()) {
            let buffer = cached.next().ok_or_else(|| {
                Error::Shape(format!(
                    "the cache of `{}` lost temporary `{}`",
                    plan.schedule, t.name
                ))
            })?;
            temps.push(buffer);
            continue;
        }
        let bytes = temp_elements(t.count, &size, first_grid)
            .and_then(|n| n.checked_mul(u64::from(t.elem_bytes)))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| {
                Error::Shape(format!(
                    "temporary `{}` is too large for this problem",
                    t.name
                ))
            })?;
        temps.push(Arc::new(
            dev.alloc_raw(bytes, t.zero || t.role == TempRole::ErrorFlag)?,
        ));
    }
    // Kernels with nothing to do for this tile set (the huge-tile split without a huge tile).
    let mut needed: Vec<bool> = kernel_plans.iter().map(|k| k.needed(&size)).collect();
    if warm.is_some() {
        // The cached temporaries are already written: their producers do not run again.
        needed.drain(..producers.min(needed.len()));
        kernels.drain(..producers.min(kernels.len()));
        if !gpu_functions.is_empty() {
            gpu_functions.drain(..producers.min(gpu_functions.len()));
        }
    }
    let mut keep = needed.iter();
    kernels.retain(|_| *keep.next().unwrap_or(&true));
    if !gpu_functions.is_empty() {
        let mut keep = needed.iter();
        gpu_functions.retain(|_| *keep.next().unwrap_or(&true));
    }
    let mut params: Vec<u64> = args.iter().map(|a| a.bits()).collect();
    params.extend(temps.iter().map(|t| t.addr()));

    let mut elapsed_ms = None;
    let mut sim_stats: Option<Stats> = None;
    match dev.backend() {
        Backend::Gpu(gpu) => {
            let module = gpu_module
                .as_ref()
                .ok_or_else(|| Error::MissingKernel(String::new()))?;
            let event = || {
                gpu.stream
                    .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| Error::cuda("recording a timing event", e))
            };
            let start = event()?;
            for (k, &f) in kernels.iter().zip(&gpu_functions) {
                // The driver copies the parameter values at launch, so reusing `params` is safe.
                module.launch(
                    f,
                    &gpu.stream,
                    k.grid,
                    k.block,
                    k.dynamic_shared,
                    &mut params,
                )?;
            }
            let stop = event()?;
            // Kernel faults surface here, at the first synchronization after the launch.
            gpu.stream
                .synchronize()
                .map_err(|e| Error::cuda(format!("running schedule `{}`", plan.schedule), e))?;
            elapsed_ms = Some(
                start
                    .elapsed_ms(&stop)
                    .map_err(|e| Error::cuda("reading the timing events", e))?,
            );
        }
        Backend::Sim(sim) => {
            let module = sim.module(ptx)?;
            // Same error as the GPU path, checked before any kernel of the plan runs.
            if let Some(k) = kernels.iter().find(|k| module.kernel(&k.entry).is_none()) {
                return Err(Error::MissingKernel(k.entry.clone()));
            }
            let mut mem = sim.memory();
            for k in &kernels {
                let cfg = LaunchConfig {
                    grid: k.grid,
                    block: k.block,
                    dynamic_shared: k.dynamic_shared,
                };
                let stats = lb_ptx::sim::launch(&module, &k.entry, cfg, &params, &mut mem)?;
                match &mut sim_stats {
                    Some(total) => total.merge(&stats),
                    None => sim_stats = Some(stats),
                }
            }
        }
    }

    for (t, raw) in plan.temps.iter().zip(&temps) {
        if t.role != TempRole::ErrorFlag {
            continue;
        }
        let bytes = dev.read_raw(raw)?;
        let word = |i: usize| -> u64 { bytes.get(i * 8..i * 8 + 8).map_or(0, u64::read_le) };
        let (w0, w1) = (word(0), word(1));
        if w0 != 0 {
            let p = (w0 - 1) as usize;
            let param = param_names
                .get(p)
                .map_or_else(|| format!("parameter #{p}"), |s| s.to_string());
            return Err(Error::OutOfBounds { param, index: w1 });
        }
    }

    if let (Some(cache), Some(key), None) = (cache, cache_key, warm) {
        let cached = plan
            .temps
            .iter()
            .zip(&temps)
            .filter(|(t, _)| matches!(t.role, TempRole::Cached { .. }))
            .map(|(_, b)| Arc::clone(b))
            .collect();
        cache.insert(key, cached);
    }

    Ok(Launch {
        schedule: plan.schedule.to_string(),
        kernels,
        elapsed_ms,
        sim: sim_stats,
        device: dev.name().to_string(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_ptx::plan::Grid;
    use std::borrow::Cow;

    fn plan(first: &'static str) -> Plan {
        let kernel = |entry: &'static str| KernelPlan {
            entry: Cow::Borrowed(entry),
            block: 64,
            grid: Grid::CoverItems { per_thread: 1 },
            dynamic_shared: 0,
            min_tile_atoms: None,
        };
        Plan {
            schedule: Cow::Borrowed("consolidate"),
            kernels: Cow::Owned(vec![kernel(first), kernel("k_child")]),
            temps: Cow::Owned(Vec::new()),
            index_limit: None,
            select: None,
            offsets: lb_ptx::plan::OffsetWidth::U64,
        }
    }

    #[test]
    fn the_twin_runs_alone_where_the_module_kept_it() {
        let ptx = ".visible .entry k(\n.visible .entry k_child(\n.visible .entry k_dl(";
        let (kernels, notes) = choose_path(ptx, &plan("k"), Ok(()));
        assert_eq!(kernels.len(), 1);
        assert_eq!(kernels[0].entry, "k_dl");
        assert_eq!(kernels[0].grid, Grid::CoverItems { per_thread: 1 });
        assert!(notes[0].starts_with("device-side launch"), "{notes:?}");

        let (kernels, notes) = choose_path(ptx, &plan("k"), Err("no libcudadevrt".into()));
        assert_eq!(kernels, plan("k").kernels.to_vec());
        assert!(notes[0].starts_with("host fallback"), "{notes:?}");
        assert!(notes[0].contains("no libcudadevrt"), "{notes:?}");
    }

    #[test]
    fn plans_without_a_twin_run_as_planned_without_notes() {
        let ptx = ".visible .entry k(\n.visible .entry k_child(";
        let (kernels, notes) = choose_path(ptx, &plan("k"), Err("simulator".into()));
        assert_eq!(kernels, plan("k").kernels.to_vec());
        assert!(notes.is_empty());
    }
}
