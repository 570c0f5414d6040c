//! Fuzzing of the front end (run by `cargo test`; `PROPTEST_CASES` sets the count): generated
//! kernel bodies, well-formed and mutated, go through the attribute, the roles, the type check,
//! the lowering and PTX generation. Nothing may panic; every body the front end accepts must
//! generate PTX that the simulator's parser reads back, and every refusal must be an error
//! with a message.

use proc_macro2::TokenStream;
use proptest::prelude::*;

use crate::{attr, check, lower, parse};

/// Leaves of type `f32`, `usize` and `bool` for the kernel below.
const F32_LEAVES: &[&str] = &[
    "a.values[nz]",
    "x[a.col_indices[nz] as usize]",
    "x[t]",
    "s",
    "1.5f32",
    "(n as f32)",
    "w[t]",
    "f32::MAX",
    "acc",
];
const USIZE_LEAVES: &[&str] = &["nz", "t", "(n as usize)", "a.num_cols", "x.len()", "3", "k"];
const BOOL_LEAVES: &[&str] = &["true", "(s < 2.0)", "(nz % 2 == 0)", "flag"];
/// What a mutation may put in place of a token: other tokens of the subset, and some outside it.
const NOISE: &[&str] = &[
    "+",
    "*",
    "-",
    "/",
    "%",
    "==",
    "<",
    "&&",
    "||",
    "!",
    "as",
    "u8",
    "i64",
    "f64",
    "usize",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ";",
    "let",
    "mut",
    "if",
    "else",
    "for",
    "in",
    "..",
    "return",
    "x",
    "w",
    "a",
    "nz",
    "t",
    "s",
    "n",
    "0",
    "1e40",
    "-1",
    "'c'",
    "\"s\"",
    "loop",
    "match",
    "?",
    "&mut",
    "atomic_add",
    "push",
    "a.row_offsets",
    "a.values",
    "sqrt",
    ".",
    ",",
    "=",
    "+=",
];

fn f32_expr() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(F32_LEAVES).prop_map(str::to_string);
    leaf.prop_recursive(4, 24, 3, |inner| {
        let idx = prop::sample::select(USIZE_LEAVES).prop_map(str::to_string);
        let cond = prop::sample::select(BOOL_LEAVES).prop_map(str::to_string);
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/"][..]),
                inner.clone()
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            inner.clone().prop_map(|e| format!("{e}.abs()")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("{l}.min({r})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("{a}.mul_add({b}, {c})")),
            (cond, inner.clone(), inner.clone())
                .prop_map(|(c, t, e)| format!("(if {c} {{ {t} }} else {{ {e} }})")),
            idx.prop_map(|i| format!("x[{i} % x.len()]")),
        ]
    })
}

fn statement() -> impl Strategy<Value = String> {
    let idx = prop::sample::select(USIZE_LEAVES).prop_map(str::to_string);
    prop_oneof![
        f32_expr().prop_map(|e| format!("acc = acc + {e};")),
        f32_expr().prop_map(|e| format!("acc += {e};")),
        (idx.clone(), f32_expr()).prop_map(|(i, e)| format!("w[{i} % w.len()] = {e};")),
        f32_expr().prop_map(|e| format!("atomic_add(&mut w[t], {e});")),
        (idx.clone(), f32_expr())
            .prop_map(|(i, e)| format!("for j in 0..{i} % 4 {{ acc += {e} * (j as f32); }}")),
        (prop::sample::select(BOOL_LEAVES), f32_expr())
            .prop_map(|(c, e)| format!("if {c} {{ acc = {e}; }}")),
        idx.prop_map(|i| format!("k = k + {i};")),
    ]
}

fn body() -> impl Strategy<Value = String> {
    (prop::collection::vec(statement(), 0..6), f32_expr()).prop_map(|(stmts, tail)| {
        format!(
            "let mut acc = 0.0f32; let mut k: usize = 1; let flag = s > 0.0; {} acc * {tail}",
            stmts.join(" ")
        )
    })
}

/// Replaces, inserts or deletes whitespace-separated pieces of `text`.
fn mutate(text: &str, edits: &[(usize, usize, u8)]) -> String {
    let mut pieces: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    for &(at, noise, kind) in edits {
        if pieces.is_empty() {
            break;
        }
        let at = at % pieces.len();
        let token = NOISE[noise % NOISE.len()].to_string();
        match kind % 3 {
            0 => pieces[at] = token,
            1 => pieces.insert(at, token),
            _ => {
                pieces.remove(at);
            }
        }
    }
    pieces.join(" ")
}

const SIGNATURE: &str = "fn k(a: &Csr<f32>, x: &[f32], w: &mut [f32], s: f32, n: u32, \
                         #[tile] t: usize, #[atom] nz: usize) -> f32";

/// The front end and PTX generation on one kernel text; `Err` is a refusal with its messages.
fn front_end(body: &str) -> Result<(), Vec<String>> {
    let item: TokenStream = match format!("{SIGNATURE} {{ {body} }}").parse() {
        Ok(t) => t,
        // Text that is not even tokens never reaches a proc macro.
        Err(_) => return Ok(()),
    };
    let attr: TokenStream = "schedule = \"thread_mapped, merge_path, binning\", reduce = \"sum\", \
                             output = \"y\""
        .parse()
        .expect("the attribute's tokens");
    let refused = |e: syn::Error| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>();
    crate::depth::check(item.clone()).map_err(refused)?;
    let func: syn::ItemFn = syn::parse2(item).map_err(refused)?;
    let args = attr::parse(attr).map_err(refused)?;
    let sig = parse::parse(&func, &args).map_err(refused)?;
    let typed = check::check(&sig, &func.block).map_err(refused)?;
    let body = lower::lower("k", &sig, &typed).map_err(refused)?;
    let opts = lb_ptx::Options {
        schedules: args.schedules.clone(),
        ..lb_ptx::Options::default()
    };
    match lb_ptx::generate(&body, &opts) {
        Ok(g) => {
            if let Err(e) = lb_ptx::sim::parse(&g.ptx) {
                panic!("accepted body, unreadable PTX ({e}):\n{body:?}");
            }
            Ok(())
        }
        Err(e) => Err(vec![e.to_string()]),
    }
}

proptest! {
    #[test]
    fn well_formed_bodies_are_accepted_and_generate_readable_ptx(body in body()) {
        if let Err(messages) = front_end(&body) {
            panic!("a body of the subset was refused: {messages:?}\n{body}");
        }
    }

    #[test]
    fn mutated_bodies_never_crash_the_front_end(
        body in body(),
        edits in prop::collection::vec((0usize..400, 0usize..100, 0u8..3), 1..4),
    ) {
        if let Err(messages) = front_end(&mutate(&body, &edits)) {
            prop_assert!(!messages.is_empty() && messages.iter().all(|m| !m.trim().is_empty()));
        }
    }
}

/// The long run, by hand: `LB_FUZZ_CASES=100000 cargo test --release -p lb-macros long_run --
/// --ignored --nocapture` (`LB_FUZZ_SEED` replays another seed). Prints how many mutated bodies
/// the front end accepted and refused; a panic fails it. docs/fuzzing.md records the runs.
#[test]
#[ignore = "minutes of fuzzing; run by hand (docs/fuzzing.md)"]
fn long_run() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let cases: u32 = std::env::var("LB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let seed: u64 = std::env::var("LB_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_122);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = (
        body(),
        prop::collection::vec((0usize..400, 0usize..100, 0u8..3), 0..4),
    );
    let (mut accepted, mut refused) = (0u64, 0u64);
    for _ in 0..cases {
        let (body, edits) = strategy
            .new_tree(&mut runner)
            .expect("a generated case")
            .current();
        match front_end(&mutate(&body, &edits)) {
            Ok(()) => accepted += 1,
            Err(messages) => {
                assert!(messages.iter().all(|m| !m.trim().is_empty()));
                refused += 1;
            }
        }
    }
    eprintln!("seed {seed}: {cases} bodies, {accepted} accepted, {refused} refused, 0 panics");
}
