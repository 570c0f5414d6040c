//! The attribute's arguments (`#[load_balanced(schedule = "...", ...)]`), parsed by darling and
//! validated into the options that shape the generated code.

use darling::ast::NestedMeta;
use darling::util::SpannedValue;
use darling::FromMeta;
use lb_ptx::body::Reduce;
use lb_ptx::{IndexWidth, Schedule, Tuning};
use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Ident, LitStr};

use crate::types::{did_you_mean, Errors};

/// `reduce = "sum" | "min" | "max"`.
#[derive(Clone, Copy, Debug, FromMeta)]
#[darling(rename_all = "snake_case")]
enum ReduceArg {
    Sum,
    Min,
    Max,
}

/// `index = "u32" | "u64" | "auto"`.
#[derive(Clone, Copy, Debug, FromMeta)]
#[darling(rename_all = "snake_case")]
enum IndexArg {
    U32,
    U64,
    Auto,
}

/// A tuning key's value with the spans of the key and of the value: an error about the key (its
/// schedule is not generated) points at the key, one about the value at the value.
#[derive(Debug)]
struct Knob<T> {
    value: T,
    key: Span,
    at: Span,
}

impl<T: FromMeta> FromMeta for Knob<T> {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        let value = SpannedValue::<T>::from_meta(item)?;
        Ok(Knob {
            key: item.path().span(),
            at: value.span(),
            value: value.into_inner(),
        })
    }
}

/// The keys of DESIGN §2 and the per-schedule tuning keys; darling rejects any other key with
/// "did you mean".
#[derive(Debug, FromMeta)]
struct RawArgs {
    schedule: Option<LitStr>,
    reduce: Option<SpannedValue<ReduceArg>>,
    output: Option<LitStr>,
    tiles: Option<LitStr>,
    lanes: Option<LitStr>,
    block: Option<SpannedValue<u32>>,
    items_per_thread: Option<SpannedValue<u32>>,
    target: Option<LitStr>,
    index: Option<IndexArg>,
    #[darling(default)]
    checked: bool,
    fma: Option<bool>,
    block_threshold: Option<Knob<u64>>,
    warp_threshold: Option<Knob<u64>>,
    consolidate_threshold: Option<Knob<u64>>,
    iteration_factor: Option<Knob<u32>>,
    epilogue: Option<syn::Expr>,
}

/// Validated arguments.
#[derive(Debug)]
pub struct Args {
    pub schedules: Vec<Schedule>,
    /// `schedule = "auto"` (or no `schedule`): a schedule the body is too large for is left
    /// out with a note instead of refused.
    pub auto: bool,
    /// The reduction and where it was written.
    pub reduce: Option<(Reduce, Span)>,
    /// The output slice's name (present iff `reduce` is).
    pub output: Option<Ident>,
    /// The name of the `&[u32]` parameter listing the active tiles, as written.
    pub tiles: Option<LitStr>,
    /// The name of the `usize` parameter giving the lane count, as written.
    pub lanes: Option<LitStr>,
    pub block: u32,
    pub items_per_thread: u32,
    pub target: String,
    /// Where `target` was written (codegen's target errors point there).
    pub target_span: Span,
    pub index: IndexWidth,
    pub checked: bool,
    /// Contract a product summed once into one `fma` (`fma = false` turns it off).
    pub fma: bool,
    /// The tuning keys, each validated and tuning a schedule that is generated.
    pub tuning: Tuning,
    /// `epilogue = |tile, value| ...`, with `reduce` (checked against the signature by
    /// `crate::epilogue`).
    pub epilogue: Option<syn::Expr>,
}

/// Parses and validates the attribute's tokens, collecting every error.
pub fn parse(attr: TokenStream) -> syn::Result<Args> {
    let metas = NestedMeta::parse_meta_list(attr)?;
    let raw = RawArgs::from_list(&metas)?;
    let mut errors = Errors::default();

    let schedules = match &raw.schedule {
        Some(lit) => errors.take(parse_schedules(lit)),
        // No schedule named: generate every built-in one, as `"auto"` does.
        None => Some(Schedule::ALL.to_vec()),
    };
    let tuning = tuning(&raw, schedules.as_deref(), &mut errors);
    let schedules = schedules.unwrap_or_default();

    let reduce = raw.reduce.as_ref().map(|r| {
        let op = match **r {
            ReduceArg::Sum => Reduce::Sum,
            ReduceArg::Min => Reduce::Min,
            ReduceArg::Max => Reduce::Max,
        };
        (op, r.span())
    });

    let output = match (&raw.output, &reduce) {
        (Some(lit), Some(_)) => errors.take(
            syn::parse_str::<Ident>(&lit.value())
                .map(|i| Ident::new(&i.to_string(), lit.span()))
                .map_err(|_| {
                    syn::Error::new(
                        lit.span(),
                        format!("`output` must be an identifier, the name of the output slice (e.g. `output = \"y\"`), not `{}`", lit.value()),
                    )
                }),
        ),
        (Some(lit), None) => {
            errors.push(syn::Error::new(
                lit.span(),
                "`output` names the slice that receives the reduced value of each tile: it needs `reduce = \"sum\"` (or \"min\", \"max\")",
            ));
            None
        }
        (None, Some((_, span))) => {
            errors.push(syn::Error::new(
                *span,
                "`reduce` needs `output = \"name\"`: the name of the slice that receives one value per tile",
            ));
            None
        }
        (None, None) => None,
    };

    if let (Some(e), None) = (&raw.epilogue, &reduce) {
        errors.push(syn::Error::new_spanned(
            e,
            "`epilogue` turns each tile's reduced value into the value stored: it needs `reduce = \"sum\"` (or \"min\", \"max\") and `output`",
        ));
    }

    let block = match raw.block {
        Some(b) if !(32..=1024).contains(&*b) || !b.is_power_of_two() => {
            errors.push(syn::Error::new(
                b.span(),
                format!(
                    "`block` must be a power of two from 32 to 1024 (threads per block), not {}",
                    *b
                ),
            ));
            256
        }
        Some(b) => *b,
        None => 256,
    };

    let items_per_thread = match raw.items_per_thread {
        Some(n) if *n == 0 => {
            errors.push(syn::Error::new(
                n.span(),
                "`items_per_thread` must be at least 1",
            ));
            1
        }
        Some(n) => *n,
        None => 1,
    };

    let (target, target_span) = match &raw.target {
        Some(lit) => {
            let value = lit.value();
            if let Err(e) = check_target(&value, lit.span()) {
                errors.push(e);
            }
            (value, lit.span())
        }
        None => ("sm_75".to_string(), Span::call_site()),
    };

    let index = match raw.index {
        Some(IndexArg::U32) => IndexWidth::U32,
        Some(IndexArg::U64) => IndexWidth::U64,
        Some(IndexArg::Auto) | None => IndexWidth::Auto,
    };

    errors.finish()?;
    let auto = raw
        .schedule
        .as_ref()
        .is_none_or(|lit| matches!(lit.value().trim(), "auto" | "every"));
    Ok(Args {
        schedules,
        auto,
        reduce,
        output,
        tiles: raw.tiles,
        lanes: raw.lanes,
        block,
        items_per_thread,
        target,
        target_span,
        index,
        checked: raw.checked,
        fma: raw.fma.unwrap_or(true),
        tuning,
        epilogue: raw.epilogue,
    })
}

/// The schedules each tuning key tunes, in the order their names are listed in errors.
const TUNED: [(&str, &[Schedule]); 4] = [
    ("block_threshold", &[Schedule::Binning]),
    ("warp_threshold", &[Schedule::Binning]),
    (
        "consolidate_threshold",
        &[
            Schedule::Consolidate,
            Schedule::ConsolidateBlock,
            Schedule::ConsolidateWarp,
        ],
    ),
    ("iteration_factor", &[Schedule::MultiPhase]),
];

/// The tuning keys: each value in its range, binning's two in order, and each key's schedule
/// among `schedules` (`None` when the schedule list did not parse: its error is enough, so that
/// check is skipped).
fn tuning(raw: &RawArgs, schedules: Option<&[Schedule]>, errors: &mut Errors) -> Tuning {
    let keys = [
        raw.block_threshold.as_ref().map(|k| k.key),
        raw.warp_threshold.as_ref().map(|k| k.key),
        raw.consolidate_threshold.as_ref().map(|k| k.key),
        raw.iteration_factor.as_ref().map(|k| k.key),
    ];
    if let Some(schedules) = schedules {
        for ((name, tuned), key) in TUNED.into_iter().zip(keys) {
            if let Some(key) = key {
                if !tuned.iter().any(|s| schedules.contains(s)) {
                    errors.push(syn::Error::new(key, not_listed(name, tuned, schedules)));
                }
            }
        }
    }

    // 0 would send even empty tiles to a warp or to the whole block: gathering nothing.
    for (name, knob, default) in [
        ("warp_threshold", &raw.warp_threshold, "32, the warp size"),
        ("block_threshold", &raw.block_threshold, "the block size"),
    ] {
        if let Some(k) = knob.as_ref().filter(|k| k.value == 0) {
            errors.push(syn::Error::new(
                k.at,
                format!("`{name}` must be at least 1 (a tile with at least this many atoms is gathered together; 0 would gather empty tiles too): write 1 or more, or drop the key for the default ({default})"),
            ));
        }
    }
    if let (Some(b), Some(w)) = (&raw.block_threshold, &raw.warp_threshold) {
        if b.value != 0 && w.value != 0 && b.value <= w.value {
            errors.push(syn::Error::new(
                b.at,
                format!(
                    "`block_threshold` ({}) must be greater than `warp_threshold` ({}): binning gives a warp the tiles from `warp_threshold` atoms up to below `block_threshold` and the whole block the larger ones, so warp < block; raise `block_threshold` above {} or lower `warp_threshold` below {}",
                    b.value, w.value, w.value, b.value
                ),
            ));
        }
    }
    if let Some(k) = raw.iteration_factor.as_ref() {
        if !(1..=8).contains(&k.value) {
            errors.push(syn::Error::new(
                k.at,
                format!(
                    "`iteration_factor` must be from 1 to 8 (the rounds of coalesced expansion per partition search of `multi_phase`), not {}",
                    k.value
                ),
            ));
        }
    }

    Tuning {
        block_threshold: raw.block_threshold.as_ref().map(|k| k.value),
        warp_threshold: raw.warp_threshold.as_ref().map(|k| k.value),
        consolidate_threshold: raw.consolidate_threshold.as_ref().map(|k| k.value),
        iteration_factor: raw.iteration_factor.as_ref().map(|k| k.value),
    }
}

/// "`key` tunes `s`, which is not among the schedules (…)": what to write instead of a key whose
/// schedules are all missing from `schedules`.
fn not_listed(key: &str, tuned: &[Schedule], schedules: &[Schedule]) -> String {
    let listed: Vec<String> = schedules
        .iter()
        .map(|s| format!("`{}`", s.name()))
        .collect();
    let listed = listed.join(", ");
    // "`a`", "`a` and `b`", "`a`, `b` and `c`".
    let mut names = String::new();
    for (i, s) in tuned.iter().enumerate() {
        if i > 0 {
            names.push_str(if i + 1 == tuned.len() { " and " } else { ", " });
        }
        names.push_str(&format!("`{}`", s.name()));
    }
    if tuned.len() == 1 {
        format!("`{key}` tunes {names}, which is not among the schedules ({listed}): drop the key or add the schedule")
    } else {
        format!("`{key}` tunes {names}, none of which is among the schedules ({listed}): drop the key or add one of them")
    }
}

/// `"name"`, `"a, b"`, `"auto"` or `"every"`.
fn parse_schedules(lit: &LitStr) -> syn::Result<Vec<Schedule>> {
    let text = lit.value();
    if text.trim() == "auto" {
        return Ok(Schedule::ALL.to_vec());
    }
    // `auto`'s schedules and the extra ones it leaves out: what tests that cover every
    // schedule generate.
    if text.trim() == "every" {
        return Ok(Schedule::every().collect());
    }
    let mut out = Vec::new();
    let mut errors = Errors::default();
    for name in text.split(',').map(str::trim) {
        if name.is_empty() {
            errors.push(syn::Error::new(
                lit.span(),
                "empty schedule name: write one name, a comma-separated list (\"a, b\"), or \"auto\"",
            ));
        } else if name == "auto" || name == "every" {
            errors.push(syn::Error::new(
                lit.span(),
                "\"auto\" and \"every\" already name sets of schedules: write one alone",
            ));
        } else if let Some(s) = Schedule::from_name(name) {
            if out.contains(&s) {
                errors.push(syn::Error::new(
                    lit.span(),
                    format!("schedule `{name}` is listed twice"),
                ));
            } else {
                out.push(s);
            }
        } else {
            let known: Vec<&str> = Schedule::every().map(|s| s.name()).collect();
            let hint = match did_you_mean(name, known.iter().copied()) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            errors.push(syn::Error::new(
                lit.span(),
                format!(
                    "unknown schedule `{name}`{hint}; the schedules are: {}, group_mapped(N) for N a power of two from 2 to 1024, \"auto\" for the heuristic's set, or \"every\" for all of them (a schedule written outside lb is not named here: pass it to the generated `launch_custom`)",
                    known.join(", ")
                ),
            ));
        }
    }
    errors.finish()?;
    Ok(out)
}

/// `sm_NN` with NN ≥ 75 (the oldest architecture whose PTX features the schedules use).
fn check_target(target: &str, span: Span) -> syn::Result<()> {
    let version = target
        .strip_prefix("sm_")
        .map(|v| v.trim_end_matches(|c: char| c.is_ascii_alphabetic()))
        .and_then(|v| v.parse::<u32>().ok());
    match version {
        Some(v) if v >= 75 => Ok(()),
        Some(_) => Err(syn::Error::new(
            span,
            format!("target `{target}` is too old: the generated PTX needs sm_75 or newer (e.g. \"sm_75\", \"sm_80\", \"sm_90\")"),
        )),
        None => Err(syn::Error::new(
            span,
            format!("`target` must name a GPU architecture like \"sm_80\", not `{target}`"),
        )),
    }
}
