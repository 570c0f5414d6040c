//! Streams, asynchronous launches, reusable workspaces and captured graphs.
//!
//! A [`Stream`] orders lb launches (and, on a GPU, the user's own cudarc work on the same
//! `CudaStream`). A launch on a stream returns a [`Pending`] at once; what only the finished
//! kernels can tell (an error flag, a queue's overflow, the kernel time) is read by
//! [`Pending::wait`] or by the stream's next synchronizing call, and an error found there is an
//! `Err` of that call: a report is never dropped. docs/streams.md explains the design.
//!
//! Each stream keeps one [`Workspace`] for the plans' temporaries, grown to the largest need
//! and reused by every launch on it (stream order makes the reuse safe); a user can size one
//! up front and hand it over instead (the cuSPARSE `bufferSize` pattern).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::{sys, CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr};
use lb_ptx::ir::Module;
use lb_ptx::sim::{LaunchConfig, Memory};

use crate::buffer::DeviceBuffer;
use crate::device::{lock, Backend, Device};
use crate::error::{Error, Result};
use crate::host::HostBuffer;
use crate::launch::{Launch, SizedPlan};
use crate::queue::DeviceQueue;
use crate::tune::Picked;

/// Bytes at the start of every workspace reserved for the error flag (two u64 words) and the
/// plans' self-resetting counters (`TempRole::Counters`, from byte 128), so that no plan's
/// scratch ever lands on the flag another plan left raised but unread, or on counters that a
/// later launch expects to find zero.
pub(crate) const FLAG_REGION: usize = 256;

/// Offsets of temporaries inside a workspace are multiples of this (the allocator's alignment).
pub(crate) const ALIGN: usize = 256;

/// Queue-counter slots per allocation of a stream's counter pool ([`CounterPool`]), and the
/// most launches that push to a queue one capture may hold.
const COUNTER_SLOTS: usize = 64;

/// Workspace memory. It refers to its device only weakly (the simulator's memory, or the
/// slice's own context), so a stream stored inside its device never keeps that device alive.
pub(crate) struct WsBuf {
    bytes: usize,
    addr: u64,
    mem: WsMem,
    /// A launch with counters failed to enqueue all its kernels, so its counters may not have
    /// been reset: the next launch with counters zeroes them first.
    counters_dirty: AtomicBool,
}

enum WsMem {
    Gpu(CudaSlice<u8>),
    Sim(Weak<Mutex<Memory>>),
}

impl WsBuf {
    fn alloc(dev: &Device, state: &StreamState, bytes: usize) -> Result<WsBuf> {
        let n = bytes.max(1);
        match (dev.backend(), &state.cuda) {
            (Backend::Gpu(_), Some(stream)) => {
                let slice = stream
                    .alloc_zeros::<u8>(n)
                    .map_err(|e| Error::cuda(format!("allocating a workspace of {n} bytes"), e))?;
                let addr = slice.device_ptr(stream).0;
                Ok(WsBuf {
                    bytes: n,
                    addr,
                    mem: WsMem::Gpu(slice),
                    counters_dirty: AtomicBool::new(false),
                })
            }
            (Backend::Sim(sim), None) => {
                let addr = sim.memory().alloc(n as u64)?;
                Ok(WsBuf {
                    bytes: n,
                    addr,
                    mem: WsMem::Sim(Arc::downgrade(&sim.memory)),
                    counters_dirty: AtomicBool::new(false),
                })
            }
            _ => Err(Error::DeviceMismatch {
                what: "the stream".into(),
            }),
        }
    }

    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// Notes that a launch may have left its counters set.
    pub(crate) fn mark_counters_dirty(&self) {
        self.counters_dirty.store(true, Ordering::Release);
    }

    /// Whether the counters must be zeroed before the next launch that has some (and from
    /// then on takes them as clean: the caller zeroes them).
    pub(crate) fn take_counters_dirty(&self) -> bool {
        self.counters_dirty.swap(false, Ordering::AcqRel)
    }

    /// Whether this memory belongs to `dev`.
    fn on(&self, dev: &Device) -> bool {
        match (&self.mem, dev.backend()) {
            (WsMem::Gpu(slice), Backend::Gpu(gpu)) => Arc::ptr_eq(slice.context(), &gpu.ctx),
            (WsMem::Sim(mem), Backend::Sim(sim)) => {
                std::ptr::eq(mem.as_ptr(), Arc::as_ptr(&sim.memory))
            }
            _ => false,
        }
    }

    /// Enqueues zeros over `off..off + n` on `stream` (recorded instead while a simulator
    /// stream captures).
    pub(crate) fn zero(self: &Arc<Self>, stream: &Stream, off: usize, n: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if off.checked_add(n).is_none_or(|end| end > self.bytes) {
            return Err(Error::Shape(format!(
                "zeroing {n} bytes at {off} of a workspace of {}",
                self.bytes
            )));
        }
        match (&self.mem, &stream.state.cuda) {
            (WsMem::Gpu(_), Some(cuda)) => {
                cuda.context()
                    .bind_to_thread()
                    .map_err(|e| Error::cuda("binding the context", e))?;
                // SAFETY: `off + n` lies inside this live allocation (checked above), which the
                // Arc keeps alive until the memset is enqueued; the stream orders it after the
                // kernels that used these bytes before.
                let r =
                    unsafe { sys::cuMemsetD8Async(self.addr + off as u64, 0, n, cuda.cu_stream()) };
                r.result()
                    .map_err(|e| Error::cuda("zeroing a temporary", e))
            }
            (WsMem::Sim(mem), None) => {
                if let Some(ops) = lock(&stream.state.capture).as_mut() {
                    ops.ops.push(SimOp::Zero {
                        buf: Arc::clone(self),
                        off,
                        n,
                    });
                    return Ok(());
                }
                let mem = mem.upgrade().ok_or_else(gone)?;
                let zeros = vec![0u8; n];
                lock(&mem).write(self.addr + off as u64, &zeros)?;
                Ok(())
            }
            _ => Err(Error::DeviceMismatch {
                what: "a workspace".into(),
            }),
        }
    }

    /// `n` bytes from `off` on (cut at the end of the buffer), once the stream has finished
    /// the work before this call.
    fn read(&self, off: usize, n: usize) -> Result<Vec<u8>> {
        let off = off.min(self.bytes);
        let n = n.min(self.bytes - off);
        let addr = self.addr + off as u64;
        match &self.mem {
            WsMem::Gpu(slice) => {
                slice
                    .context()
                    .bind_to_thread()
                    .map_err(|e| Error::cuda("binding the context", e))?;
                let mut out = vec![0u8; n];
                // SAFETY: `out` holds `n` bytes and the allocation at least `off + n` (both cut
                // above); the copy is synchronous, so `out` outlives it.
                let r = unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), addr, n) };
                r.result()
                    .map_err(|e| Error::cuda("reading an error flag", e))?;
                Ok(out)
            }
            WsMem::Sim(mem) => {
                let mem = mem.upgrade().ok_or_else(gone)?;
                let bytes = lock(&mem).read(addr, n as u64)?;
                Ok(bytes)
            }
        }
    }
}

/// `words` (8-byte device addresses) cut into runs of consecutive words, as `(first index,
/// length)`: each run is one copy.
fn word_runs(words: &[u64]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, &w) in words.iter().enumerate() {
        match runs.last_mut() {
            Some((first, n)) if words[*first].checked_add(8 * *n as u64) == Some(w) => *n += 1,
            _ => runs.push((i, 1)),
        }
    }
    runs
}

fn gone() -> Error {
    Error::DeviceMismatch {
        what: "a workspace whose device was dropped".into(),
    }
}

impl Drop for WsBuf {
    fn drop(&mut self) {
        // A GPU slice frees itself, ordered on its stream; simulator memory is ours to return.
        if let WsMem::Sim(mem) = &self.mem {
            if let Some(mem) = mem.upgrade() {
                lock(&mem).free(self.addr);
            }
        }
    }
}

/// Device memory for the temporaries of lb's plans, reused across launches on one stream.
///
/// Make one of [`Pending::workspace_bytes`] (or a generated `workspace_size`) bytes and give it
/// to a stream with [`Stream::set_workspace`]; launches on that stream then take their
/// temporaries from it and never allocate, and a launch that needs more is an `Error::Shape`
/// saying how much. Without one, a stream allocates its own on first use and grows it.
pub struct Workspace {
    buf: Arc<WsBuf>,
}

impl Workspace {
    /// `bytes` zeroed bytes on `dev` (the first 256 hold the error flag of every plan that has
    /// one).
    pub fn new(dev: &Device, bytes: usize) -> Result<Workspace> {
        let buf = WsBuf::alloc(dev, &dev.stream().state, bytes)?;
        // The allocation is zeroed on the device's stream; a launch on another stream must not
        // see it before the zeros land.
        dev.stream().synchronize()?;
        Ok(Workspace { buf: Arc::new(buf) })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.buf.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.buf.bytes == 0
    }
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workspace({} bytes)", self.buf.bytes)
    }
}

/// Something only the finished kernels can tell, read at the next synchronization.
#[derive(Clone)]
enum Check {
    /// The error flag at the start of a workspace (sticky: zeroed again only after a read
    /// found it raised), with the parameter names of the plan that raised it.
    Flag {
        buf: Arc<WsBuf>,
        names: &'static [&'static str],
    },
    /// A queue's push counter, copied right after the launch into the 8 bytes at `off` of
    /// `slot` (a slot of the stream's [`CounterPool`], or of a capture's); the value read is
    /// stored in `seen` for the launch's [`Pending::wait`] (`Launch::pushed`).
    Queue {
        param: &'static str,
        capacity: u64,
        slot: Arc<WsBuf>,
        off: usize,
        seen: Arc<AtomicU64>,
    },
}

impl Check {
    /// `Err` for what the kernels reported; a raised flag is lowered so the next launch starts
    /// clean. `copied` is the check's word ([`Check::word`]) when the synchronization already
    /// copied it to the host; without it the word is read here.
    fn run(&self, stream: &Stream, copied: Option<u64>) -> Result<()> {
        let word = |bytes: &[u8], i: usize| -> u64 {
            bytes
                .get(i * 8..i * 8 + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        let first = |buf: &WsBuf, off: usize| -> Result<u64> {
            stream.device().count_to_host(8);
            match copied {
                Some(w) => Ok(w),
                None => Ok(word(&buf.read(off, 8)?, 0)),
            }
        };
        match self {
            Check::Flag { buf, names } => {
                // The first word alone says whether the flag is raised: a launch that found
                // nothing costs an 8-byte read, the index is read only when there is one.
                let w0 = first(buf, 0)?;
                if w0 == 0 {
                    return Ok(());
                }
                let both = buf.read(0, 16)?;
                stream.device().count_to_host(both.len());
                let w1 = word(&both, 1);
                buf.zero(stream, 0, 16)?;
                let p = (w0 - 1) as usize;
                let param = names
                    .get(p)
                    .map_or_else(|| format!("parameter #{p}"), |s| s.to_string());
                Err(Error::OutOfBounds { param, index: w1 })
            }
            Check::Queue {
                param,
                capacity,
                slot,
                off,
                seen,
            } => {
                let needed = first(slot, *off)?;
                seen.store(needed, Ordering::Relaxed);
                if needed > *capacity {
                    return Err(Error::QueueOverflow {
                        param: param.to_string(),
                        needed,
                        capacity: *capacity,
                    });
                }
                Ok(())
            }
        }
    }

    /// The device address of the 8-byte word that says whether the check passes: the flag's
    /// first word, or the copied counter.
    fn word(&self) -> u64 {
        match self {
            Check::Flag { buf, .. } => buf.addr(),
            Check::Queue { slot, off, .. } => slot.addr() + *off as u64,
        }
    }

    /// Whether both read the same memory (a graph replayed twice before a synchronization
    /// adds its checks twice; the memory holds the last replay's word, read once).
    fn same(&self, other: &Check) -> bool {
        match (self, other) {
            (Check::Flag { buf: a, .. }, Check::Flag { buf: b, .. }) => Arc::ptr_eq(a, b),
            (
                Check::Queue {
                    slot: a, off: i, ..
                },
                Check::Queue {
                    slot: b, off: j, ..
                },
            ) => Arc::ptr_eq(a, b) && i == j,
            _ => false,
        }
    }
}

/// A simulator operation recorded while a stream captures.
enum SimOp {
    Kernel {
        module: Arc<Module>,
        entry: String,
        cfg: LaunchConfig,
        params: Vec<u64>,
    },
    Zero {
        buf: Arc<WsBuf>,
        off: usize,
        n: usize,
    },
    /// A queue's counter (8 bytes at `src`) copied to `off` of `slot`.
    CopyCounter {
        src: u64,
        slot: Arc<WsBuf>,
        off: usize,
    },
}

/// What a capture has recorded so far.
struct Captured {
    ops: Vec<SimOp>,
    checks: Vec<Check>,
    /// The workspaces the captured kernels use: the graph keeps them alive, so that a later
    /// launch that grows the stream's workspace cannot free memory a replay writes.
    workspaces: Vec<Arc<WsBuf>>,
    /// The capture's own queue-counter slots, made before it began (a capture cannot
    /// allocate), kept by the graph: each launch that pushes to a queue takes the next one,
    /// which no launch outside the graph ever writes.
    counters: Arc<WsBuf>,
    counters_used: usize,
}

/// The queue-counter slots of a stream: each launch that pushes to a queue copies its counter
/// into the next slot, read at the stream's next synchronization. When that synchronization
/// has read every report, the slots are free again, so a stream allocates only when more
/// launches push between two synchronizations than ever before (by [`COUNTER_SLOTS`]).
#[derive(Default)]
struct CounterPool {
    blocks: Vec<Arc<WsBuf>>,
    /// Slots handed out since the reports were last all read.
    used: usize,
}

/// The workspace slot of a stream.
#[derive(Default)]
struct Slot {
    buf: Option<Arc<WsBuf>>,
    /// Given by the user: never replaced by a larger one behind their back.
    user: bool,
}

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// The state behind a [`Stream`]; the device holds its own stream's state.
pub(crate) struct StreamState {
    pub(crate) id: u64,
    /// `None` on the simulator.
    pub(crate) cuda: Option<Arc<CudaStream>>,
    checks: Mutex<Vec<Check>>,
    slot: Mutex<Slot>,
    capture: Mutex<Option<Captured>>,
    /// GPU-side capture in progress (the simulator's is `capture`).
    capturing: AtomicBool,
    /// Whether `capture` holds a recording (either backend): one load where a launch would
    /// otherwise lock `capture` to find out.
    recording: AtomicBool,
    timing: AtomicBool,
    /// Slots for the launches' queue counters; locked only with `checks` held, so a slot is
    /// never handed out again while a check still reads it.
    counters: Mutex<CounterPool>,
    /// The device's work count (`Device::device_work`) this stream last waited for.
    joined: AtomicU64,
    /// How often this stream's launches waited for the device's stream (`Stream::device_waits`).
    device_waits: AtomicU64,
    /// Set by `Stream::order_manually`: launches no longer wait for the device's stream.
    manual: AtomicBool,
    /// The streams of a plan's side tracks (`KernelPlan::track`), made on first use.
    sides: Mutex<Vec<SideTrack>>,
    /// `Stream::set_output_mirrors`: the address of the table of mirror bases and its length,
    /// passed to every launch (`(0, 0)`: none).
    mirrors: Mutex<(u64, u64)>,
    /// Whether `mirrors` was ever set: until then a launch reads no lock for it.
    mirrored: AtomicBool,
    /// The plans last launched on this stream, sized for their problems (`launch::SizedPlan`),
    /// most recent last.
    pub(crate) sized: Mutex<Vec<Arc<SizedPlan>>>,
    /// Page-locked words the checks' words are copied into on a GPU synchronization (one per
    /// check, grown to the most checks one synchronization has read); locked only with
    /// `checks` held.
    reports: Mutex<Option<HostBuffer<u64>>>,
}

/// The stream of one side track of a plan (`KernelPlan::track` > 0) and the two events that
/// order it with the launching stream: `fork` (the side waits for the launching stream's work
/// so far) and `join` (the launching stream waits for the side's kernels).
pub(crate) struct SideTrack {
    stream: Arc<CudaStream>,
    fork: CudaEvent,
    join: CudaEvent,
}

impl SideTrack {
    fn new(main: &CudaStream) -> Result<SideTrack> {
        let ctx = main.context();
        let err = |e| Error::cuda("making a stream for a side track of a plan", e);
        Ok(SideTrack {
            stream: ctx.new_stream().map_err(err)?,
            fork: ctx.new_event(None).map_err(err)?,
            join: ctx.new_event(None).map_err(err)?,
        })
    }

    /// The side stream, after making it wait for the work enqueued on `main` so far.
    pub(crate) fn fork(&self, main: &CudaStream) -> Result<&Arc<CudaStream>> {
        let err = |e| Error::cuda("ordering a side track after the launching stream", e);
        self.fork.record(main).map_err(err)?;
        self.stream.wait(&self.fork).map_err(err)?;
        Ok(&self.stream)
    }

    /// The side stream, with no new ordering.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes `main` wait for the work enqueued on the side stream so far.
    pub(crate) fn join(&self, main: &CudaStream) -> Result<()> {
        let err = |e| Error::cuda("ordering the launching stream after a side track", e);
        self.join.record(&self.stream).map_err(err)?;
        main.wait(&self.join).map_err(err)
    }
}

impl StreamState {
    pub(crate) fn new(cuda: Option<Arc<CudaStream>>) -> StreamState {
        StreamState {
            id: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            cuda,
            checks: Mutex::new(Vec::new()),
            slot: Mutex::new(Slot::default()),
            capture: Mutex::new(None),
            capturing: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            timing: AtomicBool::new(false),
            counters: Mutex::new(CounterPool::default()),
            joined: AtomicU64::new(0),
            device_waits: AtomicU64::new(0),
            manual: AtomicBool::new(false),
            sides: Mutex::new(Vec::new()),
            mirrors: Mutex::new((0, 0)),
            mirrored: AtomicBool::new(false),
            sized: Mutex::new(Vec::new()),
            reports: Mutex::new(None),
        }
    }

    /// The side tracks' streams, at least `tracks` of them, locked for one plan's enqueue.
    /// Made here on first use, except during a capture (`None` then: the plan runs on the
    /// launching stream alone), because making the context's first extra stream synchronizes
    /// the context, which a capture forbids.
    pub(crate) fn side_tracks(
        &self,
        main: &CudaStream,
        tracks: usize,
        capturing: bool,
    ) -> Result<Option<std::sync::MutexGuard<'_, Vec<SideTrack>>>> {
        let mut sides = lock(&self.sides);
        if sides.len() < tracks && capturing {
            return Ok(None);
        }
        while sides.len() < tracks {
            sides.push(SideTrack::new(main)?);
        }
        Ok(Some(sides))
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        // Nobody can ask any more: say what the kernels reported rather than drop it.
        let checks = std::mem::take(&mut *lock(&self.checks));
        if checks.is_empty() {
            return;
        }
        if let Some(cuda) = &self.cuda {
            if cuda.synchronize().is_err() {
                eprintln!("lb: a stream with unread launch reports failed to synchronize");
                return;
            }
        }
        for check in checks {
            if let Check::Flag { buf, names } = &check {
                if let Ok(bytes) = buf.read(0, 16) {
                    let w0 = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
                    if w0 != 0 {
                        let p = (w0 - 1) as usize;
                        let param = names.get(p).copied().unwrap_or("a parameter");
                        eprintln!(
                            "lb: an asynchronous launch reported an index out of bounds for `{param}` that was never read (wait on its Pending or synchronize the stream)"
                        );
                    }
                }
            }
        }
    }
}

/// An ordered queue of GPU work: the device's own ([`Device::stream`]), a new one
/// ([`Device::new_stream`]) or the user's cudarc stream ([`Stream::from_cudarc`]).
///
/// Launches on one stream run in order and share its workspace. A launch on a stream other
/// than the device's waits for what the device's stream did since that stream's last launch
/// (uploads, copies, fills, and other streams' launches, which the device's stream waits for),
/// and the device's stream waits for the launch: safe code cannot race (docs/streams.md).
/// [`Stream::wait_for`] orders two streams explicitly. Cheap to clone; clones are the same
/// stream.
#[derive(Clone)]
pub struct Stream {
    pub(crate) dev: Device,
    pub(crate) state: Arc<StreamState>,
}

impl Stream {
    pub(crate) fn new(dev: Device, state: Arc<StreamState>) -> Stream {
        Stream { dev, state }
    }

    /// Wraps the user's cudarc stream, which must belong to `dev`'s context
    /// (`Error::DeviceMismatch` otherwise, and on the simulator). lb enqueues its launches on
    /// it in the order they are made, interleaved with the user's own work.
    pub fn from_cudarc(dev: &Device, stream: Arc<CudaStream>) -> Result<Stream> {
        match dev.backend() {
            Backend::Gpu(gpu) if Arc::ptr_eq(stream.context(), &gpu.ctx) => Ok(Stream::new(
                dev.clone(),
                Arc::new(StreamState::new(Some(stream))),
            )),
            _ => Err(Error::DeviceMismatch {
                what: "the cudarc stream".into(),
            }),
        }
    }

    /// The cudarc stream underneath, `None` on the simulator: enqueue your own kernels,
    /// copies or library calls on it to order them with lb's launches.
    pub fn cudarc(&self) -> Option<&Arc<CudaStream>> {
        self.state.cuda.as_ref()
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Whether asynchronous launches record CUDA events around their kernels, so that
    /// [`Pending::wait`] reports `elapsed_ms` (off by default: two events per launch cost
    /// host time). The synchronous `launch` always times.
    pub fn set_timing(&self, on: bool) {
        self.state.timing.store(on, Ordering::Relaxed);
    }

    /// Whether asynchronous launches are timed ([`set_timing`](Self::set_timing)).
    pub fn timing(&self) -> bool {
        self.state.timing.load(Ordering::Relaxed)
    }

    /// Makes later work on this stream wait for the work enqueued on `other` so far (an
    /// event, no host wait). Streams of different devices are `Error::DeviceMismatch`.
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        if !self.dev.same(&other.dev) {
            return Err(Error::DeviceMismatch {
                what: "the stream waited for".into(),
            });
        }
        match (&self.state.cuda, &other.state.cuda) {
            (Some(a), Some(b)) => a
                .join(b)
                .map_err(|e| Error::cuda("ordering two streams", e)),
            // The simulator finishes every operation before the call returns.
            _ => Ok(()),
        }
    }

    /// Makes every launch on this stream (and its clones) of a kernel that reduces into an
    /// output also store each output element at the same element of every buffer whose device
    /// address `table` lists, until it is called with `None`: one launch then writes its result
    /// to several places, as [`crate::multi::MultiCsr::launch_and_gather`] has each part's
    /// kernels store their rows straight into every GPU's copy of the gathered result. A table
    /// on another device is [`Error::DeviceMismatch`].
    ///
    /// # Safety
    ///
    /// Until the call with `None`, every address in `table` must be a live allocation that
    /// this stream's device may write (its own memory, or a peer GPU's whose memory pool is
    /// open to it) with room for every element the launches store (their output's length, in
    /// the output's element type), and nothing else may read or write those elements while the
    /// launches run; `table` must outlive the launches.
    pub unsafe fn set_output_mirrors(&self, table: Option<&DeviceBuffer<u64>>) -> Result<()> {
        let value = match table {
            None => (0, 0),
            Some(t) if !t.device().same(&self.dev) => {
                return Err(Error::DeviceMismatch {
                    what: "the table of output mirrors".into(),
                })
            }
            Some(t) => (t.device_addr(), t.len() as u64),
        };
        *lock(&self.state.mirrors) = value;
        self.state.mirrored.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether `other` is this stream (or a clone of it).
    pub(crate) fn same(&self, other: &Stream) -> bool {
        self.state.id == other.state.id
    }

    /// The table of output mirrors and its length ([`Stream::set_output_mirrors`]).
    pub(crate) fn output_mirrors(&self) -> (u64, u64) {
        if !self.state.mirrored.load(Ordering::Acquire) {
            return (0, 0);
        }
        *lock(&self.state.mirrors)
    }

    /// How many times launches on this stream waited for the device's stream (one event each),
    /// because it had done something since: 0 on the device's own stream, and no more than one
    /// per launch on another. Counted on the simulator too, where nothing needs to wait.
    pub fn device_waits(&self) -> u64 {
        self.state.device_waits.load(Ordering::Relaxed)
    }

    /// From now on, launches on this stream (and its clones) no longer wait for the device's
    /// stream before they run, so that launches on several streams can overlap while uploads
    /// or other streams' launches happen in between. The device's stream still waits for them.
    ///
    /// # Safety
    ///
    /// Before each launch on this stream, the caller makes it wait ([`Stream::wait_for`]) for
    /// every write to the launch's arguments enqueued on another stream: uploads, copies and
    /// fills (the device's stream), and launches on other streams that write them. Otherwise a
    /// kernel may read memory while it is written, or write it while another kernel does.
    pub unsafe fn order_manually(&self) {
        self.state.manual.store(true, Ordering::Relaxed);
    }

    /// Makes this stream wait for what the device's stream has enqueued, when it has enqueued
    /// anything since this stream last waited (one atomic load otherwise). Called before each
    /// launch: a kernel on this stream then sees every upload, copy and fill made before it, and
    /// the results of every launch on another stream made before it (the device's stream waits
    /// for those, `order_device_after`). Nothing to do on the device's own stream, for a stream
    /// under [`order_manually`](Self::order_manually), or while capturing (a capture cannot wait
    /// for work outside it; [`Graph::launch`] waits instead).
    pub(crate) fn order_after_device(&self) -> Result<()> {
        let device = self.dev.stream_state();
        if device.id == self.state.id
            || self.state.manual.load(Ordering::Relaxed)
            || self.capturing()
        {
            return Ok(());
        }
        let work = self.dev.device_work();
        if self.state.joined.load(Ordering::Acquire) == work {
            return Ok(());
        }
        if let (Some(d), Some(me)) = (&device.cuda, &self.state.cuda) {
            me.join(d)
                .map_err(|e| Error::cuda("ordering a launch after the device's stream", e))?;
        }
        // Work noted after the load above is not covered by the count stored: the next launch
        // waits again, which is only a wasted event.
        self.state.joined.store(work, Ordering::Release);
        self.state.device_waits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Waits for everything enqueued on this stream, then reads every pending report of its
    /// launches; the first kernel error is the `Err` (the others stay for the next call).
    pub fn synchronize(&self) -> Result<()> {
        if self.capturing() {
            return Err(Error::Capture(
                "a capturing stream cannot be synchronized: end the capture first".into(),
            ));
        }
        let Some(cuda) = &self.state.cuda else {
            return self.run_checks();
        };
        // Each check's word is copied into page-locked memory behind the launches, so the one
        // wait below covers the reports too: reading them after it with synchronous copies
        // cost a round trip to the GPU each (a graph traversal reads two per step). The lock
        // is held through the wait: a launch on this stream from another thread meanwhile
        // registers its reports after it, for the next synchronization, so no report is read
        // before its copy has landed.
        let mut checks = lock(&self.state.checks);
        let mut reports = lock(&self.state.reports);
        let copied = self.copy_words(cuda, &checks, &mut reports)?;
        cuda.synchronize()
            .map_err(|e| Error::cuda("running the launches of a stream", e))?;
        let words = reports.as_deref().filter(|_| copied);
        self.finish_checks(&mut checks, words)
    }

    pub(crate) fn run_checks(&self) -> Result<()> {
        let mut checks = lock(&self.state.checks);
        self.finish_checks(&mut checks, None)
    }

    /// Runs `checks` in order, the `i`th with `words[i]` when given (see
    /// [`copy_words`](Self::copy_words)); stops at the first error, leaving the rest.
    fn finish_checks(&self, checks: &mut Vec<Check>, words: Option<&[u64]>) -> Result<()> {
        let mut i = 0;
        while i < checks.len() {
            let copied = words.and_then(|w| w.get(i).copied());
            if let Err(e) = checks[i].run(self, copied) {
                checks.drain(..=i);
                return Err(e);
            }
            i += 1;
        }
        checks.clear();
        // Every report is read: no check refers to a counter slot any more.
        lock(&self.state.counters).used = 0;
        Ok(())
    }

    /// Enqueues on `cuda` a copy of each check's word into `reports` (allocated or grown
    /// here), `false` when there are none. Consecutive words in device memory go in one copy.
    fn copy_words(
        &self,
        cuda: &CudaStream,
        checks: &[Check],
        reports: &mut Option<HostBuffer<u64>>,
    ) -> Result<bool> {
        if checks.is_empty() {
            return Ok(false);
        }
        if reports.as_ref().is_none_or(|r| r.len() < checks.len()) {
            *reports = Some(
                self.dev
                    .host_buffer(checks.len().next_power_of_two().max(8))?,
            );
        }
        let Some(page) = reports.as_mut() else {
            return Ok(false);
        };
        cuda.context()
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        let dst = page.as_mut_ptr();
        let words: Vec<u64> = checks.iter().map(Check::word).collect();
        for (i, n) in word_runs(&words) {
            // SAFETY: `dst + i .. dst + i + n` lies inside `page` (its length is at least
            // `checks.len()`, and `word_runs` cuts `0..words.len()`), page-locked memory that
            // `reports` keeps, locked, until the caller's synchronization has completed the
            // copy; `words[i] .. words[i] + 8n` are the `n` checks' consecutive words, in live
            // workspace or counter-slot allocations of this stream's context (each check
            // holds its buffer).
            let r = unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.add(i).cast(), words[i], 8 * n, cuda.cu_stream())
            };
            r.result()
                .map_err(|e| Error::cuda("copying the launches' reports", e))?;
        }
        Ok(true)
    }

    /// Hands `ws` to this stream: its launches take their temporaries from it from now on.
    /// Waits for the stream first, so the workspace it had is no longer in use.
    pub fn set_workspace(&self, ws: Workspace) -> Result<()> {
        if !ws.buf.on(&self.dev) {
            return Err(Error::DeviceMismatch {
                what: "the workspace".into(),
            });
        }
        self.synchronize()?;
        *lock(&self.state.slot) = Slot {
            buf: Some(ws.buf),
            user: true,
        };
        Ok(())
    }

    /// Takes back the workspace set with [`set_workspace`](Self::set_workspace) (after waiting
    /// for the launches that use it); the stream allocates its own again when needed.
    pub fn take_workspace(&self) -> Result<Option<Workspace>> {
        self.synchronize()?;
        let mut slot = lock(&self.state.slot);
        if !slot.user {
            return Ok(None);
        }
        slot.user = false;
        Ok(slot.buf.take().map(|buf| Workspace { buf }))
    }

    /// Bytes of the workspace the stream holds now (0 before its first launch).
    pub fn workspace_len(&self) -> usize {
        lock(&self.state.slot).buf.as_ref().map_or(0, |b| b.bytes)
    }

    /// The stream's workspace, with room for `bytes` (the stream's own grows; a user's that is
    /// too small is an error).
    pub(crate) fn workspace(&self, bytes: usize) -> Result<Arc<WsBuf>> {
        let mut slot = lock(&self.state.slot);
        if let Some(buf) = slot.buf.as_ref().filter(|b| b.bytes >= bytes) {
            if !self.state.recording.load(Ordering::Acquire) {
                return Ok(buf.clone());
            }
            if let Some(cap) = lock(&self.state.capture).as_mut() {
                if !cap.workspaces.iter().any(|w| Arc::ptr_eq(w, buf)) {
                    cap.workspaces.push(buf.clone());
                }
            }
            return Ok(buf.clone());
        }
        if slot.user {
            return Err(Error::Shape(format!(
                "the stream's workspace has {} bytes, this launch needs {bytes}: make one of \
                 `workspace_size` bytes (the largest over the launches that share it)",
                slot.buf.as_ref().map_or(0, |b| b.bytes)
            )));
        }
        if self.capturing() {
            return Err(Error::Capture(format!(
                "this launch needs a workspace of {bytes} bytes and a capture cannot allocate: \
                 launch it once before the capture, or set a workspace of that size"
            )));
        }
        let buf = Arc::new(WsBuf::alloc(&self.dev, &self.state, bytes)?);
        slot.buf = Some(buf.clone());
        Ok(buf)
    }

    /// Makes the device's stream wait for what this stream has enqueued so far (nothing when
    /// this is the device's stream, or while capturing: a replay orders itself). Buffers are
    /// freed, uploaded and downloaded on the device's stream, so none of that can overtake a
    /// launch still using them on this one: dropping an argument right after an asynchronous
    /// launch is safe.
    ///
    /// Either way the launch is noted as work of the device's stream, so that a later launch on
    /// any other stream waits for it ([`order_after_device`](Self::order_after_device)).
    pub(crate) fn order_device_after(&self) -> Result<()> {
        let device = self.dev.stream_state();
        if self.capturing() {
            return Ok(());
        }
        if device.id == self.state.id {
            self.dev.note_device_work();
            return Ok(());
        }
        if let (Some(d), Some(me)) = (&device.cuda, &self.state.cuda) {
            d.join(me)
                .map_err(|e| Error::cuda("ordering the device's stream after a launch", e))?;
        }
        // When this stream had waited for everything the device's stream did before, the only
        // new work there is this wait for our own launch, which our later launches follow
        // anyway: a loop on one stream never waits for itself.
        let before = self.state.joined.load(Ordering::Acquire);
        let now = self.dev.note_device_work();
        if before + 1 == now {
            let _ = self.state.joined.compare_exchange(
                before,
                now,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        Ok(())
    }

    /// Registers the error flag of a launch to be read at the next synchronization.
    pub(crate) fn watch_flag(&self, buf: &Arc<WsBuf>, names: &'static [&'static str]) {
        let check = Check::Flag {
            buf: buf.clone(),
            names,
        };
        if self.state.recording.load(Ordering::Acquire) {
            if let Some(cap) = lock(&self.state.capture).as_mut() {
                cap.checks.push(check.clone());
            }
        }
        if self.capturing() {
            return;
        }
        let mut checks = lock(&self.state.checks);
        if !checks.iter().any(|c| c.same(&check)) {
            checks.push(check);
        }
    }

    /// Whether a capture is in progress (GPU or simulator).
    pub(crate) fn capturing(&self) -> bool {
        self.state.capturing.load(Ordering::Relaxed) || self.state.recording.load(Ordering::Acquire)
    }

    /// Records a simulator kernel when capturing; `false` when it must run now.
    pub(crate) fn record_sim_kernel(
        &self,
        module: &Arc<Module>,
        entry: &str,
        cfg: LaunchConfig,
        params: &[u64],
    ) -> bool {
        if !self.state.recording.load(Ordering::Acquire) {
            return false;
        }
        match lock(&self.state.capture).as_mut() {
            Some(cap) => {
                cap.ops.push(SimOp::Kernel {
                    module: module.clone(),
                    entry: entry.to_string(),
                    cfg,
                    params: params.to_vec(),
                });
                true
            }
            None => false,
        }
    }

    /// Starts recording this stream's lb launches into a graph (CUDA stream capture in relaxed
    /// mode on a GPU, a list of kernels on the simulator). Launch once before capturing, so
    /// that modules, cached temporaries and the workspace exist: a capture allocates nothing.
    pub fn begin_capture(&self) -> Result<()> {
        if self.capturing() {
            return Err(Error::Capture("the stream is already capturing".into()));
        }
        self.synchronize()?;
        // Made (and zeroed) on this stream before the capture begins: a capture cannot allocate.
        let counters = Arc::new(WsBuf::alloc(&self.dev, &self.state, COUNTER_SLOTS * 8)?);
        if let Some(cuda) = &self.state.cuda {
            cuda.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
                .map_err(|e| Error::cuda("beginning a stream capture", e))?;
            self.state.capturing.store(true, Ordering::Relaxed);
        }
        // The launches' reports (and, on the simulator, the operations) are recorded here.
        *lock(&self.state.capture) = Some(Captured {
            ops: Vec::new(),
            checks: Vec::new(),
            workspaces: Vec::new(),
            counters,
            counters_used: 0,
        });
        self.state.recording.store(true, Ordering::Release);
        Ok(())
    }

    /// Ends the capture begun by [`begin_capture`](Self::begin_capture) and returns the graph.
    pub fn end_capture(&self) -> Result<Graph> {
        let captured = lock(&self.state.capture)
            .take()
            .ok_or_else(|| Error::Capture("the stream is not capturing".into()))?;
        self.state.recording.store(false, Ordering::Release);
        let kind = match &self.state.cuda {
            Some(cuda) => {
                self.state.capturing.store(false, Ordering::Relaxed);
                let graph = cuda
                    .end_capture(sys::CUgraphInstantiate_flags(0))
                    .map_err(|e| Error::cuda("ending a stream capture", e))?;
                GraphKind::Gpu(graph)
            }
            None => GraphKind::Sim(captured.ops),
        };
        let mut keep = captured.workspaces;
        keep.push(captured.counters);
        Ok(Graph {
            stream: self.clone(),
            kind,
            checks: captured.checks,
            _workspaces: keep,
        })
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.dev.name())
            .field("id", &self.state.id)
            .finish()
    }
}

enum GraphKind {
    /// `None` when the capture recorded no work.
    Gpu(Option<CudaGraph>),
    Sim(Vec<SimOp>),
}

/// A recorded sequence of lb launches on one stream, replayed with [`Graph::launch`]. The graph
/// keeps its workspace and its queue-counter slots alive itself; the arguments of the captured
/// launches (buffers, tile sets, queues) it holds only by address, which is why a replay is
/// `unsafe`.
pub struct Graph {
    stream: Stream,
    kind: GraphKind,
    checks: Vec<Check>,
    _workspaces: Vec<Arc<WsBuf>>,
}

impl Graph {
    /// Enqueues one replay on the capturing stream, after what the device's stream did before
    /// (as a launch waits). Like a launch, its reports are read at the stream's next
    /// synchronization: the error flag and the queue counters of the last replay before it (a
    /// graph has one slot per captured queue launch, which each replay overwrites).
    ///
    /// # Safety
    ///
    /// The kernels read and write the addresses the captured launches were given. Every
    /// buffer, tile set and queue passed to a launch during the capture must still be alive,
    /// not replaced, when the replay runs on the GPU (keep them until the stream's next
    /// synchronization after the last replay). Their contents may change between replays: that
    /// is how a graph is fed new input. On the simulator a freed argument is an error instead.
    pub unsafe fn launch(&self) -> Result<()> {
        self.stream.order_after_device()?;
        match &self.kind {
            GraphKind::Gpu(Some(g)) => {
                g.launch()
                    .map_err(|e| Error::cuda("launching a graph", e))?;
                self.stream.order_device_after()?;
            }
            GraphKind::Gpu(None) => {}
            GraphKind::Sim(ops) => self.replay_sim(ops)?,
        }
        let mut pending = lock(&self.stream.state.checks);
        for check in &self.checks {
            if !pending.iter().any(|c| c.same(check)) {
                pending.push(check.clone());
            }
        }
        Ok(())
    }

    fn replay_sim(&self, ops: &[SimOp]) -> Result<()> {
        let Backend::Sim(sim) = self.stream.dev.backend() else {
            return Err(Error::DeviceMismatch {
                what: "a simulator graph".into(),
            });
        };
        for op in ops {
            match op {
                SimOp::Kernel {
                    module,
                    entry,
                    cfg,
                    params,
                } => {
                    let mut mem = sim.memory();
                    lb_ptx::sim::launch(module, entry, *cfg, params, &mut mem)?;
                }
                SimOp::Zero { buf, off, n } => buf.zero(&self.stream, *off, *n)?,
                SimOp::CopyCounter { src, slot, off } => {
                    let mut mem = sim.memory();
                    let count = mem.read(*src, 8)?;
                    mem.write(slot.addr() + *off as u64, &count)?;
                }
            }
        }
        Ok(())
    }

    /// The stream it replays on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}

/// An enqueued launch. [`wait`](Self::wait) waits for the stream and returns the finished
/// [`Launch`] or the kernels' error; dropping it unread leaves its reports with the stream,
/// whose next synchronizing call returns them.
#[must_use = "a launch's errors surface when it is waited on (or at the stream's next synchronization)"]
pub struct Pending {
    pub(crate) stream: Stream,
    pub(crate) launch: Launch,
    pub(crate) events: Option<(CudaEvent, CudaEvent)>,
    pub(crate) workspace_bytes: usize,
    /// The queues this launch pushes to, and where their checks store the counter they read
    /// ([`NOT_READ`] until then).
    pub(crate) pushed: Vec<(&'static str, Arc<AtomicU64>)>,
}

/// A queue counter no check has read yet.
const NOT_READ: u64 = u64::MAX;

impl Pending {
    /// Waits for the stream (everything enqueued on it up to now, this launch included), reads
    /// the reports of its launches and returns this one's [`Launch`] with its kernel time when
    /// the stream times launches. The `Err` is the first report of any launch on the stream not
    /// read yet, this one's or an earlier one's.
    pub fn wait(self) -> Result<Launch> {
        self.stream.synchronize()?;
        let mut launch = self.launch;
        launch.pushed = self
            .pushed
            .iter()
            .map(|(param, seen)| (*param, seen.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n != NOT_READ)
            .collect();
        if let Some((start, stop)) = &self.events {
            launch.elapsed_ms = Some(
                start
                    .elapsed_ms(stop)
                    .map_err(|e| Error::cuda("reading the timing events", e))?,
            );
        }
        Ok(launch)
    }

    /// What was enqueued (schedule, kernels, notes; no time yet).
    pub fn launch(&self) -> &Launch {
        &self.launch
    }

    /// Records why the launch's schedule was chosen (the generated `auto` launchers call it).
    pub fn set_picked(&mut self, picked: Picked) {
        self.launch.picked = picked;
    }

    /// Bytes of workspace the launch used (what [`Stream::set_workspace`] needs for it).
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Called by the generated launchers for each `&mut Queue` argument after the launch: the
    /// queue's push counter is copied on the stream into a slot of the stream's own (no
    /// allocation once the stream has as many slots as launches push between two of its
    /// synchronizations) and compared with the queue's capacity at the next synchronization.
    /// Inside a capture the copy is part of the graph, into a slot the graph owns.
    pub fn watch_queue(&mut self, queue: &DeviceQueue, param: &'static str) -> Result<()> {
        let stream = &self.stream;
        // The copy below reads the counter's address on this stream's device.
        if !queue.device().same(stream.device()) {
            return Err(Error::DeviceMismatch {
                what: format!("queue `{param}`"),
            });
        }
        let seen = Arc::new(AtomicU64::new(NOT_READ));
        let src = queue.count.device_addr();
        // Held until the check is registered: a synchronization on another thread cannot hand
        // the slot out again before the check that reads it exists.
        let mut checks = lock(&stream.state.checks);
        let mut capture = lock(&stream.state.capture);
        let (slot, off) = match capture.as_mut() {
            Some(cap) => {
                if cap.counters_used == COUNTER_SLOTS {
                    return Err(Error::Capture(format!(
                        "queue `{param}`: one capture holds at most {COUNTER_SLOTS} launches \
                         that push to a queue; end it and capture the rest into another graph"
                    )));
                }
                cap.counters_used += 1;
                (cap.counters.clone(), (cap.counters_used - 1) * 8)
            }
            None => stream.counter_slot()?,
        };
        stream.copy_counter(src, &slot, off, capture.as_mut())?;
        let check = Check::Queue {
            param,
            capacity: queue.capacity() as u64,
            slot,
            off,
            seen: Arc::clone(&seen),
        };
        match capture.as_mut() {
            Some(cap) => cap.checks.push(check),
            None => checks.push(check),
        }
        drop(capture);
        drop(checks);
        // The queue is freed on the device's stream: it must not overtake the copy.
        stream.order_device_after()?;
        self.pushed.push((param, seen));
        Ok(())
    }
}

impl Stream {
    /// The next free queue-counter slot of this stream (allocating a block of
    /// [`COUNTER_SLOTS`] when all are taken). Called with `checks` locked.
    fn counter_slot(&self) -> Result<(Arc<WsBuf>, usize)> {
        let mut pool = lock(&self.state.counters);
        let (block, index) = (pool.used / COUNTER_SLOTS, pool.used % COUNTER_SLOTS);
        if block == pool.blocks.len() {
            let buf = WsBuf::alloc(&self.dev, &self.state, COUNTER_SLOTS * 8)?;
            pool.blocks.push(Arc::new(buf));
        }
        pool.used += 1;
        Ok((Arc::clone(&pool.blocks[block]), index * 8))
    }

    /// Copies the 8-byte counter at `src` to `off` of `slot`, ordered on this stream after the
    /// launch before it: enqueued on a GPU (captured when the stream captures), recorded in
    /// `capture` on a capturing simulator stream, done at once on the simulator otherwise.
    fn copy_counter(
        &self,
        src: u64,
        slot: &Arc<WsBuf>,
        off: usize,
        capture: Option<&mut Captured>,
    ) -> Result<()> {
        if off.checked_add(8).is_none_or(|end| end > slot.bytes) {
            return Err(Error::Shape(format!(
                "a counter slot at {off} of {} bytes",
                slot.bytes
            )));
        }
        let dst = slot.addr() + off as u64;
        match (self.dev.backend(), &self.state.cuda) {
            (Backend::Gpu(_), Some(cuda)) => {
                cuda.context()
                    .bind_to_thread()
                    .map_err(|e| Error::cuda("binding the context", e))?;
                // SAFETY: `src` is the queue's counter, one live u64 allocation of this
                // device (`watch_queue` checked the queue's device), and `dst..dst + 8` lies
                // inside `slot` (checked above), a live allocation of this stream. The copy
                // runs after the launch that pushed (same stream). The slot outlives it: the
                // check owns an `Arc` of it, and the pool (or the graph) keeps it and hands the
                // slot out again only after a synchronization read that check. The queue is
                // freed on the device's stream, which the caller makes wait for this copy.
                let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, 8, cuda.cu_stream()) };
                r.result()
                    .map_err(|e| Error::cuda("copying a queue's counter", e))
            }
            (Backend::Sim(sim), None) => {
                if let Some(cap) = capture {
                    cap.ops.push(SimOp::CopyCounter {
                        src,
                        slot: Arc::clone(slot),
                        off,
                    });
                    return Ok(());
                }
                let mut mem = sim.memory();
                let count = mem.read(src, 8)?;
                mem.write(dst, &count)?;
                Ok(())
            }
            _ => Err(Error::DeviceMismatch {
                what: "the queue".into(),
            }),
        }
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("schedule", &self.launch.schedule)
            .field("stream", &self.stream)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::word_runs;

    #[test]
    fn adjacent_report_words_share_one_copy() {
        assert_eq!(word_runs(&[]), []);
        assert_eq!(word_runs(&[0x1000]), [(0, 1)]);
        // A flag, then three counter slots in a row, a gap, two slots, and the last one again:
        // a repeated word starts a run of its own.
        let words = [0x1000, 0x2000, 0x2008, 0x2010, 0x2020, 0x2028, 0x2028];
        assert_eq!(word_runs(&words), [(0, 1), (1, 3), (4, 2), (6, 1)]);
        // Descending addresses and the end of the address space never merge.
        assert_eq!(word_runs(&[0x2008, 0x2000]), [(0, 1), (1, 1)]);
        assert_eq!(word_runs(&[u64::MAX - 7, 0]), [(0, 1), (1, 1)]);
    }
}
