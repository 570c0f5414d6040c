//! The baselines measured in the same process: cuSPARSE's SpMV and SpMM (through cudarc's raw
//! bindings, loaded at run time) and the GPU's energy counter through NVML.
//!
//! cuSPARSE gets its favourable index format: i32 row offsets and columns when the matrix has
//! fewer than 2^31 nonzeros (i64 for both otherwise, as its CSR needs one type for both), while
//! lb's kernels read u64 offsets and u32 columns. Every failure here is a `String` that the
//! report shows; nothing panics when libcusparse or libnvidia-ml is missing.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys as cs;
use cudarc::driver::sys as cu;
use cudarc::driver::{CudaContext, CudaStream};
use lb::{Csr, Device, DeviceBuffer, Element};

/// A value type cuSPARSE's generic API takes for the matrix and the dense operands: `f32`, and
/// `f16` (with `f32` compute, as lb's half-precision kernels do).
pub trait CuValue: Element {
    const DATA_TYPE: cs::cudaDataType;
}

impl CuValue for f32 {
    const DATA_TYPE: cs::cudaDataType = cs::cudaDataType::CUDA_R_32F;
}

impl CuValue for lb::f16 {
    const DATA_TYPE: cs::cudaDataType = cs::cudaDataType::CUDA_R_16F;
}

/// cuSPARSE's algorithms tried for one operation; the report keeps the faster.
pub const SPMV_ALGS: [(cs::cusparseSpMVAlg_t, &str); 2] = [
    (cs::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG1, "CSR_ALG1"),
    (cs::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG2, "CSR_ALG2"),
];
pub const SPMM_ALGS: [(cs::cusparseSpMMAlg_t, &str); 2] = [
    (cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2, "CSR_ALG2"),
    (cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3, "CSR_ALG3"),
];

fn check(what: &str, status: cs::cusparseStatus_t) -> Result<(), String> {
    status.result().map_err(|e| format!("{what}: {:?}", e.0))
}

fn driver(what: &str, e: cudarc::driver::DriverError) -> String {
    format!("{what}: {e:?}")
}

/// `Err` unless y = A·x is well formed for an `rows × cols` matrix: cuSPARSE reads `cols`
/// values of x and writes `rows` of y whatever the vector descriptors say, so a shorter vector
/// would be read or written past its end.
fn spmv_lengths(rows: usize, cols: usize, x: usize, y: usize) -> Result<(), String> {
    if x != cols || y != rows {
        return Err(format!(
            "cuSPARSE SpMV of a {rows} × {cols} matrix needs x of {cols} and y of {rows} \
             elements, got {x} and {y}"
        ));
    }
    Ok(())
}

/// Median time in ms of `reps` calls of `call` on `stream` (CUDA events around each), after one
/// call; `what` names the work in errors.
pub fn time_on(
    stream: &CudaStream,
    what: &str,
    reps: usize,
    mut call: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    call()?;
    stream
        .synchronize()
        .map_err(|e| driver(&format!("{what}, warm-up"), e))?;
    let event = || {
        stream
            .record_event(Some(cu::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver("recording an event", e))
    };
    let mut times = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let start = event()?;
        call()?;
        let stop = event()?;
        stream
            .synchronize()
            .map_err(|e| driver(&format!("running {what}"), e))?;
        times.push(
            start
                .elapsed_ms(&stop)
                .map_err(|e| driver("reading events", e))?,
        );
    }
    times.sort_by(f32::total_cmp);
    Ok(f64::from(times[times.len() / 2]))
}

/// A cuSPARSE handle bound to the default stream of GPU 0's primary context, which is the
/// context and stream lb's `Device::cuda(0)` uses: buffers are shared and work is ordered.
pub struct Cusparse {
    handle: cs::cusparseHandle_t,
    stream: Arc<CudaStream>,
}

impl Cusparse {
    pub fn new() -> Result<Cusparse, String> {
        // cudarc panics at the first call into a missing library, so look for it first.
        // SAFETY: the call only tries to open (and closes again) the system's cuSPARSE library
        // by its standard names; it is unsafe because opening a library runs its initialisers,
        // and cuSPARSE's are the ones every program linking it runs.
        if !unsafe { cs::is_culib_present() } {
            return Err(
                "libcusparse was not found (on the GPU machine: LD_LIBRARY_PATH=/usr/local/cuda/lib64)"
                    .into(),
            );
        }
        let ctx = CudaContext::new(0).map_err(|e| driver("opening GPU 0", e))?;
        let stream = ctx.default_stream();
        let handle =
            cudarc::cusparse::result::create().map_err(|e| format!("cusparseCreate: {:?}", e.0))?;
        let cusparse = Cusparse { handle, stream };
        // SAFETY: the handle was just created and is destroyed only in `drop`; the stream is the
        // default stream of GPU 0's primary context, made current by `CudaContext::new`, and
        // `cusparse.stream` keeps it alive as long as the handle.
        check("cusparseSetStream", unsafe {
            cs::cusparseSetStream(
                cusparse.handle,
                cusparse.stream.cu_stream() as cs::cudaStream_t,
            )
        })?;
        Ok(cusparse)
    }

    /// Median time in ms of `reps` calls of `call` (CUDA events around each), after one call.
    fn time(&self, reps: usize, call: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
        time_on(&self.stream, "cuSPARSE", reps, call)
    }

    /// y = A·x with `alg`: the median time in ms. `y` holds the result afterwards.
    pub fn spmv(
        &self,
        a: &CuCsr<f32>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        alg: cs::cusparseSpMVAlg_t,
        reps: usize,
    ) -> Result<f64, String> {
        self.spmv_with(a, x, y, alg, |call| self.time(reps, call))
    }

    /// y = A·x with `alg` called `calls` times back to back, then one synchronization (after
    /// one untimed call): the host time in ms to enqueue the calls, and of the whole loop.
    pub fn spmv_loop(
        &self,
        a: &CuCsr<f32>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        alg: cs::cusparseSpMVAlg_t,
        calls: usize,
    ) -> Result<(f64, f64), String> {
        self.spmv_with(a, x, y, alg, |call| {
            call()?;
            self.stream
                .synchronize()
                .map_err(|e| driver("cuSPARSE warm-up", e))?;
            let start = std::time::Instant::now();
            for _ in 0..calls {
                call()?;
            }
            let enqueue = start.elapsed().as_secs_f64() * 1e3;
            self.stream
                .synchronize()
                .map_err(|e| driver("running cuSPARSE", e))?;
            Ok((enqueue, start.elapsed().as_secs_f64() * 1e3))
        })
    }

    /// Sets up y = A·x with `alg` (descriptors, buffer) and hands the call to `user`, which may
    /// make it any number of times (each reads `x` and overwrites `y` as they are then).
    pub fn spmv_with<R>(
        &self,
        a: &CuCsr<f32>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        alg: cs::cusparseSpMVAlg_t,
        user: impl FnOnce(&mut dyn FnMut() -> Result<(), String>) -> Result<R, String>,
    ) -> Result<R, String> {
        spmv_lengths(a.rows, a.cols, x.len(), y.len())?;
        let vx = DnVec::new(x)?;
        let vy = DnVec::new(y)?;
        self.spmv_on(a, &vx, &vy, alg, user)
    }

    /// y = A·x over the vector descriptors `vx` and `vy` (whose lengths the callers checked
    /// with [`spmv_lengths`]): the buffer is sized and made, and `user` gets the call.
    fn spmv_on<R>(
        &self,
        a: &CuCsr<f32>,
        vx: &DnVec,
        vy: &DnVec,
        alg: cs::cusparseSpMVAlg_t,
        user: impl FnOnce(&mut dyn FnMut() -> Result<(), String>) -> Result<R, String>,
    ) -> Result<R, String> {
        let mat = a.descriptor()?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let f32t = cs::cudaDataType::CUDA_R_32F;
        let mut size = 0usize;
        // SAFETY: the handle is alive while `self` is; `mat`, `vx` and `vy` are live descriptors
        // (dropped at the end of this function, after the last call); `alpha` and `beta` are
        // host scalars alive for the call (the handle is in host pointer mode, the default);
        // `size` is a writable local.
        check("cusparseSpMV_bufferSize", unsafe {
            cs::cusparseSpMV_bufferSize(
                self.handle,
                op,
                ptr(&alpha),
                mat.0,
                vx.0,
                ptr(&beta),
                vy.0,
                f32t,
                alg,
                &mut size,
            )
        })?;
        let buffer = a.dev.zeros::<u8>(size).map_err(|e| e.to_string())?;
        let buf = buffer.device_addr() as *mut c_void;
        // `cusparseSpMV` or, once before the caller's calls, the one-time analysis cuSPARSE
        // offers for repeated calls on one sparsity pattern, as an application that multiplies
        // by the same matrix many times would run it; both take the same arguments.
        let call = |preprocess: bool| {
            let (what, f) = if preprocess {
                (
                    "cusparseSpMV_preprocess",
                    cs::cusparseSpMV_preprocess as SpmvFn,
                )
            } else {
                ("cusparseSpMV", cs::cusparseSpMV as SpmvFn)
            };
            // SAFETY: as for the buffer size above, and `buf` is the device address of
            // `buffer`, `size` bytes as asked, alive until this function returns. The
            // descriptors point at `a`'s buffers and at the caller's vectors, borrowed for the
            // whole call, with their true lengths: `x` of `a.cols` and `y` of `a.rows` elements
            // (`spmv_lengths`, in both callers). Everything is on lb's device, GPU 0's primary
            // context (the bench's `Device::default()`), and the call is enqueued on its default
            // stream, the one lb frees those buffers on, so no free overtakes it.
            check(what, unsafe {
                f(
                    self.handle,
                    op,
                    ptr(&alpha),
                    mat.0,
                    vx.0,
                    ptr(&beta),
                    vy.0,
                    f32t,
                    alg,
                    buf,
                )
            })
        };
        call(true)?;
        user(&mut || call(false))
    }

    /// [`Cusparse::spmv_with`] for a caller whose vectors change between calls (a solver's p
    /// and q): the descriptors and buffer are made once for `x` and `y`'s shapes, and each call
    /// points them at the vectors it is given, which must have those lengths.
    pub fn spmv_rebound<R>(
        &self,
        a: &CuCsr<f32>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        alg: cs::cusparseSpMVAlg_t,
        user: impl FnOnce(
            &mut dyn FnMut(&DeviceBuffer<f32>, &mut DeviceBuffer<f32>) -> Result<(), String>,
        ) -> Result<R, String>,
    ) -> Result<R, String> {
        let (x_len, y_len) = (x.len(), y.len());
        spmv_lengths(a.rows, a.cols, x_len, y_len)?;
        let vx = DnVec::new(x)?;
        let vy = DnVec::new(y)?;
        self.spmv_on(a, &vx, &vy, alg, |call| {
            user(&mut |x, y| {
                if x.len() != x_len || y.len() != y_len {
                    return Err(format!(
                        "SpMV vectors of {} and {} elements, the descriptors were made for {x_len} and {y_len}",
                        x.len(),
                        y.len()
                    ));
                }
                // SAFETY: both descriptors are alive (dropped after `user` returns) and the
                // addresses are device buffers of the lengths they were created with (checked
                // above), borrowed for the call that follows.
                check("cusparseDnVecSetValues", unsafe {
                    cs::cusparseDnVecSetValues(vx.0, x.device_addr() as *mut c_void)
                })?;
                // SAFETY: as above.
                check("cusparseDnVecSetValues", unsafe {
                    cs::cusparseDnVecSetValues(vy.0, y.device_addr() as *mut c_void)
                })?;
                call()
            })
        })
    }

    /// C = A·B with B (`cols × k`) and C (`rows × k`) dense and row-major, as lb's SpMM reads
    /// them, computed in `f32` whatever `T` stores: the median time in ms. `c` holds the result
    /// afterwards.
    pub fn spmm<T: CuValue>(
        &self,
        a: &CuCsr<T>,
        b: &DeviceBuffer<T>,
        k: usize,
        c: &mut DeviceBuffer<T>,
        alg: cs::cusparseSpMMAlg_t,
        reps: usize,
    ) -> Result<f64, String> {
        let mat = a.descriptor()?;
        let mb = DnMat::new(b, a.cols, k)?;
        let mc = DnMat::new(c, a.rows, k)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let f32t = cs::cudaDataType::CUDA_R_32F;
        let mut size = 0usize;
        // SAFETY: the handle is alive while `self` is; `mat`, `mb` and `mc` are live descriptors
        // (dropped at the end of this function), `mb` and `mc` over buffers holding at least
        // `cols × k` and `rows × k` values (checked by `DnMat::new`); `alpha` and `beta` are host
        // scalars alive for the call (host pointer mode); `size` is a writable local.
        check("cusparseSpMM_bufferSize", unsafe {
            cs::cusparseSpMM_bufferSize(
                self.handle,
                op,
                op,
                ptr(&alpha),
                mat.0,
                mb.0,
                ptr(&beta),
                mc.0,
                f32t,
                alg,
                &mut size,
            )
        })?;
        let buffer = a.dev.zeros::<u8>(size).map_err(|e| e.to_string())?;
        let buf = buffer.device_addr() as *mut c_void;
        // `cusparseSpMM` or, once before the timed calls, the one-time analysis for repeated
        // calls on one sparsity pattern (what makes CSR_ALG3 fast: 1.7× on an R-MAT graph at
        // k = 32, H100); both take the same arguments.
        let call = |preprocess: bool| {
            let (what, f) = if preprocess {
                (
                    "cusparseSpMM_preprocess",
                    cs::cusparseSpMM_preprocess as SpmmFn,
                )
            } else {
                ("cusparseSpMM", cs::cusparseSpMM as SpmmFn)
            };
            // SAFETY: as for the buffer size above, and `buf` is `buffer`'s device address,
            // `size` bytes as asked, alive until this function returns; `time` synchronizes the
            // stream after the calls, and every buffer is on GPU 0's default stream.
            check(what, unsafe {
                f(
                    self.handle,
                    op,
                    op,
                    ptr(&alpha),
                    mat.0,
                    mb.0,
                    ptr(&beta),
                    mc.0,
                    f32t,
                    alg,
                    buf,
                )
            })
        };
        call(true)?;
        self.time(reps, || call(false))
    }
}

/// The signature `cusparseSpMV` and `cusparseSpMV_preprocess` share.
type SpmvFn = unsafe fn(
    cs::cusparseHandle_t,
    cs::cusparseOperation_t,
    *const c_void,
    cs::cusparseConstSpMatDescr_t,
    cs::cusparseConstDnVecDescr_t,
    *const c_void,
    cs::cusparseDnVecDescr_t,
    cs::cudaDataType,
    cs::cusparseSpMVAlg_t,
    *mut c_void,
) -> cs::cusparseStatus_t;

/// The signature `cusparseSpMM` and `cusparseSpMM_preprocess` share.
type SpmmFn = unsafe fn(
    cs::cusparseHandle_t,
    cs::cusparseOperation_t,
    cs::cusparseOperation_t,
    *const c_void,
    cs::cusparseConstSpMatDescr_t,
    cs::cusparseConstDnMatDescr_t,
    *const c_void,
    cs::cusparseDnMatDescr_t,
    cs::cudaDataType,
    cs::cusparseSpMMAlg_t,
    *mut c_void,
) -> cs::cusparseStatus_t;

impl Drop for Cusparse {
    fn drop(&mut self) {
        // Nothing to do about a failure while tearing down.
        // SAFETY: the handle was created in `new` and is destroyed once, here; no call uses it
        // afterwards.
        let _ = unsafe { cudarc::cusparse::result::destroy(self.handle) };
    }
}

fn ptr(v: &f32) -> *const c_void {
    (v as *const f32).cast()
}

/// A CSR matrix in cuSPARSE's favourable format.
pub struct CuCsr<T: CuValue> {
    dev: Device,
    offsets: Index,
    cols_idx: Index,
    values: DeviceBuffer<T>,
    rows: usize,
    cols: usize,
    nnz: usize,
}

enum Index {
    I32(DeviceBuffer<i32>),
    I64(DeviceBuffer<i64>),
}

impl Index {
    fn addr(&self) -> *mut c_void {
        match self {
            Index::I32(b) => b.device_addr() as *mut c_void,
            Index::I64(b) => b.device_addr() as *mut c_void,
        }
    }
}

impl<T: CuValue> CuCsr<T> {
    pub fn upload(dev: &Device, a: &Csr<T>) -> Result<CuCsr<T>, String> {
        let small = a.nnz() < (1 << 31) && a.num_cols < (1 << 31);
        let e = |e: lb::Error| e.to_string();
        let (offsets, cols_idx) = if small {
            let o: Vec<i32> = a.row_offsets.iter().map(|&v| v as i32).collect();
            let c: Vec<i32> = a.col_indices.iter().map(|&v| v as i32).collect();
            (
                Index::I32(dev.upload(&o).map_err(e)?),
                Index::I32(dev.upload(&c).map_err(e)?),
            )
        } else {
            let o: Vec<i64> = a.row_offsets.iter().map(|&v| v as i64).collect();
            let c: Vec<i64> = a.col_indices.iter().map(|&v| i64::from(v)).collect();
            (
                Index::I64(dev.upload(&o).map_err(e)?),
                Index::I64(dev.upload(&c).map_err(e)?),
            )
        };
        Ok(CuCsr {
            dev: dev.clone(),
            offsets,
            cols_idx,
            values: dev.upload(&a.values).map_err(e)?,
            rows: a.num_rows,
            cols: a.num_cols,
            nnz: a.nnz(),
        })
    }

    /// "i32" or "i64": the index type cuSPARSE was given.
    pub fn index_type(&self) -> &'static str {
        match self.offsets {
            Index::I32(_) => "i32",
            Index::I64(_) => "i64",
        }
    }

    fn descriptor(&self) -> Result<SpMat, String> {
        let it = match self.offsets {
            Index::I32(_) => cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            Index::I64(_) => cs::cusparseIndexType_t::CUSPARSE_INDEX_64I,
        };
        let mut d: cs::cusparseSpMatDescr_t = std::ptr::null_mut();
        // SAFETY: `d` is a writable local; the three addresses are `self`'s device buffers of
        // `rows + 1` offsets and `nnz` columns and values, of the index type passed for both
        // (`it` follows `offsets`, and `upload` makes both arrays of one type). The descriptor
        // only records them: it is used while `self` is borrowed, by the callers above.
        check("cusparseCreateCsr", unsafe {
            cs::cusparseCreateCsr(
                &mut d,
                self.rows as i64,
                self.cols as i64,
                self.nnz as i64,
                self.offsets.addr(),
                self.cols_idx.addr(),
                self.values.device_addr() as *mut c_void,
                it,
                it,
                cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                T::DATA_TYPE,
            )
        })?;
        Ok(SpMat(d))
    }
}

/// Descriptors destroyed on drop, so every error path releases them.
struct SpMat(cs::cusparseSpMatDescr_t);
struct DnVec(cs::cusparseDnVecDescr_t);
struct DnMat(cs::cusparseDnMatDescr_t);

impl DnVec {
    fn new(v: &DeviceBuffer<f32>) -> Result<DnVec, String> {
        let mut d: cs::cusparseDnVecDescr_t = std::ptr::null_mut();
        // SAFETY: `d` is a writable local; the address is `v`'s, of `v.len()` f32 values; the
        // descriptor is used only while the caller still borrows `v`.
        check("cusparseCreateDnVec", unsafe {
            cs::cusparseCreateDnVec(
                &mut d,
                v.len() as i64,
                v.device_addr() as *mut c_void,
                cs::cudaDataType::CUDA_R_32F,
            )
        })?;
        Ok(DnVec(d))
    }
}

impl DnMat {
    fn new<T: CuValue>(m: &DeviceBuffer<T>, rows: usize, k: usize) -> Result<DnMat, String> {
        if m.len() < rows * k {
            return Err(format!(
                "dense matrix of {} elements is smaller than {rows} × {k}",
                m.len()
            ));
        }
        let mut d: cs::cusparseDnMatDescr_t = std::ptr::null_mut();
        // SAFETY: `d` is a writable local; `m` holds at least `rows × k` values of `T`, the
        // type the descriptor is given (checked above), row-major with leading dimension `k`;
        // the descriptor is used only while the caller still borrows `m`.
        check("cusparseCreateDnMat", unsafe {
            cs::cusparseCreateDnMat(
                &mut d,
                rows as i64,
                k as i64,
                k as i64,
                m.device_addr() as *mut c_void,
                T::DATA_TYPE,
                cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
            )
        })?;
        Ok(DnMat(d))
    }
}

impl Drop for SpMat {
    fn drop(&mut self) {
        // SAFETY: the descriptor exists only if its create call succeeded, and is destroyed
        // once, here.
        let _ = unsafe { cs::cusparseDestroySpMat(self.0) };
    }
}
impl Drop for DnVec {
    fn drop(&mut self) {
        // SAFETY: as for `SpMat`.
        let _ = unsafe { cs::cusparseDestroyDnVec(self.0) };
    }
}
impl Drop for DnMat {
    fn drop(&mut self) {
        // SAFETY: as for `SpMat`.
        let _ = unsafe { cs::cusparseDestroyDnMat(self.0) };
    }
}

/// GPU 0's energy counter and identity through NVML.
pub struct Power {
    nvml: nvml_wrapper::Nvml,
}

impl Power {
    /// An error (never a panic) when libnvidia-ml is missing.
    pub fn new() -> Result<Power, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML: {e}"))?;
        nvml.device_by_index(0)
            .map_err(|e| format!("NVML device 0: {e}"))?;
        Ok(Power { nvml })
    }

    pub fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    /// Millijoules since the driver loaded.
    pub fn energy_mj(&self) -> Result<u64, String> {
        self.nvml
            .device_by_index(0)
            .and_then(|d| d.total_energy_consumption())
            .map_err(|e| format!("NVML energy: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::spmv_lengths;

    #[test]
    fn spmv_vectors_must_match_the_matrix() {
        assert_eq!(spmv_lengths(3, 5, 5, 3), Ok(()));
        assert_eq!(spmv_lengths(0, 0, 0, 0), Ok(()));
        for (x, y) in [(4, 3), (5, 2), (6, 3), (5, 4), (3, 5)] {
            let e = spmv_lengths(3, 5, x, y).unwrap_err();
            assert!(
                e.contains("x of 5 and y of 3") && e.contains(&format!("got {x} and {y}")),
                "{e}"
            );
        }
    }
}
