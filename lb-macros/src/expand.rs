//! Code generation: the user's function (kept, so rustc checks the body as real Rust) and the
//! module of the same name with the PTX, the plans, the CPU reference and the launchers
//! (docs/runtime-contract.md). On error, [`fallback`] emits stand-ins with the same names so one
//! mistake shows one error instead of a cascade at every use.

use lb_ptx::body::{Body, Gather, GatherBound, Guards, IndexRole, Reduce, TileSetKind, Ty};
use lb_ptx::plan::{FrontierGrid, Grid, OffsetWidth, Plan, Select, TempCount, TempRole};
use lb_ptx::{GenError, Options, SafeGenerated, Schedule};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{FnArg, ItemFn};

use crate::attr::{self, Args};
use crate::depth;
use crate::epilogue::Checked;
use crate::front;
use crate::half;
use crate::lower;
use crate::parse::{self, is_role_attr, Role, Sig};
use crate::types::STy;

/// The whole expansion, or every error found on the way.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    expansion(attr, item).map(|e| e.tokens)
}

/// An expansion with the PTX generation it holds, which the fuzz tests inspect (the macro itself
/// reads only `tokens`).
#[cfg_attr(not(test), allow(dead_code))]
pub struct Expansion {
    pub tokens: TokenStream,
    pub generated: SafeGenerated,
    /// The schedules the attribute asked for (every built-in one for `auto`).
    pub requested: Vec<Schedule>,
    /// The attribute said `auto`, which may leave out a schedule too small for the body.
    pub auto: bool,
}

/// [`expand`], keeping what it generated.
pub fn expansion(attr: TokenStream, item: TokenStream) -> syn::Result<Expansion> {
    depth::check(item.clone())?;
    // The attribute holds an expression too: the `epilogue` closure.
    depth::check(attr.clone())?;
    let func: ItemFn = syn::parse2(item)?;
    let (func, halves) = half::narrow(&func)?;
    let front::Front {
        args,
        mut sig,
        typed,
        name,
        epilogue,
    } = front::front(attr, &func)?;
    sig.halves = halves;
    let mut body = lower::lower(&name, &sig, &typed)?;
    body.epilogue = epilogue.as_ref().map(|e| e.ir.clone());
    let options = Options {
        schedules: args.schedules.clone(),
        target: args.target.clone(),
        block: args.block,
        items_per_thread: args.items_per_thread,
        index: args.index,
        checked: args.checked,
        lanes: sig.lanes.map(|i| sig.body_index(i)),
        tiles: sig.tiles.map(|i| sig.body_index(i)),
        tuning: args.tuning,
        fma: args.fma,
        leave_out_oversized: args.auto,
    };
    let generated = lb_ptx::generate_safe(&body, &options).map_err(|e| {
        let span = match e {
            GenError::BadTarget(_) => args.target_span,
            _ => Span::call_site(),
        };
        syn::Error::new(span, format!("cannot generate PTX: {e}"))
    })?;
    // The kernel as lowered, for schedules written outside lb, whose PTX is built at run time.
    let ir = lb_ptx::user::embed(&body, &options)
        .map_err(|e| syn::Error::new(Span::call_site(), e.to_string()))?;
    let mut user_fn = user_fn(&func);
    allow_schedule_params(&mut user_fn, &sig, epilogue.as_ref());
    let tested = Tested::of(&body, &options, &sig);
    let (requested, auto) = (args.schedules.clone(), args.auto);
    let args = without_left_out(args, &generated)?;
    let module = module(
        &func,
        &args,
        &sig,
        Some((&generated, &tested, &ir)),
        epilogue.as_ref(),
    )?;
    Ok(Expansion {
        tokens: quote! { #user_fn #module },
        generated,
        requested,
        auto,
    })
}

/// `args` with the schedules `auto` left out because the body is too large for them (their
/// notes go into the module's documentation); an error when none is left.
fn without_left_out(mut args: Args, generated: &SafeGenerated) -> syn::Result<Args> {
    let left_out = &generated.left_out;
    args.schedules
        .retain(|s| left_out.iter().all(|l| l.schedule != *s));
    if args.schedules.is_empty() {
        let why = left_out.first().map_or(String::new(), |l| l.why.clone());
        return Err(syn::Error::new(
            Span::call_site(),
            format!("no schedule can take this body: {why}"),
        ));
    }
    Ok(args)
}

/// What is emitted when `expand` fails: the errors, the function with its body replaced by
/// `unreachable!()`, and a module with the generated items' names.
///
/// `::core::unreachable!()` is sound here: these items exist only in a compilation that already
/// failed with our error, so no binary containing them is ever produced or run. Replacing the
/// body (instead of keeping it) keeps rustc from reporting the same mistake a second time in its
/// own words.
pub fn fallback(attr: TokenStream, item: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let stand_in = stand_in(attr, item);
    quote! { #errors #stand_in }
}

/// The items [`fallback`] stands in with, without its errors: for the other instantiations of a
/// generic kernel whose first one failed (the same mistake, reported once).
pub fn stand_in(attr: TokenStream, item: TokenStream) -> TokenStream {
    let Ok(func) = syn::parse2::<ItemFn>(item) else {
        // Not a function: there is nothing to stand in for.
        return TokenStream::new();
    };
    // The stand-ins take what the user passes, half-precision types included.
    let (mut func, halves) = half::narrow(&func).unwrap_or((func, half::Halves::default()));
    let known = attr::parse(attr).ok().and_then(|args| {
        parse::parse(&func, &args).ok().map(|mut sig| {
            sig.halves = halves;
            (args, sig)
        })
    });
    let module = match &known {
        Some((args, sig)) => module(&func, args, sig, None, None).unwrap_or_default(),
        None => placeholder_consts(&func),
    };
    *func.block = syn::parse_quote!({ ::core::unreachable!() });
    let mut stub = user_fn(&func);
    stub.attrs
        .push(syn::parse_quote!(#[allow(unused_variables)]));
    quote! { #stub #module }
}

/// The user's function without the role attributes, which are not real attributes.
fn user_fn(func: &ItemFn) -> ItemFn {
    let mut f = func.clone();
    for input in &mut f.sig.inputs {
        if let FnArg::Typed(pt) = input {
            pt.attrs.retain(|a| !is_role_attr(a));
        }
    }
    // Kernels take many parameters by nature, and a program may use only the generated module.
    f.attrs
        .push(syn::parse_quote!(#[allow(dead_code, clippy::too_many_arguments)]));
    f
}

/// The tile set, the index roles and the `tiles` / `lanes` parameters are there for the
/// schedule: a body that does not read them (SpMV never reads its `#[tile]`, a `&Tiles` kernel
/// seldom its tile set) is normal, not a mistake to warn about; nor is a parameter only the
/// epilogue reads.
fn allow_schedule_params(f: &mut ItemFn, sig: &Sig, epilogue: Option<&Checked>) {
    let for_epilogue = epilogue.map_or_else(Vec::new, Checked::reads);
    let for_schedule: Vec<&syn::Ident> = sig
        .params
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            matches!(p.role, Role::Index(_) | Role::TileSet { .. })
                || sig.tiles == Some(*i)
                || sig.lanes == Some(*i)
                || for_epilogue.contains(&sig.body_index(*i))
        })
        .map(|(_, p)| &p.ident)
        .collect();
    for input in &mut f.sig.inputs {
        if let FnArg::Typed(pt) = input {
            if matches!(&*pt.pat, syn::Pat::Ident(pi) if for_schedule.contains(&&pi.ident)) {
                pt.attrs.push(syn::parse_quote!(#[allow(unused_variables)]));
            }
        }
    }
}

pub fn prim(t: STy) -> TokenStream {
    let i = format_ident!("{}", t.name());
    quote!(::core::primitive::#i)
}

/// The module when the signature is unknown: only the constants, which need no signature.
fn placeholder_consts(func: &ItemFn) -> TokenStream {
    let vis = &func.vis;
    let name = &func.sig.ident;
    quote! {
        #[allow(dead_code)]
        #vis mod #name {
            pub const PTX: &::core::primitive::str = "";
            pub const SCHEDULES: &[::lb::__private::Schedule] = &[];
            pub const PLANS: &[::lb::__private::Plan] = &[];
            pub const UNCHECKED_PLANS: &[::lb::__private::Plan] = &[];
            pub const DEFAULT: ::lb::__private::Schedule = ::lb::__private::Schedule::ALL[0];
            pub const IR: &::core::primitive::str = "";
            pub const REDUCTION: ::core::option::Option<::lb::__private::multi::Reduction> = ::core::option::Option::None;
        }
    }
}

/// The generated module; with `generated: None`, the placeholder version (see [`fallback`]).
fn module(
    func: &ItemFn,
    args: &Args,
    sig: &Sig,
    generated: Option<(&SafeGenerated, &Tested, &str)>,
    epilogue: Option<&Checked>,
) -> syn::Result<TokenStream> {
    let vis = &func.vis;
    let name = &func.sig.ident;
    let doc = format!(
        "Generated by `#[load_balanced]` from the function `{name}`: its PTX (`PTX`), the plans of the schedules {}, a sequential CPU reference (`cpu`) and the launchers (`launch`, `launch_with`, their asynchronous forms `launch_async`, `launch_with_async` on a `Stream`, `workspace_size`, and the unchecked twins `launch_unchecked`, `launch_with_unchecked`).",
        args.schedules.iter().map(|s| format!("`{}`", s.name())).collect::<Vec<_>>().join(", ")
    );
    let left_out = generated.map_or(&[][..], |(g, _, _)| &g.left_out[..]);
    let doc = left_out.iter().fold(doc, |doc, l| {
        format!(
            "{doc}\n\nLeft out of `auto`: `{}`, {}.",
            l.schedule.name(),
            l.why
        )
    });

    let consts = match generated {
        Some((g, _, ir)) => {
            let ptx = &g.ptx;
            let schedules = args
                .schedules
                .iter()
                .map(|s| schedule_path(*s))
                .collect::<syn::Result<Vec<_>>>()?;
            let default = schedules.first().ok_or_else(|| {
                syn::Error::new(
                    Span::call_site(),
                    "no schedule to generate: name one with `schedule = \"...\"`",
                )
            })?;
            let plans = g.plans.iter().map(plan_tokens);
            let unchecked_plans = match &g.unchecked {
                Some(plans) => {
                    let plans = plans.iter().map(plan_tokens);
                    quote!(&[#(#plans),*])
                }
                None => quote!(self::PLANS),
            };
            let names = sig.body_params().map(|p| p.ident.to_string());
            let reduction = match args.reduce {
                Some((op, _)) => {
                    let op = format_ident!("{op:?}");
                    // An atom's rank restarts where a row is cut, an epilogue would run per part.
                    let whole_rows = epilogue.is_some()
                        || sig
                            .params
                            .iter()
                            .any(|p| matches!(p.role, Role::Index(IndexRole::Rank)));
                    quote!(::core::option::Option::Some(::lb::__private::multi::Reduction {
                        op: ::lb::__private::multi::Reduce::#op,
                        whole_rows: #whole_rows,
                    }))
                }
                None => quote!(::core::option::Option::None),
            };
            quote! {
                /// One PTX module with the kernels of every generated schedule.
                pub const PTX: &::core::primitive::str = #ptx;
                /// The generated schedules, in the order of `PLANS`.
                pub const SCHEDULES: &[::lb::__private::Schedule] = &[#(#schedules),*];
                /// The plans of the schedules in `SCHEDULES`, in that order; a schedule may have
                /// several (32-bit index arithmetic, then 64-bit; one per offset width): the
                /// first that reads the tile set's offset width and whose `index_limit` admits
                /// the problem runs.
                pub const PLANS: &[::lb::__private::Plan] = &[#(#plans),*];
                /// The plans the unchecked launchers run, in the order of `PLANS`: kernels
                /// without bounds tests (`PLANS` itself when those test nothing).
                pub const UNCHECKED_PLANS: &[::lb::__private::Plan] = #unchecked_plans;
                /// The first generated schedule (`launch` asks the heuristic among all of them).
                pub const DEFAULT: ::lb::__private::Schedule = #default;
                /// How the output's partial results combine, for a launch across devices
                /// (`lb::multi::MultiCsr::launch`); `None` without `reduce`.
                pub const REDUCTION: ::core::option::Option<::lb::__private::multi::Reduction> = #reduction;
                /// The kernel's body IR and options (JSON), from which `launch_custom` builds the
                /// PTX of a schedule written outside lb at its first launch.
                pub const IR: &::core::primitive::str = #ir;
                /// The kernel parameters' names, for error messages (index roles excluded).
                const PARAM_NAMES: &[&::core::primitive::str] = &[#(#names),*];
            }
        }
        None => quote! {
            pub const PTX: &::core::primitive::str = "";
            pub const SCHEDULES: &[::lb::__private::Schedule] = &[];
            pub const PLANS: &[::lb::__private::Plan] = &[];
            pub const UNCHECKED_PLANS: &[::lb::__private::Plan] = &[];
            pub const DEFAULT: ::lb::__private::Schedule = ::lb::__private::Schedule::ALL[0];
            pub const IR: &::core::primitive::str = "";
            pub const REDUCTION: ::core::option::Option<::lb::__private::multi::Reduction> = ::core::option::Option::None;
        },
    };

    let cpu = cpu_fn(func, sig, generated.is_some(), epilogue);
    let reads_old = epilogue.is_some_and(|e| e.old);
    let launchers = launchers(func, sig, generated, reads_old);
    // The placeholders' bodies ignore their parameters.
    let unused = generated.is_none().then(|| quote!(unused_variables,));
    Ok(quote! {
        #[doc = #doc]
        #[allow(#unused dead_code, clippy::too_many_arguments)]
        #vis mod #name {
            #consts
            #cpu
            #launchers
        }
    })
}

/// `::lb::__private::Schedule::Variant`, from the variant's `Debug` spelling (which is also its
/// constructor syntax, for unit and tuple variants alike).
fn schedule_path(s: Schedule) -> syn::Result<TokenStream> {
    let variant: syn::Expr = syn::parse_str(&format!("{s:?}")).map_err(|_| {
        syn::Error::new(
            Span::call_site(),
            format!("internal error: cannot name schedule {s:?}"),
        )
    })?;
    Ok(quote!(::lb::__private::Schedule::#variant))
}

fn plan_tokens(p: &Plan) -> TokenStream {
    let schedule = p.schedule.as_ref();
    let kernels = p.kernels.iter().map(|k| {
        let entry = k.entry.as_ref();
        let block = k.block;
        let dynamic_shared = k.dynamic_shared;
        let track = k.track;
        let min_tile_atoms = match k.min_tile_atoms {
            Some(m) => quote!(::core::option::Option::Some(#m)),
            None => quote!(::core::option::Option::None),
        };
        let min_grid = match k.min_grid {
            Some(m) => quote!(::core::option::Option::Some(#m)),
            None => quote!(::core::option::Option::None),
        };
        let lanes = match k.lanes {
            Some((min, max)) => quote!(::core::option::Option::Some((#min, #max))),
            None => quote!(::core::option::Option::None),
        };
        let grid = match k.grid {
            Grid::CoverItems { per_thread } => {
                quote!(::lb::__private::Grid::CoverItems { per_thread: #per_thread })
            }
            Grid::GroupPerItem { threads } => {
                quote!(::lb::__private::Grid::GroupPerItem { threads: #threads })
            }
            Grid::Fixed(n) => quote!(::lb::__private::Grid::Fixed(#n)),
            Grid::CoverWork {
                per_thread,
                count_tiles,
                frontier,
            } => {
                let frontier = match frontier {
                    FrontierGrid::No => quote!(::lb::__private::FrontierGrid::No),
                    FrontierGrid::Bounded => quote!(::lb::__private::FrontierGrid::Bounded),
                    FrontierGrid::Strided => quote!(::lb::__private::FrontierGrid::Strided),
                };
                quote!(::lb::__private::Grid::CoverWork {
                    per_thread: #per_thread,
                    count_tiles: #count_tiles,
                    frontier: #frontier,
                })
            }
            Grid::PerAtoms { atoms } => quote!(::lb::__private::Grid::PerAtoms { atoms: #atoms }),
            Grid::PerTiles { tiles } => quote!(::lb::__private::Grid::PerTiles { tiles: #tiles }),
        };
        quote! {
            ::lb::__private::KernelPlan {
                entry: ::std::borrow::Cow::Borrowed(#entry),
                block: #block,
                grid: #grid,
                dynamic_shared: #dynamic_shared,
                min_tile_atoms: #min_tile_atoms,
                min_grid: #min_grid,
                lanes: #lanes,
                track: #track,
            }
        }
    });
    let temps = p.temps.iter().map(|t| {
        let name = t.name.as_ref();
        let elem_bytes = t.elem_bytes;
        let zero = t.zero;
        let count = match t.count {
            TempCount::Fixed(n) => quote!(::lb::__private::TempCount::Fixed(#n)),
            TempCount::PerTile { per_tile, extra } => {
                quote!(::lb::__private::TempCount::PerTile { per_tile: #per_tile, extra: #extra })
            }
            TempCount::PerBlock { extra } => {
                quote!(::lb::__private::TempCount::PerBlock { extra: #extra })
            }
            TempCount::PerAtoms { atoms, extra } => {
                quote!(::lb::__private::TempCount::PerAtoms { atoms: #atoms, extra: #extra })
            }
        };
        let role = match t.role {
            TempRole::Scratch => quote!(::lb::__private::TempRole::Scratch),
            TempRole::ErrorFlag => quote!(::lb::__private::TempRole::ErrorFlag),
            TempRole::Counters => quote!(::lb::__private::TempRole::Counters),
            TempRole::Cached { producers } => {
                quote!(::lb::__private::TempRole::Cached { producers: #producers })
            }
        };
        quote! {
            ::lb::__private::Temp {
                name: ::std::borrow::Cow::Borrowed(#name),
                elem_bytes: #elem_bytes,
                count: #count,
                zero: #zero,
                role: #role,
            }
        }
    });
    let select = match p.select {
        Some(Select::AvgAtomsPerTile { min, max }) => {
            quote!(::core::option::Option::Some(::lb::__private::Select::AvgAtomsPerTile { min: #min, max: #max }))
        }
        Some(Select::Lanes { min, max }) => {
            quote!(::core::option::Option::Some(::lb::__private::Select::Lanes { min: #min, max: #max }))
        }
        Some(Select::Spread {
            max_avg,
            max_std_dev,
            low,
        }) => quote!(::core::option::Option::Some(::lb::__private::Select::Spread {
            max_avg: #max_avg,
            max_std_dev: #max_std_dev,
            low: #low,
        })),
        None => quote!(::core::option::Option::None),
    };
    let index_limit = match p.index_limit {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };
    let offsets = match p.offsets {
        OffsetWidth::U32 => quote!(::lb::__private::OffsetWidth::U32),
        OffsetWidth::U64 => quote!(::lb::__private::OffsetWidth::U64),
    };
    quote! {
        ::lb::__private::Plan {
            schedule: ::std::borrow::Cow::Borrowed(#schedule),
            kernels: ::std::borrow::Cow::Borrowed(&[#(#kernels),*]),
            temps: ::std::borrow::Cow::Borrowed(&[#(#temps),*]),
            index_limit: #index_limit,
            select: #select,
            offsets: #offsets,
        }
    }
}

/// The output parameter's type for `cpu` / `launch` (its storage type: `f16` for a
/// half-precision output of an `f32` reduction).
fn output_param(sig: &Sig, device: bool) -> Option<TokenStream> {
    let (t, _) = sig.reduce?;
    let out = sig.output.as_ref()?;
    let t = match sig.halves.output {
        Some(h) => half_path(h),
        None => prim(t),
    };
    Some(if device {
        quote!(#out: &mut ::lb::__private::DeviceBuffer<#t>)
    } else {
        quote!(#out: &mut [#t])
    })
}

/// The non-role parameters with their host (`cpu`) or device (`launch`) types, as callers pass
/// them (half-precision arrays with their 16-bit element types).
fn params(sig: &Sig, device: bool) -> Vec<TokenStream> {
    sig.body_params()
        .map(|p| {
            let id = &p.ident;
            let ty = param_type(&p.role, device, sig.halves.of(id));
            quote!(#id: #ty)
        })
        .chain(output_param(sig, device))
        .collect()
}

/// The path of a half-precision element type.
fn half_path(t: Ty) -> TokenStream {
    if t == Ty::Bf16 {
        quote!(::lb::__private::half::bf16)
    } else {
        quote!(::lb::__private::half::f16)
    }
}

/// A parameter's host (`cpu`, the function itself) or device (`launch`) type, spelled from
/// `::lb` so that it means the same wherever the kernel is declared; `half` is the storage
/// type of a half-precision slice or tile set, whose role says `f32`.
fn param_type(role: &Role, device: bool, half: Option<Ty>) -> TokenStream {
    let elem = |t: STy| half.map_or_else(|| prim(t), half_path);
    match (role, device) {
        (
            Role::TileSet {
                kind: TileSetKind::Tiles,
                ..
            },
            false,
        ) => quote!(&::lb::__private::Tiles),
        // Any format that keeps the tile-set contract.
        (
            Role::TileSet {
                kind: TileSetKind::Tiles,
                ..
            },
            true,
        ) => quote!(&dyn ::lb::__private::DeviceTileSet),
        (Role::TileSet { kind, value }, device) => {
            let t = elem(*value);
            let prefix = if device { "Device" } else { "" };
            let ty = format_ident!("{prefix}{}", kind.name());
            quote!(&::lb::__private::#ty<#t>)
        }
        (Role::Queue, false) => quote!(&mut ::lb::__private::Queue),
        (Role::Queue, true) => quote!(&mut ::lb::__private::DeviceQueue),
        (Role::Slice { elem: e, mutable }, false) => {
            let t = elem(*e);
            if *mutable {
                quote!(&mut [#t])
            } else {
                quote!(&[#t])
            }
        }
        (Role::Slice { elem: e, mutable }, true) => {
            let t = elem(*e);
            if *mutable {
                quote!(&mut ::lb::__private::DeviceBuffer<#t>)
            } else {
                quote!(&::lb::__private::DeviceBuffer<#t>)
            }
        }
        (Role::Scalar(t), _) => prim(*t),
        (Role::Index(_), _) => quote!(::core::primitive::usize),
    }
}

/// The user's function again, inside the generated module, with every type in its signature
/// spelled from `::lb` and the intrinsics imported in its body: the module then needs nothing
/// from the scope around it, so a kernel declared inside a function body (where `super::` would
/// not reach it) works like one at module level. The body is the user's own tokens, with their
/// spans; rustc reports a problem in it at the user's function, so the copy stays quiet.
fn atom_fn(func: &ItemFn, sig: &Sig) -> TokenStream {
    let inputs = sig.params.iter().map(|p| {
        let id = &p.ident;
        let ty = param_type(&p.role, false, None);
        quote!(#id: #ty)
    });
    let output = sig.reduce.map(|(t, _)| {
        let t = prim(t);
        quote!(-> #t)
    });
    let block = &func.block;
    quote! {
        #[allow(warnings, clippy::all)]
        fn __lb_body(#(#inputs),*) #output {
            #[allow(unused_imports)]
            use ::lb::__private::intrinsics::{
                atomic_add, atomic_cas, atomic_exch, atomic_max, atomic_min,
            };
            #block
        }
    }
}

/// The sequential reference: every tile (or frontier entry), every lane, every atom in order,
/// through the user's own function (its copy, [`atom_fn`]).
fn cpu_fn(func: &ItemFn, sig: &Sig, real: bool, epilogue: Option<&Checked>) -> TokenStream {
    let params = params(sig, false);
    if !real {
        return quote!(pub fn cpu(#(#params),*) { ::core::unreachable!() });
    }
    if !sig.halves.is_empty() {
        return half_cpu_fn(func, sig, epilogue, &params);
    }
    let name = &func.sig.ident;
    let atom = atom_fn(func, sig);
    let a = &sig.tile_set().ident;
    let call_args = sig.params.iter().map(|p| match &p.role {
        Role::Index(IndexRole::Tile) => quote!(__lb_tile),
        Role::Index(IndexRole::Atom) => quote!(__lb_atom),
        Role::Index(IndexRole::Lane) => quote!(__lb_lane),
        Role::Index(IndexRole::Rank) => quote!(__lb_atom - __lb_begin),
        Role::Slice { mutable: true, .. } | Role::Queue => {
            let id = &p.ident;
            quote!(&mut *#id)
        }
        _ => {
            let id = &p.ident;
            quote!(#id)
        }
    });
    let call = quote!(__lb_body(#(#call_args),*));
    let lanes = match sig.lanes {
        Some(i) => {
            let k = &sig.params[i].ident;
            quote!(#k)
        }
        None => quote!(1),
    };
    let (count, tile_of) = match sig.tiles {
        Some(i) => {
            let f = &sig.params[i].ident;
            (
                quote!(#f.len()),
                quote!(#f[__lb_position] as ::core::primitive::usize),
            )
        }
        None => (quote!(__lb_tiles), quote!(__lb_position)),
    };
    let epilogue_fn = epilogue.map(|e| e.cpu_fn(sig, |role| param_type(role, false, None)));
    let per_lane = match (sig.reduce, &sig.output) {
        (Some((t, op)), Some(out)) => {
            let at = quote!(#out[__lb_tile * __lb_lanes + __lb_lane]);
            let store = match epilogue {
                Some(e) => {
                    let call = e.cpu_call(sig, quote!(__lb_acc), at.clone());
                    quote!(#at = #call;)
                }
                None => quote!(#at = __lb_acc;),
            };
            let ty = prim(t);
            let identity = match (op, t.is_float()) {
                (Reduce::Sum, _) => quote!(<#ty as ::core::default::Default>::default()),
                (Reduce::Min, true) => quote!(#ty::INFINITY),
                (Reduce::Min, false) => quote!(#ty::MAX),
                (Reduce::Max, true) => quote!(#ty::NEG_INFINITY),
                (Reduce::Max, false) => quote!(#ty::MIN),
            };
            // Integer sums wrap, as they do on the GPU; float min/max follow `f32::min`.
            let combine = match (op, t.is_float()) {
                (Reduce::Sum, true) => quote!(__lb_acc += __lb_value),
                (Reduce::Sum, false) => quote!(__lb_acc = #ty::wrapping_add(__lb_acc, __lb_value)),
                (Reduce::Min, true) => quote!(__lb_acc = #ty::min(__lb_acc, __lb_value)),
                (Reduce::Min, false) => {
                    quote!(__lb_acc = ::core::cmp::Ord::min(__lb_acc, __lb_value))
                }
                (Reduce::Max, true) => quote!(__lb_acc = #ty::max(__lb_acc, __lb_value)),
                (Reduce::Max, false) => {
                    quote!(__lb_acc = ::core::cmp::Ord::max(__lb_acc, __lb_value))
                }
            };
            quote! {
                let mut __lb_acc: #ty = #identity;
                for __lb_atom in __lb_begin..__lb_end {
                    let __lb_value: #ty = #call;
                    #combine;
                }
                #store
            }
        }
        _ => quote! {
            for __lb_atom in __lb_begin..__lb_end {
                #call;
            }
        },
    };
    let shape_check = sig.output.as_ref().map(|out| {
        let msg = format!("`{name}::cpu`: the output `{out}` has {{}} elements but needs {{}} (tiles × lanes)");
        quote! {
            ::core::assert!(#out.len() >= __lb_tiles * __lb_lanes, #msg, #out.len(), __lb_tiles * __lb_lanes);
        }
    });
    quote! {
        /// The sequential CPU reference: the user's function for every atom of every tile, in
        /// order, reduced as the attribute says.
        pub fn cpu(#(#params),*) {
            #atom
            #epilogue_fn
            let __lb_lanes: ::core::primitive::usize = #lanes;
            // Tiles of any format: a CSR's rows, a CSC's columns, a COO's rows.
            let __lb_tiles = ::lb::__private::TileSet::num_tiles(#a);
            #shape_check
            for __lb_position in 0..#count {
                let __lb_tile: ::core::primitive::usize = #tile_of;
                let __lb_atoms = ::lb::__private::TileSet::tile_atoms(#a, __lb_tile);
                let (__lb_begin, __lb_end) = (__lb_atoms.start, __lb_atoms.end);
                for __lb_lane in 0..__lb_lanes {
                    #per_lane
                }
            }
        }
    }
}

/// The reference of a kernel with half-precision arrays: the `f32` reference (the body computes
/// in `f32`) on widened copies of them, then what it wrote rounded back to nearest even, as the
/// kernels load exactly and round each store (the output once, after the epilogue).
fn half_cpu_fn(
    func: &ItemFn,
    sig: &Sig,
    epilogue: Option<&Checked>,
    params: &[TokenStream],
) -> TokenStream {
    let mut wide = sig.clone();
    wide.halves = half::Halves::default();
    let inner = cpu_fn(func, &wide, true, epilogue);
    let (mut widen, mut args, mut narrow) = (Vec::new(), Vec::new(), Vec::new());
    let outputs = sig.output.iter().map(|o| (o, sig.halves.output, true));
    let slices = sig.body_params().map(|p| {
        let mutable = matches!(p.role, Role::Slice { mutable: true, .. } | Role::Queue);
        (&p.ident, sig.halves.of(&p.ident), mutable)
    });
    for (id, half, mutable) in slices.chain(outputs) {
        let tile_set = sig
            .body_params()
            .any(|p| p.ident == *id && matches!(p.role, Role::TileSet { .. }));
        let w = format_ident!("__lb_wide_{}", syn::ext::IdentExt::unraw(id));
        match (half, mutable) {
            (None, false) => args.push(quote!(#id)),
            (None, true) => args.push(quote!(&mut *#id)),
            (Some(_), _) if tile_set => {
                widen.push(quote!(let #w = #id.map_values(::lb::__private::HalfElement::to_f32);));
                args.push(quote!(&#w));
            }
            (Some(_), false) => {
                widen.push(quote!(let #w = ::lb::__private::widen(#id);));
                args.push(quote!(&#w));
            }
            (Some(_), true) => {
                widen.push(quote!(let mut #w = ::lb::__private::widen(&*#id);));
                args.push(quote!(&mut #w));
                narrow.push(quote!(::lb::__private::narrow_into(&#w, #id);));
            }
        }
    }
    quote! {
        /// The sequential CPU reference: the user's function for every atom of every tile, in
        /// order, reduced as the attribute says. It computes in `f32`: half-precision arguments
        /// are widened exactly first, and what it writes to them is rounded to nearest even.
        pub fn cpu(#(#params),*) {
            #[allow(clippy::too_many_arguments)]
            mod __lb_wide {
                #inner
            }
            #(#widen)*
            __lb_wide::cpu(#(#args),*);
            #(#narrow)*
        }
    }
}

/// What the safe kernels of a body test per access, for the launchers' documentation.
pub struct Tested {
    /// `checked = true`: every access.
    every: bool,
    /// The parameters some access indexes without a proof (under the proofs, whatever `every`
    /// says: what the unchecked entry points leave to their caller).
    unproven: Vec<String>,
    /// The frontier parameter, whose entries the schedules read.
    frontier: Option<String>,
}

impl Tested {
    pub fn of(body: &Body, options: &Options, sig: &Sig) -> Tested {
        let guards = Guards::Unproven {
            lanes: options.lanes,
        };
        let name = |p: usize| format!("`{}`", body.params[p].name);
        Tested {
            every: options.checked,
            unproven: body.unproven_params(guards).into_iter().map(name).collect(),
            frontier: sig.tiles.map(|i| format!("`{}`", sig.params[i].ident)),
        }
    }

    /// What `launch_with`'s kernels test, as a sentence.
    fn safe_doc(&self) -> String {
        if self.every {
            return "Its kernels test every load, store and atomic of the body (`checked = true`) \
                    and return `Error::OutOfBounds` with the parameter and the index of the first \
                    access out of range; nothing is written out of bounds."
                .into();
        }
        let mut tested: Vec<String> = self
            .unproven
            .iter()
            .map(|p| format!("the accesses of {p} no host check proves in bounds"))
            .collect();
        tested.extend(self.frontier.iter().map(|f| format!("the entries of {f}")));
        if tested.is_empty() {
            return "Every access of the body is proven in bounds by the host checks, so its \
                    kernels test nothing: they are the unchecked ones."
                .into();
        }
        format!(
            "Its kernels test {} and return `Error::OutOfBounds` naming the parameter and the \
             index of the first out of range; nothing is written out of bounds. The other \
             accesses are proven in bounds by the host checks.",
            tested.join(" and ")
        )
    }

    /// What the caller of the unchecked entry points guarantees, as a sentence.
    fn safety_doc(&self) -> String {
        let mut owed: Vec<String> = self
            .unproven
            .iter()
            .map(|p| format!("every index the body computes into {p} is below its length"))
            .collect();
        owed.extend(
            self.frontier
                .iter()
                .map(|f| format!("every entry of {f} is a tile of the tile set")),
        );
        if owed.is_empty() {
            return "The host checks prove every access of this body in bounds, so nothing is \
                    left to the caller: these kernels are the safe ones."
                .into();
        }
        format!(
            "The caller guarantees that {}: the kernels do not test it, and an access out of \
             range reads or writes whatever device memory lies there. The host checks of \
             `launch_with` still run.",
            owed.join(", and that ")
        )
    }
}

/// The launchers; `generated` is `None` for the placeholders of [`fallback`].
fn launchers(
    func: &ItemFn,
    sig: &Sig,
    generated: Option<(&SafeGenerated, &Tested, &str)>,
    reads_old: bool,
) -> TokenStream {
    let params = params(sig, true);
    let Some((g, tested, _)) = generated else {
        return quote! {
            pub fn launch(dev: &::lb::__private::Device, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
                ::core::unreachable!()
            }
            pub fn launch_with(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
                ::core::unreachable!()
            }
            #[allow(unsafe_code)]
            pub unsafe fn launch_unchecked(dev: &::lb::__private::Device, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
                ::core::unreachable!()
            }
            #[allow(unsafe_code)]
            pub unsafe fn launch_with_unchecked(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
                ::core::unreachable!()
            }
            #[allow(unsafe_code)]
            pub unsafe fn launch_with_unchecked_async(stream: &::lb::__private::Stream, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
                ::core::unreachable!()
            }
            pub fn launch_async(stream: &::lb::__private::Stream, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
                ::core::unreachable!()
            }
            pub fn launch_with_async(stream: &::lb::__private::Stream, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
                ::core::unreachable!()
            }
            pub fn workspace_size(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::core::primitive::usize> {
                ::core::unreachable!()
            }
            pub fn launch_custom(dev: &::lb::__private::Device, schedule: &dyn ::lb::__private::UserSchedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
                ::core::unreachable!()
            }
            pub fn launch_custom_async(stream: &::lb::__private::Stream, schedule: &dyn ::lb::__private::UserSchedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
                ::core::unreachable!()
            }
        };
    };
    let names = arg_names(sig);
    // With several schedules (`"auto"`), `launch` lets lb-runtime's heuristic pick one from the
    // tile set's statistics (lb_runtime::heuristic).
    let tile_set = &sig.tile_set().ident;
    let lane_count = match sig.lanes {
        Some(i) => {
            let f = &sig.params[i].ident;
            quote!(#f as ::core::primitive::u64)
        }
        None => quote!(1u64),
    };
    // Over a frontier the rule reads the frontier's tiles, measured on the device when they
    // could change its pick (lb_runtime::frontier_schedule); such a launch is not tuned.
    let frontier_pick = |stream: TokenStream| {
        sig.tiles.map(|i| {
            let f = &sig.params[i].ident;
            quote!(::lb::__private::frontier_schedule(
                #stream,
                ::lb::__private::DeviceTileSet::tiles(#tile_set),
                #f,
                self::SCHEDULES,
                #lane_count,
            )?)
        })
    };
    let choose = frontier_pick(quote!(&dev.stream())).unwrap_or_else(|| {
        quote!(::lb::__private::choose_schedule(
            self::SCHEDULES,
            #tile_set.stats(),
            #lane_count
        ))
    });
    // Candidate runs of a tuning launch must leave what one launch leaves: a reduce kernel
    // overwrites its whole output at each run, and each `&mut` slice and queue (and an output
    // whose old value the epilogue reads) is replaced by a scratch copy of it for the
    // candidates, so that only the chosen schedule's launch writes the caller's buffers.
    let fn_name = func.sig.ident.to_string();
    let scratch = scratch_args(sig, reads_old);
    let (scratch_slots, scratch_copies, candidate_names) = scratch;
    let pick = match frontier_pick(quote!(stream)) {
        Some(frontier) => quote! {
            let __lb_schedule = #frontier;
            let __lb_picked = ::lb::__private::Picked::Rule;
        },
        None => quote! {
            #(#scratch_slots)*
            let __lb_kernel = ::lb::__private::AutoKernel {
                name: #fn_name,
                ptx: self::PTX,
                schedules: self::SCHEDULES,
            };
            let (__lb_schedule, __lb_picked) = ::lb::__private::pick_schedule(
                stream,
                &__lb_kernel,
                #tile_set.stats(),
                ::lb::__private::DeviceTileSet::temp_cache(#tile_set),
                #lane_count,
                &mut |__lb_st, __lb_s| {
                    #(#scratch_copies)*
                    self::__lb_run(__lb_st, __lb_s, false, ::lb::__private::Submit::Timed, #(#candidate_names),*)
                },
            )?;
        },
    };
    let safe_doc = tested.safe_doc();
    let safety_doc = tested.safety_doc();
    let run = run_fn(func, sig, g);
    // The unchecked entry points call the private `__lb_run`, not each other: the only `unsafe`
    // block in the user's crate is `__lb_run`'s call of `submit`, and `#[allow(unsafe_code)]` (on
    // these and on that statement) lets a crate that denies unsafe code keep its lint for its own
    // code.
    quote! {
        /// Runs the kernels of the schedule among `SCHEDULES` that the device's tuning picks for
        /// the tile set (`Launch::picked` says how): measured at the first launch on a tile set
        /// when the kernel can be tuned and tuning is on, else `lb::heuristic`'s choice; over a
        /// frontier, the heuristic's choice for the frontier's tiles (`lb::frontier_schedule`,
        /// which may wait for the GPU to measure them); see `launch_with` for what is checked.
        pub fn launch(dev: &::lb::__private::Device, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
            let __lb_stream = dev.stream();
            self::__lb_auto(&__lb_stream, ::lb::__private::Submit::Timed, #(#names),*)?.wait()
        }

        /// `launch` on `stream`, without waiting: the kernels are enqueued and the returned
        /// `Pending` reports their errors (bounds, queue overflow) and time when waited on, or
        /// the stream's next synchronization does. Temporaries come from the stream's workspace.
        /// A launch that tunes waits for its candidates' runs.
        pub fn launch_async(stream: &::lb::__private::Stream, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            self::__lb_auto(stream, ::lb::__private::Submit::Enqueue, #(#names),*)
        }

        /// `launch`'s schedule choice, then the launch.
        fn __lb_auto(stream: &::lb::__private::Stream, __lb_mode: ::lb::__private::Submit, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            #pick
            let mut __lb_pending = self::__lb_run(stream, __lb_schedule, false, __lb_mode, #(#names),*)?;
            __lb_pending.set_picked(__lb_picked);
            ::core::result::Result::Ok(__lb_pending)
        }

        /// `launch_with` on `stream`, without waiting; see `launch_async`.
        pub fn launch_with_async(stream: &::lb::__private::Stream, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            self::__lb_run(stream, schedule, false, ::lb::__private::Submit::Enqueue, #(#names),*)
        }

        /// Bytes of workspace `launch_with(dev, schedule, …)` takes from its stream for these
        /// arguments (launches nothing, allocates nothing): the size of a `Workspace` to give a
        /// stream with `Stream::set_workspace`. The host checks of `launch_with` apply.
        pub fn workspace_size(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::core::primitive::usize> {
            let __lb_stream = dev.stream();
            ::core::result::Result::Ok(self::__lb_run(&__lb_stream, schedule, false, ::lb::__private::Submit::SizeOnly, #(#names),*)?.workspace_bytes())
        }

        /// Runs the kernels of `schedule` on `dev`; it must be one of `SCHEDULES`. Before
        /// anything is launched, the host checks the schedule, the plan, the output's length,
        /// every slice indexed through the tile set against the count bounding its index, and
        /// that every argument lives on `dev`.
        #[doc = #safe_doc]
        pub fn launch_with(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
            self::__lb_run(&dev.stream(), schedule, false, ::lb::__private::Submit::Timed, #(#names),*)?.wait()
        }

        /// `launch` with kernels that test no index (`UNCHECKED_PLANS`).
        ///
        /// # Safety
        ///
        #[doc = #safety_doc]
        #[allow(unsafe_code)]
        pub unsafe fn launch_unchecked(dev: &::lb::__private::Device, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
            self::__lb_run(&dev.stream(), #choose, true, ::lb::__private::Submit::Timed, #(#names),*)?.wait()
        }

        /// `launch_with` with kernels that test no index (`UNCHECKED_PLANS`).
        ///
        /// # Safety
        ///
        #[doc = #safety_doc]
        #[allow(unsafe_code)]
        pub unsafe fn launch_with_unchecked(dev: &::lb::__private::Device, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
            self::__lb_run(&dev.stream(), schedule, true, ::lb::__private::Submit::Timed, #(#names),*)?.wait()
        }

        /// `launch_with_unchecked` on `stream`, without waiting; see `launch_async`.
        ///
        /// # Safety
        ///
        #[doc = #safety_doc]
        #[allow(unsafe_code)]
        pub unsafe fn launch_with_unchecked_async(stream: &::lb::__private::Stream, schedule: ::lb::__private::Schedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            self::__lb_run(stream, schedule, true, ::lb::__private::Submit::Enqueue, #(#names),*)
        }

        /// Runs the kernels of `schedule`, a schedule written outside lb (`lb::schedule`): its
        /// PTX is built from `IR` at the first launch under it and kept for the process (an
        /// `Err` if it cannot be built). The host checks of `launch_with` apply, and the kernels
        /// test what they test under a built-in schedule.
        pub fn launch_custom(dev: &::lb::__private::Device, schedule: &dyn ::lb::__private::UserSchedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Launch> {
            let __lb_kernels = ::lb::__private::user_kernels(self::IR, schedule)?;
            self::__lb_run_in(&dev.stream(), __lb_kernels, schedule.name(), false, ::lb::__private::Submit::Timed, #(#names),*)?.wait()
        }

        /// `launch_custom` on `stream`, without waiting; see `launch_async`.
        pub fn launch_custom_async(stream: &::lb::__private::Stream, schedule: &dyn ::lb::__private::UserSchedule, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            let __lb_kernels = ::lb::__private::user_kernels(self::IR, schedule)?;
            self::__lb_run_in(stream, __lb_kernels, schedule.name(), false, ::lb::__private::Submit::Enqueue, #(#names),*)
        }

        #run
    }
}

/// What a tuning launch's candidate runs take instead of the buffers they would write: for each
/// `&mut` slice and queue (and the output when the epilogue reads its old value), a slot
/// declared before the tuner (`let mut __lb_scratch_x = None;`), the copy into it before each
/// run (`scratch_copy`, `DeviceQueue::scratch_of`), and the arguments as [`arg_names`] lists
/// them with those buffers replaced.
fn scratch_args(
    sig: &Sig,
    reads_old: bool,
) -> (Vec<TokenStream>, Vec<TokenStream>, Vec<TokenStream>) {
    let slice_copy = quote!(::lb::__private::scratch_copy);
    let queue_copy = quote!(::lb::__private::DeviceQueue::scratch_of);
    let written = sig
        .body_params()
        .map(|p| {
            let copy = match p.role {
                Role::Slice { mutable: true, .. } => Some(&slice_copy),
                Role::Queue => Some(&queue_copy),
                _ => None,
            };
            (&p.ident, copy)
        })
        .chain(
            sig.output
                .iter()
                .map(|o| (o, reads_old.then_some(&slice_copy))),
        );
    let (mut slots, mut copies, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for (id, copy) in written {
        let Some(copy) = copy else {
            names.push(quote!(#id));
            continue;
        };
        let slot = format_ident!("__lb_scratch_{}", syn::ext::IdentExt::unraw(id));
        slots.push(quote!(let mut #slot = ::core::option::Option::None;));
        copies.push(quote!(let #slot = #copy(&*#id, &mut #slot)?;));
        names.push(quote!(#slot));
    }
    (slots, copies, names)
}

/// The launchers' arguments as the generated functions pass them on: the body's parameters,
/// then the output.
fn arg_names(sig: &Sig) -> Vec<TokenStream> {
    sig.body_params()
        .map(|p| {
            let id = &p.ident;
            quote!(#id)
        })
        .chain(sig.output.iter().map(|o| quote!(#o)))
        .collect()
}

/// The host comparisons of `gathers`, each returning `Error::Shape` naming the slice.
fn gather_checks(name: &syn::Ident, sig: &Sig, gathers: &[Gather]) -> Vec<TokenStream> {
    // `x[a.col_indices[nz] as usize]` stays inside `x` when `x` covers the tile set's columns
    // (the upload validated every index against them): one comparison here instead of one per
    // access on the GPU, where a short `x` would be an out-of-bounds access.
    gathers.iter().map(|g| {
        let slice = &sig.body_params().nth(g.slice).expect("a body parameter").ident;
        let ts = &sig.body_params().nth(g.tile_set).expect("a body parameter").ident;
        let (what, count) = match g.bound {
            GatherBound::Columns => (format!("`{ts}.col_indices`"), quote!(#ts.num_cols())),
            GatherBound::Rows => (format!("`{ts}.row_indices`"), quote!(#ts.num_rows())),
            GatherBound::Tiles => (
                "the tile index".to_string(),
                quote!(::lb::__private::DeviceTileSet::num_tiles(#ts)),
            ),
            GatherBound::Atoms => (
                "the atom index".to_string(),
                quote!(::lb::__private::DeviceTileSet::num_atoms(#ts)),
            ),
        };
        // `i * lanes + lane` reaches `count × lanes`; in u128, which cannot overflow.
        let (what, lanes) = match g.lanes {
            Some(p) => {
                let k = &sig.body_params().nth(p).expect("a body parameter").ident;
                (format!("{what} × `{k}` + the lane"), quote!(#k as ::core::primitive::u128))
            }
            None => (what, quote!(1u128)),
        };
        let msg = format!(
            "`{name}`: `{slice}` has {{}} elements, but the kernel indexes it with {what}, which \
             goes up to {{}}: pass a `{slice}` of at least that length"
        );
        quote! {
            let __lb_needed = (#count as ::core::primitive::u128) * #lanes;
            if (#slice.len() as ::core::primitive::u128) < __lb_needed {
                return ::core::result::Result::Err(::lb::__private::Error::Shape(::std::format!(#msg, #slice.len(), __lb_needed)));
            }
        }
    }).collect()
}

/// The private `__lb_run(dev, schedule, unchecked, ...)` behind the built-in schedules' entry
/// points, and `__lb_run_in`, behind it and `launch_custom`: the host checks, the plan choice
/// (among the unchecked plans when `unchecked`), the launch and the queue checks.
fn run_fn(func: &ItemFn, sig: &Sig, g: &SafeGenerated) -> TokenStream {
    let name = &func.sig.ident;
    let params = params(sig, true);
    let names = arg_names(sig);
    let a = &sig.tile_set().ident;
    let tiles = match sig.tiles {
        Some(i) => {
            let f = &sig.params[i].ident;
            quote!(#f.len())
        }
        None => quote!(::lb::__private::DeviceTileSet::num_tiles(#a)),
    };
    // Temporaries cached with the tile set describe all of its tiles: never with a frontier.
    let cache = match sig.tiles {
        Some(_) => quote!(::core::option::Option::None),
        None => {
            quote!(::core::option::Option::Some(::lb::__private::DeviceTileSet::temp_cache(#a)))
        }
    };
    let lanes = match sig.lanes {
        Some(i) => {
            let k = &sig.params[i].ident;
            quote!(#k)
        }
        None => quote!(1),
    };
    let pushes = sig.body_params().map(|p| {
        let id = &p.ident;
        quote!(::lb::__private::KernelArg::push_args(&#id, &mut __lb_args);)
    });
    // A format written outside lb answers `DeviceTileSet::tiles` with its own code, which could
    // answer differently from call to call: the launch takes the `DeviceTiles` once, and every
    // size, check and argument below reads that one (whose `tiles` is itself).
    let take_tiles = sig.body_params().find_map(|p| match p.role {
        Role::TileSet {
            kind: TileSetKind::Tiles,
            ..
        } => {
            let id = &p.ident;
            Some(quote! {
                let #id: &dyn ::lb::__private::DeviceTileSet = ::lb::__private::DeviceTileSet::tiles(#id);
            })
        }
        _ => None,
    });
    let out_push = sig
        .output
        .as_ref()
        .map(|out| quote!(::lb::__private::KernelArg::push_args(&*#out, &mut __lb_args);));
    let safe_checks = gather_checks(name, sig, &g.gathers);
    // Under `checked = true` the kernels report each index themselves; the unchecked twins
    // still make every host check the proofs rely on.
    let gather_checks = if g.gathers == g.unchecked_gathers {
        quote!(#(#safe_checks)*)
    } else {
        let unchecked_checks = gather_checks(name, sig, &g.unchecked_gathers);
        quote! {
            if __lb_unchecked {
                #(#unchecked_checks)*
            } else {
                #(#safe_checks)*
            }
        }
    };
    // Addresses of another device's memory would read or overwrite whatever lives there in
    // this device's address space: refuse them before anything is launched.
    let device_checks = sig
        .body_params()
        .map(|p| &p.ident)
        .chain(sig.output.iter())
        .map(|id| {
            let what = format!("`{name}`: the argument `{id}`");
            quote! {
                if !::lb::__private::KernelArg::on_device(&#id, stream.device()) {
                    return ::core::result::Result::Err(::lb::__private::Error::DeviceMismatch {
                        what: ::std::string::ToString::to_string(#what),
                    });
                }
            }
        });
    // A push past a queue's capacity is counted but not stored: report it instead of losing it.
    let overflow_checks = sig
        .body_params()
        .filter(|p| p.role == Role::Queue)
        .map(|p| {
            let id = &p.ident;
            let name = id.to_string();
            quote! {
                if __lb_mode != ::lb::__private::Submit::SizeOnly {
                    __lb_pending.watch_queue(#id, #name)?;
                }
            }
        });
    let too_big = format!(
        "`{name}`: {{}} tiles + atoms over {{:?}} offsets fit no plan of `{{}}` (offset width, index range or variant rules)"
    );
    let shape_check = sig.output.as_ref().map(|out| {
        let msg = format!("`{name}`: the output `{out}` has {{}} elements but needs {{}} (tiles × lanes)");
        quote! {
            let __lb_needed = ::lb::__private::DeviceTileSet::num_tiles(#a) as ::core::primitive::u64 * __lb_size.lanes;
            if (#out.len() as ::core::primitive::u64) < __lb_needed {
                return ::core::result::Result::Err(::lb::__private::Error::Shape(::std::format!(#msg, #out.len(), __lb_needed)));
            }
        }
    });
    // SAFETY (of the `unsafe` call of `submit` below, whose comment cannot travel in tokens):
    // `PTX` and `PLANS` are generated from the same parameter list as `#pushes` and `#out_push`,
    // so the arguments are the kernels' parameters in order and type; every argument's device
    // was checked (`#device_checks`), the tile set was validated at upload (a `&Tiles` parameter
    // is one `DeviceTiles`, taken once, `#take_tiles`), the output and every
    // gathered slice were compared with what indexes them (`#shape_check`, `#gather_checks`; under
    // `checked = true` the kernels test each access instead), the unchecked plans run only from
    // the `unsafe` entry points, whose callers answer for what their `# Safety` names, and the
    // cache is the tile set's own (or `None` with a frontier).
    quote! {
        /// The built-in schedules' entry points' common body; `__lb_unchecked` runs
        /// `UNCHECKED_PLANS`.
        fn __lb_run(stream: &::lb::__private::Stream, schedule: ::lb::__private::Schedule, __lb_unchecked: ::core::primitive::bool, __lb_mode: ::lb::__private::Submit, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            if !self::SCHEDULES.contains(&schedule) {
                return ::core::result::Result::Err(::lb::__private::Error::ScheduleNotGenerated {
                    requested: ::std::string::ToString::to_string(&schedule),
                    generated: self::SCHEDULES.iter().map(|__lb_s| __lb_s.name()).collect::<::std::vec::Vec<_>>().join(", "),
                });
            }
            const __LB_KERNELS: ::lb::__private::UserKernels = ::lb::__private::UserKernels {
                ptx: self::PTX,
                plans: self::PLANS,
                unchecked_plans: self::UNCHECKED_PLANS,
            };
            self::__lb_run_in(stream, &__LB_KERNELS, schedule.name(), __lb_unchecked, __lb_mode, #(#names),*)
        }

        /// Every entry point's common body, over the module `__lb_kernels` (the built-in
        /// schedules' constants, or a user schedule's module): the host checks, the plan choice
        /// among the plans of `schedule` (the unchecked ones when `__lb_unchecked`), the launch
        /// and the queue checks.
        fn __lb_run_in(stream: &::lb::__private::Stream, __lb_kernels: &'static ::lb::__private::UserKernels, schedule: &::core::primitive::str, __lb_unchecked: ::core::primitive::bool, __lb_mode: ::lb::__private::Submit, #(#params),*) -> ::lb::__private::Result<::lb::__private::Pending> {
            #take_tiles
            let __lb_size = ::lb::__private::ProblemSize {
                tiles: #tiles as ::core::primitive::u64,
                atoms: ::lb::__private::DeviceTileSet::num_atoms(#a) as ::core::primitive::u64,
                lanes: #lanes as ::core::primitive::u64,
                max_tile_atoms: #a.stats().max_atoms,
                offsets: ::lb::__private::DeviceTileSet::offset_width(#a),
            };
            // A schedule may have several plans (32-bit index arithmetic before 64-bit, variants
            // for different tile sizes, one per offset width): the first that reads the tile
            // set's offset width and whose limit and rule admit the problem runs.
            let __lb_all = if __lb_unchecked { __lb_kernels.unchecked_plans } else { __lb_kernels.plans };
            let mut __lb_plans = __lb_all.iter().filter(|__lb_p| __lb_p.schedule == schedule).peekable();
            if __lb_plans.peek().is_none() {
                return ::core::result::Result::Err(::lb::__private::Error::ScheduleNotGenerated {
                    requested: ::std::string::ToString::to_string(schedule),
                    generated: ::lb::__private::plan_names(__lb_all),
                });
            }
            let __lb_work = __lb_size.tiles.saturating_add(__lb_size.atoms);
            let __lb_plan = match __lb_plans.find(|__lb_p| {
                __lb_p.offsets == __lb_size.offsets
                    && __lb_p.index_limit.is_none_or(|__lb_l| __lb_work <= __lb_l)
                    && __lb_p.select.as_ref().is_none_or(|__lb_r| __lb_r.matches(&__lb_size, #a.stats().std_atoms))
            }) {
                ::core::option::Option::Some(__lb_p) => __lb_p,
                ::core::option::Option::None => {
                    return ::core::result::Result::Err(::lb::__private::Error::Shape(::std::format!(
                        #too_big, __lb_work, __lb_size.offsets, schedule
                    )));
                }
            };
            #shape_check
            #gather_checks
            #(#device_checks)*
            // One allocation: every built-in argument takes at most a few parameters.
            let mut __lb_args = ::std::vec::Vec::with_capacity(32);
            #(#pushes)*
            #out_push
            let __lb_job = ::lb::__private::Job {
                ptx: __lb_kernels.ptx,
                plan: __lb_plan,
                param_names: self::PARAM_NAMES,
                size: __lb_size,
                cache: #cache,
            };
            #[allow(unused_mut, unsafe_code)]
            let mut __lb_pending = unsafe { ::lb::__private::submit(stream, &__lb_job, __lb_args, __lb_mode) }?;
            #(#overflow_checks)*
            ::core::result::Result::Ok(__lb_pending)
        }
    }
}
