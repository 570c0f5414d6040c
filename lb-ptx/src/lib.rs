//! lb-ptx: the typed PTX IR and emitter, the body IR, the schedule templates, plans, and a SIMT
//! simulator that runs the emitted text on the CPU. It has no dependency on `syn`: the macro
//! builds a [`body::Body`] and calls [`generate`]; programs may call it at run time too.

pub mod body;
pub mod builder;
pub mod codegen;
pub mod ir;
pub mod math64;
pub mod optimize;
pub mod plan;
pub mod primitives;
pub mod ptxas;
pub mod schedules;
pub mod sim;
pub mod user;

pub use schedules::{Schedule, ScheduleTemplate};

/// Index width of the work-oriented schedules' search arithmetic.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub enum IndexWidth {
    U32,
    U64,
    /// Generate both and let the launcher choose by problem size.
    #[default]
    Auto,
}

/// Options from the attribute that shape the generated code.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Options {
    /// The schedules to generate, in order (no duplicates).
    pub schedules: Vec<Schedule>,
    /// PTX `.target`, e.g. `"sm_75"`.
    pub target: String,
    /// Threads per block.
    pub block: u32,
    /// Work items per thread, for schedules that use it.
    pub items_per_thread: u32,
    pub index: IndexWidth,
    /// Bounds-check every load, store and atomic of the body; raise the plan's error flag
    /// instead of faulting.
    pub checked: bool,
    /// The `usize` scalar parameter giving the lane count (index into `Body::params`).
    pub lanes: Option<usize>,
    /// The `&[u32]` slice parameter listing the active tiles (index into `Body::params`).
    pub tiles: Option<usize>,
    /// Per-schedule knobs; `None` keeps the schedule's default.
    pub tuning: Tuning,
    /// Contract a product summed once into one `fma` (what CUDA C++ does by default): one
    /// rounding instead of two. `false` rounds every operation as the CPU reference does, so a
    /// schedule that sums in atom order matches it bitwise.
    pub fma: bool,
    /// What to do with a schedule whose kernels would declare more than [`MAX_REGISTERS`]:
    /// `false` refuses the whole generation ([`GenError::TooManyRegisters`]), `true` leaves the
    /// schedule out and says so in [`Generated::left_out`] (what `schedule = "auto"` asks).
    pub leave_out_oversized: bool,
}

/// The most virtual registers one generated kernel may declare. The code generator gives every
/// value of the body its own register, so the count grows with the body; past this a kernel is
/// far beyond what ptxas can keep in registers and beyond the simulator's register file, and the
/// body is better split.
pub const MAX_REGISTERS: u32 = 1 << 16;

/// A schedule left out of a generation, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub schedule: Schedule,
    pub why: String,
}

/// The knobs of single schedules, from the attribute's keys of the same names. A schedule reads
/// only its own; `None` means the default its template documents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tuning {
    /// `binning`: tiles with at least this many atoms are gathered by the whole block.
    pub block_threshold: Option<u64>,
    /// `binning`: tiles with at least this many atoms (below the block threshold) by a warp.
    pub warp_threshold: Option<u64>,
    /// `consolidate` at every level: tiles with at least this many atoms go to the buffer.
    pub consolidate_threshold: Option<u64>,
    /// `multi_phase`: Busato & Bombieri's iteration factor `IS` (rounds of coalesced expansion
    /// per partition search).
    pub iteration_factor: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            schedules: vec![Schedule::ThreadMapped],
            target: "sm_75".to_string(),
            block: 256,
            items_per_thread: 1,
            index: IndexWidth::Auto,
            checked: false,
            lanes: None,
            tiles: None,
            tuning: Tuning::default(),
            fma: true,
            leave_out_oversized: false,
        }
    }
}

/// The output of [`generate`]: one PTX module holding every requested schedule's kernels, and one
/// plan per schedule in the order of `Options::schedules`.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    pub ptx: String,
    pub plans: Vec<plan::Plan>,
    /// The schedules left out under [`Options::leave_out_oversized`], in request order.
    pub left_out: Vec<LeftOut>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("block size {block} is not supported by `{schedule}`: {why}")]
    BadBlock {
        schedule: &'static str,
        block: u32,
        why: String,
    },
    #[error(
        "target `{0}` is not supported: use sm_75 or newer (sm_75, sm_80, sm_86, sm_89, sm_90)"
    )]
    BadTarget(String),
    #[error(
        "the body is too large for `{schedule}`: its kernel `{kernel}` needs {registers} registers, more than the {max} a generated kernel may declare (every value of the body gets its own); split the work into smaller kernels, or name other schedules",
        max = MAX_REGISTERS
    )]
    TooManyRegisters {
        schedule: &'static str,
        kernel: String,
        registers: u64,
    },
    #[error("{0}")]
    Unsupported(String),
}

/// Whether `target` is `sm_XY` (optionally with a letter suffix, `sm_90a`) with `XY >= 75`.
fn target_ok(target: &str) -> bool {
    let Some(rest) = target.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
    let suffix = &rest[digits.len()..];
    suffix.len() <= 1 && digits.len() >= 2 && digits.parse::<u32>().is_ok_and(|v| v >= 75)
}

/// Builds one PTX module holding the kernels of every schedule in `opts.schedules`, and their
/// plans in the same order (one or more per schedule, see [`ScheduleTemplate::plans`]).
pub fn generate(body: &body::Body, opts: &Options) -> Result<Generated, GenError> {
    let mut kernels = Vec::new();
    let mut left_out = Vec::new();
    let plans = add_kernels(body, opts, &mut kernels, &mut left_out)?;
    Ok(Generated {
        ptx: module(opts, kernels),
        plans,
        left_out,
    })
}

/// What the launchers of a `#[load_balanced]` function run (docs/runtime-contract.md): one PTX
/// module with the kernels of the safe entry points and, where they differ, those of the
/// unchecked ones.
#[derive(Clone, Debug, PartialEq)]
pub struct SafeGenerated {
    pub ptx: String,
    /// The plans of the safe entry points, as [`Generated::plans`].
    pub plans: Vec<plan::Plan>,
    /// The plans of the unchecked entry points, whose kernels test nothing (entries named after
    /// `{body}_unchecked`); `None` when they would be `plans`, because nothing needed a test.
    pub unchecked: Option<Vec<plan::Plan>>,
    /// The host checks the kernels of `plans` rely on ([`body::Body::gathers`]).
    pub gathers: Vec<body::Gather>,
    /// The host checks the unchecked entry points make: every gather, so that their caller
    /// answers only for the accesses no launch-time check proves.
    pub unchecked_gathers: Vec<body::Gather>,
    /// The schedules left out under [`Options::leave_out_oversized`], from neither `plans` nor
    /// `unchecked`.
    pub left_out: Vec<LeftOut>,
}

/// The kernels of the safe and the unchecked entry points. `opts.checked` asks for kernels that
/// test every access of the body and report its index ([`body::Guards::Every`]); otherwise the
/// safe kernels test only what [`body::Proofs`] cannot prove from the host checks, and with a
/// frontier (`opts.tiles`) its entries, which no host check sees. When nothing is left to test,
/// the safe kernels are the unchecked ones, built once.
pub fn generate_safe(body: &body::Body, opts: &Options) -> Result<SafeGenerated, GenError> {
    safe_generation(body, opts, &add_kernels)
}

/// The kernels of a schedule written outside lb ([`user::UserSchedule`]) for the safe and the
/// unchecked entry points, as [`generate_safe`] builds the built-in ones: one module holding
/// only that schedule's kernels (`opts.schedules` is not read).
pub fn generate_user(
    body: &body::Body,
    opts: &Options,
    schedule: &dyn user::UserSchedule,
) -> Result<SafeGenerated, GenError> {
    let name = user::checked_name(schedule)?;
    let opts = Options {
        schedules: Vec::new(),
        leave_out_oversized: false,
        ..opts.clone()
    };
    let add =
        |body: &body::Body, opts: &Options, kernels: &mut Vec<ir::Kernel>, _: &mut Vec<LeftOut>| {
            check_kernel(body, opts)?;
            let built = build_schedule(body, opts, name, schedule)?;
            if built.is_empty() {
                return Err(GenError::Unsupported(format!(
                    "schedule `{name}` returned no plan for `{}`",
                    body.name
                )));
            }
            push_kernels(kernels, name, built)
        };
    safe_generation(body, &opts, &add)
}

/// Adds the kernels and returns the plans of the schedules a generation covers.
type AddKernels<'a> = dyn Fn(
        &body::Body,
        &Options,
        &mut Vec<ir::Kernel>,
        &mut Vec<LeftOut>,
    ) -> Result<Vec<plan::Plan>, GenError>
    + 'a;

/// [`generate_safe`] over the schedules `add` builds.
fn safe_generation(
    body: &body::Body,
    opts: &Options,
    add: &AddKernels<'_>,
) -> Result<SafeGenerated, GenError> {
    let proven = body::Guards::Unproven { lanes: opts.lanes };
    let guards = if opts.checked {
        body::Guards::Every
    } else {
        proven
    };
    let safe = body::Body {
        guards,
        ..body.clone()
    };
    let unchecked_opts = Options {
        checked: false,
        ..opts.clone()
    };
    let gathers = safe.gathers(guards);
    let unchecked_gathers = safe.gathers(proven);
    let tests = opts.checked || opts.tiles.is_some() || !safe.unproven_params(guards).is_empty();
    if !tests {
        let mut kernels = Vec::new();
        let mut left_out = Vec::new();
        let plans = add(&safe, &unchecked_opts, &mut kernels, &mut left_out)?;
        return Ok(SafeGenerated {
            ptx: module(opts, kernels),
            plans,
            unchecked: None,
            gathers,
            unchecked_gathers,
            left_out,
        });
    }
    let safe_opts = Options {
        checked: true,
        ..opts.clone()
    };
    let twin = body::Body {
        name: format!("{}_unchecked", body.name),
        ..safe.clone()
    };
    let mut kernels = Vec::new();
    let mut left_out = Vec::new();
    let plans = add(&safe, &safe_opts, &mut kernels, &mut left_out)?;
    // The unchecked twins of the schedules kept: their kernels are the safe ones without the
    // tests, so they never need more registers, and none is left out on its own.
    let twin_opts = Options {
        schedules: opts
            .schedules
            .iter()
            .copied()
            .filter(|s| left_out.iter().all(|l| l.schedule != *s))
            .collect(),
        leave_out_oversized: false,
        ..unchecked_opts
    };
    let unchecked = add(&twin, &twin_opts, &mut kernels, &mut Vec::new())?;
    Ok(SafeGenerated {
        ptx: module(opts, kernels),
        plans,
        unchecked: Some(unchecked),
        gathers,
        unchecked_gathers,
        left_out,
    })
}

/// The PTX text of a module holding `kernels`.
fn module(opts: &Options, kernels: Vec<ir::Kernel>) -> String {
    ir::Module {
        version: (7, 8),
        target: opts.target.clone(),
        kernels,
    }
    .to_string()
}

/// `Err` naming the first of `kernels` that declares more than [`MAX_REGISTERS`].
fn within_registers(schedule: &'static str, kernels: &[ir::Kernel]) -> Result<(), GenError> {
    for k in kernels {
        let registers: u64 = k.reg_counts.iter().map(|&n| u64::from(n)).sum();
        if registers > u64::from(MAX_REGISTERS) {
            return Err(GenError::TooManyRegisters {
                schedule,
                kernel: k.name.clone(),
                registers,
            });
        }
    }
    Ok(())
}

/// Appends the kernels of every schedule in `opts.schedules` to `kernels` (each entry name
/// once) and returns their plans in order; a schedule whose kernels are too large is left out
/// (recorded in `left_out`) under [`Options::leave_out_oversized`], refused otherwise.
fn add_kernels(
    body: &body::Body,
    opts: &Options,
    kernels: &mut Vec<ir::Kernel>,
    left_out: &mut Vec<LeftOut>,
) -> Result<Vec<plan::Plan>, GenError> {
    check_kernel(body, opts)?;
    let mut plans = Vec::with_capacity(opts.schedules.len());
    for (i, &schedule) in opts.schedules.iter().enumerate() {
        if opts.schedules[..i].contains(&schedule) {
            let name = schedule.name();
            return Err(GenError::Unsupported(format!(
                "schedule `{name}` is listed twice"
            )));
        }
        match build_schedule(body, opts, schedule.name(), schedule.template()) {
            Err(e @ GenError::TooManyRegisters { .. }) if opts.leave_out_oversized => {
                if left_out.iter().all(|l| l.schedule != schedule) {
                    left_out.push(LeftOut {
                        schedule,
                        why: e.to_string(),
                    });
                }
            }
            built => plans.extend(push_kernels(kernels, schedule.name(), built?)?),
        }
    }
    Ok(plans)
}

/// The checks of the kernel itself, before any schedule: its target and its name.
fn check_kernel(body: &body::Body, opts: &Options) -> Result<(), GenError> {
    if !target_ok(&opts.target) {
        return Err(GenError::BadTarget(opts.target.clone()));
    }
    if !codegen::is_ptx_ident(&body.name) {
        return Err(GenError::Unsupported(format!(
            "the kernel name `{}` cannot be used in PTX entry names: use ASCII letters, digits \
             and `_`",
            body.name
        )));
    }
    Ok(())
}

/// Every plan of one schedule with its kernels (through the IR passes); `Err` when the block
/// size is not one lb supports or a kernel declares more than [`MAX_REGISTERS`].
fn build_schedule(
    body: &body::Body,
    opts: &Options,
    name: &'static str,
    template: &dyn ScheduleTemplate,
) -> Result<Vec<(plan::Plan, Vec<ir::Kernel>)>, GenError> {
    if !(32..=1024).contains(&opts.block) || !opts.block.is_power_of_two() {
        return Err(GenError::BadBlock {
            schedule: name,
            block: opts.block,
            why: "threads per block must be a power of two from 32 to 1024".into(),
        });
    }
    let mut built = Vec::new();
    for plan in template.plans(body, opts)? {
        let plan_kernels = template.kernels(body, opts, &plan)?;
        within_registers(name, &plan_kernels)?;
        built.push((plan, plan_kernels));
    }
    Ok(built)
}

/// Appends the kernels of `built` to `kernels`, each entry name once, and returns the plans.
fn push_kernels(
    kernels: &mut Vec<ir::Kernel>,
    name: &str,
    built: Vec<(plan::Plan, Vec<ir::Kernel>)>,
) -> Result<Vec<plan::Plan>, GenError> {
    let mut plans = Vec::with_capacity(built.len());
    for (plan, plan_kernels) in built {
        // Plans of one schedule may share kernels (`multi_phase`'s variants share all but
        // their partition): a kernel is emitted once per entry name.
        for kernel in plan_kernels {
            match kernels.iter().find(|k: &&ir::Kernel| k.name == kernel.name) {
                None => kernels.push(kernel),
                Some(same) if *same == kernel => {}
                Some(_) => {
                    return Err(GenError::Unsupported(format!(
                        "two plans of `{name}` build different kernels named `{}`",
                        kernel.name
                    )))
                }
            }
        }
        plans.push(plan);
    }
    Ok(plans)
}
