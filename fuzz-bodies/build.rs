//! Writes `$OUT_DIR/bodies.rs`: random, valid `#[load_balanced]` kernels of one fixed signature,
//! each with a few schedules, for `tests/generated.rs` to run on the simulator against `cpu`.
//!
//! The seed is `LB_FUZZ_SEED` when set, else the clock's, so every fresh build fuzzes new
//! bodies; the generated file records it (`SEED`, and `REPLAY`: the command that rebuilds the
//! same kernels, with `LB_FUZZ_KERNELS` when that set another count).
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
use std::time::{SystemTime, UNIX_EPOCH};

/// How many kernels one build generates unless `LB_FUZZ_KERNELS` says otherwise (long runs):
/// enough to give every schedule several bodies, few enough that expanding them takes about
/// 15 s on two cores.
const KERNELS: usize = 40;
/// Schedules a kernel takes; the list is shuffled per seed and dealt out in turn, so every
/// schedule (the 13 of `"auto"` and the variants `"auto"` leaves out) gets several bodies.
const PER_KERNEL: usize = 4;
const SCHEDULES: &[&str] = &[
    "thread_mapped",
    "warp_mapped",
    "block_mapped",
    "group_mapped(4)",
    "group_mapped(8)",
    "dynamic_virtual_warps",
    "merge_path",
    "nonzero_split",
    "consolidate",
    "two_phase",
    "multi_phase",
    "binning",
    "lrb",
    "group_mapped(2)",
    "group_mapped(16)",
    "group_mapped(64)",
    "consolidate(block)",
    "consolidate(warp)",
];

// The generator the test draws its inputs with; `value`/`values` are the test's alone.
#[allow(dead_code)]
#[path = "src/rng.rs"]
mod rng;
use rng::Rng;

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

/// One kernel: its attribute, its function and its entry of the test's table.
fn kernel(rng: &mut Rng, index: usize, schedules: &[&str], out: &mut String) {
    let name = format!("k{index:03}");
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
    let mut body = String::from("let mut acc = 0.5f32; let flag = s > 0.0f32;");
    for _ in 0..1 + rng.below(6) {
        let s = statement(rng, &mut sc, true, false, 2);
        body.push(' ');
        body.push_str(&s);
    }
    // Most kernels have their atomic: force it in where the statements did not pick it.
    if sc.atomic_left {
        body.push(' ');
        body.push_str(&atomic(rng, &sc));
    }
    if reduce.is_some() {
        let tail = float_expr(rng, &sc, 3);
        write!(body, " acc * {tail}").unwrap();
    } else {
        write!(body, " w[{}] = acc;", sc.slot).unwrap();
    }

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
    // A block of 32 makes the 3000-atom row of the test a huge tile (4 × block × 16 atoms); a
    // group must fit in the block.
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
    // Tuning keys of the schedules the kernel has, now and then.
    if schedules.contains(&"binning") && rng.chance(50) {
        write!(attr, ", warp_threshold = {}", 1 + rng.below(40)).unwrap();
    }
    if schedules.iter().any(|s| s.starts_with("consolidate")) && rng.chance(50) {
        write!(attr, ", consolidate_threshold = {}", rng.below(50)).unwrap();
    }
    if schedules.contains(&"multi_phase") && rng.chance(50) {
        write!(attr, ", iteration_factor = {}", 1 + rng.below(4)).unwrap();
    }

    let lane_params = if lanes {
        " k: usize, #[lane] j: usize,"
    } else {
        ""
    };
    let f_param = if frontier { " f: &[u32]," } else { "" };
    let ret = if reduce.is_some() { " -> f32" } else { "" };
    let source = format!(
        "#[lb::load_balanced({attr})]\npub fn {name}(a: &Csr<f32>,{f_param} x: &[f32], w: &mut [f32], \
         h: &mut [f32], s: f32, n: u32,{lane_params} #[tile] t: usize, #[atom] nz: usize, \
         #[rank] r: usize){ret} {{\n    {body}\n}}\n"
    );
    out.push_str(&source);

    let f_arg = if frontier { " c.f," } else { "" };
    let k_arg = if lanes { " c.k," } else { "" };
    let lane_arg = if lanes { " j," } else { "" };
    let (y_arg, atom_value) = if reduce.is_some() {
        (" y", "")
    } else {
        ("", "; 0.0")
    };
    let reduce_value = match reduce {
        Some("sum") => "Some(Reduce::Sum)",
        Some("min") => "Some(Reduce::Min)",
        Some(_) => "Some(Reduce::Max)",
        None => "None",
    };
    let h_op = match atomic_op {
        "atomic_min" => "Reduce::Min",
        "atomic_max" => "Reduce::Max",
        _ => "Reduce::Sum",
    };
    write!(
        out,
        "pub const {upper}: Kernel = Kernel {{
    name: \"{name}\",
    source: {source:?},
    reduce: {reduce_value},
    lanes: {lanes},
    frontier: {frontier},
    h_op: {h_op},
    schedules: {name}::SCHEDULES,
    cpu: |c, w, h, y| {{ let _ = &y; {name}::cpu(c.a,{f_arg} c.x, w, h, c.s, c.n,{k_arg}{y_arg}) }},
    atom: |c, w, h, t, nz, j| {{ let _ = j; {name}(c.a,{f_arg} c.x, w, h, c.s, c.n,{k_arg}{lane_arg} t, nz, nz - c.a.row_offsets[t]){atom_value} }},
    launch: |dev, schedule, d, w, h, y| {{ let _ = &y; {name}::launch_with(dev, schedule, d.a,{f_arg_d} d.x, w, h, d.s, d.n,{k_arg_d}{y_arg}).map(drop) }},
}};\n\n",
        upper = name.to_uppercase(),
        k_arg_d = if lanes { " d.k," } else { "" },
        f_arg_d = if frontier { " d.f," } else { "" },
    )
    .unwrap();
}

fn main() {
    println!("cargo:rerun-if-env-changed=LB_FUZZ_SEED");
    println!("cargo:rerun-if-env-changed=LB_FUZZ_KERNELS");
    println!("cargo:rerun-if-changed=build.rs");
    let seed: u64 = match std::env::var("LB_FUZZ_SEED") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("LB_FUZZ_SEED={v:?} is not a u64")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    };
    let kernels: usize = match std::env::var("LB_FUZZ_KERNELS") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("LB_FUZZ_KERNELS={v:?} is not a count")),
        Err(_) => KERNELS,
    };
    let mut rng = Rng(seed);
    let mut deck: Vec<&str> = Vec::new();
    while deck.len() < kernels * PER_KERNEL {
        let mut round = SCHEDULES.to_vec();
        for i in (1..round.len()).rev() {
            round.swap(i, rng.below(i + 1));
        }
        deck.extend(round);
    }
    let count = if kernels == KERNELS {
        String::new()
    } else {
        format!(" LB_FUZZ_KERNELS={kernels}")
    };
    let mut out = format!(
        "/// The seed these kernels were generated from.\n\
         pub const SEED: u64 = {seed};\n\
         /// The command that rebuilds these kernels and reruns the test on the same inputs.\n\
         pub const REPLAY: &str = \"LB_FUZZ_SEED={seed}{count} cargo test -p lb-fuzz-bodies\";\n\n"
    );
    let mut names = Vec::new();
    for (i, chunk) in deck.chunks(PER_KERNEL).take(kernels).enumerate() {
        // A schedule listed twice in one attribute is an error; a repeat is dropped.
        let mut schedules: Vec<&str> = Vec::new();
        for s in chunk {
            if !schedules.contains(s) {
                schedules.push(s);
            }
        }
        kernel(&mut rng, i, &schedules, &mut out);
        names.push(format!("K{i:03}"));
    }
    writeln!(
        out,
        "/// Every generated kernel.\npub const ALL: &[Kernel] = &[{}];",
        names.join(", ")
    )
    .unwrap();
    let path = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("bodies.rs");
    std::fs::write(&path, out).expect("writing bodies.rs");
}
