//! In-process fuzzing of the whole expansion on the kernels `lb-fuzz-gen` draws: the generator
//! whose kernels lb-fuzz-bodies compiles with rustc and runs on the simulator. Here no rustc runs
//! per case, so a long run reaches hundreds of thousands of kernels.
//!
//! Half the cases are kernels as drawn: the expansion must succeed, and its PTX must read back
//! through the simulator's parser with the entries of every requested schedule (under `auto`, a
//! schedule may instead be left out for its registers). The other half carry one mistake of a
//! known class ([`Mistake`]): the expansion must refuse it with exactly one spanned error, except
//! for the classes that can legitimately give none (a deleted unary `-` leaves a valid body) or
//! several (a deleted `let` turns every later use of the local into an unknown name). Nothing may
//! panic: every case runs under `catch_unwind`, and a panic fails the test.
//!
//! `LB_FUZZ_SEED` picks the seed (else the clock's; the test prints it), `LB_FUZZ_EXPANSIONS` the
//! number of cases ([`CASES`] by default), and `LB_FUZZ_SHARD=i/n` runs only the cases whose
//! index is `i` modulo `n`, so a long run spreads over `n` processes: each case draws from its
//! own seed, the `index`-th of the run's seed sequence, so the shards together run exactly the
//! cases of the unsharded run. docs/fuzzing.md records the long runs.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use lb_fuzz_gen::{kernel, schedules, Kernel, Rng};
use proc_macro2::{Group, Ident, Literal, Span, TokenStream, TokenTree};

use crate::expand::{self, Expansion};

/// Cases per `cargo test` run: 20 to 40 s on one core.
const CASES: u64 = 300;

/// One class of mistake, each a single edit a user could make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mistake {
    /// A use of a name replaced by one nothing declares.
    UnknownName,
    /// A statement outside the language: `while`, `loop`, a closure, `match`, a tuple, a
    /// `return` of the wrong kind, …, at the top or inside an `if`.
    Forbidden,
    /// A statement whose types disagree.
    WrongType,
    /// An attribute key with a typo.
    BadKey,
    /// An attribute value out of its range, or an unknown schedule.
    BadValue,
    /// A parameter of a type kernels cannot take.
    BadParam,
    /// Two scalar parameters written as one tuple pattern.
    PatternParam,
    /// A kernel or parameter name outside PTX's ASCII.
    NonAsciiName,
    /// An integer literal no integer type can hold.
    HugeLiteral,
    /// An expression nested deeper than the front end accepts.
    DeepNesting,
    /// One token (or one bracketed group) deleted.
    DeletedToken,
    /// One binary operator replaced by another.
    SwappedOperator,
}

const MISTAKES: &[Mistake] = &[
    Mistake::UnknownName,
    Mistake::Forbidden,
    Mistake::WrongType,
    Mistake::BadKey,
    Mistake::BadValue,
    Mistake::BadParam,
    Mistake::PatternParam,
    Mistake::NonAsciiName,
    Mistake::HugeLiteral,
    Mistake::DeepNesting,
    Mistake::DeletedToken,
    Mistake::SwappedOperator,
];

impl Mistake {
    /// Whether the mistake is one error, always. A deleted token or a swapped operator may
    /// leave a valid kernel (`-x` to `x`, `*` to `/`), or break a declaration whose every use
    /// is then an error of its own.
    fn one_error(self) -> bool {
        !matches!(self, Mistake::DeletedToken | Mistake::SwappedOperator)
    }
}

/// How often each class was drawn and what it gave.
#[derive(Default)]
struct Tally {
    cases: u64,
    accepted: u64,
    refused: u64,
    errors: u64,
    /// Refusals with more than one error (only in the classes that allow it).
    several: u64,
}

/// A case's kernel and the mistake it carries, as the macro receives them.
struct Case {
    mistake: Option<Mistake>,
    attr: String,
    item: String,
}

impl Case {
    fn describe(&self, seed: u64, index: u64) -> String {
        format!(
            "case {index} of seed {seed} ({:?}); replay: LB_FUZZ_SEED={seed} \
             LB_FUZZ_EXPANSIONS={} cargo test -p lb-macros generated_kernels\n\
             #[load_balanced({})]\n{}",
            self.mistake,
            index + 1,
            self.attr,
            self.item
        )
    }
}

fn setting(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a u64")),
    )
}

#[test]
fn generated_kernels_expand_and_each_mistake_is_one_error() {
    let seed = setting("LB_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let cases = setting("LB_FUZZ_EXPANSIONS").unwrap_or(CASES);
    let (shard, shards) = shard();
    let mut seeds = Rng(seed);
    let mut tally: BTreeMap<Option<Mistake>, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    for index in 0..cases {
        let case_seed = seeds.next_u64();
        if index % shards != shard {
            continue;
        }
        let case = draw(&mut Rng(case_seed));
        let t = tally.entry(case.mistake).or_default();
        t.cases += 1;
        if let Err(why) = run(&case, t) {
            failures.push(format!("{why}\n{}", case.describe(seed, index)));
        }
        // The spans of this case are never looked at again; without this the thread's source
        // map would keep every case's text.
        proc_macro2::extra::invalidate_current_thread_spans();
        if (index + 1) % 10_000 == 0 && index + 1 < cases {
            eprintln!(
                "seed {seed}: {} cases, {} failed",
                index + 1,
                failures.len()
            );
        }
    }
    report(seed, cases, (shard, shards), &tally);
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed (seed {seed}); the first:\n{}",
        failures.len(),
        failures[..failures.len().min(3)].join("\n\n")
    );
}

/// `LB_FUZZ_SHARD=i/n` as `(i, n)`; `(0, 1)` without it.
fn shard() -> (u64, u64) {
    let Ok(v) = std::env::var("LB_FUZZ_SHARD") else {
        return (0, 1);
    };
    let parsed = v
        .split_once('/')
        .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
    match parsed {
        Some((i, n)) if i < n => (i, n),
        _ => panic!("LB_FUZZ_SHARD={v:?} is not `i/n` with i < n"),
    }
}

/// What each class of case gave, for the record of long runs.
fn report(
    seed: u64,
    cases: u64,
    (shard, shards): (u64, u64),
    tally: &BTreeMap<Option<Mistake>, Tally>,
) {
    let ran: u64 = tally.values().map(|t| t.cases).sum();
    eprintln!(
        "seed {seed}: {ran} kernels expanded in-process (shard {shard}/{shards} of {cases} cases)"
    );
    for (class, t) in tally {
        eprintln!(
            "  {:<24} {:>7} cases {:>7} accepted {:>7} refused {:>8} errors {:>6} with several",
            format!("{class:?}"),
            t.cases,
            t.accepted,
            t.refused,
            t.errors,
            t.several
        );
    }
}

/// Expands `case` and checks what it gave against its class.
fn run(case: &Case, t: &mut Tally) -> Result<(), String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let attr: TokenStream = case.attr.parse().expect("the attribute lexes");
        let item: TokenStream = case.item.parse().expect("the function lexes");
        expand::expansion(attr, item)
    }))
    .map_err(|p| {
        let message = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("the expansion panicked: {message}")
    })?;
    match result {
        Ok(e) => {
            t.accepted += 1;
            match case.mistake {
                None => generated_every_schedule(&e),
                Some(m) if m.one_error() => Err("the mistake was accepted".into()),
                Some(_) => Ok(()),
            }
        }
        Err(error) => {
            t.refused += 1;
            let errors: Vec<syn::Error> = error.into_iter().collect();
            t.errors += errors.len() as u64;
            t.several += u64::from(errors.len() > 1);
            let listed = || {
                let m: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                format!("{m:#?}")
            };
            match case.mistake {
                None => Err(format!("a valid kernel was refused: {}", listed())),
                Some(m) if m.one_error() && errors.len() != 1 => Err(format!(
                    "one mistake gave {} errors: {}",
                    errors.len(),
                    listed()
                )),
                Some(_) if errors.iter().any(|e| !spanned(e.span())) => Err(format!(
                    "an error points at no token of the input: {}",
                    listed()
                )),
                Some(_) if errors.iter().any(|e| e.to_string().trim().is_empty()) => {
                    Err(format!("an error without a message: {}", listed()))
                }
                Some(_) => Ok(()),
            }
        }
    }
}

/// A span of the input's text, not the call site's: a token has a start and an end.
fn spanned(span: Span) -> bool {
    span.start() != span.end()
}

/// The PTX reads back, and every requested schedule has its entries in it (or, under `auto`,
/// was left out for its registers).
fn generated_every_schedule(e: &Expansion) -> Result<(), String> {
    let g = &e.generated;
    lb_ptx::sim::parse(&g.ptx).map_err(|err| format!("unreadable PTX: {err}"))?;
    for s in &e.requested {
        let plans: Vec<_> = g
            .plans
            .iter()
            .chain(g.unchecked.iter().flatten())
            .filter(|p| p.schedule == s.name())
            .collect();
        match g.left_out.iter().find(|l| l.schedule == *s) {
            None if !plans.is_empty() => {}
            Some(l) if plans.is_empty() && e.auto && l.why.contains("registers") => continue,
            other => return Err(format!("`{}`: no plan ({other:?})", s.name())),
        }
        for k in plans.iter().flat_map(|p| p.kernels.iter()) {
            if !g.ptx.contains(&format!(".entry {}(", k.entry)) {
                return Err(format!("`{}`: no entry `{}` in the PTX", s.name(), k.entry));
            }
        }
    }
    Ok(())
}

/// One case: a kernel with 1 to 4 schedules (now and then `auto`), and in half the cases one
/// mistake.
fn draw(rng: &mut Rng) -> Case {
    let all = schedules();
    let picked: Vec<&str> = if rng.chance(5) {
        vec!["auto"]
    } else {
        let mut picked: Vec<&str> = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let s = all[rng.below(all.len())];
            if !picked.contains(&s) {
                picked.push(s);
            }
        }
        picked
    };
    let index = rng.below(1000);
    let mut k = kernel(rng, index, &picked);
    let mut mistake = None;
    if rng.chance(50) {
        let m = MISTAKES[rng.below(MISTAKES.len())];
        // A class with nothing to edit in this kernel gives way to one that always has.
        mistake = Some(if mutate(rng, &mut k, m) {
            m
        } else {
            mutate(rng, &mut k, Mistake::Forbidden);
            Mistake::Forbidden
        });
    }
    Case {
        mistake,
        attr: k.attr.clone(),
        item: k.function(),
    }
}

/// Makes mistake `m` in `k`; `false` when `k` has nothing it applies to.
fn mutate(rng: &mut Rng, k: &mut Kernel, m: Mistake) -> bool {
    match m {
        Mistake::UnknownName => edit_leaf(rng, k, is_use, |_| vec![ident("zq")]),
        Mistake::Forbidden => {
            let ret = match k.reduce {
                Some(_) => "return;",
                None => "return 1.0f32;",
            };
            let s = rng.pick(&[
                "let zq = loop { break 1.0f32; };",
                "continue 'zq;",
                "let c = |q: f32| q * 2.0f32;",
                "match n { 0 => {} }",
                "unsafe { acc = 1.0f32; }",
                "let (p, q) = 1u32;",
                "let p = (1u32, 2u32);",
                "let v = vec![1.0f32];",
                "let z = &w[nz];",
                "let z = x.iter().count();",
                "struct P;",
                ret,
            ]);
            insert(rng, k, s);
            true
        }
        Mistake::WrongType => {
            let s = rng.pick(&[
                "acc = nz;",
                "let zq: u32 = 1.5f32;",
                "w[nz] = true;",
                "acc = acc * n;",
                "let zq = x[s];",
                "if nz { acc = 1.0f32; }",
                "acc = flag;",
                "let zq: bool = 3usize;",
                "let zq = acc & 1.0f32;",
                "acc = a.row_offsets[t];",
            ]);
            insert(rng, k, s);
            true
        }
        Mistake::BadKey => {
            let key = rng.pick(&[
                "blok = 64",
                "schedul = \"thread_mapped\"",
                "item_per_thread = 2",
                "fmaa = false",
                "tile = \"f\"",
                "reduction = \"sum\"",
                "lane = \"k\"",
                "outptu = \"y\"",
            ]);
            k.attr = format!("{}, {key}", k.attr);
            true
        }
        Mistake::BadValue => bad_value(rng, k),
        Mistake::BadParam => {
            let (from, to) = if rng.chance(50) {
                let to = rng.pick(&["f16", "String", "&f32", "Option<f32>", "u128", "char"]);
                ("s: f32", format!("s: {to}"))
            } else {
                let to = rng.pick(&["Vec<f32>", "&[u8]", "&[String]", "&Vec<f32>", "[f32; 4]"]);
                ("x: &[f32]", format!("x: {to}"))
            };
            k.params = k.params.replacen(from, &to, 1);
            true
        }
        Mistake::PatternParam => {
            k.params = k.params.replacen("s: f32, n: u32", "(s, n): (f32, u32)", 1);
            true
        }
        Mistake::NonAsciiName => {
            let name = rng.pick(&["k_é", "矩阵", "ядро", "σ"]);
            if rng.chance(50) {
                k.name = name.to_string();
            } else {
                // A parameter renamed everywhere: its declaration is the one mistake.
                let rename = |t: TokenStream| rename_ident(t, "s", name);
                k.params = rename(k.params.parse().expect("parameters lex")).to_string();
                for part in k.statements.iter_mut().chain([&mut k.tail]) {
                    *part = rename(part.parse().expect("statement lexes")).to_string();
                }
            }
            true
        }
        Mistake::HugeLiteral => edit_leaf(rng, k, is_int_literal, |l| vec![huge(l)]),
        Mistake::DeepNesting => {
            let depth = 1100 + rng.below(1000);
            let nested = format!("{}acc{}", "(".repeat(depth), ")".repeat(depth));
            insert(rng, k, &format!("acc = {nested};"));
            true
        }
        Mistake::DeletedToken => edit_leaf(rng, k, |_, _| true, |_| Vec::new()),
        Mistake::SwappedOperator => swap_operator(rng, k),
    }
}

/// An attribute value out of range for a key the kernel does not set, or an unknown schedule.
fn bad_value(rng: &mut Rng, k: &mut Kernel) -> bool {
    let candidates: Vec<&str> = [
        ("block =", "block = 48"),
        ("block =", "block = 0"),
        ("index =", "index = \"u16\""),
        ("target =", "target = \"sm_50\""),
        ("items_per_thread =", "items_per_thread = 0"),
        ("checked =", "checked = 2"),
        ("fma =", "fma = \"yes\""),
    ]
    .iter()
    .filter(|(key, _)| !k.attr.contains(key))
    .map(|&(_, v)| v)
    .collect();
    if rng.chance(30) || candidates.is_empty() {
        // The attribute starts with `schedule = "first, ..."`: the first name gives way.
        let list = k.attr.trim_start_matches("schedule = \"");
        let first = list
            .split(['"', ','])
            .next()
            .unwrap_or_default()
            .to_string();
        let bad = rng.pick(&["merge_paht", "group_mapped(3)", "thread-mapped", "Binning"]);
        k.attr = k.attr.replacen(&first, bad, 1);
    } else {
        k.attr = format!("{}, {}", k.attr, rng.pick(&candidates));
    }
    true
}

/// One ` op ` of the body replaced by another binary operator.
fn swap_operator(rng: &mut Rng, k: &mut Kernel) -> bool {
    const OPS: &[&str] = &[
        " + ", " - ", " * ", " / ", " % ", " < ", " > ", " <= ", " >= ", " == ", " != ", " && ",
        " || ", " ^ ", " >> ",
    ];
    let parts = k.statements.len() + 1;
    let start = rng.below(parts);
    for i in (0..parts).map(|i| (start + i) % parts) {
        let part = if i < k.statements.len() {
            &mut k.statements[i]
        } else {
            &mut k.tail
        };
        let at: Vec<(usize, &str)> = OPS
            .iter()
            .flat_map(|op| part.match_indices(op).collect::<Vec<_>>())
            .collect();
        if at.is_empty() {
            continue;
        }
        let (pos, op) = at[rng.below(at.len())];
        let with = rng.pick(OPS);
        part.replace_range(pos..pos + op.len(), with);
        return true;
    }
    false
}

/// Inserts statement `s` at a random place after the declarations of `acc` and `flag`, which it
/// may use, inside an `if` one time in three.
fn insert(rng: &mut Rng, k: &mut Kernel, s: &str) {
    let s = if rng.chance(33) {
        format!("if flag {{ {s} }}")
    } else {
        s.to_string()
    };
    let at = 2 + rng.below(k.statements.len() - 1);
    k.statements.insert(at, s);
}

/// Replaces one leaf token that `eligible` accepts (among the leaves of its statement, and the
/// index) by what `with` makes of it, in a random statement that has one.
fn edit_leaf(
    rng: &mut Rng,
    k: &mut Kernel,
    eligible: fn(&[TokenTree], usize) -> bool,
    with: impl Fn(&TokenTree) -> Vec<TokenTree>,
) -> bool {
    let parts = k.statements.len() + 1;
    let start = rng.below(parts);
    for i in (0..parts).map(|i| (start + i) % parts) {
        let part = if i < k.statements.len() {
            &mut k.statements[i]
        } else {
            &mut k.tail
        };
        let tokens: TokenStream = part.parse().expect("a generated statement lexes");
        let flat = leaves(tokens.clone());
        let at: Vec<usize> = (0..flat.len()).filter(|&j| eligible(&flat, j)).collect();
        if at.is_empty() {
            continue;
        }
        let j = at[rng.below(at.len())];
        *part = replace_leaf(tokens, &mut { j }, &with(&flat[j])).to_string();
        return true;
    }
    false
}

/// The identifiers, punctuation and literals of `ts` in order, through its groups.
fn leaves(ts: TokenStream) -> Vec<TokenTree> {
    ts.into_iter()
        .flat_map(|tt| match tt {
            TokenTree::Group(g) => leaves(g.stream()),
            leaf => vec![leaf],
        })
        .collect()
}

/// `ts` with its leaf number `at` (counted as [`leaves`] does) replaced by `with`.
fn replace_leaf(ts: TokenStream, at: &mut usize, with: &[TokenTree]) -> TokenStream {
    let mut out = Vec::new();
    for tt in ts {
        match tt {
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), replace_leaf(g.stream(), at, with));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            leaf => {
                if *at == 0 {
                    out.extend(with.iter().cloned());
                } else {
                    out.push(leaf);
                }
                *at = at.wrapping_sub(1);
            }
        }
    }
    out.into_iter().collect()
}

/// `ts` with every identifier `from` renamed `to`.
fn rename_ident(ts: TokenStream, from: &str, to: &str) -> TokenStream {
    ts.into_iter()
        .map(|tt| match tt {
            TokenTree::Group(g) => TokenTree::Group(Group::new(
                g.delimiter(),
                rename_ident(g.stream(), from, to),
            )),
            TokenTree::Ident(i) if i == from => ident(to),
            other => other,
        })
        .collect()
}

fn ident(name: &str) -> TokenTree {
    TokenTree::Ident(Ident::new(name, Span::call_site()))
}

/// Words of the language that are no names.
const KEYWORDS: &[&str] = &[
    "let", "mut", "if", "else", "for", "in", "return", "as", "true", "false",
];

/// Leaf `i` is a use of a name: not a keyword, a declared name, a field, a method, a type or a
/// path segment.
fn is_use(leaves: &[TokenTree], i: usize) -> bool {
    let TokenTree::Ident(id) = &leaves[i] else {
        return false;
    };
    let text = |j: Option<usize>| j.and_then(|j| leaves.get(j)).map(|t| t.to_string());
    !KEYWORDS.contains(&id.to_string().as_str())
        && !matches!(
            text(i.checked_sub(1)).as_deref(),
            Some("." | "let" | "mut" | "for" | "as" | ":")
        )
        && text(Some(i + 1)).as_deref() != Some(":")
}

/// Leaf `i` is an integer literal. (A float literal out of range is rustc's to report: the
/// function is kept, and `overflowing_literals` denies `1e39f32` by default.)
fn is_int_literal(leaves: &[TokenTree], i: usize) -> bool {
    let TokenTree::Literal(l) = &leaves[i] else {
        return false;
    };
    let text = l.to_string();
    !text.contains(['.', 'e', 'f'])
}

/// An integer literal with the suffix of `l` that no integer type can hold.
fn huge(l: &TokenTree) -> TokenTree {
    let text = l.to_string();
    let suffix = ["usize", "u32", "u64", "i32", "i64"]
        .into_iter()
        .find(|s| text.ends_with(s))
        .unwrap_or("");
    let huge: Literal = format!("340282366920938463463374607431768211456{suffix}")
        .parse()
        .expect("a literal lexes");
    TokenTree::Literal(huge)
}
