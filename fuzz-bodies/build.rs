//! Writes `$OUT_DIR/bodies.rs`: random, valid `#[load_balanced]` kernels of one fixed signature
//! (drawn by `lb-fuzz-gen`, whose documentation lists the rules that keep them valid and
//! order-independent), each with a few schedules, for `tests/generated.rs` to run on the
//! simulator against `cpu`.
//!
//! The seed is `LB_FUZZ_SEED` when set, else the clock's, so every fresh build fuzzes new
//! bodies; the generated file records it (`SEED`, and `REPLAY`: the command that rebuilds the
//! same kernels, with `LB_FUZZ_KERNELS` when that set another count).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use lb_fuzz_gen::{deal, kernel, Kernel, Rng};

/// How many kernels one build generates unless `LB_FUZZ_KERNELS` says otherwise (long runs):
/// enough to give every schedule several bodies, few enough that expanding them takes about
/// 15 s on two cores.
const KERNELS: usize = 40;
/// Schedules a kernel takes (`deal` shuffles the list per seed and deals it out in turn).
const PER_KERNEL: usize = 4;

/// One kernel's source and its entry of the test's table.
fn write_kernel(k: &Kernel, out: &mut String) {
    let source = k.source();
    out.push_str(&source);
    let name = &k.name;
    let f_arg = if k.frontier { " c.f," } else { "" };
    let k_arg = if k.lanes { " c.k," } else { "" };
    let lane_arg = if k.lanes { " j," } else { "" };
    let (y_arg, atom_value) = if k.reduce.is_some() {
        (" y", "")
    } else {
        ("", "; 0.0")
    };
    let reduce_value = match k.reduce {
        Some("sum") => "Some(Reduce::Sum)",
        Some("min") => "Some(Reduce::Min)",
        Some(_) => "Some(Reduce::Max)",
        None => "None",
    };
    let h_op = match k.atomic_op {
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
        lanes = k.lanes,
        frontier = k.frontier,
        k_arg_d = if k.lanes { " d.k," } else { "" },
        f_arg_d = if k.frontier { " d.f," } else { "" },
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
    let dealt = deal(&mut rng, kernels, PER_KERNEL);
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
    for (i, schedules) in dealt.iter().enumerate() {
        write_kernel(&kernel(&mut rng, i, schedules), &mut out);
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
