//! Random, valid `#[load_balanced]` kernels of one fixed signature, drawn from a seed. Two fuzz
//! targets share them: `lb-fuzz-bodies` compiles them with rustc and runs them on the simulator
//! against `cpu`, and lb-macros' unit tests expand them in-process, valid and mutated, by the
//! hundred thousand.
//!
//! Bodies are valid Rust *and* inside the kernel language, and their result must not depend on
//! the order atoms run in:
//! - `w` is the atom's own scratch: read and written at its own slot only (`w[nz]`, per lane
//!   `w[nz * k + j]`), so no atom sees another's store;
//! - a frontier (`tiles = "f"`) lists a tile at most once, since two copies would share slots;
//! - `h` takes at most one atomic per body (never in a loop) and is never read, so its final
//!   value is a sum (or min, max) whose terms the test can recover one atom at a time;
//! - no integer operation can overflow or divide by zero (the CPU reference is built with
//!   overflow checks), no index leaves its slice, division is by `|d|.max(0.5)` so the sign of a
//!   zero (which `min`/`max` may pick differently on the CPU) never becomes an infinity's sign;
//! - kernels keeping the default `fma = true` use no float addition or subtraction outside
//!   `mul_add`, so the only contraction is of the returned product into the schedule's sum,
//!   which the test's tolerance covers; the others set `fma = false`, where every atom's value
//!   is bitwise the CPU's.

use std::fmt::Write as _;

use lb_ptx::Schedule;

pub mod rng;
pub use rng::Rng;

/// Variants a kernel may name that [`Schedule::every`] leaves out.
const VARIANTS: &[&str] = &[
    "group_mapped(2)",
    "group_mapped(16)",
    "group_mapped(64)",
    "consolidate(block)",
    "consolidate(warp)",
];

/// Schedules a kernel takes: every built-in schedule (from lb-ptx's registry, so a new schedule
/// is fuzzed as soon as it is registered) and the variants.
pub fn schedules() -> Vec<&'static str> {
    Schedule::every()
        .map(Schedule::name)
        .chain(VARIANTS.iter().copied())
        .collect()
}

/// Deals `per_kernel` schedules to each of `kernels` kernels from [`schedules`], shuffled per round,
/// so every schedule gets several bodies; a schedule dealt twice to one kernel is kept once (an
/// attribute may not list it twice).
pub fn deal(rng: &mut Rng, kernels: usize, per_kernel: usize) -> Vec<Vec<&'static str>> {
    let all = schedules();
    let mut deck: Vec<&str> = Vec::new();
    while deck.len() < kernels * per_kernel {
        let mut round = all.clone();
        for i in (1..round.len()).rev() {
            round.swap(i, rng.below(i + 1));
        }
        deck.extend(round);
    }
    deck.chunks(per_kernel)
        .take(kernels)
        .map(|chunk| {
            let mut schedules: Vec<&str> = Vec::new();
            for s in chunk {
                if !schedules.contains(s) {
                    schedules.push(s);
                }
            }
            schedules
        })
        .collect()
}

/// One generated kernel, in pieces, so that a fuzz target can mutate one of them.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    /// What goes between the parentheses of `#[lb::load_balanced(...)]`.
    pub attr: String,
    /// The parameter list, without its parentheses.
    pub params: String,
    /// `" -> f32"` with `reduce`, else empty.
    pub ret: &'static str,
    /// The body's statements in order, then its tail (the returned value, or the last store).
    pub statements: Vec<String>,
    pub tail: String,
    /// `"sum"`, `"min"`, `"max"`, or none.
    pub reduce: Option<&'static str>,
    pub lanes: bool,
    /// `tiles = "f"`: the kernel runs the tiles the frontier `f` lists.
    pub frontier: bool,
    pub fma: bool,
    /// The intrinsic of the body's atomic on `h` (whether or not the body has one).
    pub atomic_op: &'static str,
}

impl Kernel {
    /// The body between its braces.
    pub fn body(&self) -> String {
        format!("{} {}", self.statements.join(" "), self.tail)
    }

    /// The function, without the attribute.
    pub fn function(&self) -> String {
        format!(
            "pub fn {}({}){} {{\n    {}\n}}\n",
            self.name,
            self.params,
            self.ret,
            self.body()
        )
    }

    /// The attribute and the function, as a source file holds them.
    pub fn source(&self) -> String {
        format!("#[lb::load_balanced({})]\n{}", self.attr, self.function())
    }
}

/// What one kernel's body may use.
struct Scope {
    /// Float addition and subtraction (only with `fma = false`).
    additive: bool,
    /// The kernel has `lanes = "k"` and `#[lane] j`.
    lanes: bool,
    /// The atom's own slot of `w`.
    slot: &'static str,
    /// Locals bound by `let` so far, and loop variables in scope.
    floats: Vec<String>,
    indices: Vec<String>,
    /// Counter for fresh local names.
    fresh: usize,
    /// The intrinsic of the kernel's atomic on `h`, and whether the body may still use it.
    atomic_op: &'static str,
    atomic_left: bool,
    /// The body returns a value (`reduce`), so it may `return` early.
    reduces: bool,
}

fn float_literal(rng: &mut Rng) -> String {
    // Quarter steps in [-2, 2]: exact in f32, never large enough to overflow a short product.
    let q = rng.below(17) as i32 - 8;
    format!("({:.2}f32)", f64::from(q) * 0.25)
}

fn float_leaf(rng: &mut Rng, sc: &Scope) -> String {
    let mut leaves: Vec<String> = [
        "a.values[nz]",
        "a.values[nz]",
        "x[a.col_indices[nz] as usize]",
        "x[t]",
        "s",
        "(n as f32)",
        "acc",
        "acc",
        "(t as f32)",
        "(r as f32)",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    leaves.push(format!("w[{}]", sc.slot));
    if sc.lanes {
        leaves.push("x[a.col_indices[nz] as usize * k + j]".into());
        leaves.push("(j as f32)".into());
    }
    leaves.extend(sc.floats.iter().cloned());
    if rng.chance(12) {
        return float_literal(rng);
    }
    // Rarely an infinity, so NaN and infinities flow through every operation.
    if rng.chance(1) {
        return rng.pick(&["f32::INFINITY", "f32::NEG_INFINITY"]).into();
    }
    leaves.swap_remove(rng.below(leaves.len()))
}

fn float_expr(rng: &mut Rng, sc: &Scope, depth: usize) -> String {
    if depth == 0 || rng.chance(30) {
        return float_leaf(rng, sc);
    }
    let d = depth - 1;
    match rng.below(if sc.additive { 14 } else { 12 }) {
        0 | 1 => format!("({} * {})", float_expr(rng, sc, d), float_expr(rng, sc, d)),
        2 => format!(
            "({} / {}.abs().max(0.5f32))",
            float_expr(rng, sc, d),
            float_expr(rng, sc, d)
        ),
        3 => format!("{}.abs()", float_expr(rng, sc, d)),
        4 => {
            // The root of a negative number is NaN on both sides.
            let e = float_expr(rng, sc, d);
            if rng.chance(70) {
                format!("{e}.abs().sqrt()")
            } else {
                format!("{e}.sqrt()")
            }
        }
        5 => format!(
            "{}.{}({})",
            float_expr(rng, sc, d),
            rng.pick(&["min", "max"]),
            float_expr(rng, sc, d)
        ),
        6 => format!(
            "{}.mul_add({}, {})",
            float_expr(rng, sc, d),
            float_expr(rng, sc, d),
            float_expr(rng, sc, d)
        ),
        7 => format!(
            "(if {} {{ {} }} else {{ {} }})",
            bool_expr(rng, sc, 1),
            float_expr(rng, sc, d),
            float_expr(rng, sc, d)
        ),
        8 => format!("x[{} % x.len()]", index_expr(rng, sc, 2)),
        9 => format!("({} as f32)", int_expr(rng, sc)),
        10 => format!("(-{})", float_expr(rng, sc, d)),
        11 => format!("({} as f32)", index_expr(rng, sc, 2)),
        _ => format!(
            "({} {} {})",
            float_expr(rng, sc, d),
            rng.pick(&["+", "-"]),
            float_expr(rng, sc, d)
        ),
    }
}

/// A `usize` no larger than a few times the matrix's size: sums of two such, small multiples,
/// remainders, and saturating float casts only under a remainder.
fn index_expr(rng: &mut Rng, sc: &Scope, depth: usize) -> String {
    if depth == 0 || rng.chance(35) {
        let mut leaves: Vec<String> = [
            "nz",
            "t",
            "r",
            "(n as usize)",
            "a.num_cols",
            "a.num_rows",
            "x.len()",
            "(a.col_indices[nz] as usize)",
            "a.row_offsets[t]",
            "a.row_offsets[t + 1]",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        // Suffixed: a method on an unsuffixed literal is refused (its type is not known yet).
        leaves.push(format!("{}usize", rng.below(10)));
        if sc.lanes {
            leaves.push("j".into());
            leaves.push("k".into());
        }
        leaves.extend(sc.indices.iter().cloned());
        return leaves.swap_remove(rng.below(leaves.len()));
    }
    let d = depth - 1;
    match rng.below(7) {
        0 => format!("({} + {})", index_expr(rng, sc, d), index_expr(rng, sc, d)),
        1 => format!("({} % {})", index_expr(rng, sc, d), 1 + rng.below(13)),
        2 => format!("({} * {})", index_expr(rng, sc, d), 1 + rng.below(3)),
        3 => format!(
            "{}.{}({})",
            index_expr(rng, sc, d),
            rng.pick(&["min", "max"]),
            index_expr(rng, sc, d)
        ),
        4 => format!(
            "(({} as usize) % {})",
            float_expr(rng, sc, 1),
            1 + rng.below(13)
        ),
        5 => format!("({} ^ {})", index_expr(rng, sc, d), rng.below(16)),
        _ => format!("({} >> {})", index_expr(rng, sc, d), rng.below(6)),
    }
}

/// Signed and 32-bit integers through operations that cannot overflow: saturating casts from
/// floats, bit operations, shifts by constants, remainders by positive constants.
fn int_expr(rng: &mut Rng, sc: &Scope) -> String {
    let f = float_expr(rng, sc, 1);
    let e = match rng.below(7) {
        0 => format!("(({f} * 4.0f32) as i32 ^ {})", rng.below(64)),
        1 => format!("(({f} * 1000.0f32) as i32 >> {})", rng.below(5)),
        2 => format!("(({f} * 8.0f32) as i32 % {})", 1 + rng.below(9)),
        3 => format!("({f} as i32).min({}i32)", rng.below(5) as i32 - 2),
        4 => format!("(({f} * 1e6f32) as i64 >> {})", rng.below(9)),
        5 => format!("(a.col_indices[nz] ^ n) % {}", 1 + rng.below(31)),
        _ => format!("(({} as u32) & {})", index_expr(rng, sc, 1), rng.below(256)),
    };
    // Whole, so that the `as f32` around it applies to all of it.
    format!("({e})")
}

fn bool_expr(rng: &mut Rng, sc: &Scope, depth: usize) -> String {
    let leaf = rng.below(if depth == 0 { 5 } else { 8 });
    match leaf {
        0 => format!(
            "({} {} {})",
            float_expr(rng, sc, 1),
            rng.pick(&["<", "<=", ">", ">=", "==", "!="]),
            float_expr(rng, sc, 1)
        ),
        1 => format!("({} % 2 == {})", index_expr(rng, sc, 1), rng.below(2)),
        2 => format!(
            "({} {} {})",
            index_expr(rng, sc, 1),
            rng.pick(&["<", ">=", "=="]),
            index_expr(rng, sc, 1)
        ),
        3 => "flag".into(),
        4 => format!("({} > {})", float_leaf(rng, sc), float_literal(rng)),
        5 => format!("!{}", bool_expr(rng, sc, depth - 1)),
        _ => format!(
            "({} {} {})",
            bool_expr(rng, sc, depth - 1),
            rng.pick(&["&&", "||"]),
            bool_expr(rng, sc, depth - 1)
        ),
    }
}

/// The kernel's one atomic statement on `h`: which slot, through which operation.
fn atomic(rng: &mut Rng, sc: &Scope) -> String {
    // The test recovers each atom's term by looking at exactly these slots.
    let slot = rng.pick(&[
        "t",
        "a.col_indices[nz] as usize",
        "nz % 7",
        "n as usize % 5",
    ]);
    format!(
        "{}(&mut h[{slot}], {});",
        sc.atomic_op,
        float_expr(rng, sc, 2)
    )
}

/// One statement; `top` allows `let` (whose name stays in scope); `depth` bounds the nesting of
/// `if` and `for`.
fn statement(rng: &mut Rng, sc: &mut Scope, top: bool, in_loop: bool, depth: usize) -> String {
    loop {
        let s = match rng.below(13) {
            0 if sc.additive => format!("acc += {};", float_expr(rng, sc, 3)),
            1 => format!("acc *= {};", float_expr(rng, sc, 2)),
            2 => format!("acc = {};", float_expr(rng, sc, 3)),
            3 if top => {
                let name = format!("v{}", sc.fresh);
                sc.fresh += 1;
                let s = format!("let {name} = {};", float_expr(rng, sc, 3));
                sc.floats.push(name);
                s
            }
            4 if top => {
                let name = format!("u{}", sc.fresh);
                sc.fresh += 1;
                let s = format!("let {name}: usize = {};", index_expr(rng, sc, 2));
                sc.indices.push(name);
                s
            }
            5 => format!("w[{}] = {};", sc.slot, float_expr(rng, sc, 2)),
            6 if sc.additive => format!("w[{}] += {};", sc.slot, float_expr(rng, sc, 2)),
            7 => format!("w[{}] *= {};", sc.slot, float_expr(rng, sc, 1)),
            8 if depth > 0 => {
                let c = bool_expr(rng, sc, 1);
                let then = statement(rng, sc, false, in_loop, depth - 1);
                if rng.chance(50) {
                    let other = statement(rng, sc, false, in_loop, depth - 1);
                    format!("if {c} {{ {then} }} else {{ {other} }}")
                } else {
                    format!("if {c} {{ {then} }}")
                }
            }
            9 if depth > 0 => {
                let var = format!("i{}", sc.fresh);
                sc.fresh += 1;
                let range = if rng.chance(50) {
                    format!("0..{} % 4", index_expr(rng, sc, 1))
                } else {
                    // Unsuffixed bounds half the time: the loop variable's type is then decided
                    // by a later use (an index, `i.min(..)`), as rustc decides it.
                    let lo = rng.below(3);
                    let suffix = if rng.chance(50) { "usize" } else { "" };
                    format!("{lo}{suffix}..={}{suffix}", lo + rng.below(3))
                };
                sc.indices.push(var.clone());
                sc.floats.push(format!("({var} as f32)"));
                let inner = statement(rng, sc, false, true, depth - 1);
                sc.indices.pop();
                sc.floats.pop();
                format!("for {var} in {range} {{ {inner} }}")
            }
            10 if sc.atomic_left && !in_loop => {
                sc.atomic_left = false;
                atomic(rng, sc)
            }
            // An early return at any depth, from inside loops too; at the top only under an
            // `if`, so what follows stays reachable.
            11 => {
                let ret = if sc.reduces {
                    format!("return {};", float_expr(rng, sc, 2))
                } else {
                    "return;".to_string()
                };
                if top {
                    format!("if {} {{ {ret} }}", bool_expr(rng, sc, 1))
                } else {
                    ret
                }
            }
            12 => format!(
                "acc = acc.{}({});",
                rng.pick(&["min", "max"]),
                float_expr(rng, sc, 2)
            ),
            _ => continue,
        };
        return s;
    }
}

/// One kernel named `k{index:03}` with `schedules`.
pub fn kernel(rng: &mut Rng, index: usize, schedules: &[&str]) -> Kernel {
    let reduce = match rng.below(10) {
        0..=5 => Some("sum"),
        6 => Some("min"),
        7 => Some("max"),
        _ => None,
    };
    let lanes = rng.chance(25);
    // A frontier `f` lists the tiles to run (`tiles = "f"`), each at most once: two copies of a
    // tile would race on their atoms' slots of `w`.
    let frontier = rng.chance(25);
    let fma = rng.chance(25);
    let atomic_op = match rng.below(4) {
        0 => "atomic_min",
        1 => "atomic_max",
        _ => "atomic_add",
    };
    let mut sc = Scope {
        additive: !fma,
        lanes,
        slot: if lanes { "nz * k + j" } else { "nz" },
        floats: Vec::new(),
        indices: Vec::new(),
        fresh: 0,
        atomic_op,
        atomic_left: rng.chance(70),
        reduces: reduce.is_some(),
    };
    let mut statements = vec![
        "let mut acc = 0.5f32;".to_string(),
        "let flag = s > 0.0f32;".to_string(),
    ];
    for _ in 0..1 + rng.below(6) {
        statements.push(statement(rng, &mut sc, true, false, 2));
    }
    // Most kernels have their atomic: force it in where the statements did not pick it.
    if sc.atomic_left {
        statements.push(atomic(rng, &sc));
    }
    let tail = if reduce.is_some() {
        format!("acc * {}", float_expr(rng, &sc, 3))
    } else {
        format!("w[{}] = acc;", sc.slot)
    };
    let attr = attribute(rng, schedules, reduce, lanes, frontier, fma);
    let lane_params = if lanes {
        " k: usize, #[lane] j: usize,"
    } else {
        ""
    };
    let f_param = if frontier { " f: &[u32]," } else { "" };
    Kernel {
        name: format!("k{index:03}"),
        attr,
        params: format!(
            "a: &Csr<f32>,{f_param} x: &[f32], w: &mut [f32], h: &mut [f32], s: f32, n: u32,\
             {lane_params} #[tile] t: usize, #[atom] nz: usize, #[rank] r: usize"
        ),
        ret: if reduce.is_some() { " -> f32" } else { "" },
        statements,
        tail,
        reduce,
        lanes,
        frontier,
        fma,
        atomic_op,
    }
}

/// The attribute's keys: the schedules, the kernel's shape, and now and then a block size, the
/// 64-bit index and the tuning keys of the schedules it has.
fn attribute(
    rng: &mut Rng,
    schedules: &[&str],
    reduce: Option<&str>,
    lanes: bool,
    frontier: bool,
    fma: bool,
) -> String {
    let mut attr = format!("schedule = \"{}\"", schedules.join(", "));
    if let Some(op) = reduce {
        write!(attr, ", reduce = \"{op}\", output = \"y\"").unwrap();
    }
    if lanes {
        attr.push_str(", lanes = \"k\"");
    }
    if frontier {
        attr.push_str(", tiles = \"f\"");
    }
    if !fma {
        attr.push_str(", fma = false");
    }
    // A block of 32 makes the 3000-atom row of lb-fuzz-bodies' test a huge tile (4 × block × 16
    // atoms); a group must fit in the block.
    let smallest_block = if schedules.contains(&"group_mapped(64)") {
        64
    } else {
        32
    };
    match rng.below(4) {
        0 if smallest_block == 32 => attr.push_str(", block = 32"),
        0 | 1 => attr.push_str(", block = 64"),
        _ => {}
    }
    // The 64-bit index variants, which small matrices never pick under the default `auto`, and
    // shares other than the default for the work-oriented schedules.
    if rng.chance(25) {
        attr.push_str(", index = \"u64\"");
    }
    // (Not with multi_phase: only its default share is lowered to fit shared memory.)
    if !schedules.contains(&"multi_phase") && rng.chance(25) {
        write!(attr, ", items_per_thread = {}", 2 + rng.below(4)).unwrap();
    }
    if schedules.contains(&"binning") && rng.chance(50) {
        write!(attr, ", warp_threshold = {}", 1 + rng.below(40)).unwrap();
    }
    if schedules.iter().any(|s| s.starts_with("consolidate")) && rng.chance(50) {
        write!(attr, ", consolidate_threshold = {}", rng.below(50)).unwrap();
    }
    if schedules.contains(&"multi_phase") && rng.chance(50) {
        write!(attr, ", iteration_factor = {}", 1 + rng.below(4)).unwrap();
    }
    attr
}
