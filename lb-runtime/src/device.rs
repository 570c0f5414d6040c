//! Devices: a CUDA GPU through cudarc (libcuda loaded at run time), or lb-ptx's simulator.
//!
//! [`Device::default`] picks GPU 0 when the driver and a GPU are there and the simulator
//! otherwise, so the same program runs on a laptop, in CI and on an H100. Set the environment
//! variable `LB_DEVICE=sim` to force the simulator even when a GPU is present.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use cudarc::driver::{sys, CudaContext, CudaStream, DevicePtr};
use lb_ptx::ir::Module;
use lb_ptx::plan::DeviceLimits;
use lb_ptx::sim::Memory;

use crate::buffer::{le_bytes, to_bytes, DeviceBuffer, Element, RawBuffer, Storage};
use crate::cuda::GpuModule;
use crate::error::{Error, Result};
use crate::stream::{Stream, StreamState};
use crate::tune::{TuneConfig, Tuning};

/// Modules are cached by the address and length of their `&'static str` PTX: each kernel
/// module is a distinct constant, so this identifies it without hashing megabytes of text.
pub(crate) type ModuleKey = (usize, usize);

pub(crate) fn module_key(ptx: &'static str) -> ModuleKey {
    (ptx.as_ptr() as usize, ptx.len())
}

/// The simulated machine is deliberately tiny: grids stay small so tests run fast, yet
/// `CoverItems` grids hit the residency cap and kernels must stride.
pub(crate) const SIM_LIMITS: DeviceLimits = DeviceLimits {
    sm_count: 2,
    blocks_per_sm: 2,
};

/// A CUDA context with the device's stream; every copy goes through that stream, and so does
/// every launch that names no other, so they are ordered without events.
pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) sm_count: u32,
    modules: Mutex<HashMap<ModuleKey, Arc<GpuModule>>>,
}

/// The simulator's memory and parsed modules. Workspaces refer to the memory weakly (see
/// `stream::WsBuf`), hence the `Arc`.
pub(crate) struct Sim {
    pub(crate) memory: Arc<Mutex<Memory>>,
    modules: Mutex<HashMap<ModuleKey, Arc<Module>>>,
}

impl Sim {
    pub(crate) fn memory(&self) -> MutexGuard<'_, Memory> {
        lock(&self.memory)
    }

    /// The parsed module for `ptx`, parsing it on first use.
    pub(crate) fn module(&self, ptx: &'static str) -> Result<Arc<Module>> {
        let mut cache = lock(&self.modules);
        if let Some(m) = cache.get(&module_key(ptx)) {
            return Ok(m.clone());
        }
        let module = Arc::new(lb_ptx::sim::parse(ptx)?);
        cache.insert(module_key(ptx), module.clone());
        Ok(module)
    }
}

impl Gpu {
    /// The loaded module for `ptx`, JIT-compiling it on first use.
    pub(crate) fn module(&self, ptx: &'static str) -> Result<Arc<GpuModule>> {
        let mut cache = lock(&self.modules);
        if let Some(m) = cache.get(&module_key(ptx)) {
            return Ok(m.clone());
        }
        let module = Arc::new(self.load(ptx)?);
        cache.insert(module_key(ptx), module.clone());
        Ok(module)
    }

    /// Loads `ptx`; a module with device-side launches is linked against the device runtime
    /// ([`device_runtime`]). Where the library is missing or the link fails, the module is
    /// loaded without the kernels that launch from the device (their plans' host fallbacks
    /// remain), and the reason is kept for `Launch::notes`.
    fn load(&self, ptx: &str) -> Result<GpuModule> {
        if !lb_ptx::ptxas::needs_link(ptx) {
            return GpuModule::load(&self.ctx, ptx);
        }
        let library = device_runtime();
        let reason = if library.is_file() {
            match GpuModule::load_linked(&self.ctx, ptx, &library) {
                Ok(m) => return Ok(m),
                Err(e) => format!("linking against {} failed: {e}", library.display()),
            }
        } else {
            format!(
                "{} not found (set LB_CUDADEVRT to libcudadevrt.a)",
                library.display()
            )
        };
        let host_only = lb_ptx::sim::parse(ptx)?
            .without_device_launches()
            .to_string();
        let mut module = GpuModule::load(&self.ctx, &host_only)?;
        module.without_device_launch = Some(reason);
        Ok(module)
    }
}

/// The driver's version number, or `"unknown"` when it cannot say.
fn driver_version() -> String {
    let mut v = 0;
    // SAFETY: the driver writes one int through the pointer, which is valid for the call.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    match r.result() {
        Ok(()) => v.to_string(),
        Err(_) => "unknown".to_string(),
    }
}

/// The CUDA device runtime library: `$LB_CUDADEVRT`, else the toolkit's default location.
fn device_runtime() -> std::path::PathBuf {
    std::env::var_os("LB_CUDADEVRT")
        .map_or_else(|| "/usr/local/cuda/lib64/libcudadevrt.a".into(), Into::into)
}

/// A poisoned lock only means another thread panicked mid-launch; the data (a cache, the
/// simulator's memory) is still usable, and panicking here would turn one failure into two.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) enum Backend {
    Gpu(Gpu),
    Sim(Sim),
}

struct Inner {
    /// [`Device::name`], shared with every `Launch` it reports.
    name: Arc<str>,
    /// The CUDA driver's version (`"13000"`), or `"simulator"`: part of a tuning file's key.
    driver: String,
    /// How `auto` picks (`crate::tune`).
    tune: Mutex<TuneConfig>,
    backend: Backend,
    fallback: Option<String>,
    /// The device's own stream: copies, and launches that name no other.
    stream: Arc<StreamState>,
    /// Operations enqueued on the device's stream so far that may write device memory
    /// (uploads, fills, copies, launches, and its waits for other streams). A launch on another
    /// stream compares it with what that stream last waited for (`Stream::order_after_device`).
    device_work: AtomicU64,
    /// Bytes copied between the host and this device so far ([`Device::transferred`]).
    to_device: AtomicU64,
    to_host: AtomicU64,
}

/// Bytes copied between the host and a device ([`Device::transferred`]): uploads, downloads,
/// queue resets written from the host, and the reports lb reads after launches (error flags,
/// queue counters). Kernel parameters and device-side copies or fills are not transfers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transferred {
    pub to_device: u64,
    pub to_host: u64,
}

impl Transferred {
    /// What was copied between `earlier` and `self` (two readings of one device).
    pub fn since(self, earlier: Transferred) -> Transferred {
        Transferred {
            to_device: self.to_device.saturating_sub(earlier.to_device),
            to_host: self.to_host.saturating_sub(earlier.to_host),
        }
    }
}

/// A GPU or the simulator. Cheap to clone: clones share the context, memory and module cache.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl Default for Device {
    /// GPU 0 if there is one, else the simulator (saying why once on stderr).
    fn default() -> Self {
        let reason = match std::env::var("LB_DEVICE") {
            Ok(v) if v == "sim" => "LB_DEVICE=sim".to_string(),
            _ => match Device::cuda(0) {
                Ok(dev) => return dev,
                Err(e) => e.to_string(),
            },
        };
        static WARNED: Once = Once::new();
        WARNED.call_once(|| eprintln!("lb: no CUDA GPU ({reason}); running on the simulator"));
        Device::new_sim(Some(reason))
    }
}

impl Device {
    /// The GPU with this ordinal. Fails (never panics) without libcuda or without that GPU.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        // cudarc panics on the first driver call when libcuda is missing, so look first.
        // SAFETY: the call only tries to open (and closes again) the system's CUDA driver
        // library by its standard names; it is unsafe because opening a library runs its
        // initialisers, and the driver's are the ones every CUDA program runs.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Cuda {
                context: "loading the CUDA driver".into(),
                message: "libcuda was not found".into(),
            });
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| Error::cuda(format!("opening GPU {ordinal}"), e))?;
        // SAFETY: cudarc then leaves the ordering of this context's slices across streams to
        // us. lb allocates, uploads, downloads and frees its buffers on the device's stream,
        // and after every launch on another stream makes the device's stream wait for it
        // (`Stream::order_device_after`), so nothing is freed, overwritten or read back while
        // a kernel on another stream still uses it. The other direction, a launch on another
        // stream reading what the device's stream allocated, uploaded or launched, is ordered
        // by `Stream::order_after_device`: before such a launch the stream waits for the
        // device's stream whenever the latter did anything since the stream's last wait. Only
        // a stream the caller took over with the unsafe `Stream::order_manually` skips that.
        // Per-buffer events would add their cost to every launch, the device's stream's too.
        unsafe { ctx.disable_event_tracking() };
        Device::from_cudarc(ctx.default_stream())
    }

    /// A device on the user's cudarc context, whose stream `stream` becomes the device's
    /// stream (uploads, downloads, copies and launches that name no other stream). lb keeps the
    /// context's event-tracking setting as the user chose it. Buffers made by lb and by the
    /// user's cudarc code on this context mix freely ([`DeviceBuffer::from_cudarc`]).
    pub fn from_cudarc(stream: Arc<CudaStream>) -> Result<Device> {
        let ctx = stream.context().clone();
        let name = ctx
            .name()
            .map_err(|e| Error::cuda("reading the GPU name", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::cuda("reading the compute capability", e))?;
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| Error::cuda("reading the SM count", e))?;
        let gpu = Gpu {
            ctx,
            stream,
            sm_count: u32::try_from(sm_count).unwrap_or(1).max(1),
            modules: Mutex::new(HashMap::new()),
        };
        let state = Arc::new(StreamState::new(Some(gpu.stream.clone())));
        Ok(Device {
            inner: Arc::new(Inner {
                name: format!("{name} (sm_{major}{minor})").into(),
                driver: driver_version(),
                tune: Mutex::new(TuneConfig::from_env(true)),
                backend: Backend::Gpu(gpu),
                fallback: None,
                stream: state,
                device_work: AtomicU64::new(0),
                to_device: AtomicU64::new(0),
                to_host: AtomicU64::new(0),
            }),
        })
    }

    /// A fresh simulator with its own memory.
    pub fn simulator() -> Device {
        Device::new_sim(None)
    }

    fn new_sim(fallback: Option<String>) -> Device {
        let sim = Sim {
            memory: Arc::new(Mutex::new(Memory::new())),
            modules: Mutex::new(HashMap::new()),
        };
        Device {
            inner: Arc::new(Inner {
                name: "simulator".into(),
                driver: "simulator".into(),
                tune: Mutex::new(TuneConfig::from_env(false)),
                backend: Backend::Sim(sim),
                fallback,
                stream: Arc::new(StreamState::new(None)),
                device_work: AtomicU64::new(0),
                to_device: AtomicU64::new(0),
                to_host: AtomicU64::new(0),
            }),
        }
    }

    /// The device's own stream: the one `launch` uses and every copy goes through.
    pub fn stream(&self) -> Stream {
        Stream::new(self.clone(), self.inner.stream.clone())
    }

    /// The state of the device's own stream, without a `Stream` (and its two reference counts)
    /// made for it.
    pub(crate) fn stream_state(&self) -> &StreamState {
        &self.inner.stream
    }

    /// A new stream of this device (a non-blocking CUDA stream; on the simulator, a stream of
    /// its own with its own workspace and reports). Its launches are ordered with the device's
    /// stream both ways: a launch first waits for what the device's stream did since the
    /// stream's last launch (uploads, copies, fills, and the launches of other streams, which
    /// the device's stream waits for), and the device's stream then waits for the launch. So
    /// safe code cannot race, and launches on several streams only overlap where nothing else
    /// happens between them; [`Stream::order_manually`] (unsafe) gives that ordering up.
    pub fn new_stream(&self) -> Result<Stream> {
        let cuda = match &self.inner.backend {
            Backend::Gpu(gpu) => Some(
                gpu.ctx
                    .new_stream()
                    .map_err(|e| Error::cuda("creating a stream", e))?,
            ),
            Backend::Sim(_) => None,
        };
        Ok(Stream::new(self.clone(), Arc::new(StreamState::new(cuda))))
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self.inner.backend, Backend::Gpu(_))
    }

    /// The GPU's name and compute capability (`"NVIDIA H100 80GB HBM3 (sm_90)"`), or `"simulator"`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// [`Device::name`], shared.
    pub(crate) fn name_arc(&self) -> Arc<str> {
        Arc::clone(&self.inner.name)
    }

    /// The CUDA driver's version number (`"13000"`), or `"simulator"`.
    pub fn driver_version(&self) -> &str {
        &self.inner.driver
    }

    /// How `schedule = "auto"` picks on this device: [`Tuning::Tune`] (the default on a GPU)
    /// measures every generated schedule at the first launch on a tile set; [`Tuning::Rule`]
    /// (the default on the simulator) uses the heuristic alone. `LB_TUNE=rule|tune` sets the
    /// default. See docs/tuning.md.
    pub fn set_tuning(&self, mode: Tuning) {
        lock(&self.inner.tune).mode = mode;
    }

    pub fn tuning(&self) -> Tuning {
        lock(&self.inner.tune).mode
    }

    /// Where tuning choices are kept across processes; `None`: nowhere. The default is
    /// `LB_TUNE_CACHE` (a path, or `off`), else on a GPU `$XDG_CACHE_HOME/lb/tuning.tsv` or
    /// `~/.cache/lb/tuning.tsv`, and nowhere on the simulator.
    pub fn set_tuning_file(&self, path: Option<std::path::PathBuf>) {
        lock(&self.inner.tune).set_file(path);
    }

    pub fn tuning_file(&self) -> Option<std::path::PathBuf> {
        lock(&self.inner.tune).file.clone()
    }

    pub(crate) fn tune_config(&self) -> &Mutex<TuneConfig> {
        &self.inner.tune
    }

    /// Why [`Device::default`] fell back to the simulator, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.inner.fallback.as_deref()
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// Bytes copied between the host and this device since it was opened, counted the same
    /// way on a GPU and on the simulator (see [`Transferred`]): how a driver shows what its
    /// loop moves per iteration.
    pub fn transferred(&self) -> Transferred {
        Transferred {
            to_device: self.inner.to_device.load(Ordering::Relaxed),
            to_host: self.inner.to_host.load(Ordering::Relaxed),
        }
    }

    /// Counts `bytes` copied from the device to the host.
    pub(crate) fn count_to_host(&self, bytes: usize) {
        self.inner
            .to_host
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn count_to_device(&self, bytes: usize) {
        self.inner
            .to_device
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Notes one more operation on the device's stream that may write device memory; returns
    /// the new count.
    pub(crate) fn note_device_work(&self) -> u64 {
        self.inner.device_work.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Operations noted by [`note_device_work`](Self::note_device_work) so far.
    pub(crate) fn device_work(&self) -> u64 {
        self.inner.device_work.load(Ordering::Acquire)
    }

    /// Whether both handles are clones of one `Device` (the same context, streams and caches),
    /// whose buffers each other's launches may take.
    pub fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Copies `data` into a new device buffer.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let bytes = le_bytes(data);
        let mut raw = self.alloc_raw(bytes.len(), false)?;
        self.write_raw(&mut raw, &bytes)?;
        Ok(DeviceBuffer::from_raw(raw, data.len()))
    }

    /// A new buffer of `n` zeros.
    pub fn zeros<T: Element>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        let bytes = n
            .checked_mul(T::SIZE)
            .ok_or_else(|| Error::Shape(format!("{n} elements do not fit in memory")))?;
        Ok(DeviceBuffer::from_raw(self.alloc_raw(bytes, true)?, n))
    }

    /// A new buffer of `n` copies of `value`, written on the device: no host buffer of `n`
    /// elements and no copy from the host, so an algorithm's initial state (distances at
    /// infinity, depths at `u32::MAX`) costs a fill, not an upload of the whole array. On a GPU,
    /// a value of 4 bytes is one 32-bit fill and a value whose bytes are all equal one byte
    /// fill; any other value (8 bytes of mixed bytes) is uploaded from a host copy.
    pub fn filled<T: Element>(&self, n: usize, value: T) -> Result<DeviceBuffer<T>> {
        let pattern = to_bytes(&[value]);
        if pattern.iter().all(|&b| b == 0) {
            return self.zeros(n);
        }
        let bytes = n
            .checked_mul(T::SIZE)
            .ok_or_else(|| Error::Shape(format!("{n} elements do not fit in memory")))?;
        let mut raw = self.alloc_raw(bytes, false)?;
        self.fill_raw(&mut raw, &pattern, n)?;
        Ok(DeviceBuffer::from_raw(raw, n))
    }

    /// Copies `data` into `buf` from element `offset` on, ordered after earlier work on the
    /// device's stream: a few elements of a device array set from the host (a source's
    /// distance, say) without rewriting the rest. Elements past `buf`'s length are an
    /// [`Error::Shape`].
    pub fn write_at<T: Element>(
        &self,
        buf: &mut DeviceBuffer<T>,
        offset: usize,
        data: &[T],
    ) -> Result<()> {
        if !self.same(buf.device()) {
            return Err(Error::DeviceMismatch {
                what: "the buffer written".into(),
            });
        }
        let end = offset.checked_add(data.len()).filter(|&e| e <= buf.len());
        if end.is_none() {
            return Err(Error::Shape(format!(
                "{} elements written at offset {offset} into a buffer of {}: write within the buffer's length",
                data.len(),
                buf.len()
            )));
        }
        self.write_raw_at(&mut buf.raw, offset * T::SIZE, &le_bytes(data))
    }

    /// Sets every element of `buf` to `value`, ordered after earlier work on the device's
    /// stream and without a host wait: [`filled`](Self::filled) for a buffer that exists (state
    /// reset between two runs of an algorithm without allocating it again).
    pub fn fill<T: Element>(&self, buf: &mut DeviceBuffer<T>, value: T) -> Result<()> {
        if !self.same(buf.device()) {
            return Err(Error::DeviceMismatch {
                what: "the buffer filled".into(),
            });
        }
        let pattern = to_bytes(&[value]);
        if pattern.iter().all(|&b| b == 0) {
            let bytes = buf.len() * T::SIZE;
            return self.zero_raw(&mut buf.raw, bytes);
        }
        let n = buf.len();
        self.fill_raw(&mut buf.raw, &pattern, n)
    }

    /// Copies a buffer back to the host. Waits for all earlier work on the device.
    pub fn download<T: Element>(&self, buf: &DeviceBuffer<T>) -> Result<Vec<T>> {
        let mut values = Vec::new();
        self.download_into(buf, &mut values)?;
        Ok(values)
    }

    /// [`Self::download`] into `out`, replacing its contents and reusing its allocation when
    /// it is large enough. A loop that downloads a result of the same size every iteration
    /// then writes into host memory it has already touched: on a virtual machine a first
    /// touch costs a page fault per 4 KiB page, about 0.8 ms per MB on the machine
    /// docs/benchmarks.md measured (twenty-fifth session), more than the copy itself.
    ///
    /// ```
    /// let dev = lb_runtime::Device::simulator();
    /// let b = dev.upload(&[1u32, 2, 3])?;
    /// let mut out = vec![9; 100];
    /// dev.download_into(&b, &mut out)?;
    /// assert_eq!(out, [1, 2, 3]);
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn download_into<T: Element>(&self, buf: &DeviceBuffer<T>, out: &mut Vec<T>) -> Result<()> {
        if !self.same(buf.device()) {
            return Err(Error::DeviceMismatch {
                what: "the buffer to download".into(),
            });
        }
        // The buffer's length, not its allocation: a queue's `slots` is a prefix of its slots.
        self.read_typed_into(&buf.raw, buf.len(), out)?;
        // The read waited for the device's stream: its launches' reports are due now.
        self.stream().run_checks()
    }

    /// Copies `src` into `dst` on the device (same length), ordered after earlier work: e.g. a
    /// snapshot of distances before a launch that may have to be undone.
    pub fn copy<T: Element>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>) -> Result<()> {
        if !self.same(src.device()) || !self.same(dst.device()) {
            return Err(Error::DeviceMismatch {
                what: "a buffer of the copy".into(),
            });
        }
        if src.len() != dst.len() {
            return Err(Error::Shape(format!(
                "copying {} elements into a buffer of {}",
                src.len(),
                dst.len()
            )));
        }
        // The lengths, not the allocations: a queue's `slots` is a prefix of its slots.
        let bytes = src.len() * T::SIZE;
        if bytes == 0 {
            return Ok(());
        }
        self.note_device_work();
        match (&src.raw.storage, &mut dst.raw.storage) {
            (Storage::Gpu { slice: s, stream }, Storage::Gpu { slice: d, .. }) => stream
                .memcpy_dtod(&s.slice(0..bytes), &mut d.slice_mut(0..bytes))
                .map_err(|e| Error::cuda("copying on the GPU", e)),
            (Storage::Sim(s), Storage::Sim(d)) => {
                let Backend::Sim(sim) = &self.inner.backend else {
                    return Err(Error::DeviceMismatch {
                        what: "a simulator buffer".into(),
                    });
                };
                let mut mem = sim.memory();
                let data = mem.read(*s, bytes as u64)?;
                Ok(mem.write(*d, &data)?)
            }
            _ => Err(Error::DeviceMismatch {
                what: "a buffer of the copy".into(),
            }),
        }
    }

    /// Waits until all work submitted to the device (on every stream) has finished; reports
    /// faults of kernels and the pending reports of the device's stream
    /// ([`Stream::synchronize`] reads another stream's).
    pub fn synchronize(&self) -> Result<()> {
        if let Backend::Gpu(gpu) = &self.inner.backend {
            gpu.ctx
                .synchronize()
                .map_err(|e| Error::cuda("synchronizing", e))?;
        }
        self.stream().synchronize()
    }

    /// Device-to-device copy bandwidth in bytes per second, counting each copied byte twice (read
    /// and written), so it compares directly with the bytes a kernel must read plus write. The
    /// median of 10 timed copies of `bytes` bytes (CUDA events), after one untimed warm-up copy.
    /// An error on the simulator, which has no bandwidth.
    pub fn measure_copy_bandwidth(&self, bytes: usize) -> Result<f64> {
        const REPS: usize = 10;
        let Backend::Gpu(gpu) = &self.inner.backend else {
            return Err(Error::Cuda {
                context: "measuring the copy bandwidth".into(),
                message: "the simulator has no memory bandwidth".into(),
            });
        };
        let n = bytes.max(1);
        let cuda = |context: &str, e| Error::cuda(context.to_string(), e);
        let src = gpu
            .stream
            .alloc_zeros::<u8>(n)
            .map_err(|e| cuda("allocating the copy source", e))?;
        let mut dst = gpu
            .stream
            .alloc_zeros::<u8>(n)
            .map_err(|e| cuda("allocating the copy destination", e))?;
        let event = || {
            gpu.stream
                .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| cuda("recording a timing event", e))
        };
        gpu.stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(|e| cuda("copying on the GPU", e))?;
        let mut times = Vec::with_capacity(REPS);
        for _ in 0..REPS {
            let start = event()?;
            gpu.stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(|e| cuda("copying on the GPU", e))?;
            let stop = event()?;
            gpu.stream
                .synchronize()
                .map_err(|e| cuda("copying on the GPU", e))?;
            times.push(
                start
                    .elapsed_ms(&stop)
                    .map_err(|e| cuda("reading the timing events", e))?,
            );
        }
        times.sort_by(f32::total_cmp);
        let seconds = f64::from(times[REPS / 2]) * 1e-3;
        if seconds <= 0.0 {
            return Err(Error::Cuda {
                context: "measuring the copy bandwidth".into(),
                message: format!("a copy of {n} bytes took no measurable time"),
            });
        }
        Ok(2.0 * n as f64 / seconds)
    }

    /// An allocation of at least one byte (so even an empty buffer has a valid address).
    pub(crate) fn alloc_raw(&self, bytes: usize, zero: bool) -> Result<RawBuffer> {
        self.alloc_raw_on(&self.stream(), bytes, zero)
    }

    /// [`alloc_raw`](Self::alloc_raw), ordered on `stream` (its zeros land before the stream's
    /// later work).
    pub(crate) fn alloc_raw_on(
        &self,
        stream: &Stream,
        bytes: usize,
        zero: bool,
    ) -> Result<RawBuffer> {
        if zero && stream.state.id == self.inner.stream.id {
            self.note_device_work();
        }
        let storage = match (&self.inner.backend, stream.cudarc()) {
            (Backend::Gpu(_), Some(cuda)) => {
                let n = bytes.max(1);
                let slice = if zero {
                    cuda.alloc_zeros::<u8>(n)
                } else {
                    // SAFETY: any bytes are valid u8 values, and the memory is written before
                    // it is read: every caller that passes `zero = false` (`upload` and
                    // `filled`) writes all `bytes` right after, on the same stream. Cached
                    // temporaries are always allocated zeroed (`launch::Temps::gather`).
                    unsafe { cuda.alloc::<u8>(n) }
                }
                .map_err(|e| Error::cuda(format!("allocating {n} bytes"), e))?;
                Storage::Gpu {
                    slice,
                    stream: cuda.clone(),
                }
            }
            (Backend::Sim(sim), None) => {
                let mut mem = sim.memory();
                // Simulated memory starts zeroed, so `zero` needs no host-side buffer of zeros
                // (which would abort the process for a size the host cannot hold); a size the
                // simulator refuses is an `Error::Sim` naming it.
                let addr = mem.alloc(bytes.max(1) as u64)?;
                Storage::Sim(addr)
            }
            _ => {
                return Err(Error::DeviceMismatch {
                    what: "the stream of an allocation".into(),
                })
            }
        };
        Ok(RawBuffer {
            dev: self.clone(),
            bytes,
            storage,
        })
    }

    /// Overwrites the first `data.len()` bytes of `raw` (which must be at most its size).
    pub(crate) fn write_raw(&self, raw: &mut RawBuffer, data: &[u8]) -> Result<()> {
        self.write_raw_at(raw, 0, data)
    }

    /// Overwrites `data.len()` bytes of `raw` from byte `at` on (which must end within its
    /// size).
    fn write_raw_at(&self, raw: &mut RawBuffer, at: usize, data: &[u8]) -> Result<()> {
        let Some(end) = at.checked_add(data.len()).filter(|&e| e <= raw.bytes) else {
            return Err(Error::Shape(format!(
                "{} bytes written at byte {at} into a buffer of {}",
                data.len(),
                raw.bytes
            )));
        };
        if data.is_empty() {
            return Ok(());
        }
        self.count_to_device(data.len());
        self.note_device_work();
        match (&mut raw.storage, &self.inner.backend) {
            (Storage::Gpu { slice, stream }, Backend::Gpu(_)) => stream
                .memcpy_htod(data, &mut slice.slice_mut(at..end))
                .map_err(|e| Error::cuda("copying to the GPU", e)),
            (Storage::Sim(addr), Backend::Sim(sim)) => {
                Ok(sim.memory().write(*addr + at as u64, data)?)
            }
            _ => Err(Error::DeviceMismatch {
                what: "the buffer written".into(),
            }),
        }
    }

    /// Zeroes the first `bytes` bytes of `raw` (at most its size) on the device, ordered after
    /// earlier work on the device's stream: a fill, not a copy from the host.
    pub(crate) fn zero_raw(&self, raw: &mut RawBuffer, bytes: usize) -> Result<()> {
        let bytes = bytes.min(raw.bytes);
        if bytes == 0 {
            return Ok(());
        }
        self.note_device_work();
        match (&mut raw.storage, &self.inner.backend) {
            (Storage::Gpu { slice, stream }, Backend::Gpu(_)) => stream
                .memset_zeros(&mut slice.slice_mut(0..bytes))
                .map_err(|e| Error::cuda("zeroing on the GPU", e)),
            (Storage::Sim(addr), Backend::Sim(sim)) => {
                Ok(sim.memory().write(*addr, &vec![0u8; bytes])?)
            }
            _ => Err(Error::DeviceMismatch {
                what: "the buffer zeroed".into(),
            }),
        }
    }

    /// Writes `n` copies of `pattern` (one element's bytes) from the start of `raw`, on the
    /// device where the pattern allows it (see [`Device::filled`]).
    fn fill_raw(&self, raw: &mut RawBuffer, pattern: &[u8], n: usize) -> Result<()> {
        if n == 0 || pattern.is_empty() {
            return Ok(());
        }
        let bytes = n * pattern.len();
        self.note_device_work();
        if let (Storage::Gpu { slice, stream }, Backend::Gpu(_)) =
            (&mut raw.storage, &self.inner.backend)
        {
            let fill = match <[u8; 4]>::try_from(pattern) {
                Ok(word) => Some((u32::from_ne_bytes(word), 4, n)),
                Err(_) if pattern.iter().all(|&b| b == pattern[0]) => {
                    Some((u32::from(pattern[0]), 1, bytes))
                }
                Err(_) => None,
            };
            if let Some((value, width, count)) = fill {
                return crate::cuda::memset(stream, slice, (value, width), count);
            }
        }
        // The simulator, or a pattern no driver fill writes: the bytes from the host.
        let mut data = crate::formats::try_with_capacity::<u8>(bytes, "the filled buffer")?;
        for _ in 0..n {
            data.extend_from_slice(pattern);
        }
        self.write_raw(raw, &data)
    }

    /// The first `bytes` bytes of `raw` (at most its size), after the work before it has
    /// finished.
    /// The first `len` elements of `raw` (at most what it holds), once the device's stream has
    /// finished the work before this call. From a GPU to a little-endian host they are copied
    /// straight into the returned vector: no byte buffer to allocate, fill and convert, which
    /// for a result of millions of elements was most of the read.
    pub(crate) fn read_typed<T: Element>(&self, raw: &RawBuffer, len: usize) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.read_typed_into(raw, len, &mut out)?;
        Ok(out)
    }

    /// [`Self::read_typed`] into `out`, whose allocation is reused when it is large enough: the
    /// host pages a result lands in are then pages the process has already touched.
    pub(crate) fn read_typed_into<T: Element>(
        &self,
        raw: &RawBuffer,
        len: usize,
        out: &mut Vec<T>,
    ) -> Result<()> {
        let n = len.min(raw.bytes / T::SIZE);
        out.clear();
        match (&raw.storage, &self.inner.backend) {
            (Storage::Gpu { .. }, Backend::Gpu(_))
                if cfg!(target_endian = "little") && T::ANY_BITS && n > 0 =>
            {
                out.reserve(n);
                // SAFETY: `out` is empty with room for `n` elements, `n * T::SIZE` bytes, which
                // nothing reads before the copy has completed (it stays empty if it fails).
                // Every byte pattern the device holds is a value of `T` (`T::ANY_BITS`), in the
                // host's (little-endian) layout.
                unsafe { self.copy_raw_to_host(raw, out.as_mut_ptr().cast(), n * T::SIZE) }?;
                // SAFETY: the copy of all `n` elements has completed.
                unsafe { out.set_len(n) };
                Ok(())
            }
            _ => {
                let bytes = self.read_raw_prefix(raw, n * T::SIZE)?;
                out.extend(bytes.chunks_exact(T::SIZE).map(T::read_le));
                Ok(())
            }
        }
    }

    /// Copies the first `bytes` bytes of the GPU buffer `raw` to `dst` and waits for the copy.
    /// An error when `raw` is not a buffer of this GPU or is shorter.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for `bytes` bytes of writes, and nothing may access them until this
    /// returns.
    pub(crate) unsafe fn copy_raw_to_host(
        &self,
        raw: &RawBuffer,
        dst: *mut u8,
        bytes: usize,
    ) -> Result<()> {
        let (Storage::Gpu { slice, stream }, Backend::Gpu(_)) = (&raw.storage, &self.inner.backend)
        else {
            return Err(Error::DeviceMismatch {
                what: "the buffer read".into(),
            });
        };
        if bytes > raw.bytes {
            return Err(Error::Shape(format!(
                "reading {bytes} bytes from a buffer of {}",
                raw.bytes
            )));
        }
        self.count_to_host(bytes);
        // The stream's context must be the current one (another GPU's may be).
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the GPU's context", e))?;
        let (src, record) = slice.device_ptr(stream);
        // SAFETY: the allocation holds at least `bytes` bytes (checked above) and `dst` takes
        // `bytes` (the caller's contract), untouched until the stream is synchronized below.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, stream.cu_stream()) };
        drop(record);
        r.result()
            .map_err(|e| Error::cuda("copying from the GPU", e))?;
        // A kernel fault before the copy also surfaces here.
        stream
            .synchronize()
            .map_err(|e| Error::cuda("copying from the GPU", e))
    }

    pub(crate) fn read_raw_prefix(&self, raw: &RawBuffer, bytes: usize) -> Result<Vec<u8>> {
        let bytes = bytes.min(raw.bytes);
        if bytes == 0 {
            return Ok(Vec::new());
        }
        self.count_to_host(bytes);
        match (&raw.storage, &self.inner.backend) {
            (Storage::Gpu { slice, stream }, Backend::Gpu(_)) => {
                let bytes = stream
                    .clone_dtoh(&slice.slice(0..bytes))
                    .map_err(|e| Error::cuda("copying from the GPU", e))?;
                // The copy is asynchronous; a kernel fault before it also surfaces here.
                stream
                    .synchronize()
                    .map_err(|e| Error::cuda("copying from the GPU", e))?;
                Ok(bytes)
            }
            (Storage::Sim(addr), Backend::Sim(sim)) => {
                Ok(sim.memory().read(*addr, bytes as u64)?)
            }
            _ => Err(Error::DeviceMismatch {
                what: "the buffer read".into(),
            }),
        }
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name())
            .finish()
    }
}
