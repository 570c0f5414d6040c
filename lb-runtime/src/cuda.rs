//! Raw driver calls that cudarc's safe API does not cover: JIT with ptxas's error log, JIT
//! linking against the device runtime (for kernels that launch kernels), and launches whose
//! argument types are known only at run time.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::Path;
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaContext, CudaStream, DriverError};
use lb_ptx::plan::KernelPlan;

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

// The driver's module and function handles are usable from any thread once the context is
// bound; every method below binds it first.
unsafe impl Send for GpuModule {}
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
            let r = unsafe { sys::cuLinkComplete(state, &mut cubin, &mut size) };
            r.result().map_err(|e| jit_error(e, &log))?;
            let mut raw: sys::CUmodule = std::ptr::null_mut();
            let r = unsafe { sys::cuModuleLoadData(&mut raw, cubin as *const c_void) };
            check(|| "loading the linked module".to_string(), r)?;
            Ok(GpuModule::wrap(ctx, raw))
        })();
        // Destroying can only fail for an invalid state, and this one is valid.
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
        let mut ptrs: Vec<*mut c_void> = params
            .iter_mut()
            .map(|p| p as *mut u64 as *mut c_void)
            .collect();
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
        if self.ctx.bind_to_thread().is_ok() {
            unsafe {
                let _ = sys::cuModuleUnload(self.raw);
            }
        }
    }
}
