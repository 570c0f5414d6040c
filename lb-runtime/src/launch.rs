//! Plan execution: arguments, temporaries, grids, launches, timing and error flags.

use cudarc::driver::{sys, CudaEvent, CudaStream};
use lb_ptx::plan::{DeviceLimits, KernelPlan, Plan, ProblemSize, Temp, TempCount, TempRole};
use lb_ptx::sim::{LaunchConfig, Stats};
use smallvec::SmallVec;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::buffer::{DeviceBuffer, Element, RawBuffer};
use crate::cache::{PlanKey, TempCache};
use crate::coo::DeviceCoo;
use crate::csc::DeviceCsc;
use crate::cuda::{Function, GpuModule, LoadedKernel, LoadedPlan};
use crate::device::{lock, Backend, Device, SIM_LIMITS};
use crate::error::{Error, Result};
use crate::formats::DeviceCsr;
use crate::queue::DeviceQueue;
use crate::stream::{Pending, Stream, WsBuf, ALIGN, FLAG_REGION};
use crate::tiles::{DeviceTileSet, DeviceTiles};
use crate::tune::Picked;

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
        out.push(ArgValue::U64(self.tiles.offsets.device_addr()));
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
        out.push(ArgValue::U64(self.tiles.offsets.device_addr()));
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
        out.push(ArgValue::U64(self.tiles.offsets.device_addr()));
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

/// The tile offsets (address), then tiles and atoms: the `Tiles` slots.
impl KernelArg for DeviceTiles {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        out.push(ArgValue::U64(self.offsets.device_addr()));
        out.push(ArgValue::U64(self.num_tiles() as u64));
        out.push(ArgValue::U64(self.num_atoms() as u64));
    }

    fn on_device(&self, dev: &Device) -> bool {
        dev.same(self.device())
    }
}

/// Any format, through the tile-set contract: its [`DeviceTiles`]' slots.
impl KernelArg for dyn DeviceTileSet + '_ {
    fn push_args(&self, out: &mut Vec<ArgValue>) {
        self.tiles().push_args(out);
    }

    fn on_device(&self, dev: &Device) -> bool {
        self.tiles().on_device(dev)
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
    pub entry: Cow<'static, str>,
    pub grid: u32,
    pub block: u32,
    pub dynamic_shared: u32,
    /// The plan's track it ran on ([`KernelPlan::track`]; 0: the launching stream).
    pub track: u8,
}

/// What a plan's execution did.
#[derive(Clone, Debug)]
pub struct Launch {
    pub schedule: Cow<'static, str>,
    pub kernels: Vec<KernelLaunch>,
    /// GPU time of all kernels together (CUDA events), `None` on the simulator.
    pub elapsed_ms: Option<f32>,
    /// Work statistics summed over the kernels, on the simulator only.
    pub sim: Option<Stats>,
    /// [`Device::name`] of the device it ran on.
    pub device: Arc<str>,
    /// Why this schedule ran: named by the caller, picked by the heuristic, or measured
    /// ([`Picked`]).
    pub picked: Picked,
    /// How the plan ran where that is a choice: for a schedule with a device-launch twin
    /// ([`Plan::device_launch_entry`]), whether its child kernels were launched from the device
    /// or by the host (the fallback), and why.
    pub notes: Vec<String>,
    /// Pushes counted per queue parameter (name, count, those that did not fit included), as
    /// read after the launch by its overflow check: filled by [`Pending::wait`], so a driver
    /// learns the next frontier's length without reading the counter again.
    pub pushed: Vec<(&'static str, u64)>,
}

/// The kernels to launch for `plan`: its device-launch twin alone (with the first kernel's
/// block and grid) when `ptx` has one and the loaded module kept it, else `plan.kernels`; and
/// a note saying which path runs. `kept`: `Ok` when the module has the twin, else why not.
fn choose_path(
    ptx: &'static str,
    plan: &Plan,
    kept: std::result::Result<(), String>,
) -> (Vec<KernelPlan>, Vec<String>) {
    let twin = plan.device_launch_entry();
    if !has_entry(ptx, &twin) {
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

/// Whether `ptx` declares the kernel `entry`. Searching a module of every schedule takes tens of
/// microseconds, more than a launch may cost, so each answer is kept; the texts are `'static`
/// and the search is pure, so an answer never goes stale.
fn has_entry(ptx: &'static str, entry: &str) -> bool {
    type Seen = HashMap<(usize, usize, String), bool>;
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    let key = (ptx.as_ptr() as usize, ptx.len(), entry.to_string());
    let seen = SEEN.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&found) = lock(seen).get(&key) {
        return found;
    }
    let found = ptx.contains(&format!(".entry {entry}("));
    lock(seen).insert(key, found);
    found
}

/// Elements of a temporary for this problem and first-kernel grid.
fn temp_elements(count: TempCount, size: &ProblemSize, first_grid: u32) -> Option<u64> {
    match count {
        TempCount::Fixed(n) => Some(n),
        TempCount::PerTile { per_tile, extra } => {
            per_tile.checked_mul(size.tiles)?.checked_add(extra)
        }
        TempCount::PerBlock { extra } => u64::from(first_grid).checked_add(extra),
        TempCount::PerAtoms { atoms, extra } => {
            size.atoms.div_ceil(atoms.max(1)).checked_add(extra)
        }
    }
}

/// Runs `plan` from the module `ptx` on `dev`; see docs/runtime-contract.md.
///
/// `args` are the body's parameters (and output) as the kernels take them; one pointer per
/// temporary is appended here. Waits for the kernels to finish, so a fault or a raised error
/// flag is reported by this call.
///
/// # Safety
///
/// As for [`submit`]: `args` must be what the plan's kernels declare, and every address among
/// them a live allocation of `dev` large enough for every access the kernels make.
pub unsafe fn execute(
    dev: &Device,
    ptx: &'static str,
    plan: &Plan,
    param_names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: ProblemSize,
) -> Result<Launch> {
    // SAFETY: the caller answers for `args` (this function's contract is `submit`'s).
    unsafe { execute_cached(dev, ptx, plan, param_names, args, size, None) }
}

/// [`execute`], keeping the plan's `TempRole::Cached` temporaries in `cache` (the tile set's):
/// the first launch runs every kernel and stores them; later launches reuse them and skip the
/// kernels that produce them (they are absent from `Launch::kernels`). Pass `None` when the
/// launch's tiles are not the tile set's own (a frontier).
///
/// # Safety
///
/// As for [`execute`]; `cache` must be the cache of the tile set among `args`.
pub unsafe fn execute_cached(
    dev: &Device,
    ptx: &'static str,
    plan: &Plan,
    param_names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: ProblemSize,
    cache: Option<&TempCache>,
) -> Result<Launch> {
    let job = Job {
        ptx,
        plan,
        param_names,
        size,
        cache,
    };
    // SAFETY: the caller answers for `args` and `cache` (this function's contract).
    unsafe { submit(&dev.stream(), &job, args, Submit::Timed) }?.wait()
}

/// What [`submit`] does with a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submit {
    /// Enqueue it between two timing events (what the synchronous `launch` does).
    Timed,
    /// Enqueue it, timed only when the stream times its launches (`Stream::set_timing`).
    Enqueue,
    /// Launch nothing and allocate nothing: only size its workspace (`Pending::workspace_bytes`).
    SizeOnly,
}

/// One plan and what it runs over; see [`execute_cached`] for `cache`.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub ptx: &'static str,
    pub plan: &'a Plan,
    pub param_names: &'static [&'static str],
    pub size: ProblemSize,
    pub cache: Option<&'a TempCache>,
}

/// Enqueues `job` on `stream` and returns without waiting; see docs/runtime-contract.md.
/// The temporaries come from the stream's workspace (and the tile set's cache), the error flag
/// is read at the stream's next synchronization ([`Pending::wait`]).
///
/// # Safety
///
/// Nothing here can check `args` against the PTX: the kernels read their parameters as the
/// entry declares them. The caller guarantees that
///
/// - `args`, followed by one address per temporary of the plan, are exactly the parameters of
///   every kernel of `job.plan` in `job.ptx`, in order, each of the declared type;
/// - every address among `args` is a live allocation of the stream's device, at least as large
///   as every access the kernels make through it (the tile set's indices validated at upload,
///   lengths compared with what indexes them, or the kernels' own checks), and stays alive
///   until the kernels finish (lb buffers freed on the device's stream are, as `submit` orders
///   that stream after the launch);
/// - `job.size` describes the tile set among `args`, and `job.cache` is that tile set's cache
///   (cached temporaries are sized from the tile set they were made for).
///
/// The `#[load_balanced]` expansion builds `args` and the PTX from one description of the
/// parameters, and makes these checks before calling it.
pub unsafe fn submit(
    stream: &Stream,
    job: &Job<'_>,
    args: Vec<ArgValue>,
    mode: Submit,
) -> Result<Pending> {
    let (plan, size) = (job.plan, &job.size);
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
    // Over 32-bit offsets the lane walks keep positions and lane groups in 32 bits
    // (`lb_ptx::primitives::layout::LaneStride`).
    if plan.offsets == lb_ptx::plan::OffsetWidth::U32
        && size.tiles.max(size.lanes) > u64::from(u32::MAX)
    {
        return Err(Error::Shape(format!(
            "{} tiles and {} lanes over a tile set with 32-bit offsets: both must be at most \
             {} (split the frontier or the lanes into several launches)",
            size.tiles,
            size.lanes,
            u32::MAX
        )));
    }
    // A frontier launch (the one kind without the tile set's cache) has a new size nearly every
    // time: its sized plan is not kept, so a traversal does not push the stream's other plans
    // out.
    let sized = SizedPlan::get(stream, job.ptx, plan, size, job.cache.is_some())?;
    let mut launch = Launch {
        schedule: plan.schedule.clone(),
        kernels: Vec::new(),
        elapsed_ms: None,
        sim: None,
        device: stream.device().name_arc(),
        picked: Picked::Named,
        notes: sized.notes.clone(),
        pushed: Vec::new(),
    };
    if mode == Submit::SizeOnly {
        launch.kernels = sized.cold.kernels.clone();
        return Ok(Pending {
            stream: stream.clone(),
            launch,
            events: None,
            workspace_bytes: sized.ws_bytes,
            pushed: Vec::new(),
        });
    }
    let ws = stream.workspace(sized.ws_bytes)?;
    let temps = Temps::gather(stream, job, &ws, &sized.offsets, sized.first_grid)?;
    let prepared = match &sized.warm {
        Some(warm) if temps.warm => warm,
        _ => &sized.cold,
    };
    // Counters are left zero by every launch that ran all its kernels; after one that did not,
    // they are zeroed once here.
    if let Some(bytes) = sized.counters {
        if ws.take_counters_dirty() {
            ws.zero(stream, Temp::COUNTERS_OFFSET as usize, bytes)?;
        }
    }
    for &(off, bytes) in &sized.zeroed {
        ws.zero(stream, off, bytes)?;
    }
    // Every kernel declares the output's mirrors after the temporaries
    // (`KernelParams::mirrors`).
    let (mirrors, mirror_count) = stream.output_mirrors();
    let mut params: SmallVec<[u64; PARAMS_INLINE]> = args.iter().map(|a| a.bits()).collect();
    params.extend(temps.addrs.iter().copied());
    params.extend([mirrors, mirror_count]);
    let timed = mode == Submit::Timed || stream.timing();
    // The kernels must see what the device's stream wrote (uploads, other streams' launches).
    stream.order_after_device()?;
    let events = run_kernels(
        stream,
        job.ptx,
        prepared,
        &mut params[..],
        timed,
        &mut launch,
    )
    .inspect_err(|_| {
        if sized.counters.is_some() {
            ws.mark_counters_dirty();
        }
    })?;
    stream.order_device_after()?;
    if sized.error_flag {
        stream.watch_flag(&ws, job.param_names);
    }
    temps.store(job);
    launch.kernels = prepared.kernels.clone();
    Ok(Pending {
        stream: stream.clone(),
        launch,
        events,
        workspace_bytes: sized.ws_bytes,
        pushed: Vec::new(),
    })
}

/// Kernel parameters kept on the stack: more than any built-in body's kernels take.
const PARAMS_INLINE: usize = 48;

/// Temporaries' addresses kept on the stack: more than any built-in plan has.
const TEMPS_INLINE: usize = 16;

/// The work (atoms × lanes) from which a plan's side tracks ([`KernelPlan::track`]) run on
/// streams of their own; a smaller problem runs every kernel on the launching stream, in listed
/// order. A side kernel costs four driver calls besides its launch (an event and a wait each
/// way), about as much host time as four launches, and its kernels' overlap saves at most the
/// shorter kernels' time: under about a million items each class or tier kernel takes a few
/// microseconds on the GPU, less than those calls cost the host, and a loop of such launches is
/// bound by the host (lb-bench `--loop`, docs/benchmarks.md, twenty-seventh session).
const SIDE_TRACKS_MIN_WORK: u64 = 1 << 20;

/// Sized plans a stream keeps ([`SizedPlan::get`]): enough for the few kernels an iterative method
/// or a graph driver alternates between.
const SIZED_KEPT: usize = 8;

/// What a plan needs before a launch and what depends only on the plan and the problem's size:
/// the kernels with their grids and driver handles, where the temporaries lie in the workspace,
/// and which of them are zeroed. A loop of launches over one tile set makes it once: a stream
/// keeps the last few ([`SIZED_KEPT`]) of plans with a `'static` kernel list, so that a launch's
/// host work is the arguments, the workspace and the driver calls.
pub(crate) struct SizedPlan {
    key: Option<SizedKey>,
    /// The kernels when the tile set's cache of the plan's temporaries is cold…
    cold: Prepared,
    /// …and when it is warm (the cache producers dropped); `None` for a plan that caches
    /// nothing, whose kernels are the same either way.
    warm: Option<Prepared>,
    notes: Vec<String>,
    offsets: Vec<Option<usize>>,
    ws_bytes: usize,
    first_grid: u32,
    /// `(offset, bytes)` of each temporary zeroed before every launch.
    zeroed: Vec<(usize, usize)>,
    /// Bytes of the plan's counters, when it has some.
    counters: Option<usize>,
    /// Whether the plan has an error flag to read back.
    error_flag: bool,
}

/// A static plan and a problem size: `(address, length)` of the module text, the kernel list
/// and the temporaries (which identify a `'static` plan), and the size.
#[derive(Clone, Copy, PartialEq, Eq)]
struct SizedKey {
    ptx: (usize, usize),
    kernels: (usize, usize),
    temps: (usize, usize),
    size: ProblemSize,
}

impl SizedKey {
    /// `None` for a plan built at run time, whose lists a later plan may reuse the memory of.
    fn new(ptx: &'static str, plan: &Plan, size: &ProblemSize) -> Option<SizedKey> {
        match (&plan.kernels, &plan.temps) {
            (Cow::Borrowed(k), Cow::Borrowed(t)) => Some(SizedKey {
                ptx: (ptx.as_ptr() as usize, ptx.len()),
                kernels: (k.as_ptr() as usize, k.len()),
                temps: (t.as_ptr() as usize, t.len()),
                size: *size,
            }),
            _ => None,
        }
    }
}

impl SizedPlan {
    /// The sized plan for `plan` over `size` on `stream`: kept from an earlier launch of the
    /// same static plan and size, else made (and kept when `keep`).
    fn get(
        stream: &Stream,
        ptx: &'static str,
        plan: &Plan,
        size: &ProblemSize,
        keep: bool,
    ) -> Result<Arc<SizedPlan>> {
        let key = SizedKey::new(ptx, plan, size).filter(|_| keep);
        if let Some(key) = &key {
            let mut kept = lock(&stream.state.sized);
            if let Some(i) = kept.iter().rposition(|s| s.key.as_ref() == Some(key)) {
                let hit = kept.remove(i);
                kept.push(Arc::clone(&hit));
                return Ok(hit);
            }
        }
        let sized = Arc::new(SizedPlan::new(stream.device(), ptx, plan, size, key)?);
        if key.is_some() {
            let mut kept = lock(&stream.state.sized);
            if kept.len() >= SIZED_KEPT {
                kept.remove(0);
            }
            kept.push(Arc::clone(&sized));
        }
        Ok(sized)
    }

    fn new(
        dev: &Device,
        ptx: &'static str,
        plan: &Plan,
        size: &ProblemSize,
        key: Option<SizedKey>,
    ) -> Result<SizedPlan> {
        let mut planned = prepare(dev, ptx, plan, size)?;
        if size.atoms.saturating_mul(size.lanes.max(1)) < SIDE_TRACKS_MIN_WORK {
            for k in &mut planned.kernels {
                k.track = 0;
            }
        }
        let first_grid = planned.first_bound;
        let (offsets, ws_bytes) = layout(plan, size, first_grid)?;
        let mut zeroed = Vec::new();
        let mut counters = None;
        for (t, off) in plan.temps.iter().zip(&offsets) {
            let Some(off) = *off else { continue };
            match t.role {
                TempRole::ErrorFlag => {}
                TempRole::Counters => counters = Some(temp_bytes(t, size, first_grid)?),
                _ if t.zero => zeroed.push((off, temp_bytes(t, size, first_grid)?)),
                _ => {}
            }
        }
        let producers = plan.cache_producers();
        Ok(SizedPlan {
            key,
            cold: planned.prepared(false, producers),
            warm: (producers > 0).then(|| planned.prepared(true, producers)),
            notes: planned.notes,
            offsets,
            ws_bytes,
            first_grid,
            zeroed,
            counters,
            error_flag: plan.temps.iter().any(|t| t.role == TempRole::ErrorFlag),
        })
    }
}

/// The kernels of a plan as they will be launched, with their driver handles on a GPU.
struct Prepared {
    kernels: Vec<KernelLaunch>,
    gpu_functions: Vec<Function>,
    gpu_module: Option<Arc<GpuModule>>,
}

/// Every kernel of a plan with its grid for one problem size, before those without work are
/// dropped ([`Planned::prepared`]).
struct Planned {
    kernels: Vec<KernelLaunch>,
    gpu_functions: Vec<Function>,
    gpu_module: Option<Arc<GpuModule>>,
    notes: Vec<String>,
    /// Per kernel: whether this problem gives it work ([`KernelPlan::needed`]).
    needed: Vec<bool>,
    /// The first kernel's blocks before a strided grid's cap ([`lb_ptx::plan::Grid::uncapped`]): what the
    /// plan's per-block temporaries and `min_grid` count.
    first_bound: u32,
}

/// The blocks of the first of `plans` before a strided grid's cap ([`lb_ptx::plan::Grid::uncapped`]).
fn first_bound(plans: &[KernelPlan], size: &ProblemSize, limits: &DeviceLimits) -> u32 {
    plans
        .first()
        .map_or(1, |k| k.grid.uncapped().blocks(size, k.block, limits))
}

impl Planned {
    /// The kernels that have work: without the cache producers when the cache is `warm`, and
    /// without those this tile set does not need (the huge-tile split without a huge tile).
    fn prepared(&self, warm: bool, producers: usize) -> Prepared {
        let dropped = if warm { producers } else { 0 };
        let keep = |i: usize| i >= dropped && self.needed.get(i).copied().unwrap_or(true);
        Prepared {
            kernels: self
                .kernels
                .iter()
                .enumerate()
                .filter(|&(i, _)| keep(i))
                .map(|(_, k)| k.clone())
                .collect(),
            gpu_functions: self
                .gpu_functions
                .iter()
                .enumerate()
                .filter(|&(i, _)| keep(i))
                .map(|(_, &f)| f)
                .collect(),
            gpu_module: self.gpu_module.clone(),
        }
    }
}

/// Loads the module, picks the kernels (device-launch twin or host path) and sizes their grids.
fn prepare(dev: &Device, ptx: &'static str, plan: &Plan, size: &ProblemSize) -> Result<Planned> {
    // The device-launch twin has no huge-tile split: a tile set with a huge tile takes the host
    // path, whose split kernels spread that tile over the grid.
    let huge = plan
        .kernels
        .iter()
        .any(|k| k.min_tile_atoms.is_some_and(|m| size.max_tile_atoms >= m));
    let (gpu, gpu_module) = match dev.backend() {
        Backend::Gpu(gpu) => (gpu, gpu.module(ptx)?),
        Backend::Sim(_) => {
            let kept = Err("the simulator has no device-side launch".to_string());
            let (kernel_plans, notes) = choose_path(ptx, plan, kept);
            let kernels: Vec<KernelLaunch> = kernel_plans
                .iter()
                .map(|k| KernelLaunch {
                    entry: k.entry.clone(),
                    grid: k.grid.blocks(size, k.block, &SIM_LIMITS),
                    block: k.block,
                    dynamic_shared: k.dynamic_shared,
                    track: k.track,
                })
                .collect();
            let first = first_bound(&kernel_plans, size, &SIM_LIMITS);
            return Ok(Planned {
                first_bound: first,
                needed: kernel_plans.iter().map(|k| k.needed(size, first)).collect(),
                kernels,
                gpu_functions: Vec::new(),
                gpu_module: None,
                notes,
            });
        }
    };
    // A static plan's kernels are looked up in the module once; a plan built at run time (tests,
    // tools) is looked up at every launch.
    let key = match &plan.kernels {
        Cow::Borrowed(list) => Some((list.as_ptr() as usize, list.len(), huge)),
        Cow::Owned(_) => None,
    };
    let loaded = gpu_module.plan(key, || load_plan(&gpu_module, ptx, plan, huge))?;
    let mut kernels = Vec::with_capacity(loaded.kernels.len());
    let mut gpu_functions = Vec::with_capacity(loaded.kernels.len());
    for k in &loaded.kernels {
        let limits = DeviceLimits {
            sm_count: gpu.sm_count,
            blocks_per_sm: k.blocks_per_sm,
        };
        gpu_functions.push(k.function);
        kernels.push(KernelLaunch {
            entry: k.plan.entry.clone(),
            grid: k.plan.grid.blocks(size, k.plan.block, &limits),
            block: k.plan.block,
            dynamic_shared: k.plan.dynamic_shared,
            track: k.plan.track,
        });
    }
    let first = loaded.kernels.first().map_or(1, |k| {
        let limits = DeviceLimits {
            sm_count: gpu.sm_count,
            blocks_per_sm: k.blocks_per_sm,
        };
        k.plan.grid.uncapped().blocks(size, k.plan.block, &limits)
    });
    Ok(Planned {
        first_bound: first,
        needed: loaded
            .kernels
            .iter()
            .map(|k| k.plan.needed(size, first))
            .collect(),
        kernels,
        gpu_functions,
        notes: loaded.notes.clone(),
        gpu_module: Some(gpu_module),
    })
}

/// The kernels `plan` launches from `module` (its device-launch twin unless the module lacks
/// it or the tile set has a huge tile), with their handles and occupancy.
fn load_plan(module: &GpuModule, ptx: &'static str, plan: &Plan, huge: bool) -> Result<LoadedPlan> {
    let kept = match module.without_device_launch.clone() {
        None if huge => Err("a tile is large enough for the huge-tile split".to_string()),
        None => Ok(()),
        Some(why) => Err(why),
    };
    let (kernel_plans, notes) = choose_path(ptx, plan, kept);
    let mut kernels = Vec::with_capacity(kernel_plans.len());
    for k in kernel_plans {
        let function = module.function(&k.entry, k.dynamic_shared)?;
        let blocks_per_sm = module.blocks_per_sm(function, k.block, k.dynamic_shared)?;
        if blocks_per_sm == 0 {
            return Err(Error::Shape(format!(
                "kernel `{}` cannot run: no block of {} threads with {} bytes of dynamic shared memory fits on an SM",
                k.entry, k.block, k.dynamic_shared
            )));
        }
        kernels.push(LoadedKernel {
            plan: k,
            function,
            blocks_per_sm,
        });
    }
    Ok(LoadedPlan { kernels, notes })
}

/// Bytes of temporary `t` for this problem and first-kernel grid.
fn temp_bytes(t: &Temp, size: &ProblemSize, first_grid: u32) -> Result<usize> {
    temp_elements(t.count, size, first_grid)
        .and_then(|n| n.checked_mul(u64::from(t.elem_bytes)))
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| {
            Error::Shape(format!(
                "temporary `{}` is too large for this problem",
                t.name
            ))
        })
}

/// Where each temporary that is not cached with the tile set lies in the workspace, and the
/// workspace's size: the error flag at 0, the rest after the flag region, aligned.
fn layout(plan: &Plan, size: &ProblemSize, first_grid: u32) -> Result<(Vec<Option<usize>>, usize)> {
    let mut end = FLAG_REGION;
    let mut offsets = Vec::with_capacity(plan.temps.len());
    for t in plan.temps.iter() {
        let bytes = temp_bytes(t, size, first_grid)?;
        let off = match t.role {
            TempRole::Cached { .. } => None,
            TempRole::ErrorFlag if bytes <= FLAG_REGION => Some(0),
            TempRole::Counters => {
                if bytes as u64 > Temp::COUNTERS_BYTES {
                    return Err(Error::Shape(format!(
                        "counters `{}` take {bytes} bytes, more than the {} of the flag region",
                        t.name,
                        Temp::COUNTERS_BYTES
                    )));
                }
                Some(Temp::COUNTERS_OFFSET as usize)
            }
            _ => {
                let off = end;
                end = bytes
                    .checked_next_multiple_of(ALIGN)
                    .and_then(|b| off.checked_add(b))
                    .ok_or_else(|| Error::Shape(format!("temporary `{}` is too large", t.name)))?;
                Some(off)
            }
        };
        offsets.push(off);
    }
    Ok((offsets, end))
}

/// The temporaries' device addresses, in plan order, and the cached ones made by this launch.
struct Temps {
    addrs: SmallVec<[u64; TEMPS_INLINE]>,
    /// The tile set's cache already held this plan's cached temporaries.
    warm: bool,
    /// Cached temporaries this launch made (stored once it is enqueued).
    fresh: Option<(PlanKey, Vec<Arc<RawBuffer>>)>,
}

impl Temps {
    fn gather(
        stream: &Stream,
        job: &Job<'_>,
        ws: &WsBuf,
        offsets: &[Option<usize>],
        first_grid: u32,
    ) -> Result<Temps> {
        let plan = job.plan;
        let key = match (job.cache, plan.cache_producers()) {
            (Some(_), 1..) => plan
                .kernels
                .first()
                .map(|k| TempCache::key(job.ptx, k.entry.clone(), stream.state.id)),
            _ => None,
        };
        let kept = job.cache.zip(key.as_ref()).and_then(|(c, key)| c.get(key));
        let mut warm = kept.as_deref().map(|buffers| buffers.iter());
        let is_warm = warm.is_some();
        let mut addrs = SmallVec::new();
        let mut made = Vec::new();
        for (t, off) in plan.temps.iter().zip(offsets) {
            if let Some(off) = off {
                addrs.push(ws.addr() + *off as u64);
                continue;
            }
            // A cached temporary: the tile set's, or a new one (zeroed on the stream when asked).
            let addr = match warm.as_mut() {
                Some(cached) => cached
                    .next()
                    .ok_or_else(|| {
                        Error::Shape(format!(
                            "the cache of `{}` lost temporary `{}`",
                            plan.schedule, t.name
                        ))
                    })?
                    .addr(),
                None if stream.capturing() => {
                    return Err(Error::Capture(format!(
                        "`{}` would allocate its cached temporaries inside the capture: launch it once on this stream first",
                        plan.schedule
                    )))
                }
                None => {
                    // Zeroed whatever the plan says: the cache is stored only once every kernel
                    // of this launch, its producers included, was enqueued (`store`), but a
                    // producer that then fails on the device must not leave a later consumer
                    // reading uninitialised memory, only zeros.
                    let bytes = temp_bytes(t, &job.size, first_grid)?;
                    let b = Arc::new(stream.device().alloc_raw_on(stream, bytes, true)?);
                    let addr = b.addr();
                    made.push(b);
                    addr
                }
            };
            addrs.push(addr);
        }
        Ok(Temps {
            addrs,
            warm: is_warm,
            fresh: key.filter(|_| !is_warm).map(|k| (k, made)),
        })
    }

    /// Keeps the cached temporaries this launch produced with the tile set. Called only after
    /// every kernel of the launch was enqueued (or, on the simulator, ran): a launch that fails
    /// before that leaves the cache cold, and the next launch runs the producers again.
    fn store(self, job: &Job<'_>) {
        if let (Some(cache), Some((key, made))) = (job.cache, self.fresh) {
            cache.insert(key, made);
        }
    }
}

/// Enqueues the prepared kernels on the GPU: track 0 on `cuda`, a side track
/// ([`KernelPlan::track`]) on its own stream, which waits for the track-0 kernels enqueued
/// before each of its kernels (one event whenever track 0 moved on since), and `cuda` waits
/// for every side track used before this returns, also when a launch failed, so that
/// everything enqueued after the plan on `cuda` (the temporaries' release among it) follows
/// all of its kernels.
fn enqueue_tracks(
    stream: &Stream,
    cuda: &CudaStream,
    module: &GpuModule,
    prepared: &Prepared,
    params: &mut [u64],
) -> Result<()> {
    let kernels = prepared.kernels.iter().zip(&prepared.gpu_functions);
    let tracks = prepared.kernels.iter().map(|k| usize::from(k.track)).max();
    let sides = match tracks {
        Some(tracks @ 1..) => stream
            .state
            .side_tracks(cuda, tracks, stream.capturing())?
            .map(|sides| (tracks, sides)),
        _ => None,
    };
    let Some((tracks, sides)) = sides else {
        // One track, in listed order: every side track's kernels also follow the track-0
        // kernels listed before them.
        for (k, &f) in kernels {
            // The driver copies the parameter values at launch, so reusing `params` is safe.
            module.launch(f, cuda, k.grid, k.block, k.dynamic_shared, params)?;
        }
        return Ok(());
    };
    // Per side track: whether it has kernels in this plan, and whether track 0 moved on since
    // it last waited.
    let mut used = vec![false; tracks];
    let mut behind = vec![true; tracks];
    let run = || -> Result<()> {
        for (k, &f) in kernels {
            let on = match usize::from(k.track) {
                0 => {
                    behind.fill(true);
                    cuda
                }
                t => {
                    let side = &sides[t - 1];
                    used[t - 1] = true;
                    if std::mem::take(&mut behind[t - 1]) {
                        side.fork(cuda)?
                    } else {
                        side.stream()
                    }
                }
            };
            module.launch(f, on, k.grid, k.block, k.dynamic_shared, params)?;
        }
        Ok(())
    };
    let enqueued = run();
    let joined = sides
        .iter()
        .zip(&used)
        .filter(|(_, &u)| u)
        .try_for_each(|(side, _)| side.join(cuda));
    enqueued.and(joined)
}

/// Enqueues the prepared kernels (or runs them, on the simulator); the timing events around
/// them when `timed` on a GPU.
fn run_kernels(
    stream: &Stream,
    ptx: &'static str,
    prepared: &Prepared,
    params: &mut [u64],
    timed: bool,
    launch: &mut Launch,
) -> Result<Option<(CudaEvent, CudaEvent)>> {
    let dev = stream.device();
    match (dev.backend(), stream.cudarc()) {
        (Backend::Gpu(_), Some(cuda)) => {
            let module = prepared
                .gpu_module
                .as_ref()
                .ok_or_else(|| Error::MissingKernel(String::new()))?;
            // Events cannot time a capture; the graph's replays are timed by the caller.
            let timed = timed && !stream.capturing();
            let event = || {
                cuda.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| Error::cuda("recording a timing event", e))
            };
            let start = timed.then(event).transpose()?;
            enqueue_tracks(stream, cuda, module, prepared, params)?;
            let stop = timed.then(event).transpose()?;
            Ok(start.zip(stop))
        }
        (Backend::Sim(sim), None) => {
            let module = sim.module(ptx)?;
            // Same error as the GPU path, checked before any kernel of the plan runs.
            if let Some(k) = prepared
                .kernels
                .iter()
                .find(|k| module.kernel(&k.entry).is_none())
            {
                return Err(Error::MissingKernel(k.entry.to_string()));
            }
            for k in &prepared.kernels {
                let cfg = LaunchConfig {
                    grid: k.grid,
                    block: k.block,
                    dynamic_shared: k.dynamic_shared,
                };
                if stream.record_sim_kernel(&module, &k.entry, cfg, params) {
                    continue;
                }
                let stats = lb_ptx::sim::launch(&module, &k.entry, cfg, params, &mut sim.memory())?;
                match &mut launch.sim {
                    Some(total) => total.merge(&stats),
                    None => launch.sim = Some(stats),
                }
            }
            Ok(None)
        }
        _ => Err(Error::DeviceMismatch {
            what: "the stream".into(),
        }),
    }
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
            min_grid: None,
            lanes: None,
            track: 0,
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

    /// A plan with a `'static` kernel list (what the macro emits), its second kernel on a side
    /// track, its third only for tiles of at least 1000 atoms, and a zeroed temporary.
    fn static_plan() -> Plan {
        let kernel = |entry: &'static str, track: u8, min_tile_atoms: Option<u64>| KernelPlan {
            entry: Cow::Borrowed(entry),
            block: 64,
            grid: Grid::CoverItems { per_thread: 1 },
            dynamic_shared: 0,
            min_tile_atoms,
            min_grid: None,
            lanes: None,
            track,
        };
        let kernels = vec![
            kernel("s_main", 0, None),
            kernel("s_side", 1, None),
            kernel("s_huge", 0, Some(1000)),
        ];
        let temps = vec![Temp {
            name: Cow::Borrowed("scratch"),
            elem_bytes: 4,
            count: TempCount::PerTile {
                per_tile: 1,
                extra: 0,
            },
            zero: true,
            role: TempRole::Scratch,
        }];
        Plan {
            schedule: Cow::Borrowed("static"),
            kernels: Cow::Borrowed(Box::leak(kernels.into_boxed_slice())),
            temps: Cow::Borrowed(Box::leak(temps.into_boxed_slice())),
            index_limit: None,
            select: None,
            offsets: lb_ptx::plan::OffsetWidth::U64,
        }
    }

    fn size(tiles: u64, atoms: u64, max_tile_atoms: u64) -> ProblemSize {
        ProblemSize {
            tiles,
            atoms,
            lanes: 1,
            max_tile_atoms,
            offsets: lb_ptx::plan::OffsetWidth::U64,
        }
    }

    const PTX: &str = ".visible .entry s_main(\n.visible .entry s_side(\n.visible .entry s_huge(";

    #[test]
    fn small_problems_run_every_kernel_on_the_launching_stream() {
        let dev = Device::simulator();
        let plan = static_plan();
        let tracks = |s: &ProblemSize| -> Vec<(String, u8)> {
            let sized = SizedPlan::new(&dev, PTX, &plan, s, None).unwrap();
            sized
                .cold
                .kernels
                .iter()
                .map(|k| (k.entry.to_string(), k.track))
                .collect()
        };
        let small = size(100, SIDE_TRACKS_MIN_WORK - 1, 10);
        assert_eq!(
            tracks(&small),
            [("s_main".to_string(), 0), ("s_side".to_string(), 0)]
        );
        let large = size(100, SIDE_TRACKS_MIN_WORK, 2000);
        assert_eq!(
            tracks(&large),
            [
                ("s_main".to_string(), 0),
                ("s_side".to_string(), 1),
                ("s_huge".to_string(), 0)
            ]
        );
        // Lanes count as work.
        let lanes = ProblemSize {
            lanes: 64,
            ..size(100, SIDE_TRACKS_MIN_WORK / 32, 10)
        };
        assert_eq!(tracks(&lanes)[1].1, 1);
    }

    #[test]
    fn a_sized_plan_zeroes_its_temporaries_and_is_kept_per_size() {
        let dev = Device::simulator();
        let stream = dev.new_stream().unwrap();
        let sp = static_plan();
        let a = SizedPlan::get(&stream, PTX, &sp, &size(100, 500, 10), true).unwrap();
        assert_eq!(a.zeroed.len(), 1);
        assert_eq!(a.zeroed[0].1, 400);
        // Nothing is cached with the tile set: one kernel list serves a cold and a warm cache.
        assert!(a.warm.is_none());
        assert_eq!(a.offsets, [Some(a.zeroed[0].0)]);
        assert!(a.ws_bytes >= a.zeroed[0].0 + 400);
        let again = SizedPlan::get(&stream, PTX, &sp, &size(100, 500, 10), true).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        // Another size is sized anew, and so is the same size on another stream.
        let b = SizedPlan::get(&stream, PTX, &sp, &size(101, 500, 10), true).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.zeroed[0].1, 404);
        let other = dev.new_stream().unwrap();
        let c = SizedPlan::get(&other, PTX, &sp, &size(100, 500, 10), true).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        // The stream keeps the most recent few: as many new sizes evict both.
        for tiles in 0..SIZED_KEPT as u64 {
            SizedPlan::get(&stream, PTX, &sp, &size(1000 + tiles, 500, 10), true).unwrap();
        }
        assert_eq!(lock(&stream.state.sized).len(), SIZED_KEPT);
        let b_again = SizedPlan::get(&stream, PTX, &sp, &size(101, 500, 10), true).unwrap();
        assert!(!Arc::ptr_eq(&b, &b_again), "an evicted size is sized anew");
        let last = SizedPlan::get(
            &stream,
            PTX,
            &sp,
            &size(1000 + SIZED_KEPT as u64 - 1, 500, 10),
            true,
        );
        assert!(Arc::ptr_eq(
            &last.unwrap(),
            lock(&stream.state.sized).last().unwrap()
        ));
        // A plan built at run time is never kept: its lists' memory may be reused.
        let owned = plan("k");
        SizedPlan::get(&stream, ".visible .entry k(", &owned, &size(1, 1, 1), true).unwrap();
        assert_eq!(lock(&stream.state.sized).len(), SIZED_KEPT);
        // Nor is a frontier's (`keep: false`), though its plan is static.
        let frontier = SizedPlan::get(&stream, PTX, &sp, &size(7, 500, 10), false).unwrap();
        assert!(frontier.key.is_none());
        assert!(lock(&stream.state.sized)
            .iter()
            .all(|s| !Arc::ptr_eq(s, &frontier)));
    }
}
