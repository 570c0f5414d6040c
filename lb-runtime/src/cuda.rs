//! Raw driver calls that cudarc's safe API does not cover: JIT with ptxas's error log, JIT
//! linking against the device runtime (for kernels that launch kernels), launches whose
//! argument types are known only at run time, and fills with a nonzero value.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::Path;
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtrMut, DriverError};
use lb_ptx::plan::KernelPlan;
use smallvec::SmallVec;

use crate::device::lock;
use crate::error::{Error, Result};

/// Bytes kept of ptxas's error log; its messages are a few lines each.
const JIT_LOG_BYTES: usize = 64 * 1024;

/// Dynamic shared memory above this needs the per-function opt-in attribute.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

fn check(context: impl FnOnce() -> String, r: sys::CUresult) -> Result<()> {
    r.result()
        .map_err(|e: DriverError| Error::cuda(context(), e))
}

/// Sets the first `count` elements of `slice` to `value`, as `width`-byte elements (4: a
/// 32-bit fill, else one byte of `value`), ordered on `stream` (cudarc fills only with zeros).
pub(crate) fn memset(
    stream: &Arc<CudaStream>,
    slice: &mut CudaSlice<u8>,
    (value, width): (u32, usize),
    count: usize,
) -> Result<()> {
    if count.checked_mul(width).is_none_or(|b| b > slice.len()) {
        return Err(Error::Shape(format!(
            "a fill of {count} elements of {width} bytes into {} bytes",
            slice.len()
        )));
    }
    // The driver takes the stream's context to be the current one: with several GPUs in one
    // process, the last one used may be another.
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| Error::cuda("binding the GPU's context", e))?;
    let (ptr, _record) = slice.device_ptr_mut(stream);
    let r = if width == 4 {
        // SAFETY: `ptr` addresses `slice`, which holds at least `count × 4` bytes (checked
        // above) and outlives the call; the fill is ordered on `stream`, the stream the slice's
        // other work is ordered on.
        unsafe { sys::cuMemsetD32Async(ptr, value, count, stream.cu_stream()) }
    } else {
        // SAFETY: as above, for `count` bytes.
        unsafe { sys::cuMemsetD8Async(ptr, value as u8, count, stream.cu_stream()) }
    };
    check(|| format!("filling {count} elements on the GPU"), r)
}

/// A loaded module and the functions looked up in it.
pub(crate) struct GpuModule {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
    functions: Mutex<HashMap<String, Function>>,
    /// Resident blocks per SM by (function, block, dynamic shared memory): asked of the driver
    /// once, not at every launch.
    occupancy: Mutex<HashMap<(usize, u32, u32), u32>>,
    /// The kernels each static plan launches from this module, looked up once: a launch then
    /// takes one lock instead of a name search, a function lookup and an occupancy query per
    /// kernel (see [`LoadedPlanKey`]).
    plans: Mutex<HashMap<LoadedPlanKey, Arc<LoadedPlan>>>,
    /// Why the module's device-side launches were left out (it was loaded without its kernels
    /// that call the device runtime); `None` when nothing was left out.
    pub(crate) without_device_launch: Option<String>,
}

// SAFETY: the driver API is thread-safe and a module handle is not tied to the thread that
// loaded it, only to its context, which every method below (and `drop`) binds on the calling
// thread first; the handle is never mutated after loading, and the Rust-side state (the maps) is
// behind mutexes.
unsafe impl Send for GpuModule {}
// SAFETY: as for `Send`: shared use only reads the handle and locks the maps.
unsafe impl Sync for GpuModule {}

/// Which plan a [`LoadedPlan`] was made for: the address and length of the plan's `'static`
/// kernel list (only plans whose list is `'static` are kept, so the address never names another
/// list later) and whether the tile set has a huge tile (which decides the device-launch twin).
pub(crate) type LoadedPlanKey = (usize, usize, bool);

/// One kernel of a plan as this module runs it.
#[derive(Clone)]
pub(crate) struct LoadedKernel {
    pub(crate) plan: KernelPlan,
    pub(crate) function: Function,
    pub(crate) blocks_per_sm: u32,
}

/// The kernels a plan launches from this module (its device-launch twin or its host path) and
/// the note saying which path that is.
pub(crate) struct LoadedPlan {
    pub(crate) kernels: Vec<LoadedKernel>,
    pub(crate) notes: Vec<String>,
}

/// A kernel handle and the dynamic shared memory it has been opted in to.
#[derive(Clone, Copy)]
pub(crate) struct Function {
    raw: sys::CUfunction,
    shared_opt_in: u32,
}

// SAFETY: a function handle is a driver object of its module's context, valid from any thread;
// every launch and query through it binds that context first, and the module (which owns it)
// outlives every `Function` taken from it, as both live in the module's maps or a `Prepared`
// that holds the module's `Arc`.
unsafe impl Send for Function {}
// SAFETY: as for `Send`: a `Function` is a plain copyable handle with no Rust-side state.
unsafe impl Sync for Function {}

impl GpuModule {
    /// JIT-compiles `ptx`; on failure the error carries ptxas's log.
    pub(crate) fn load(ctx: &Arc<CudaContext>, ptx: &str) -> Result<GpuModule> {
        let text = CString::new(ptx).map_err(|_| Error::Jit {
            message: "the PTX text contains a NUL byte".into(),
            log: String::new(),
        })?;
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // Option values are passed as pointer-sized slots; the size travels as an integer.
        let mut values = [
            log.as_mut_ptr() as *mut c_void,
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut raw: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the context is bound on this thread (above); `raw` is a writable local for the
        // handle; `text` is NUL-terminated PTX that outlives the call; `options` and `values`
        // both have `options.len()` entries, and the log buffer option points at `log`, which
        // holds the `JIT_LOG_BYTES` bytes the size option promises and outlives the call (the
        // driver writes the log only during it).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                text.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if let Err(e) = r.result() {
            return Err(jit_error(e, &log));
        }
        Ok(GpuModule::wrap(ctx, raw))
    }

    fn wrap(ctx: &Arc<CudaContext>, raw: sys::CUmodule) -> GpuModule {
        GpuModule {
            raw,
            ctx: ctx.clone(),
            functions: Mutex::new(HashMap::new()),
            occupancy: Mutex::new(HashMap::new()),
            plans: Mutex::new(HashMap::new()),
            without_device_launch: None,
        }
    }

    /// JIT-compiles `ptx` as relocatable code and links it against the device runtime
    /// `library` (libcudadevrt.a), which kernels that launch kernels need: `cuLinkCreate`,
    /// `cuLinkAddData` (the PTX), `cuLinkAddFile` (the library), `cuLinkComplete`, then
    /// `cuModuleLoadData` of the linked cubin. On failure the error carries the linker's log.
    pub(crate) fn load_linked(
        ctx: &Arc<CudaContext>,
        ptx: &str,
        library: &Path,
    ) -> Result<GpuModule> {
        let text = CString::new(ptx).map_err(|_| Error::Jit {
            message: "the PTX text contains a NUL byte".into(),
            log: String::new(),
        })?;
        let path =
            CString::new(library.as_os_str().as_encoded_bytes()).map_err(|_| Error::Jit {
                message: format!("the path {} contains a NUL byte", library.display()),
                log: String::new(),
            })?;
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))?;
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [
            log.as_mut_ptr() as *mut c_void,
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut state: sys::CUlinkState = std::ptr::null_mut();
        // SAFETY: the context is bound on this thread (above); `state` is a writable local;
        // `options` and `values` both have `options.len()` entries. The link state keeps the
        // log buffer's address and writes to it in the calls below, until `cuLinkDestroy`:
        // `log` holds the promised `JIT_LOG_BYTES` and is a local of this function, dropped only
        // after the state is destroyed at its end.
        let r = unsafe {
            sys::cuLinkCreate_v2(
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
                &mut state,
            )
        };
        if let Err(e) = r.result() {
            return Err(jit_error(e, &log));
        }
        // The link state owns the cubin, so it is destroyed only after the module is loaded.
        let linked = (|| {
            // SAFETY: `state` was created above and is destroyed only after this closure; `text`
            // is NUL-terminated PTX of the given length (NUL included) that outlives the call
            // (the driver only reads it, whatever the pointer's mutability in the binding);
            // the name is a C string literal; no options (count 0, null arrays).
            let r = unsafe {
                sys::cuLinkAddData_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_PTX,
                    text.as_ptr() as *mut c_void,
                    text.as_bytes_with_nul().len(),
                    c"lb.ptx".as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            r.result().map_err(|e| jit_error(e, &log))?;
            // SAFETY: `state` is live (as above); `path` is a NUL-terminated path that outlives
            // the call; no options.
            let r = unsafe {
                sys::cuLinkAddFile_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                    path.as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            r.result().map_err(|e| jit_error(e, &log))?;
            let mut cubin: *mut c_void = std::ptr::null_mut();
            let mut size = 0usize;
            // SAFETY: `state` is live and holds the inputs added above; `cubin` and `size` are
            // writable locals. The image it returns is owned by `state`.
            let r = unsafe { sys::cuLinkComplete(state, &mut cubin, &mut size) };
            r.result().map_err(|e| jit_error(e, &log))?;
            let mut raw: sys::CUmodule = std::ptr::null_mut();
            // SAFETY: `cubin` is the image `cuLinkComplete` just produced, valid until `state`
            // is destroyed, which happens after this call (the loaded module keeps its own
            // copy); `raw` is a writable local; the context is bound.
            let r = unsafe { sys::cuModuleLoadData(&mut raw, cubin as *const c_void) };
            check(|| "loading the linked module".to_string(), r)?;
            Ok(GpuModule::wrap(ctx, raw))
        })();
        // Destroying can only fail for an invalid state, and this one is valid.
        // SAFETY: `state` was created by the successful `cuLinkCreate_v2` above and is destroyed
        // exactly once, here, after its last use (the module, if loaded, no longer needs the
        // image).
        unsafe {
            let _ = sys::cuLinkDestroy(state);
        }
        linked
    }

    /// The kernel `entry`, opted in to `dynamic_shared` bytes when that is above 48 KiB.
    pub(crate) fn function(&self, entry: &str, dynamic_shared: u32) -> Result<Function> {
        let mut functions = lock(&self.functions);
        let mut f = match functions.get(entry) {
            Some(f) => *f,
            None => {
                let name =
                    CString::new(entry).map_err(|_| Error::MissingKernel(entry.to_string()))?;
                self.bind()?;
                let mut raw: sys::CUfunction = std::ptr::null_mut();
                // SAFETY: the context is bound (above); `self.raw` is this module's handle,
                // loaded at construction and unloaded only in `drop`; `name` is a
                // NUL-terminated string that outlives the call; `raw` is a writable local.
                let r = unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, name.as_ptr()) };
                if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
                    return Err(Error::MissingKernel(entry.to_string()));
                }
                check(|| format!("looking up kernel `{entry}`"), r)?;
                Function {
                    raw,
                    shared_opt_in: DEFAULT_SHARED_LIMIT,
                }
            }
        };
        if dynamic_shared > f.shared_opt_in {
            self.bind()?;
            // SAFETY: the context is bound; `f.raw` was looked up in this module (the map holds
            // only this module's functions), which is alive while `self` is; the attribute
            // takes a plain int.
            let r = unsafe {
                sys::cuFuncSetAttribute(
                    f.raw,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(dynamic_shared).unwrap_or(i32::MAX),
                )
            };
            check(
                || {
                    format!(
                        "allowing {dynamic_shared} bytes of dynamic shared memory for `{entry}`"
                    )
                },
                r,
            )?;
            f.shared_opt_in = dynamic_shared;
        }
        functions.insert(entry.to_string(), f);
        Ok(f)
    }

    /// The kernels of the plan `key` names, made by `load` on first use and kept with the module
    /// when `key` is `Some` (a plan with a `'static` kernel list).
    pub(crate) fn plan(
        &self,
        key: Option<LoadedPlanKey>,
        load: impl FnOnce() -> Result<LoadedPlan>,
    ) -> Result<Arc<LoadedPlan>> {
        let Some(key) = key else {
            return load().map(Arc::new);
        };
        if let Some(p) = lock(&self.plans).get(&key) {
            return Ok(Arc::clone(p));
        }
        let p = Arc::new(load()?);
        lock(&self.plans).insert(key, Arc::clone(&p));
        Ok(p)
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("binding the context", e))
    }

    /// Blocks of `f` resident on one SM at `block` threads and `dynamic_shared` bytes.
    pub(crate) fn blocks_per_sm(
        &self,
        f: Function,
        block: u32,
        dynamic_shared: u32,
    ) -> Result<u32> {
        let key = (f.raw as usize, block, dynamic_shared);
        if let Some(&n) = lock(&self.occupancy).get(&key) {
            return Ok(n);
        }
        self.bind()?;
        let mut n: i32 = 0;
        // SAFETY: the context is bound; `n` is a writable local; `f` comes from this module's
        // `function` (every caller takes it from the same module it asks), so its handle is
        // alive while `self` is.
        let r = unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                f.raw,
                i32::try_from(block).unwrap_or(i32::MAX),
                dynamic_shared as usize,
            )
        };
        check(|| "computing occupancy".to_string(), r)?;
        let n = u32::try_from(n).unwrap_or(0);
        lock(&self.occupancy).insert(key, n);
        Ok(n)
    }

    /// Launches `f` on `stream`; each entry of `params` is one kernel parameter's bits,
    /// 4-byte parameters in the low half of their slot (the host is little-endian).
    pub(crate) fn launch(
        &self,
        f: Function,
        stream: &CudaStream,
        grid: u32,
        block: u32,
        dynamic_shared: u32,
        params: &mut [u64],
    ) -> Result<()> {
        self.bind()?;
        let mut ptrs: SmallVec<[*mut c_void; 48]> = params
            .iter_mut()
            .map(|p| p as *mut u64 as *mut c_void)
            .collect();
        // SAFETY: the context is bound; `f` comes from this module's `function` and `stream`
        // belongs to the module's context (the module is the device's, and a `Stream` is only
        // made on the device's context: `Device::new_stream`, or `Stream::from_cudarc`, which
        // checks it). Each entry of `ptrs` points at one 8-byte slot of `params`, which outlives
        // the call; the driver copies the values at launch and reads at most 8 bytes per slot
        // (lb's kernels take only 4- and 8-byte parameters). The kernel declares no more
        // parameters than `params` has: `submit` builds them from its arguments and the plan's
        // temporaries, and its caller guarantees (its `# Safety`) that the arguments are the
        // entry's parameters in order, which the macro expansion generates from one list. The addresses among them are live device allocations that
        // the caller keeps alive (or orders frees after) until the kernel finishes.
        let r = unsafe {
            sys::cuLaunchKernel(
                f.raw,
                grid,
                1,
                1,
                block,
                1,
                1,
                dynamic_shared,
                stream.cu_stream(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(
            || format!("launching a kernel with {grid} blocks of {block} threads"),
            r,
        )
    }
}

/// A JIT or link failure with the driver's message and the log's text up to its NUL.
fn jit_error(e: DriverError, log: &[u8]) -> Error {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let message = match Error::cuda("", e) {
        Error::Cuda { message, .. } => message,
        other => other.to_string(),
    };
    Error::Jit {
        message,
        log: String::from_utf8_lossy(&log[..end]).into_owned(),
    }
}

impl Drop for GpuModule {
    fn drop(&mut self) {
        // Unloading can only fail if the context is already gone, and then so is the module.
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // Launches are asynchronous: a kernel of this module may still be queued or running on
        // any stream of the context (a `Pending` dropped unread, the device dropped right after
        // a launch). The last reference goes with the device's module cache, so this waits once
        // per module and device, not per launch. A failed wait means a kernel faulted: the
        // context is then unusable and its kernels stopped, and the fault is the error of the
        // synchronizing calls on it.
        // SAFETY: the context is bound on this thread; the call only blocks until the
        // context's work is done.
        let _ = unsafe { sys::cuCtxSynchronize() };
        // SAFETY: the module was loaded by this value and is unloaded once, here, with its
        // context bound and no kernel of it left to run (the wait above); no `Function` of it
        // outlives it (see `Function`'s `Send`).
        unsafe {
            let _ = sys::cuModuleUnload(self.raw);
        }
    }
}
