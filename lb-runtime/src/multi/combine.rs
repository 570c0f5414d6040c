//! The kernel that joins two partial results of the same rows, `dst[i] = dst[i] ⊕ src[i]`: a
//! part split by columns ([`SplitOptions::local_columns_first`](super::SplitOptions)) computes
//! its rows' products over its device's own columns and over the others' as two launches, and
//! this adds (or takes the minimum or maximum of) the two.
//!
//! One module holds an entry per element type and reduction (`lb_combine_f32_add`, …); a
//! thread handles one element per trip of a grid-stride loop. 16-bit floats have none: a split
//! of those leaves its parts whole.

use std::fmt::Write;
use std::sync::LazyLock;

use lb_ptx::body::{Reduce, Ty};

use crate::buffer::{DeviceBuffer, Element};
use crate::builtin;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// The module, every entry `(dst, src, n)`.
pub(crate) static PTX: LazyLock<String> = LazyLock::new(ptx);

/// The element types the module combines: the name in an entry, the PTX type, and whether its
/// values live in 64-bit registers.
const TYPES: [(Ty, &str, &str, bool); 6] = [
    (Ty::F32, "f32", "f32", false),
    (Ty::F64, "f64", "f64", true),
    (Ty::I32, "s32", "s32", false),
    (Ty::U32, "u32", "u32", false),
    (Ty::I64, "s64", "s64", true),
    (Ty::U64, "u64", "u64", true),
];

const OPS: [(Reduce, &str); 3] = [
    (Reduce::Sum, "add"),
    (Reduce::Min, "min"),
    (Reduce::Max, "max"),
];

/// The entry that combines elements of `ty` with `op`, `None` for a type the module lacks.
pub(crate) fn entry(ty: Option<Ty>, op: Reduce) -> Option<String> {
    let (_, name, _, _) = TYPES.iter().find(|t| Some(t.0) == ty)?;
    let (_, verb) = OPS.iter().find(|o| o.0 == op)?;
    Some(format!("lb_combine_{name}_{verb}"))
}

/// Enqueues `dst[i] = dst[i] op src[i]` for every element of `dst` on `stream` (run at once on
/// the simulator). Both buffers are on the stream's device and equally long, and `U` has an
/// entry ([`entry`]); the caller checked.
pub(crate) fn combine_into<U: Element>(
    stream: &Stream,
    op: Reduce,
    dst: &mut DeviceBuffer<U>,
    src: &DeviceBuffer<U>,
) -> Result<()> {
    let Some(name) = entry(U::TY, op) else {
        return Err(Error::Shape(
            "partial results of 16-bit floats are not combined on the device".into(),
        ));
    };
    if dst.len() != src.len() || !dst.device().same(stream.device()) {
        return Err(Error::Shape(format!(
            "combining {} partial results into {} on another device or of another length",
            src.len(),
            dst.len()
        )));
    }
    let n = dst.len();
    if n == 0 {
        return Ok(());
    }
    let mut params = [dst.device_addr(), src.device_addr(), n as u64];
    // Both buffers hold `n` elements of the entry's type on this device (checked above); the
    // kernel reads and writes `n` elements of each and takes the three parameters given. The
    // caller orders the launch after the kernels that wrote both and before what reads `dst`
    // next (the same stream).
    builtin::launch(stream, &PTX, &name, n, &mut params)?;
    if stream.cudarc().is_some() {
        stream.order_device_after()?;
    }
    Ok(())
}

/// The module's text. Registers: `%rd0` `dst`, `%rd1` `src`, `%rd2` `n`, `%rd3` the element,
/// `%rd4` scratch, `%rd5` the grid's stride, `%rd6`–`%rd8` addresses, `%rd9`/`%rd10` 64-bit
/// values; `%r1`–`%r4` the grid's coordinates, `%r5`/`%r6` 32-bit values.
fn ptx() -> String {
    let mut out = String::from(".version 7.8\n.target sm_75\n.address_size 64\n");
    for (_, name, ty, wide) in TYPES {
        let size_log2 = if wide { 3 } else { 2 };
        let (a, b) = if wide {
            ("%rd9", "%rd10")
        } else {
            ("%r5", "%r6")
        };
        for (_, verb) in OPS {
            let _ = write!(
                out,
                "\n.visible .entry lb_combine_{name}_{verb}(\n    .param .u64 p_dst,\n    \
                 .param .u64 p_src,\n    .param .u64 p_n\n)\n{{\n    .reg .pred %p<2>;\n    \
                 .reg .b32 %r<7>;\n    .reg .b64 %rd<11>;\n    ld.param.u64 %rd0, [p_dst];\n    \
                 ld.param.u64 %rd1, [p_src];\n    ld.param.u64 %rd2, [p_n];\n    \
                 mov.u32 %r1, %ctaid.x;\n    mov.u32 %r2, %ntid.x;\n    mov.u32 %r3, %tid.x;\n    \
                 mov.u32 %r4, %nctaid.x;\n    mul.wide.u32 %rd3, %r1, %r2;\n    \
                 cvt.u64.u32 %rd4, %r3;\n    add.s64 %rd3, %rd3, %rd4;\n    \
                 mul.wide.u32 %rd5, %r4, %r2;\nL0:\n    setp.ge.u64 %p0, %rd3, %rd2;\n    \
                 @%p0 bra L1;\n    shl.b64 %rd6, %rd3, {size_log2};\n    \
                 add.s64 %rd7, %rd0, %rd6;\n    add.s64 %rd8, %rd1, %rd6;\n    \
                 ld.global.{ty} {a}, [%rd7];\n    ld.global.nc.{ty} {b}, [%rd8];\n    \
                 {verb}.{ty} {a}, {a}, {b};\n    st.global.{ty} [%rd7], {a};\n    \
                 add.s64 %rd3, %rd3, %rd5;\n    bra L0;\nL1:\n    ret;\n}}\n"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_ptx::sim::{self, LaunchConfig, Memory};
    use rand::{Rng, SeedableRng};

    /// Every entry on fresh random elements (lengths from 0 to past a few blocks, on grids
    /// smaller than the elements so that threads stride), on the simulator, against the host's
    /// arithmetic; the element past the end is untouched.
    #[test]
    fn every_entry_combines_every_element() {
        let module = sim::parse(&PTX).expect("the combine kernel parses");
        let seed = rand::random::<u64>();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for (ty, _, _, wide) in TYPES {
            for (op, _) in OPS {
                let name = entry(Some(ty), op).expect("an entry");
                for n in [0usize, 1, 7, 256, 1000, 3 * 256 + 5] {
                    let what = format!("{name}, {n} elements, seed {seed}");
                    let size = if wide { 8 } else { 4 };
                    let draw = |rng: &mut rand::rngs::StdRng| -> u64 {
                        match ty {
                            Ty::F32 => u64::from(rng.random_range(-1e3f32..1e3).to_bits()),
                            Ty::F64 => rng.random_range(-1e3f64..1e3).to_bits(),
                            Ty::I32 | Ty::U32 => u64::from(rng.random::<u32>()),
                            _ => rng.random::<u64>(),
                        }
                    };
                    let a: Vec<u64> = (0..=n).map(|_| draw(&mut rng)).collect();
                    let b: Vec<u64> = (0..n).map(|_| draw(&mut rng)).collect();
                    let bytes = |v: &[u64]| -> Vec<u8> {
                        v.iter()
                            .flat_map(|x| x.to_le_bytes()[..size].to_vec())
                            .collect()
                    };
                    let mut mem = Memory::new();
                    let dst = mem.alloc(((n + 1) * size) as u64).expect("alloc");
                    let src = mem.alloc((n.max(1) * size) as u64).expect("alloc");
                    mem.write(dst, &bytes(&a)).expect("write");
                    mem.write(src, &bytes(&b)).expect("write");
                    let cfg = LaunchConfig {
                        grid: crate::builtin::grid(n, 2),
                        block: crate::builtin::BLOCK,
                        dynamic_shared: 0,
                    };
                    sim::launch(&module, &name, cfg, &[dst, src, n as u64], &mut mem)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let got = mem.read(dst, ((n + 1) * size) as u64).expect("read");
                    let mut want: Vec<u64> = a
                        .iter()
                        .zip(&b)
                        .map(|(&x, &y)| host(ty, op, x, y))
                        .collect();
                    want.push(a[n]);
                    assert_eq!(got, bytes(&want), "{what}");
                }
            }
        }
    }

    /// `x op y` on the bits of two elements of `ty`.
    fn host(ty: Ty, op: Reduce, x: u64, y: u64) -> u64 {
        let pick = |o: std::cmp::Ordering| match (op, o) {
            (Reduce::Min, std::cmp::Ordering::Greater)
            | (Reduce::Max, std::cmp::Ordering::Less) => y,
            _ => x,
        };
        match (ty, op) {
            (Ty::F32, Reduce::Sum) => {
                u64::from((f32::from_bits(x as u32) + f32::from_bits(y as u32)).to_bits())
            }
            (Ty::F64, Reduce::Sum) => (f64::from_bits(x) + f64::from_bits(y)).to_bits(),
            (Ty::I32 | Ty::U32, Reduce::Sum) => u64::from((x as u32).wrapping_add(y as u32)),
            (_, Reduce::Sum) => x.wrapping_add(y),
            (Ty::F32, _) => pick(f32::from_bits(x as u32).total_cmp(&f32::from_bits(y as u32))),
            (Ty::F64, _) => pick(f64::from_bits(x).total_cmp(&f64::from_bits(y))),
            (Ty::I32, _) => pick((x as i32).cmp(&(y as i32))),
            (Ty::U32, _) => pick((x as u32).cmp(&(y as u32))),
            (Ty::I64, _) => pick((x as i64).cmp(&(y as i64))),
            _ => pick(x.cmp(&y)),
        }
    }

    #[test]
    fn half_types_have_no_entry() {
        assert_eq!(entry(Some(Ty::F16), Reduce::Sum), None);
        assert_eq!(entry(Some(Ty::Bf16), Reduce::Max), None);
        assert_eq!(
            entry(Some(Ty::F32), Reduce::Max).as_deref(),
            Some("lb_combine_f32_max")
        );
    }

    /// ptxas (when `LB_PTXAS` names it) accepts the module for sm_75, sm_80 and sm_90, unspilled.
    #[test]
    fn the_module_assembles() {
        lb_ptx::ptxas::assert_assembles("the combine kernels", &PTX);
    }
}
