//! Hand-written PTX kernels and plans shared by the simulator and GPU tests.

use std::borrow::Cow;

use lb_ptx::plan::{Grid, KernelPlan, OffsetWidth, Plan, ProblemSize, Temp, TempCount, TempRole};

/// `y[i] = 2 * x[i]` with a grid-stride loop; params (x, x_len, y, y_len).
pub const DOUBLE_PTX: &str = "\
.version 7.8
.target sm_75
.address_size 64

.visible .entry double(
\t.param .u64 x,
\t.param .u64 x_len,
\t.param .u64 y,
\t.param .u64 y_len
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
\t.param .u64 flag
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
}];

pub const MISSING_PLAN: Plan = Plan {
    schedule: Cow::Borrowed("missing"),
    kernels: Cow::Borrowed(MISSING_KERNELS),
    temps: Cow::Borrowed(&[]),
    index_limit: None,
    offsets: OffsetWidth::U64,
    select: None,
};
