//! Simulator semantics against independent CPU computations: arithmetic and conversions, shared
//! memory and barriers, warp collectives, divergence statistics, cross-block progress, memory
//! checking, deadlock and step-limit reporting.

use lb_ptx::ir::Module;
use lb_ptx::sim::{launch, launch_with_limit, parse, LaunchConfig, Memory, SimError, Stats};

/// A module of hand-written kernels, each declaring generous register files.
fn module(kernels: &[(&str, &str, &str)]) -> Module {
    let mut text = String::from(".version 7.8\n.target sm_75\n.address_size 64\n");
    for (name, params, body) in kernels {
        let params: Vec<String> = params
            .split_whitespace()
            .map(|p| {
                let (ty, n) = p.split_once(':').unwrap();
                format!("\t.param .{ty} {n}")
            })
            .collect();
        text += &format!(
            "\n.visible .entry {name}(\n{}\n)\n{{\n\t.reg .pred %p<16>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<32>;\n\t.reg .f32 %f<32>;\n\t.reg .f64 %fd<32>;\n{body}\n}}\n",
            params.join(",\n")
        );
    }
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn cfg(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        dynamic_shared: 0,
    }
}

fn upload_u32(mem: &mut Memory, data: &[u32]) -> u64 {
    let a = mem.alloc(4 * data.len() as u64).unwrap();
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    mem.write(a, &bytes).unwrap();
    a
}

fn download_u32(mem: &Memory, a: u64, n: usize) -> Vec<u32> {
    mem.read(a, 4 * n as u64)
        .unwrap()
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn download_u64(mem: &Memory, a: u64, n: usize) -> Vec<u64> {
    mem.read(a, 8 * n as u64)
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs a one-thread kernel `k(out, x, y, z)` that writes `slots` u64 results and returns them.
fn run_scalar(m: &Module, entry: &str, slots: usize, args: [u64; 3]) -> Vec<u64> {
    let mut mem = Memory::new();
    let out = mem.alloc(8 * slots as u64).unwrap();
    launch(
        m,
        entry,
        cfg(1, 1),
        &[out, args[0], args[1], args[2]],
        &mut mem,
    )
    .unwrap();
    download_u64(&mem, out, slots)
}

mod arith {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// The results `INT32` stores, one per 8-byte slot.
    const INT32_SLOTS: usize = 34;

    const INT32: &str = "
\tld.param.u64 %rd1, [out];
\tld.param.u32 %r1, [x];
\tld.param.u32 %r2, [y];
\tadd.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1], %r3;
\tsub.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+8], %r3;
\tmul.lo.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+16], %r3;
\tmul.hi.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+24], %r3;
\tmul.hi.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+32], %r3;
\tmul.wide.u32 %rd2, %r1, %r2;
\tst.global.u64 [%rd1+40], %rd2;
\tmul.wide.s32 %rd2, %r1, %r2;
\tst.global.u64 [%rd1+48], %rd2;
\tdiv.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+56], %r3;
\tdiv.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+64], %r3;
\trem.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+72], %r3;
\trem.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+80], %r3;
\tmin.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+88], %r3;
\tmax.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+96], %r3;
\tand.b32 %r3, %r1, %r2;
\tor.b32 %r4, %r1, %r2;
\txor.b32 %r5, %r3, %r4;
\tst.global.u32 [%rd1+104], %r5;
\tshl.b32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+112], %r3;
\tshr.u32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+120], %r3;
\tshr.s32 %r3, %r1, %r2;
\tst.global.u32 [%rd1+128], %r3;
\tneg.s32 %r3, %r1;
\tst.global.u32 [%rd1+136], %r3;
\tnot.b32 %r3, %r1;
\tst.global.u32 [%rd1+144], %r3;
\tabs.s32 %r3, %r1;
\tst.global.u32 [%rd1+152], %r3;
\tpopc.b32 %r3, %r1;
\tst.global.u32 [%rd1+160], %r3;
\tclz.b32 %r3, %r1;
\tst.global.u32 [%rd1+168], %r3;
\tsetp.lt.s32 %p1, %r1, %r2;
\tselp.u32 %r3, 1, 0, %p1;
\tst.global.u32 [%rd1+176], %r3;
\tsetp.lt.u32 %p1, %r1, %r2;
\tselp.u32 %r3, 1, 0, %p1;
\tst.global.u32 [%rd1+184], %r3;
\tcvt.u64.u32 %rd2, %r1;
\tst.global.u64 [%rd1+192], %rd2;
\tcvt.s64.s32 %rd2, %r1;
\tst.global.u64 [%rd1+200], %rd2;
\tcvt.u32.u8 %r3, %r1;
\tst.global.u32 [%rd1+208], %r3;
\tcvt.rn.f32.s32 %f1, %r1;
\tst.global.f32 [%rd1+216], %f1;
\tcvt.rn.f32.u32 %f1, %r1;
\tst.global.f32 [%rd1+224], %f1;
\tcvt.rn.f64.s32 %fd1, %r1;
\tst.global.f64 [%rd1+232], %fd1;
\tadd.u32 %r3, %r1, -5;
\tst.global.u32 [%rd1+240], %r3;
\tmad.lo.u32 %r3, %r1, %r2, %r1;
\tst.global.u32 [%rd1+248], %r3;
\tmad.wide.s32 %rd2, %r1, %r2, -3;
\tst.global.u64 [%rd1+256], %rd2;
\tmad.wide.u32 %rd2, %r1, %r2, %rd2;
\tst.global.u64 [%rd1+264], %rd2;
\tret;";

    fn int32_expected(x: u32, y: u32) -> Vec<u64> {
        let (sx, sy) = (x as i32, y as i32);
        let sh = |v: u32| if y >= 32 { 0 } else { v << y };
        vec![
            x.wrapping_add(y) as u64,
            sx.wrapping_sub(sy) as u32 as u64,
            x.wrapping_mul(y) as u64,
            (x as u64 * y as u64) >> 32,
            ((sx as i64 * sy as i64) >> 32) as u32 as u64,
            x as u64 * y as u64,
            (sx as i64 * sy as i64) as u64,
            x.checked_div(y).unwrap_or(u32::MAX) as u64,
            if y == 0 {
                u32::MAX as u64
            } else {
                sx.wrapping_div(sy) as u32 as u64
            },
            if y == 0 { x as u64 } else { (x % y) as u64 },
            if y == 0 {
                x as u64
            } else {
                sx.wrapping_rem(sy) as u32 as u64
            },
            sx.min(sy) as u32 as u64,
            x.max(y) as u64,
            ((x & y) ^ (x | y)) as u64,
            sh(x) as u64,
            if y >= 32 { 0 } else { (x >> y) as u64 },
            (if y >= 32 { sx >> 31 } else { sx >> y }) as u32 as u64,
            sx.wrapping_neg() as u32 as u64,
            (!x) as u64,
            sx.wrapping_abs() as u32 as u64,
            x.count_ones() as u64,
            x.leading_zeros() as u64,
            (sx < sy) as u64,
            (x < y) as u64,
            x as u64,
            sx as i64 as u64,
            (x & 0xff) as u64,
            (sx as f32).to_bits() as u64,
            (x as f32).to_bits() as u64,
            (sx as f64).to_bits(),
            x.wrapping_sub(5) as u64,
            x.wrapping_mul(y).wrapping_add(x) as u64,
            (sx as i64 * sy as i64).wrapping_sub(3) as u64,
            (x as u64 * y as u64).wrapping_add((sx as i64 * sy as i64).wrapping_sub(3) as u64),
        ]
    }

    const INT64: &str = "
\tld.param.u64 %rd1, [out];
\tld.param.u64 %rd2, [x];
\tld.param.u64 %rd3, [y];
\tcvt.u32.u64 %r1, %rd3;
\tadd.s64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1], %rd4;
\tmul.lo.s64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+8], %rd4;
\tmul.hi.u64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+16], %rd4;
\tmul.hi.s64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+24], %rd4;
\tdiv.s64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+32], %rd4;
\trem.u64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+40], %rd4;
\tmax.s64 %rd4, %rd2, %rd3;
\tst.global.u64 [%rd1+48], %rd4;
\tshl.b64 %rd4, %rd2, %r1;
\tst.global.u64 [%rd1+56], %rd4;
\tshr.s64 %rd4, %rd2, %r1;
\tst.global.u64 [%rd1+64], %rd4;
\tcvt.u32.u64 %r2, %rd2;
\tst.global.u32 [%rd1+72], %r2;
\tcvt.rn.f32.u64 %f1, %rd2;
\tst.global.f32 [%rd1+80], %f1;
\tcvt.rn.f32.s64 %f1, %rd2;
\tst.global.f32 [%rd1+88], %f1;
\tcvt.rn.f64.u64 %fd1, %rd2;
\tst.global.f64 [%rd1+96], %fd1;
\tpopc.b64 %r2, %rd2;
\tst.global.u32 [%rd1+104], %r2;
\tclz.b64 %r2, %rd2;
\tst.global.u32 [%rd1+112], %r2;
\tsetp.ge.s64 %p1, %rd2, %rd3;
\tselp.u64 %rd4, %rd2, %rd3, %p1;
\tst.global.u64 [%rd1+120], %rd4;
\tret;";

    fn int64_expected(x: u64, y: u64) -> Vec<u64> {
        let (sx, sy) = (x as i64, y as i64);
        let s = y as u32;
        vec![
            x.wrapping_add(y),
            x.wrapping_mul(y),
            ((x as u128 * y as u128) >> 64) as u64,
            ((sx as i128 * sy as i128) >> 64) as u64,
            if y == 0 {
                u64::MAX
            } else {
                sx.wrapping_div(sy) as u64
            },
            if y == 0 { x } else { x % y },
            sx.max(sy) as u64,
            if s >= 64 { 0 } else { x << s },
            (if s >= 64 { sx >> 63 } else { sx >> s }) as u64,
            x & 0xffff_ffff,
            (x as f32).to_bits() as u64,
            (sx as f32).to_bits() as u64,
            (x as f64).to_bits(),
            x.count_ones() as u64,
            x.leading_zeros() as u64,
            if sx >= sy { x } else { y },
        ]
    }

    const FLOAT: &str = "
\tld.param.u64 %rd1, [out];
\tld.param.f32 %f1, [x];
\tld.param.f32 %f2, [y];
\tld.param.f32 %f3, [z];
\tadd.rn.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1], %f4;
\tsub.rn.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1+8], %f4;
\tmul.rn.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1+16], %f4;
\tdiv.rn.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1+24], %f4;
\tfma.rn.f32 %f4, %f1, %f2, %f3;
\tst.global.f32 [%rd1+32], %f4;
\tmin.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1+40], %f4;
\tmax.f32 %f4, %f1, %f2;
\tst.global.f32 [%rd1+48], %f4;
\tsqrt.rn.f32 %f4, %f1;
\tst.global.f32 [%rd1+56], %f4;
\tabs.f32 %f4, %f1;
\tst.global.f32 [%rd1+64], %f4;
\tneg.f32 %f4, %f1;
\tst.global.f32 [%rd1+72], %f4;
\tsetp.eq.f32 %p1, %f1, %f2;
\tselp.u32 %r1, 1, 0, %p1;
\tst.global.u32 [%rd1+80], %r1;
\tsetp.ne.f32 %p1, %f1, %f2;
\tselp.u32 %r1, 1, 0, %p1;
\tst.global.u32 [%rd1+88], %r1;
\tsetp.neu.f32 %p1, %f1, %f2;
\tselp.u32 %r1, 1, 0, %p1;
\tst.global.u32 [%rd1+96], %r1;
\tsetp.le.f32 %p1, %f1, %f2;
\tselp.u32 %r1, 1, 0, %p1;
\tst.global.u32 [%rd1+104], %r1;
\tcvt.rzi.s32.f32 %r1, %f1;
\tst.global.u32 [%rd1+112], %r1;
\tcvt.rzi.u32.f32 %r1, %f1;
\tst.global.u32 [%rd1+120], %r1;
\tcvt.rzi.s64.f32 %rd2, %f1;
\tst.global.u64 [%rd1+128], %rd2;
\tcvt.rzi.u64.f32 %rd2, %f1;
\tst.global.u64 [%rd1+136], %rd2;
\tcvt.f64.f32 %fd1, %f1;
\tst.global.f64 [%rd1+144], %fd1;
\tmul.f64 %fd2, %fd1, %fd1;
\tcvt.rn.f32.f64 %f4, %fd2;
\tst.global.f32 [%rd1+152], %f4;
\tcvt.rzi.u8.f32 %r1, %f1;
\tst.global.u32 [%rd1+160], %r1;
\tadd.rn.f32 %f4, %f1, 0f3F800000;
\tst.global.f32 [%rd1+168], %f4;
\tret;";

    /// Results as bits; every NaN is compared as "some NaN".
    fn float_expected(x: f32, y: f32, z: f32) -> Vec<u64> {
        let fmin = |a: f32, b: f32| {
            if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else if a < b {
                a
            } else {
                b
            }
        };
        let fmax = |a: f32, b: f32| -fmin(-a, -b);
        let b = |v: f32| v.to_bits() as u64;
        let xd = x as f64;
        vec![
            b(x + y),
            b(x - y),
            b(x * y),
            b(x / y),
            b(x.mul_add(y, z)),
            b(fmin(x, y)),
            b(fmax(x, y)),
            b(x.sqrt()),
            b(x.abs()),
            b(-x),
            (x == y) as u64,
            (!x.is_nan() && !y.is_nan() && x != y) as u64,
            (x != y) as u64,
            (x <= y) as u64,
            x as i32 as u32 as u64,
            x as u32 as u64,
            x as i64 as u64,
            x as u64,
            xd.to_bits(),
            b((xd * xd) as f32),
            x as u8 as u64,
            b(x + 1.0),
        ]
    }

    const FLOAT64: &str = "
\tld.param.u64 %rd1, [out];
\tld.param.f64 %fd1, [x];
\tld.param.f64 %fd2, [y];
\tld.param.f64 %fd3, [z];
\tadd.rn.f64 %fd4, %fd1, %fd2;
\tst.global.f64 [%rd1], %fd4;
\tsub.rn.f64 %fd4, %fd1, %fd2;
\tst.global.f64 [%rd1+8], %fd4;
\tmul.rn.f64 %fd4, %fd1, %fd2;
\tst.global.f64 [%rd1+16], %fd4;
\tdiv.rn.f64 %fd4, %fd1, %fd2;
\tst.global.f64 [%rd1+24], %fd4;
\tfma.rn.f64 %fd4, %fd1, %fd2, %fd3;
\tst.global.f64 [%rd1+32], %fd4;
\tsqrt.rn.f64 %fd4, %fd1;
\tst.global.f64 [%rd1+40], %fd4;
\tmax.f64 %fd4, %fd1, %fd2;
\tst.global.f64 [%rd1+48], %fd4;
\tcvt.rn.f32.f64 %f1, %fd1;
\tst.global.f32 [%rd1+56], %f1;
\tcvt.rzi.s64.f64 %rd2, %fd1;
\tst.global.u64 [%rd1+64], %rd2;
\tcvt.rzi.u32.f64 %r1, %fd1;
\tst.global.u32 [%rd1+72], %r1;
\tsetp.gt.f64 %p1, %fd1, %fd2;
\tselp.u32 %r1, 1, 0, %p1;
\tst.global.u32 [%rd1+80], %r1;
\tret;";

    fn float64_expected(x: f64, y: f64, z: f64) -> Vec<u64> {
        let fmax = |a: f64, b: f64| {
            if a.is_nan() || (b > a) || (a == b && a.is_sign_negative()) {
                b
            } else {
                a
            }
        };
        vec![
            (x + y).to_bits(),
            (x - y).to_bits(),
            (x * y).to_bits(),
            (x / y).to_bits(),
            x.mul_add(y, z).to_bits(),
            x.sqrt().to_bits(),
            fmax(x, y).to_bits(),
            (x as f32).to_bits() as u64,
            x as i64 as u64,
            x as u32 as u64,
            (x > y) as u64,
        ]
    }

    /// Slot-wise equality, where two NaNs of the slot's float width count as equal.
    fn same(got: &[u64], want: &[u64], f32_slots: &[usize], f64_slots: &[usize]) {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let nan32 = |v: u64| f32::from_bits(v as u32).is_nan();
            let nan64 = |v: u64| f64::from_bits(v).is_nan();
            if (f32_slots.contains(&i) && nan32(*g) && nan32(*w))
                || (f64_slots.contains(&i) && nan64(*g) && nan64(*w))
            {
                continue;
            }
            assert_eq!(g, w, "slot {i}: got {g:#x}, want {w:#x}");
        }
    }

    fn modules() -> &'static Module {
        static M: OnceLock<Module> = OnceLock::new();
        M.get_or_init(|| {
            module(&[
                ("int32", "u64:out u32:x u32:y u32:z", INT32),
                ("int64", "u64:out u64:x u64:y u64:z", INT64),
                ("float", "u64:out f32:x f32:y f32:z", FLOAT),
                ("float64", "u64:out f64:x f64:y f64:z", FLOAT64),
            ])
        })
    }

    fn any_f32() -> impl Strategy<Value = f32> {
        prop_oneof![
            any::<f32>(),
            Just(f32::NAN),
            Just(-0.0f32),
            Just(0.0f32),
            Just(f32::INFINITY),
            Just(-f32::INFINITY),
            Just(3e9f32),
            Just(-3e9f32),
            Just(255.9f32),
            Just(-1.5f32),
            (-1000i32..1000).prop_map(|v| v as f32 / 4.0),
        ]
    }

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(-0.0f64),
            Just(f64::INFINITY),
            Just(1e300f64),
            Just(-5e9f64),
            (-1000i32..1000).prop_map(|v| f64::from(v) / 8.0),
        ]
    }

    fn any_u32() -> impl Strategy<Value = u32> {
        prop_oneof![any::<u32>(), 0u32..40, Just(0x8000_0000u32), Just(u32::MAX)]
    }

    fn any_u64() -> impl Strategy<Value = u64> {
        prop_oneof![any::<u64>(), 0u64..70, Just(1u64 << 63), Just(u64::MAX)]
    }

    proptest! {
        #[test]
        fn int32_matches_rust(x in any_u32(), y in any_u32()) {
            let got = run_scalar(modules(), "int32", INT32_SLOTS, [x as u64, y as u64, 0]);
            same(&got, &int32_expected(x, y), &[], &[]);
        }

        #[test]
        fn int64_matches_rust(x in any_u64(), y in any_u64()) {
            let got = run_scalar(modules(), "int64", 16, [x, y, 0]);
            same(&got, &int64_expected(x, y), &[], &[]);
        }

        #[test]
        fn float_matches_rust(x in any_f32(), y in any_f32(), z in any_f32()) {
            let args = [x.to_bits() as u64, y.to_bits() as u64, z.to_bits() as u64];
            let got = run_scalar(modules(), "float", 22, args);
            same(&got, &float_expected(x, y, z), &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 19, 21], &[18]);
        }
    }

    proptest! {
        #[test]
        fn float64_matches_rust(x in any_f64(), y in any_f64(), z in any_f64()) {
            let got = run_scalar(modules(), "float64", 11, [x.to_bits(), y.to_bits(), z.to_bits()]);
            same(&got, &float64_expected(x, y, z), &[7], &[0, 1, 2, 3, 4, 5, 6]);
        }
    }

    #[test]
    fn edge_cases() {
        let m = modules();
        let got = run_scalar(
            m,
            "int32",
            INT32_SLOTS,
            [i32::MIN as u32 as u64, (-1i32) as u32 as u64, 0],
        );
        assert_eq!(got[8], i32::MIN as u32 as u64, "MIN / -1 wraps");
        assert_eq!(got[10], 0, "MIN rem -1");
        let got = run_scalar(m, "int32", INT32_SLOTS, [7, 0, 0]);
        assert_eq!(
            (got[7], got[8], got[9], got[10]),
            (0xffff_ffff, 0xffff_ffff, 7, 7)
        );
        let nan = f32::NAN.to_bits() as u64;
        let got = run_scalar(m, "float", 22, [nan, 1f32.to_bits() as u64, 0]);
        assert_eq!(got[0], 0x7fff_ffff, "canonical NaN");
        assert_eq!(
            got[5],
            1f32.to_bits() as u64,
            "min returns the non-NaN operand"
        );
        assert_eq!((got[10], got[11], got[12], got[13]), (0, 0, 1, 0));
        assert_eq!(
            (got[14], got[15], got[16], got[17]),
            (0, 0, 0, 0),
            "NaN converts to 0"
        );
        let got = run_scalar(m, "float", 22, [(-0.0f32).to_bits() as u64, 0, 0]);
        assert_eq!(got[5], (-0.0f32).to_bits() as u64);
        assert_eq!(got[6], 0);
        let got = run_scalar(m, "float", 22, [1e10f32.to_bits() as u64, 0, 0]);
        assert_eq!(
            (got[14], got[15], got[20]),
            (i32::MAX as u64, u32::MAX as u64, 255),
            "saturating"
        );
    }
}

#[test]
fn block_reduction_with_barriers_and_shared_memory() {
    let body = "
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ctaid.x;
\tmov.u32 %r3, %ntid.x;
\tmul.lo.u32 %r4, %r2, %r3;
\tadd.u32 %r4, %r4, %r1;
\tmul.wide.u32 %rd3, %r4, 4;
\tadd.s64 %rd3, %rd1, %rd3;
\tld.global.u32 %r5, [%rd3];
\tmov.u64 %rd4, smem;
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd5, %rd4, %rd5;
\tst.shared.u32 [%rd5], %r5;
\tbar.sync 0;
\tshr.u32 %r6, %r3, 1;
L1:
\tsetp.eq.u32 %p1, %r6, 0;
\t@%p1 bra L2;
\tsetp.lt.u32 %p2, %r1, %r6;
\t@!%p2 bra L3;
\tadd.u32 %r7, %r1, %r6;
\tmul.wide.u32 %rd6, %r7, 4;
\tadd.s64 %rd6, %rd4, %rd6;
\tld.shared.u32 %r8, [%rd6];
\tld.shared.u32 %r9, [%rd5];
\tadd.u32 %r9, %r9, %r8;
\tst.shared.u32 [%rd5], %r9;
L3:
\tbar.sync 0;
\tshr.u32 %r6, %r6, 1;
\tbra L1;
L2:
\tsetp.ne.u32 %p3, %r1, 0;
\t@%p3 ret;
\tld.shared.u32 %r10, [smem];
\tmul.wide.u32 %rd7, %r2, 4;
\tadd.s64 %rd7, %rd2, %rd7;
\tst.global.u32 [%rd7], %r10;
\tret;";
    let body = format!("\t.shared .align 4 .b8 smem[1024];{body}");
    let m = module(&[("reduce", "u64:inp u64:out", &body)]);
    let blocks = 5;
    let data: Vec<u32> = (0..blocks * 256)
        .map(|i: u32| i.wrapping_mul(2654435761) >> 7)
        .collect();
    let mut mem = Memory::new();
    let inp = upload_u32(&mut mem, &data);
    let out = mem.alloc(4 * blocks as u64).unwrap();
    let stats = launch(&m, "reduce", cfg(blocks, 256), &[inp, out], &mut mem).unwrap();
    let want: Vec<u32> = data
        .chunks(256)
        .map(|c| c.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
        .collect();
    assert_eq!(download_u32(&mem, out, blocks as usize), want);
    assert_eq!(stats.threads, 5 * 256);
    assert_eq!(stats.per_thread_instructions.len(), 5 * 256);
    assert!(stats.per_thread_instructions[0] > stats.per_thread_instructions[255]);
}

/// `out[tid] = shfl(in[tid], b, c)` and `pred[tid] = p`, for a 32-thread block.
const SHFL: &str = "
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tld.param.u64 %rd3, [pout];
\tld.param.u32 %r1, [b];
\tld.param.u32 %r2, [c];
\tmov.u32 %r3, %tid.x;
\tmul.wide.u32 %rd4, %r3, 4;
\tadd.s64 %rd5, %rd1, %rd4;
\tld.global.u32 %r4, [%rd5];
\tshfl.sync.MODE.b32 %r5|%p1, %r4, %r1, %r2, -1;
\tadd.s64 %rd6, %rd2, %rd4;
\tst.global.u32 [%rd6], %r5;
\tselp.u32 %r6, 1, 0, %p1;
\tadd.s64 %rd7, %rd3, %rd4;
\tst.global.u32 [%rd7], %r6;
\tret;";

/// CUDA's `__shfl_*_sync(mask, v, b, width)` result for one lane, written from the CUDA guide.
fn shfl_cpu(mode: &str, vals: &[u32], lane: usize, b: usize, width: usize) -> (u32, bool) {
    let start = lane / width * width;
    let end = start + width - 1;
    let src = match mode {
        "up" => lane.checked_sub(b).filter(|&j| j >= start),
        "down" => Some(lane + b).filter(|&j| j <= end),
        "bfly" => Some(lane ^ b).filter(|&j| j <= end),
        _ => Some(start + b % width),
    };
    match src {
        Some(j) => (vals[j], true),
        None => (vals[lane], false),
    }
}

#[test]
fn shuffles_all_modes_and_widths() {
    let modes = ["up", "down", "bfly", "idx"];
    let kernels: Vec<(String, String)> = modes
        .iter()
        .map(|m| (format!("shfl_{m}"), SHFL.replace("MODE", m)))
        .collect();
    let list: Vec<(&str, &str, &str)> = kernels
        .iter()
        .map(|(n, b)| {
            (
                n.as_str(),
                "u64:inp u64:out u64:pout u32:b u32:c",
                b.as_str(),
            )
        })
        .collect();
    let m = module(&list);
    let vals: Vec<u32> = (0..32).map(|i| 1000 + i * 7).collect();
    for mode in modes {
        for width in [32usize, 16, 8, 4] {
            for b in [0usize, 1, 2, 3, 5, 8, 13, 17, 31] {
                let seg = ((32 - width) << 8) as u64;
                let c = if mode == "up" { seg } else { seg | 0x1f };
                let mut mem = Memory::new();
                let inp = upload_u32(&mut mem, &vals);
                let out = mem.alloc(128).unwrap();
                let pout = mem.alloc(128).unwrap();
                launch(
                    &m,
                    &format!("shfl_{mode}"),
                    cfg(1, 32),
                    &[inp, out, pout, b as u64, c],
                    &mut mem,
                )
                .unwrap();
                let got = download_u32(&mem, out, 32);
                let preds = download_u32(&mem, pout, 32);
                for lane in 0..32 {
                    let (v, p) = shfl_cpu(mode, &vals, lane, b, width);
                    assert_eq!(
                        (got[lane], preds[lane] == 1),
                        (v, p),
                        "{mode} width {width} b {b} lane {lane}"
                    );
                }
            }
        }
    }
}

#[test]
fn shuffle_waits_for_lanes_arriving_later() {
    // Lanes 16..31 reach the shuffle first; lanes 0..15 take a detour and jump back to it.
    let body = "
\tld.param.u64 %rd2, [out];
\tmov.u32 %r3, %tid.x;
\tmul.lo.u32 %r4, %r3, 3;
\tsetp.lt.u32 %p1, %r3, 16;
\t@%p1 bra L2;
L1:
\tshfl.sync.bfly.b32 %r5, %r4, 16, 31, -1;
\tmul.wide.u32 %rd4, %r3, 4;
\tadd.s64 %rd6, %rd2, %rd4;
\tst.global.u32 [%rd6], %r5;
\tret;
L2:
\tadd.u32 %r4, %r4, 1;
\tbra L1;";
    let m = module(&[("late", "u64:out", body)]);
    let mut mem = Memory::new();
    let out = mem.alloc(128).unwrap();
    launch(&m, "late", cfg(1, 32), &[out], &mut mem).unwrap();
    let val = |t: u32| t * 3 + u32::from(t < 16);
    let want: Vec<u32> = (0..32).map(|t| val(t ^ 16)).collect();
    assert_eq!(download_u32(&mem, out, 32), want);
}

#[test]
fn votes() {
    let body = "
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd3, %r1, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.u32 %r2, [%rd4];
\tsetp.ne.u32 %p1, %r2, 0;
\tvote.sync.all.pred %p2, %p1, -1;
\tvote.sync.any.pred %p3, %p1, -1;
\tvote.sync.ballot.b32 %r3, %p1, -1;
\tselp.u32 %r4, 1, 0, %p2;
\tselp.u32 %r5, 2, 0, %p3;
\tor.b32 %r4, %r4, %r5;
\tmul.wide.u32 %rd3, %r1, 8;
\tadd.s64 %rd5, %rd2, %rd3;
\tst.global.u32 [%rd5], %r4;
\tst.global.u32 [%rd5+4], %r3;
\tret;";
    let m = module(&[("vote", "u64:inp u64:out", body)]);
    let cases: [Vec<u32>; 4] = [
        vec![1; 64],
        vec![0; 64],
        (0..64).map(|i| u32::from(i % 3 == 0)).collect(),
        {
            let mut v = vec![1; 64];
            v[40] = 0;
            v
        },
    ];
    for data in cases {
        let mut mem = Memory::new();
        let inp = upload_u32(&mut mem, &data);
        let out = mem.alloc(8 * 64).unwrap();
        launch(&m, "vote", cfg(1, 64), &[inp, out], &mut mem).unwrap();
        let got = download_u32(&mem, out, 128);
        for (w, chunk) in data.chunks(32).enumerate() {
            let ballot = chunk
                .iter()
                .enumerate()
                .fold(0u32, |m, (i, &v)| if v != 0 { m | 1 << i } else { m });
            let flags = u32::from(ballot == u32::MAX) | (2 * u32::from(ballot != 0));
            for lane in 0..32 {
                let t = w * 32 + lane;
                assert_eq!((got[2 * t], got[2 * t + 1]), (flags, ballot), "thread {t}");
            }
        }
    }
}

/// Two half-warp groups at the same vote: each lane votes only among its own member mask, as on
/// the GPU, even when the simulator issues both groups in one step.
#[test]
fn sub_warp_votes_stay_inside_their_member_mask() {
    let body = "
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd3, %r1, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.u32 %r2, [%rd4];
\tsetp.ne.u32 %p1, %r2, 0;
\tsetp.lt.u32 %p4, %r1, 16;
\tselp.u32 %r6, 65535, -65536, %p4;
\tvote.sync.all.pred %p2, %p1, %r6;
\tvote.sync.ballot.b32 %r3, %p1, %r6;
\tselp.u32 %r4, 1, 0, %p2;
\tmul.wide.u32 %rd3, %r1, 8;
\tadd.s64 %rd5, %rd2, %rd3;
\tst.global.u32 [%rd5], %r4;
\tst.global.u32 [%rd5+4], %r3;
\tret;";
    let m = module(&[("halves", "u64:inp u64:out", body)]);
    // The low half all true, the high half mixed.
    let data: Vec<u32> = (0..32).map(|i| u32::from(i < 16 || i % 2 == 0)).collect();
    let mut mem = Memory::new();
    let inp = upload_u32(&mut mem, &data);
    let out = mem.alloc(8 * 32).unwrap();
    launch(&m, "halves", cfg(1, 32), &[inp, out], &mut mem).unwrap();
    let got = download_u32(&mem, out, 64);
    let high_ballot = (16..32)
        .filter(|i| i % 2 == 0)
        .fold(0u32, |m, i| m | 1 << i);
    for lane in 0..32 {
        let (all, ballot) = if lane < 16 {
            (1, 0xFFFF)
        } else {
            (0, high_ballot)
        };
        assert_eq!(
            (got[2 * lane], got[2 * lane + 1]),
            (all, ballot),
            "lane {lane}"
        );
    }
}

#[test]
fn divergence_reconverges_and_lowers_warp_efficiency() {
    // Thread t loops t % 4 times, then all store; odd threads take an extra branch.
    let body = "
\tld.param.u64 %rd2, [out];
\tmov.u32 %r1, %tid.x;
\tand.b32 %r2, %r1, 3;
\tmov.u32 %r3, 0;
L1:
\tsetp.ge.u32 %p1, %r3, %r2;
\t@%p1 bra L2;
\tadd.u32 %r3, %r3, 1;
\tbra L1;
L2:
\tand.b32 %r4, %r1, 1;
\tsetp.eq.u32 %p2, %r4, 0;
\t@%p2 bra L3;
\tadd.u32 %r3, %r3, 100;
L3:
\tmul.wide.u32 %rd4, %r1, 4;
\tadd.s64 %rd6, %rd2, %rd4;
\tst.global.u32 [%rd6], %r3;
\tret;";
    let m = module(&[("div", "u64:out", body)]);
    let mut mem = Memory::new();
    let out = mem.alloc(4 * 64).unwrap();
    let stats = launch(&m, "div", cfg(1, 64), &[out], &mut mem).unwrap();
    let want: Vec<u32> = (0..64)
        .map(|t| t % 4 + if t % 2 == 1 { 100 } else { 0 })
        .collect();
    assert_eq!(download_u32(&mem, out, 64), want);
    let eff = stats.warp_efficiency();
    assert!(eff > 0.3 && eff < 0.95, "efficiency {eff}");
    // Thread instructions: 4 to set up, 4 per loop trip, 2 to leave it, 3 or 4 for the branch, 4 to store.
    let per = |t: u64| 4 + 4 * (t % 4) + 2 + if t % 2 == 1 { 4 } else { 3 } + 4;
    for t in 0..64u64 {
        assert_eq!(
            stats.per_thread_instructions[t as usize],
            per(t),
            "thread {t}"
        );
    }
    assert_eq!(stats.instructions, (0..64).map(per).sum::<u64>());
    assert_eq!(stats.active_lanes, stats.instructions);

    let uniform = module(&[("u", "u64:out", "\tmov.u32 %r1, %tid.x;\n\tret;")]);
    let s = launch(&uniform, "u", cfg(3, 64), &[0], &mut mem).unwrap();
    assert_eq!(s.warp_efficiency(), 1.0);
    assert_eq!((s.warp_issues, s.instructions, s.threads), (12, 384, 192));
    let mut total = Stats::default();
    total.merge(&s);
    total.merge(&s);
    assert_eq!(
        (
            total.instructions,
            total.per_thread_instructions[5],
            total.threads
        ),
        (768, 4, 384)
    );
}

#[test]
fn block_spins_on_flag_set_by_another_block() {
    // Block 0 works for a while, writes data, then raises the flag; block 1 spins until it sees it.
    let body = "
\tld.param.u64 %rd1, [flag];
\tld.param.u64 %rd2, [data];
\tld.param.u64 %rd3, [out];
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %tid.x;
\tsetp.ne.u32 %p1, %r2, 0;
\t@%p1 ret;
\tsetp.ne.u32 %p2, %r1, 0;
\t@%p2 bra L5;
\tmov.u32 %r3, 0;
L1:
\tadd.u32 %r3, %r3, 1;
\tsetp.lt.u32 %p3, %r3, 2000;
\t@%p3 bra L1;
\tst.global.u32 [%rd2], 4242;
\tmembar.gl;
\tatom.global.exch.b32 %r4, [%rd1], 1;
\tret;
L5:
\tatom.global.or.b32 %r5, [%rd1], 0;
\tsetp.eq.u32 %p4, %r5, 0;
\t@%p4 bra L5;
\tld.global.u32 %r6, [%rd2];
\tst.global.u32 [%rd3], %r6;
\tret;";
    let m = module(&[("spin", "u64:flag u64:data u64:out", body)]);
    let mut mem = Memory::new();
    let (flag, data, out) = (
        mem.alloc(4).unwrap(),
        mem.alloc(4).unwrap(),
        mem.alloc(4).unwrap(),
    );
    let stats = launch(&m, "spin", cfg(2, 32), &[flag, data, out], &mut mem).unwrap();
    assert_eq!(download_u32(&mem, out, 1), vec![4242]);
    assert!(stats.per_thread_instructions[32] > 100, "block 1 spun");
}

#[test]
fn atomics_global_and_shared() {
    let body = "
\t.shared .align 8 .b8 cnt[8];
\tld.param.u64 %rd1, [out];
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ctaid.x;
\tatom.global.add.u32 %r3, [%rd1], 1;
\tatom.global.max.s32 %r3, [%rd1+4], %r1;
\tsub.s32 %r4, 0, %r1;
\tatom.global.min.s32 %r3, [%rd1+8], %r4;
\tcvt.rn.f32.u32 %f1, %r1;
\tatom.global.add.f32 %f2, [%rd1+12], %f1;
\tcvt.u64.u32 %rd2, %r1;
\tatom.global.add.u64 %rd3, [%rd1+16], %rd2;
\tatom.global.cas.b32 %r5, [%rd1+24], 0, 77;
\tatom.global.or.b32 %r5, [%rd1+28], 1;
\tatom.shared.add.u32 %r6, [cnt], 2;
\tbar.sync 0;
\tsetp.ne.u32 %p1, %r1, 0;
\t@%p1 ret;
\tld.shared.u32 %r7, [cnt];
\tatom.global.add.u32 %r8, [%rd1+32], %r7;
\tret;";
    let m = module(&[("atom", "u64:out", body)]);
    let mut mem = Memory::new();
    let out = mem.alloc(40).unwrap();
    launch(&m, "atom", cfg(3, 100), &[out], &mut mem).unwrap();
    let w = download_u32(&mem, out, 10);
    assert_eq!(w[0], 300);
    assert_eq!(w[1], 99);
    assert_eq!(w[2] as i32, -99);
    assert_eq!(f32::from_bits(w[3]), 3.0 * 4950.0);
    assert_eq!(w[4] as u64 | (w[5] as u64) << 32, 3 * 4950);
    assert_eq!((w[6], w[7], w[8]), (77, 1, 600));
}

#[test]
fn dynamic_shared_memory_and_partial_warp() {
    let body = "
\t.extern .shared .align 16 .b8 dyn[];
\tld.param.u64 %rd1, [out];
\tmov.u32 %r1, %tid.x;
\tmov.u64 %rd2, dyn;
\tmul.wide.u32 %rd3, %r1, 8;
\tadd.s64 %rd4, %rd2, %rd3;
\tcvt.u64.u32 %rd5, %r1;
\tmul.lo.u64 %rd5, %rd5, %rd5;
\tst.shared.u64 [%rd4], %rd5;
\tbar.sync 0;
\tmov.u32 %r2, %ntid.x;
\tsub.u32 %r3, %r2, 1;
\tsub.u32 %r3, %r3, %r1;
\tmul.wide.u32 %rd6, %r3, 8;
\tadd.s64 %rd6, %rd2, %rd6;
\tld.shared.u64 %rd7, [%rd6];
\tadd.s64 %rd8, %rd1, %rd3;
\tst.global.u64 [%rd8], %rd7;
\tret;";
    let m = module(&[("dyn", "u64:out", body)]);
    let mut mem = Memory::new();
    let out = mem.alloc(8 * 40).unwrap();
    let c = LaunchConfig {
        grid: 1,
        block: 40,
        dynamic_shared: 320,
    };
    let s = launch(&m, "dyn", c, &[out], &mut mem).unwrap();
    let want: Vec<u64> = (0..40u64).map(|t| (39 - t) * (39 - t)).collect();
    assert_eq!(download_u64(&mem, out, 40), want);
    assert!(s.warp_efficiency() < 1.0, "the second warp has 8 lanes");
    let small = LaunchConfig {
        dynamic_shared: 312,
        ..c
    };
    match launch(&m, "dyn", small, &[out], &mut mem) {
        Err(SimError::OutOfBounds {
            addr: 312,
            bytes: 8,
            block: 0,
            thread: 39,
            instr,
        }) => {
            assert!(instr.contains("st.shared.u64"), "{instr}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_blocks_beyond_the_resident_window() {
    // out[ctaid * 64 + tid] = warpid * 32 + laneid - tid + nctaid, which is nctaid.
    let body = "
\tld.param.u64 %rd1, [out];
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %nctaid.x;
\tmov.u32 %r3, %tid.x;
\tmov.u32 %r4, %laneid;
\tmov.u32 %r5, %warpid;
\tshl.b32 %r6, %r1, 6;
\tadd.u32 %r6, %r6, %r3;
\tmul.wide.u32 %rd2, %r6, 4;
\tadd.s64 %rd2, %rd1, %rd2;
\tmul.lo.u32 %r7, %r5, 32;
\tadd.u32 %r7, %r7, %r4;
\tsub.u32 %r7, %r7, %r3;
\tadd.u32 %r7, %r7, %r2;
\tst.global.u32 [%rd2], %r7;
\tret;";
    let m = module(&[("many", "u64:out", body)]);
    let mut mem = Memory::new();
    let out = mem.alloc(4 * 300 * 64).unwrap();
    launch(&m, "many", cfg(300, 64), &[out], &mut mem).unwrap();
    assert_eq!(download_u32(&mem, out, 300 * 64), vec![300; 300 * 64]);
}

const LOAD_AT: &str = "
\tld.param.u64 %rd1, [buf];
\tld.param.u64 %rd2, [idx];
\tmov.u32 %r1, %tid.x;
\tsetp.ne.u32 %p1, %r1, 5;
\t@%p1 ret;
\tshl.b64 %rd3, %rd2, 2;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.u32 %r2, [%rd4];
\tret;";

#[test]
fn out_of_bounds_and_use_after_free_are_reported() {
    let m = module(&[("load", "u64:buf u64:idx", LOAD_AT)]);
    let mut mem = Memory::new();
    let buf = mem.alloc(40).unwrap();
    launch(&m, "load", cfg(2, 32), &[buf, 9], &mut mem).unwrap();
    match launch(&m, "load", cfg(2, 32), &[buf, 10], &mut mem) {
        Err(SimError::OutOfBounds {
            addr,
            bytes: 4,
            block: 0,
            thread: 5,
            instr,
        }) => {
            assert_eq!(addr, buf + 40);
            assert!(instr.contains("ld.global.u32 %r2, [%rd4]"), "{instr}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        launch(&m, "load", cfg(1, 32), &[buf, u64::MAX], &mut mem),
        Err(SimError::OutOfBounds { .. })
    ));
    assert!(matches!(
        launch(&m, "load", cfg(1, 32), &[0, 0], &mut mem),
        Err(SimError::OutOfBounds { .. })
    ));
    let misaligned = launch(&m, "load", cfg(1, 32), &[buf + 2, 0], &mut mem);
    assert!(
        matches!(misaligned, Err(SimError::Misaligned { bytes: 4, .. })),
        "{misaligned:?}"
    );
    mem.free(buf);
    let e = launch(&m, "load", cfg(1, 32), &[buf, 0], &mut mem).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::UseAfterFree {
                block: 0,
                thread: 5,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("freed"));
}

#[test]
fn divergent_barrier_is_a_deadlock_not_a_hang() {
    // Half the block syncs inside a branch, the other half at a different barrier.
    let body = "
\tmov.u32 %r1, %tid.x;
\tsetp.lt.u32 %p1, %r1, 32;
\t@%p1 bra L1;
\tbar.sync 0;
\tret;
L1:
\tbar.sync 0;
\tret;";
    let m = module(&[("bar", "", body)]);
    let e = launch(&m, "bar", cfg(1, 64), &[], &mut Memory::new()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SimError::Deadlock(_)), "{msg}");
    assert!(
        msg.contains("threads 0-31") && msg.contains("threads 32-63"),
        "{msg}"
    );

    // Threads that exit do not hold a barrier up.
    let body = "
\tmov.u32 %r1, %tid.x;
\tsetp.lt.u32 %p1, %r1, 32;
\t@%p1 ret;
\tbar.sync 0;
\tret;";
    let m = module(&[("bar", "", body)]);
    launch(&m, "bar", cfg(1, 64), &[], &mut Memory::new()).unwrap();

    // Half a warp waits at a barrier while the other half waits for it at a shuffle.
    let body = "
\tmov.u32 %r1, %tid.x;
\tsetp.lt.u32 %p1, %r1, 16;
\t@%p1 bra L1;
\tbar.sync 0;
\tret;
L1:
\tshfl.sync.idx.b32 %r2, %r1, 0, 31, -1;
\tret;";
    let m = module(&[("mixed", "", body)]);
    let e = launch(&m, "mixed", cfg(1, 32), &[], &mut Memory::new()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("deadlock")
            && msg.contains("threads 0-15 at `shfl")
            && msg.contains("threads 16-31 at `bar"),
        "{msg}"
    );
}

#[test]
fn step_limit_stops_a_hung_kernel() {
    let m = module(&[("hang", "", "L1:\n\tbra L1;")]);
    let e = launch_with_limit(&m, "hang", cfg(2, 64), &[], &mut Memory::new(), 10_000).unwrap_err();
    assert_eq!(e, SimError::StepLimit(10_000));
}

#[test]
fn bad_launches_are_errors() {
    let m = module(&[("k", "u64:a", "\tret;")]);
    let mut mem = Memory::new();
    assert!(matches!(
        launch(&m, "nope", cfg(1, 1), &[0], &mut mem),
        Err(SimError::UnknownEntry(_))
    ));
    assert!(matches!(
        launch(&m, "k", cfg(1, 1), &[], &mut mem),
        Err(SimError::BadArgs {
            expected: 1,
            got: 0,
            ..
        })
    ));
    assert!(matches!(
        launch(&m, "k", cfg(1, 2000), &[0], &mut mem),
        Err(SimError::BadLaunch(_))
    ));
    let undeclared = module(&[("u", "", "\tmov.u32 %r99, 1;\n\tret;")]);
    let e = launch(&undeclared, "u", cfg(1, 1), &[], &mut mem).unwrap_err();
    assert!(e.to_string().contains("%r99"), "{e}");
}

#[test]
fn bytes_load_zero_extended_and_store_low_byte() {
    let body = "
\tld.param.u64 %rd1, [inp];
\tld.param.u64 %rd2, [out];
\tmov.u32 %r1, %tid.x;
\tcvt.u64.u32 %rd3, %r1;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.u8 %r2, [%rd4];
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd5, %rd2, %rd5;
\tst.global.u32 [%rd5], %r2;
\tadd.u32 %r3, %r2, 511;
\tst.global.u8 [%rd4], %r3;
\tret;";
    let m = module(&[("bytes", "u64:inp u64:out", body)]);
    let mut mem = Memory::new();
    let data: Vec<u8> = (0..40u32).map(|i| (i * 37 + 200) as u8).collect();
    let inp = mem.alloc(40).unwrap();
    mem.write(inp, &data).unwrap();
    let out = mem.alloc(160).unwrap();
    launch(&m, "bytes", cfg(1, 40), &[inp, out], &mut mem).unwrap();
    let want: Vec<u32> = data.iter().map(|&b| u32::from(b)).collect();
    assert_eq!(download_u32(&mem, out, 40), want);
    let bumped: Vec<u8> = data.iter().map(|&b| (u32::from(b) + 511) as u8).collect();
    assert_eq!(mem.read(inp, 40).unwrap(), bumped);
}

#[test]
fn launches_are_deterministic() {
    let body = "
\tld.param.u64 %rd1, [out];
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ctaid.x;
\tshl.b32 %r3, %r2, 8;
\tor.b32 %r3, %r3, %r1;
\tatom.global.exch.b32 %r4, [%rd1], %r3;
\tatom.global.add.u32 %r5, [%rd1+4], 1;
\tmul.wide.u32 %rd2, %r3, 4;
\tadd.s64 %rd2, %rd1, %rd2;
\tst.global.u32 [%rd2+8], %r5;
\tret;";
    let m = module(&[("race", "u64:out", body)]);
    let run = || {
        let mut mem = Memory::new();
        let out = mem.alloc(8 + 4 * 4 * 256).unwrap();
        let s = launch(&m, "race", cfg(4, 100), &[out], &mut mem).unwrap();
        (s, mem.read(out, 8 + 4 * 4 * 256).unwrap())
    };
    let (s1, m1) = run();
    let (s2, m2) = run();
    assert_eq!(s1, s2);
    assert_eq!(m1, m2);
    let order: Vec<u32> = m1
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let words = &order;
    let mut tickets: Vec<u32> = (0..4)
        .flat_map(|b| (0..100).map(move |t| words[2 + b * 256 + t]))
        .collect();
    tickets.sort_unstable();
    assert_eq!(
        tickets,
        (0..400).collect::<Vec<u32>>(),
        "every thread got a distinct ticket"
    );
}
