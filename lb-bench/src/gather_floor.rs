//! The gather floor: the time the GPU needs for the memory traffic that any CSR SpMV or SpMM
//! walking the nonzeros in storage order cannot avoid, measured on the matrix itself in the same
//! run as the schedules and cuSPARSE.
//!
//! The copy-bandwidth floor counts every byte once; on a matrix whose columns are scattered the
//! gathers of `x` (or of B's rows) fetch a 32-byte sector for each 4-byte element, and they, not
//! DRAM, bound every CSR kernel (docs/benchmarks.md: both lb and cuSPARSE at 0.24–0.29 of the
//! copy floor on the random-column members, with the L2 at 96% of its throughput). This kernel
//! does that work and nothing else: consecutive threads take consecutive nonzeros (coalesced
//! column and value loads, streamed like lb's), gather the dense operand at each column and
//! accumulate into registers with no row boundaries; then, as a separate coalesced pass, they
//! read each row's offset and write the row's outputs, the traffic of the rows themselves. What
//! it takes is the price of the matrix's column pattern and size on this GPU with perfect
//! balance and no reduction; a schedule at `gather = 1.0` pays nothing for load balancing.
//!
//! Each thread stores its partial sums, whose total must match the CPU reference's (the sum of
//! every output), and each output holds its row's offset, checked exactly: a floor that skipped
//! work fails like a schedule.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::CudaStream;
use lb::{Csr, Device, DeviceBuffer};

/// Threads per block.
const BLOCK: u32 = 256;

/// The lane counts the SpMM kernel takes (`k / 4` threads side by side must tile a block).
const LANES_RULE: &str = "it needs k a multiple of 4 with k / 4 dividing 256 (the block)";

/// The kernels' PTX before [`ptx`] fills in its generated parts (`@…@`: entries, accumulators,
/// the nonzero loops and the row pass's head): `lb_gather_spmv` (four
/// nonzeros in flight per thread, then one at a time) and `lb_gather_spmm4` (a thread owns four
/// adjacent lanes of a nonzero, read with one `ld.v4`; two nonzeros in flight, then one; `k / 4`
/// threads side by side per nonzero). Both end with the row pass: each row's offset read once
/// and written to the row's outputs (converted to f32), so that the check can see every output
/// written.
const TEMPLATE: &str = r#"
.version 7.0
.target sm_75
.address_size 64

@SPMV_HEAD@
	mov.u64 %rd10, %rd8;
	shl.b64 %rd11, %rd9, 2;
	mul.lo.u64 %rd12, %rd9, 3;
@ZERO4@
@SPMV_LOOPS@
	add.f32 %f1, %f1, %f2;
	add.f32 %f3, %f3, %f4;
	add.f32 %f1, %f1, %f3;
	shl.b64 %rd31, %rd8, 2;
	add.u64 %rd32, %rd4, %rd31;
	st.global.f32 [%rd32], %f1;
@SPMV_ROWS@
	add.u64 %rd38, %rd39, %rd36;
	st.global.f32 [%rd38], %f13;
	add.u64 %rd33, %rd33, %rd9;
	bra L3;
L4:
	ret;
}

@SPMM_HEAD@
	div.u64 %rd11, %rd10, %rd6;
	div.u64 %rd12, %rd9, %rd6;
	mul.lo.u64 %rd13, %rd12, %rd6;
	sub.u64 %rd14, %rd9, %rd13;
	mov.u64 %rd33, %rd12;
	shl.b64 %rd15, %rd14, 4;
	add.u64 %rd16, %rd3, %rd15;
	shl.b64 %rd17, %rd6, 4;
	shl.b64 %rd18, %rd11, 2;
@ZERO8@
@SPMM_LOOPS@
	add.f32 %f1, %f1, %f5;
	add.f32 %f2, %f2, %f6;
	add.f32 %f3, %f3, %f7;
	add.f32 %f4, %f4, %f8;
	shl.b64 %rd31, %rd9, 4;
	add.u64 %rd32, %rd4, %rd31;
	st.global.v4.f32 [%rd32], {%f1, %f2, %f3, %f4};
@SPMM_ROWS@
	mul.lo.u64 %rd40, %rd33, %rd17;
	add.u64 %rd38, %rd39, %rd40;
	add.u64 %rd38, %rd38, %rd15;
	st.global.v4.f32 [%rd38], {%f19, %f19, %f19, %f19};
	add.u64 %rd33, %rd33, %rd11;
	bra L3;
L4:
	ret;
}
"#;

/// The kernels' PTX.
pub fn ptx() -> String {
    let spmv = ["cols", "vals", "x", "out", "n", "offsets", "rows", "y"];
    let spmm = [
        "cols", "vals", "b", "out", "n", "offsets", "rows", "y", "groups",
    ];
    TEMPLATE
        .replace(
            "@SPMV_HEAD@",
            &head("lb_gather_spmv", &spmv, (Some(32), 16)),
        )
        .replace("@SPMM_HEAD@", &head("lb_gather_spmm4", &spmm, (None, 24)))
        .replace("@SPMV_ROWS@", &rows(Some("%rd8"), 13))
        .replace("@SPMM_ROWS@", &rows(None, 19))
        .replace("@ZERO4@", &zeros(4))
        .replace("@ZERO8@", &zeros(8))
        .replace(
            "@SPMV_LOOPS@",
            &trips(
                ("%rd10", "%rd13", "%rd12", "%rd9"),
                spmv_trip(4),
                spmv_trip(1),
            ),
        )
        .replace(
            "@SPMM_LOOPS@",
            &trips(
                ("%rd12", "%rd19", "%rd11", "%rd11"),
                spmm_trip(2),
                spmm_trip(1),
            ),
        )
}

/// A kernel's entry up to its thread index: the `.u64` parameters `params`, of which every one
/// but the row pass's (`offsets`, `rows`, `y`, loaded after the nonzeros so that their
/// registers are free during them) is loaded into `%rd1..`; then the thread's global index and
/// the grid's thread count in the next two 64-bit registers after two for their products.
fn head(entry: &str, params: &[&str], (max_registers, floats): (Option<u32>, u32)) -> String {
    let mut out = vec![format!(".visible .entry {entry}(")];
    let declared: Vec<String> = params
        .iter()
        .map(|p| format!("\t.param .u64 {p}"))
        .collect();
    out.push(declared.join(",\n"));
    out.push(")".into());
    out.extend(max_registers.map(|n| format!(".maxnreg {n}")));
    out.push("{".into());
    out.push("\t.reg .pred %p<3>;".into());
    out.push("\t.reg .b32 %r<12>;".into());
    out.push(format!("\t.reg .f32 %f<{floats}>;"));
    out.push("\t.reg .b64 %rd<48>;".into());
    let early = params
        .iter()
        .filter(|p| !matches!(**p, "offsets" | "rows" | "y"));
    let mut rd = 0;
    for p in early {
        rd += 1;
        out.push(format!("\tld.param.u64 %rd{rd}, [{p}];"));
    }
    let (a, b, index, threads) = (rd + 1, rd + 2, rd + 3, rd + 4);
    out.extend([
        "\tmov.u32 %r1, %ctaid.x;".to_string(),
        "\tmov.u32 %r2, %ntid.x;".into(),
        "\tmov.u32 %r3, %tid.x;".into(),
        "\tmov.u32 %r4, %nctaid.x;".into(),
        format!("\tmul.wide.u32 %rd{a}, %r1, %r2;"),
        format!("\tcvt.u64.u32 %rd{b}, %r3;"),
        format!("\tadd.u64 %rd{index}, %rd{a}, %rd{b};"),
        format!("\tmul.wide.u32 %rd{threads}, %r4, %r2;"),
    ]);
    out.join("\n")
}

/// The row pass up to the row's offset as an f32 in `%f{value}`: the pass's parameters, the
/// first row `%rd33` (set here from `first`, or earlier), and the loop head over rows
/// `%rd33 < rows`, reading `offsets[%rd33]` (the row's byte offset `%rd36` stays for the store).
fn rows(first: Option<&str>, value: u32) -> String {
    let mut out = vec![
        "\tld.param.u64 %rd34, [offsets];".to_string(),
        "\tld.param.u64 %rd35, [rows];".into(),
        "\tld.param.u64 %rd39, [y];".into(),
    ];
    out.extend(first.map(|f| format!("\tmov.u64 %rd33, {f};")));
    out.extend([
        "L3:".to_string(),
        "\tsetp.ge.u64 %p1, %rd33, %rd35;".into(),
        "\t@%p1 bra L4;".into(),
        "\tshl.b64 %rd36, %rd33, 2;".into(),
        "\tadd.u64 %rd37, %rd34, %rd36;".into(),
        "\tld.global.cs.nc.u32 %r9, [%rd37];".into(),
        format!("\tcvt.rn.f32.u32 %f{value}, %r9;"),
    ]);
    out.join("\n")
}

/// The strided loops over the nonzeros `e < n` (`n` in `%rd5`): trips of `many` while the
/// trip's last nonzero, `ahead = e + span`, is in range, then `one` at a time; `e` steps by
/// `stride` nonzeros per nonzero of a trip. Ends at label `L2`.
fn trips((e, ahead, span, stride): (&str, &str, &str, &str), many: String, one: String) -> String {
    [
        "L0:".to_string(),
        format!("\tadd.u64 {ahead}, {e}, {span};"),
        format!("\tsetp.ge.u64 %p1, {ahead}, %rd5;"),
        "\t@%p1 bra L1;".into(),
        many,
        format!("\tadd.u64 {e}, {ahead}, {stride};"),
        "\tbra L0;".into(),
        "L1:".into(),
        format!("\tsetp.ge.u64 %p2, {e}, %rd5;"),
        "\t@%p2 bra L2;".into(),
        one,
        format!("\tadd.u64 {e}, {e}, {stride};"),
        "\tbra L1;".into(),
        "L2:".into(),
    ]
    .join("\n")
}

/// `%f1..=%fn` set to zero: the accumulators.
fn zeros(n: u32) -> String {
    (1..=n)
        .map(|f| format!("\tmov.f32 %f{f}, 0f00000000;"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One trip of `lb_gather_spmv` over `n` (1 or 4) nonzeros `%rd10 + j · stride` (stride bytes
/// in `%rd11`): their columns and values, then their gathers of `x` (`%rd3`), then the products
/// into accumulator `%f(1 + j)`; loads first, so the trip has all its gathers in flight.
fn spmv_trip(n: u32) -> String {
    let cols = [15, 17, 18, 19];
    let vals = [16, 20, 21, 22];
    let mut out = vec![
        "shl.b64 %rd14, %rd10, 2;".to_string(),
        "add.u64 %rd15, %rd1, %rd14;".into(),
        "add.u64 %rd16, %rd2, %rd14;".into(),
    ];
    let n = n as usize;
    for at in [cols, vals] {
        for pair in at[..n].windows(2) {
            out.push(format!("add.u64 %rd{}, %rd{}, %rd11;", pair[1], pair[0]));
        }
    }
    for (j, col) in cols[..n].iter().enumerate() {
        out.push(format!("ld.global.cs.nc.u32 %r{}, [%rd{col}];", 5 + j));
    }
    for (j, val) in vals[..n].iter().enumerate() {
        out.push(format!("ld.global.cs.nc.f32 %f{}, [%rd{val}];", 5 + j));
    }
    for j in 0..n {
        let (offset, addr) = (23 + 2 * j, 24 + 2 * j);
        out.push(format!("mul.wide.u32 %rd{offset}, %r{}, 4;", 5 + j));
        out.push(format!("add.u64 %rd{addr}, %rd3, %rd{offset};"));
        out.push(format!("ld.global.nc.f32 %f{}, [%rd{addr}];", 9 + j));
    }
    for j in 0..n {
        let acc = 1 + j;
        out.push(format!(
            "fma.rn.f32 %f{acc}, %f{}, %f{}, %f{acc};",
            5 + j,
            9 + j
        ));
    }
    indent(out)
}

/// One trip of `lb_gather_spmm4` over `n` (1 or 2) nonzeros `%rd12 + j · stride` (stride bytes
/// in `%rd18`): their columns and values, then for each the `ld.v4` of its four lanes of B (the
/// thread's lanes at `%rd16`, a row every `%rd17` bytes), then the products into accumulators
/// `%f(1 + 4j)..=%f(4 + 4j)`.
fn spmm_trip(n: u32) -> String {
    let mut out = vec![
        "shl.b64 %rd20, %rd12, 2;".to_string(),
        "add.u64 %rd21, %rd1, %rd20;".into(),
        "add.u64 %rd22, %rd2, %rd20;".into(),
    ];
    for j in 1..n as usize {
        out.push(format!(
            "add.u64 %rd{}, %rd{}, %rd18;",
            21 + 2 * j,
            19 + 2 * j
        ));
        out.push(format!(
            "add.u64 %rd{}, %rd{}, %rd18;",
            22 + 2 * j,
            20 + 2 * j
        ));
    }
    for j in 0..n as usize {
        out.push(format!(
            "ld.global.nc.u32 %r{}, [%rd{}];",
            5 + j,
            21 + 2 * j
        ));
    }
    for j in 0..n as usize {
        out.push(format!(
            "ld.global.nc.f32 %f{}, [%rd{}];",
            9 + j,
            22 + 2 * j
        ));
    }
    for j in 0..n as usize {
        let (col, offset, addr, lane) = (25 + 3 * j, 26 + 3 * j, 27 + 3 * j, 11 + 4 * j);
        out.push(format!("cvt.u64.u32 %rd{col}, %r{};", 5 + j));
        out.push(format!("mul.lo.u64 %rd{offset}, %rd{col}, %rd17;"));
        out.push(format!("add.u64 %rd{addr}, %rd16, %rd{offset};"));
        let lanes: Vec<String> = (lane..lane + 4).map(|f| format!("%f{f}")).collect();
        out.push(format!(
            "ld.global.nc.v4.f32 {{{}}}, [%rd{addr}];",
            lanes.join(", ")
        ));
    }
    for j in 0..n as usize {
        for l in 0..4 {
            let (acc, lane) = (1 + 4 * j + l, 11 + 4 * j + l);
            out.push(format!(
                "fma.rn.f32 %f{acc}, %f{}, %f{lane}, %f{acc};",
                9 + j
            ));
        }
    }
    indent(out)
}

/// PTX lines, each indented by a tab, joined.
fn indent(lines: Vec<String>) -> String {
    lines
        .iter()
        .map(|l| format!("\t{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How a gather-floor launch is shaped for `nnz` nonzeros and `k` lanes (`None`: SpMV).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// `lb_gather_spmv` or `lb_gather_spmm4`.
    pub entry: &'static str,
    /// Threads side by side per nonzero: 1, or `k / 4`.
    pub groups: u64,
    pub blocks: u32,
    /// f32 partial sums the launch stores: one per thread, four with lanes.
    pub outputs: usize,
    /// Kernel parameters: the SpMM kernel also takes `groups`.
    pub params: usize,
    /// Outputs of the row pass: `rows × k`.
    pub rows_out: usize,
}

/// The launch shape, or why there is no floor for these lanes: SpMM needs `k` a multiple of 4
/// whose `k / 4` threads tile a block exactly (every thread of a nonzero in one block, so a
/// block's positions all start a group). `resident` caps the grid at the blocks that fit on the
/// GPU at once: the kernels stride over the rest.
pub fn shape(
    (rows, nnz): (usize, usize),
    k: Option<usize>,
    resident: u32,
) -> Result<Shape, String> {
    let (entry, groups) = match k {
        None => ("lb_gather_spmv", 1u64),
        Some(k) if k % 4 == 0 && k > 0 && u64::from(BLOCK) % (k as u64 / 4) == 0 => {
            ("lb_gather_spmm4", k as u64 / 4)
        }
        Some(k) => return Err(format!("no gather floor for k = {k}: {LANES_RULE}")),
    };
    let per_block = u64::from(BLOCK) / groups;
    let wanted = (nnz.max(rows) as u64).div_ceil(per_block).max(1);
    let blocks = wanted.min(u64::from(resident.max(1))) as u32;
    let threads = blocks as usize * BLOCK as usize;
    let (outputs, params) = match k {
        None => (threads, 8),
        Some(_) => (threads * 4, 9),
    };
    Ok(Shape {
        entry,
        groups,
        blocks,
        outputs,
        params,
        rows_out: rows * k.unwrap_or(1),
    })
}

/// The total the partial sums must reach: every output of the op summed, in f64, and the sum of
/// the terms' magnitudes, the scale of their rounding.
pub fn expected(want: &[f32], magnitude: &[f32]) -> (f64, f64) {
    let sum = want.iter().map(|&v| f64::from(v)).sum();
    let scale = magnitude.iter().map(|&v| f64::from(v)).sum();
    (sum, scale)
}

/// The loaded module and the stream its launches go on.
pub struct GatherFloor {
    module: sys::CUmodule,
    stream: Arc<CudaStream>,
    /// Streaming multiprocessors: the grids cover one resident wave of each kernel.
    sms: u32,
}

fn check(what: &str, r: sys::CUresult) -> Result<(), String> {
    r.result().map_err(|e| format!("{what}: {e:?}"))
}

impl GatherFloor {
    /// Loads the kernels on `dev`'s stream; `None` on the simulator.
    pub fn new(dev: &Device) -> Result<Option<GatherFloor>, String> {
        let Some(stream) = dev.stream().cudarc().cloned() else {
            return Ok(None);
        };
        let ctx = stream.context();
        ctx.bind_to_thread()
            .map_err(|e| format!("binding the context: {e:?}"))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| format!("reading the SM count: {e:?}"))?;
        let text = CString::new(ptx()).map_err(|e| e.to_string())?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `text` is a NUL-terminated PTX module that outlives the call; the context is
        // bound to this thread.
        check("loading the gather-floor kernels", unsafe {
            sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
        })?;
        Ok(Some(GatherFloor {
            module,
            stream,
            sms: u32::try_from(sms).unwrap_or(1).max(1),
        }))
    }

    /// The floor's median time (ms over `reps` launches, CUDA events around each) for `a` (its
    /// columns, values and 32-bit row offsets uploaded here) with the dense operand `dense` and
    /// `k` lanes, and the total of its partial sums.
    pub fn time(
        &self,
        dev: &Device,
        a: &Csr<f32>,
        dense: &DeviceBuffer<f32>,
        k: Option<usize>,
        reps: usize,
    ) -> Result<(f64, f64), String> {
        let e = |e: lb::Error| e.to_string();
        let entry = shape((a.num_rows, a.nnz()), k, 1)?.entry;
        let name = CString::new(entry).map_err(|e| e.to_string())?;
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `module` was loaded in `new` and lives as long as `self`; `name` is
        // NUL-terminated.
        check("finding the gather-floor kernel", unsafe {
            sys::cuModuleGetFunction(&mut function, self.module, name.as_ptr())
        })?;
        let mut per_sm = 0i32;
        // SAFETY: `function` was found above; `per_sm` is a writable local.
        check("the gather floor's occupancy", unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, function, BLOCK as i32, 0)
        })?;
        let resident = self.sms * u32::try_from(per_sm).unwrap_or(1).max(1);
        let s = shape((a.num_rows, a.nnz()), k, resident)?;
        if dense.len() != a.num_cols * k.unwrap_or(1) {
            return Err(format!(
                "the dense operand has {} elements where the matrix needs {}",
                dense.len(),
                a.num_cols * k.unwrap_or(1)
            ));
        }
        if a.values.len() != a.nnz() || a.row_offsets.len() != a.num_rows + 1 {
            return Err(format!(
                "the matrix has {} values and {} offsets for {} nonzeros and {} rows",
                a.values.len(),
                a.row_offsets.len(),
                a.nnz(),
                a.num_rows
            ));
        }
        if a.col_indices.iter().any(|&c| c as usize >= a.num_cols) {
            return Err("a column index is not below the column count".into());
        }
        let offsets = narrow_offsets(a)?;
        let cols: DeviceBuffer<u32> = dev.upload(&a.col_indices).map_err(e)?;
        let vals: DeviceBuffer<f32> = dev.upload(&a.values).map_err(e)?;
        let offs: DeviceBuffer<u32> = dev.upload(&offsets).map_err(e)?;
        let out: DeviceBuffer<f32> = dev.zeros(s.outputs).map_err(e)?;
        let y: DeviceBuffer<f32> = dev.zeros(s.rows_out.max(1)).map_err(e)?;
        let mut values = [
            cols.device_addr(),
            vals.device_addr(),
            dense.device_addr(),
            out.device_addr(),
            a.nnz() as u64,
            offs.device_addr(),
            a.num_rows as u64,
            y.device_addr(),
            s.groups,
        ];
        let mut ptrs: Vec<*mut c_void> = values[..s.params]
            .iter_mut()
            .map(|v| (v as *mut u64).cast::<c_void>())
            .collect();
        let launch = |ptrs: &mut Vec<*mut c_void>| {
            // SAFETY: the kernel takes `s.params` u64 parameters and each pointer in `ptrs`
            // points at one that lives until the launch returns (the driver copies them). The
            // kernel reads `nnz` u32 columns and f32 values and `rows` u32 offsets (the uploads
            // above, whose lengths were checked against `nnz` and `rows + 1`), the dense operand at `column × k + lane` for lanes below `k` (every column
            // was checked below `num_cols`, and `dense` holds `num_cols × k` elements); each
            // thread writes its own partial sums inside `out` (sized by `shape` for this grid)
            // and the outputs of its rows inside `y` (`rows × k`).
            check("launching the gather floor", unsafe {
                sys::cuLaunchKernel(
                    function,
                    s.blocks,
                    1,
                    1,
                    BLOCK,
                    1,
                    1,
                    0,
                    self.stream.cu_stream(),
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            })
        };
        let ms =
            crate::baseline::time_on(&self.stream, "the gather floor", reps, || launch(&mut ptrs))?;
        let lanes = k.unwrap_or(1);
        let rows_out = y.download().map_err(e)?;
        if let Some(bad) = (0..s.rows_out).find(|&i| rows_out[i] != offsets[i / lanes] as f32) {
            return Err(format!(
                "the row pass wrote {} at output {bad}, not its row's offset",
                rows_out[bad]
            ));
        }
        let partials = out.download().map_err(e)?;
        let total = partials.iter().map(|&v| f64::from(v)).sum();
        Ok((ms, total))
    }
}

/// The row offsets as u32, the narrowest any CSR kernel reads; an error past 2^32 nonzeros.
fn narrow_offsets(a: &Csr<f32>) -> Result<Vec<u32>, String> {
    a.row_offsets
        .iter()
        .map(|&o| u32::try_from(o))
        .collect::<Result<_, _>>()
        .map_err(|_| "no gather floor for 2^32 nonzeros or more (32-bit offsets)".to_string())
}

impl Drop for GatherFloor {
    fn drop(&mut self) {
        // Every launch was synchronized by `time_on`; nothing refers to the module after this.
        let _ = self.stream.synchronize();
        // SAFETY: no launch of the module's kernels is pending (synchronized just above), and
        // the module is unloaded once, here.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_ptx::sim::{self, LaunchConfig, Memory};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn upload(mem: &mut Memory, bytes: &[u8]) -> u64 {
        let addr = mem.alloc(bytes.len().max(4) as u64).expect("alloc");
        mem.write(addr, bytes).expect("write");
        addr
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Runs the floor's kernel on the simulator over `rows` rows of random lengths summing to
    /// `nnz`, checks that every output holds its row's offset, and returns the total of the
    /// partial sums with the f64 sum of every output of y = A·x (or C = A·B) and its magnitude.
    fn simulate(
        (rows, nnz): (usize, usize),
        cols: usize,
        k: Option<usize>,
        blocks: u32,
        seed: u64,
    ) -> (f64, f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let lanes = k.unwrap_or(1);
        let mut cuts: Vec<u32> = (0..rows.saturating_sub(1))
            .map(|_| rng.random_range(0..=nnz as u32))
            .collect();
        cuts.sort_unstable();
        let offsets: Vec<u32> = std::iter::once(0)
            .chain(cuts)
            .chain(std::iter::once(nnz as u32))
            .take(rows + 1)
            .collect();
        let col: Vec<u32> = (0..nnz).map(|_| rng.random_range(0..cols as u32)).collect();
        let val: Vec<f32> = (0..nnz).map(|_| rng.random_range(-1.0..1.0)).collect();
        let dense: Vec<f32> = (0..cols * lanes)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let (mut want, mut scale) = (0.0f64, 0.0f64);
        for (&c, &v) in col.iter().zip(&val) {
            for l in 0..lanes {
                let t = f64::from(v) * f64::from(dense[c as usize * lanes + l]);
                want += t;
                scale += t.abs();
            }
        }
        let s = shape((rows, nnz), k, blocks).expect("a shape");
        let module = sim::parse(&ptx()).expect("the floor's PTX parses");
        let mut mem = Memory::new();
        let u32s = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|c| c.to_le_bytes()).collect() };
        let args = [
            upload(&mut mem, &u32s(&col)),
            upload(&mut mem, &f32s(&val)),
            upload(&mut mem, &f32s(&dense)),
            upload(&mut mem, &vec![0u8; s.outputs * 4]),
            nnz as u64,
            upload(&mut mem, &u32s(&offsets)),
            rows as u64,
            upload(&mut mem, &vec![0u8; s.rows_out * 4]),
            s.groups,
        ];
        let cfg = LaunchConfig {
            grid: s.blocks,
            block: BLOCK,
            dynamic_shared: 0,
        };
        sim::launch(&module, s.entry, cfg, &args[..s.params], &mut mem).expect("the floor runs");
        let y = mem.read(args[7], s.rows_out as u64 * 4).expect("read");
        for (i, b) in y.chunks(4).enumerate() {
            let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            assert_eq!(
                v,
                offsets[i / lanes] as f32,
                "output {i} of {rows} rows, k {k:?}"
            );
        }
        let out = mem.read(args[3], s.outputs as u64 * 4).expect("read");
        let total = out
            .chunks(4)
            .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .sum();
        (total, want, scale)
    }

    /// Every nonzero (and lane) is gathered exactly once and every row's outputs written, whatever
    /// the grid: zero, one and a few nonzeros, counts that leave a partial trip, more rows than
    /// nonzeros (empty rows) and the reverse, grids smaller than the work (the stride loops) and
    /// larger (idle threads).
    #[test]
    fn the_floor_reads_every_nonzero_once() {
        let cases = [
            ((3, 0), 5, None, 1),
            ((1, 1), 5, None, 1),
            ((2, 3), 7, None, 2),
            ((700, 1000), 64, None, 1),
            ((5000, 4099), 300, None, 3),
            ((4, 0), 5, Some(8), 1),
            ((1, 1), 5, Some(8), 1),
            ((90, 777), 40, Some(32), 2),
            ((600, 513), 17, Some(128), 1),
            ((1, 300), 9, Some(4), 4),
        ];
        for (i, &(size, cols, k, blocks)) in cases.iter().enumerate() {
            let (total, want, scale) = simulate(size, cols, k, blocks, 40 + i as u64);
            assert!(
                (total - want).abs() <= 1e-5 * scale.max(1.0),
                "{size:?}, k {k:?}, {blocks} blocks: {total} against {want}"
            );
        }
    }

    #[test]
    fn lanes_without_a_vector_shape_have_no_floor() {
        assert!(shape((2, 10), Some(3), 8).is_err());
        assert!(shape((2, 10), Some(12), 8).is_err());
        assert!(shape((2, 10), Some(0), 8).is_err());
        let s = shape((7, 10_000), Some(32), 4).expect("k = 32 has a floor");
        assert_eq!((s.groups, s.blocks, s.outputs), (8, 4, 4 * 256 * 4));
        assert_eq!((s.params, s.rows_out), (9, 7 * 32));
        let s = shape((300, 10), None, 100).expect("SpMV has a floor");
        assert_eq!((s.groups, s.blocks, s.outputs, s.params), (1, 2, 512, 8));
    }

    #[test]
    fn the_expected_total_sums_every_output() {
        let (sum, scale) = expected(&[1.0, -2.5, 4.0], &[1.0, 3.0, 4.5]);
        assert_eq!((sum, scale), (2.5, 8.5));
    }
}
