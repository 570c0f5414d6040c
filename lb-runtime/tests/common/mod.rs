//! Hand-written PTX kernels and plans shared by the simulator and GPU tests.

use std::borrow::Cow;

use lb_ptx::plan::{Grid, KernelPlan, OffsetWidth, Plan, ProblemSize, Temp, TempCount, TempRole};

/// `y[i] = 2 * x[i]` with a grid-stride loop; params (x, x_len, y, y_len), then the output
/// mirrors every kernel declares (unused here).
pub const DOUBLE_PTX: &str = "\
.version 7.8
.target sm_75
.address_size 64

.visible .entry double(
\t.param .u64 x,
\t.param .u64 x_len,
\t.param .u64 y,
\t.param .u64 y_len,
\t.param .u64 lb_mirrors,
\t.param .u64 lb_mirror_count
)
{
\t.reg .pred %p<1>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<8>;
\t.reg .f32 %f<2>;
\tld.param.u64 %rd0, [x];
\tld.param.u64 %rd1, [x_len];
\tld.param.u64 %rd2, [y];
\tmov.u32 %r0, %tid.x;
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %ntid.x;
\tmov.u32 %r3, %nctaid.x;
\tmul.wide.u32 %rd3, %r1, %r2;
\tcvt.u64.u32 %rd4, %r0;
\tadd.u64 %rd3, %rd3, %rd4;
\tmul.wide.u32 %rd5, %r2, %r3;
L0:
\tsetp.ge.u64 %p0, %rd3, %rd1;
\t@%p0 bra L1;
\tshl.b64 %rd6, %rd3, 2;
\tadd.u64 %rd7, %rd0, %rd6;
\tld.global.f32 %f0, [%rd7];
\tmul.rn.f32 %f1, %f0, 0f40000000;
\tadd.u64 %rd7, %rd2, %rd6;
\tst.global.f32 [%rd7], %f1;
\tadd.u64 %rd3, %rd3, %rd5;
\tbra L0;
L1:
\tret;
}

.visible .entry raise(
\t.param .u64 x,
\t.param .u64 x_len,
\t.param .u64 flag,
\t.param .u64 lb_mirrors,
\t.param .u64 lb_mirror_count
)
{
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd0, [flag];
\tmov.u64 %rd1, 2;
\tst.global.u64 [%rd0], %rd1;
\tmov.u64 %rd1, 7;
\tst.global.u64 [%rd0+8], %rd1;
\tret;
}
";

const DOUBLE_KERNELS: &[KernelPlan] = &[KernelPlan {
    entry: Cow::Borrowed("double"),
    block: 32,
    grid: Grid::CoverItems { per_thread: 1 },
    dynamic_shared: 0,
    min_tile_atoms: None,
    min_grid: None,
    lanes: None,
    track: 0,
}];

pub const DOUBLE_PLAN: Plan = Plan {
    schedule: Cow::Borrowed("thread_mapped"),
    kernels: Cow::Borrowed(DOUBLE_KERNELS),
    temps: Cow::Borrowed(&[]),
    index_limit: None,
    offsets: OffsetWidth::U64,
    select: None,
};

const RAISE_KERNELS: &[KernelPlan] = &[KernelPlan {
    entry: Cow::Borrowed("raise"),
    block: 32,
    grid: Grid::Fixed(1),
    dynamic_shared: 0,
    min_tile_atoms: None,
    min_grid: None,
    lanes: None,
    track: 0,
}];

const RAISE_TEMPS: &[Temp] = &[Temp {
    name: Cow::Borrowed("error"),
    elem_bytes: 8,
    count: TempCount::Fixed(2),
    zero: true,
    role: TempRole::ErrorFlag,
}];

pub const RAISE_PLAN: Plan = Plan {
    schedule: Cow::Borrowed("raise"),
    kernels: Cow::Borrowed(RAISE_KERNELS),
    temps: Cow::Borrowed(RAISE_TEMPS),
    index_limit: None,
    offsets: OffsetWidth::U64,
    select: None,
};

pub fn size(tiles: u64) -> ProblemSize {
    ProblemSize {
        tiles,
        atoms: tiles,
        lanes: 1,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    }
}

const MISSING_KERNELS: &[KernelPlan] = &[KernelPlan {
    entry: Cow::Borrowed("nope"),
    block: 32,
    grid: Grid::Fixed(1),
    dynamic_shared: 0,
    min_tile_atoms: None,
    min_grid: None,
    lanes: None,
    track: 0,
}];

pub const MISSING_PLAN: Plan = Plan {
    schedule: Cow::Borrowed("missing"),
    kernels: Cow::Borrowed(MISSING_KERNELS),
    temps: Cow::Borrowed(&[]),
    index_limit: None,
    offsets: OffsetWidth::U64,
    select: None,
};

/// `Device::filled` and `Device::write_at` on `dev`, on sizes drawn from `seed`: every fill path
/// (zero bytes, a 4-byte word, equal bytes, mixed 8-byte patterns from the host), writes at the
/// ends and in the middle, and the errors a wrong offset or a foreign buffer gives.
pub fn check_fill_and_write_at(dev: &lb_runtime::Device, seed: u64) {
    use lb_runtime::Error;
    let mut state = seed | 1;
    let mut next = |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    };
    for _ in 0..4 {
        let n = next(5000) as usize + 1;
        let at = next(n as u64) as usize;
        let mut f = dev.filled(n, f32::INFINITY).unwrap();
        dev.write_at(&mut f, at, &[0.0f32]).unwrap();
        let mut want = vec![f32::INFINITY; n];
        want[at] = 0.0;
        assert_eq!(
            f.download().unwrap(),
            want,
            "f32, {n} elements, write at {at}"
        );
        let u = dev.filled(n, u32::MAX).unwrap();
        assert_eq!(u.download().unwrap(), vec![u32::MAX; n]);
        // Equal bytes (one byte fill) and mixed bytes (from the host).
        let same = f64::from_bits(0x4141_4141_4141_4141);
        assert_eq!(
            dev.filled(n, same).unwrap().download().unwrap(),
            vec![same; n]
        );
        let mut mixed = dev.filled(n, -2.5f64).unwrap();
        let tail = [7.0f64, 8.0];
        let from = n.saturating_sub(tail.len());
        dev.write_at(&mut mixed, from, &tail[..n - from]).unwrap();
        let mut want = vec![-2.5f64; n];
        want[from..].copy_from_slice(&tail[..n - from]);
        assert_eq!(mixed.download().unwrap(), want);
        assert_eq!(dev.filled(n, 0u64).unwrap().download().unwrap(), vec![0; n]);
        let b = dev.filled(n, 200u8).unwrap();
        assert_eq!(b.download().unwrap(), vec![200u8; n]);
        // Past the end: an error naming the sizes; the buffer is unchanged.
        let err = dev.write_at(&mut f, n, &[1.0f32]).unwrap_err();
        assert!(matches!(err, Error::Shape(_)), "{err}");
        assert!(dev.write_at(&mut f, usize::MAX, &[1.0f32]).is_err());
        assert_eq!(f.download().unwrap()[at], 0.0);
    }
    assert!(dev.filled(0, 1.0f32).unwrap().is_empty());
    assert!(dev.filled(usize::MAX, 1.0f32).is_err());
    let mut empty = dev.filled(3, 1u32).unwrap();
    dev.write_at(&mut empty, 3, &[]).unwrap();
    let other = lb_runtime::Device::simulator();
    let mut foreign = other.filled(2, 1u32).unwrap();
    assert!(matches!(
        dev.write_at(&mut foreign, 0, &[5]),
        Err(Error::DeviceMismatch { .. })
    ));
}
