//! The function signature: which parameter plays which role (tile set, index roles, slices,
//! scalars), checked against the attribute's `reduce`, `output`, `lanes` and `tiles`.

use lb_ptx::body::{IndexRole, Reduce, TileSetKind};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Type};

use crate::attr::Args;
use crate::half::Halves;
use crate::types::{did_you_mean, Errors, STy};

/// What a parameter of the user's function is.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// `#[tile]`, `#[atom]`, `#[lane]`, `#[rank]`: an index the schedule computes.
    Index(IndexRole),
    /// `&Csr<T>`, `&Csc<T>` or `&Coo<T>`.
    TileSet { kind: TileSetKind, value: STy },
    /// `&[T]` or `&mut [T]`.
    Slice { elem: STy, mutable: bool },
    /// `T` by value.
    Scalar(STy),
    /// `&mut Queue`.
    Queue,
}

#[derive(Clone, Debug)]
pub struct SigParam {
    pub ident: Ident,
    pub role: Role,
}

/// The checked signature.
#[derive(Clone, Debug)]
pub struct Sig {
    pub params: Vec<SigParam>,
    /// With `reduce`: the return type and the reduction.
    pub reduce: Option<(STy, Reduce)>,
    /// The type the body returns: `reduce`'s, or from [`parse_alone`], the declared one.
    pub ret: Option<STy>,
    /// The output slice's name, with `reduce`.
    pub output: Option<Ident>,
    /// Index into `params` of the `usize` lane-count parameter.
    pub lanes: Option<usize>,
    /// Index into `params` of the `&[u32]` active-tile parameter.
    pub tiles: Option<usize>,
    /// Index into `params` of the tile-set parameter (`parse` guarantees there is one).
    tile_set: usize,
    /// Parameters whose declaration was reported ([`for_body`]; empty otherwise): the body's
    /// uses of them are not mistakes of their own.
    pub rejected: Vec<String>,
    /// The parameters (and the output) stored in 16 bits, which the signature now writes as
    /// `f32` (`half::narrow`).
    pub halves: Halves,
}

impl Sig {
    /// The parameters the kernel receives (index roles are computed, not passed), in order.
    pub fn body_params(&self) -> impl Iterator<Item = &SigParam> {
        self.params
            .iter()
            .filter(|p| !matches!(p.role, Role::Index(_)))
    }

    /// Position of `params[i]` among the body parameters.
    pub fn body_index(&self, i: usize) -> usize {
        self.params[..i]
            .iter()
            .filter(|p| !matches!(p.role, Role::Index(_)))
            .count()
    }

    pub fn tile_set(&self) -> &SigParam {
        &self.params[self.tile_set]
    }

    /// The signature an epilogue is checked against: the kernel's parameters without its index
    /// roles (so each keeps its position among the body parameters), then `extra` (the
    /// epilogue's own: its index roles and the reduced and old values as scalars). It returns
    /// the reduced type.
    pub fn for_epilogue(&self, extra: Vec<SigParam>) -> Sig {
        let kept: Vec<SigParam> = self
            .params
            .iter()
            .filter(|p| !matches!(p.role, Role::Index(_)))
            .cloned()
            .collect();
        let moved = |i: Option<usize>| i.map(|i| self.body_index(i));
        let tile_set = self.body_index(self.tile_set);
        Sig {
            params: kept.into_iter().chain(extra).collect(),
            reduce: self.reduce,
            ret: self.reduce.map(|(t, _)| t),
            output: None,
            lanes: moved(self.lanes),
            tiles: moved(self.tiles),
            tile_set,
            rejected: Vec::new(),
            halves: self.halves.clone(),
        }
    }

    pub fn roles(&self) -> Vec<IndexRole> {
        self.params
            .iter()
            .filter_map(|p| match p.role {
                Role::Index(r) => Some(r),
                _ => None,
            })
            .collect()
    }
}

const ROLE_ATTRS: [(&str, IndexRole); 4] = [
    ("tile", IndexRole::Tile),
    ("atom", IndexRole::Atom),
    ("lane", IndexRole::Lane),
    ("rank", IndexRole::Rank),
];

/// Is this a role attribute (`#[tile]` …), which the emitted function must not carry?
pub fn is_role_attr(attr: &syn::Attribute) -> bool {
    ROLE_ATTRS
        .iter()
        .any(|(name, _)| attr.path().is_ident(name))
}

/// Names the generated module's functions use for their own parameters and items, which a
/// parameter of the same name would shadow.
const RESERVED: [&str; 8] = [
    "dev",
    "schedule",
    "PTX",
    "SCHEDULES",
    "PLANS",
    "UNCHECKED_PLANS",
    "DEFAULT",
    "PARAM_NAMES",
];

const SCALARS: &str = "bool, i32, u32, i64, u64, usize, f32, f64";
const ELEMENTS: &str = "bool, i32, u32, i64, u64, f32, f64, f16, bf16";

/// The signature, checked against the attribute.
pub fn parse(func: &ItemFn, args: &Args) -> syn::Result<Sig> {
    signature(func, Some(args))
}

/// The signature as the function alone declares it, for checking the body when the attribute
/// has errors: the checks that need the attribute (`reduce` against the return type, `output`,
/// `lanes`, `tiles`) are left out, as the attribute's own error may be what they would find, and
/// the body returns the declared type. Nothing is generated from it.
pub fn parse_alone(func: &ItemFn) -> syn::Result<Sig> {
    signature(func, None)
}

fn signature(func: &ItemFn, args: Option<&Args>) -> syn::Result<Sig> {
    let sig = &func.sig;
    let mut errors = Errors::default();
    qualifiers(sig, &mut errors);
    let (params, _) = params(sig, &mut errors);
    let has = |r: IndexRole| params.iter().any(|p| p.role == Role::Index(r));
    // The role checks below would only repeat what is already reported.
    errors.finish()?;
    let mut errors = Errors::default();
    let tile_set = params
        .iter()
        .position(|p| matches!(p.role, Role::TileSet { .. }));
    if tile_set.is_none() {
        errors.push(syn::Error::new(
            sig.paren_token.span.join(),
            "a load-balanced function takes exactly one tile-set parameter, e.g. `a: &Csr<f32>`",
        ));
    }
    if !has(IndexRole::Atom) {
        errors.push(syn::Error::new(
            sig.paren_token.span.join(),
            "a load-balanced function needs an `#[atom] nz: usize` parameter: the index of the atom it computes",
        ));
    }

    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => match scalar(ty) {
            Some(t) => Some((t, ty.span())),
            None => {
                errors.push(syn::Error::new_spanned(
                    ty,
                    format!("the contribution of an atom must be a scalar: one of {SCALARS}"),
                ));
                None
            }
        },
    };
    let (reduce, lanes, tiles) = match args {
        Some(args) => with_attr(sig, args, &params, ret, &mut errors),
        None => (None, None, None),
    };
    errors.finish()?;
    Ok(Sig {
        ret: match args {
            Some(_) => reduce.map(|(t, _)| t),
            None => ret.map(|(t, _)| t),
        },
        params,
        reduce,
        output: args.and_then(|a| a.output.clone()),
        tile_set: tile_set.unwrap_or_default(),
        lanes,
        tiles,
        rejected: Vec::new(),
        halves: Halves::default(),
    })
}

/// The signature as far as it can be read when it has errors, so that the body's own mistakes
/// are reported in the same compile: the parameters that were declared well, and the names of
/// those that were not (`Sig::rejected`), whose uses in the body are not reported again.
/// `None` when the return type is not a scalar, since every `return` would then be reported
/// too. Only checked, never generated from: it may lack a tile set.
pub fn for_body(func: &ItemFn) -> Option<Sig> {
    let sig = &func.sig;
    let (params, rejected) = params(sig, &mut Errors::default());
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => Some(scalar(ty)?),
    };
    let tile_set = params
        .iter()
        .position(|p| matches!(p.role, Role::TileSet { .. }));
    Some(Sig {
        params,
        reduce: None,
        ret,
        output: None,
        lanes: None,
        tiles: None,
        tile_set: tile_set.unwrap_or_default(),
        rejected,
        halves: Halves::default(),
    })
}

/// `const`, `async`, `unsafe`, `extern`, generics and variadics, which a kernel cannot have.
fn qualifiers(sig: &syn::Signature, errors: &mut Errors) {
    if let Some(c) = &sig.constness {
        errors.push(syn::Error::new_spanned(
            c,
            "a load-balanced function cannot be `const`",
        ));
    }
    if let Some(a) = &sig.asyncness {
        errors.push(syn::Error::new_spanned(
            a,
            "a load-balanced function cannot be `async`",
        ));
    }
    if let Some(u) = &sig.unsafety {
        errors.push(syn::Error::new_spanned(
            u,
            "a load-balanced function cannot be `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "a load-balanced function cannot have an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "a load-balanced function cannot be generic: write concrete types (e.g. `&Csr<f32>`, `&[f32]`)",
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            v,
            "a load-balanced function cannot be variadic",
        ));
    }
}

/// Each parameter's role, from its type or role attribute: what the function says without the
/// attribute.
fn params(sig: &syn::Signature, errors: &mut Errors) -> (Vec<SigParam>, Vec<String>) {
    let mut params: Vec<SigParam> = Vec::new();
    let mut rejected = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            errors.push(syn::Error::new_spanned(
                input,
                "a load-balanced function cannot take `self`: write a free function",
            ));
            continue;
        };
        let ident = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if let Some(m) = &pi.mutability {
                    errors.push(syn::Error::new_spanned(
                        m,
                        format!("kernel parameters are read-only: drop `mut` and copy it into a local (`let mut {0} = {0};`)", pi.ident),
                    ));
                }
                pi.ident.clone()
            }
            other => {
                errors.push(syn::Error::new_spanned(
                    other,
                    "a kernel parameter must be a plain name (`x: &[f32]`), not a pattern",
                ));
                rejected.extend(bound_names(other));
                continue;
            }
        };
        let name = ident.to_string();
        if RESERVED.contains(&name.as_str()) || name.starts_with("__lb") {
            errors.push(syn::Error::new(
                ident.span(),
                format!("`{name}` is a name the generated launchers use: rename this parameter"),
            ));
            rejected.push(name.clone());
            continue;
        }
        let mut role_attr = None;
        for attr in pt.attrs.iter().filter(|a| is_role_attr(a)) {
            let Some((name, role)) = ROLE_ATTRS.iter().find(|(n, _)| attr.path().is_ident(n))
            else {
                continue;
            };
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.push(syn::Error::new_spanned(
                    attr,
                    format!("write the role attribute as `#[{name}]`, without arguments"),
                ));
            }
            if role_attr.is_some() {
                errors.push(syn::Error::new_spanned(
                    attr,
                    "a parameter can play only one index role",
                ));
            } else {
                role_attr = Some((*role, attr));
            }
        }
        let role = match role_attr {
            Some((role, attr)) => {
                if !is_usize(&pt.ty) {
                    errors.push(syn::Error::new_spanned(
                        &pt.ty,
                        format!("the `{}` parameter `{ident}` receives an index: its type must be `usize`", attr.path().get_ident().map(|i| i.to_string()).unwrap_or_default()),
                    ));
                    rejected.push(name.clone());
                    continue;
                }
                if let Some(prev) = params.iter().find(|p| p.role == Role::Index(role)) {
                    errors.push(syn::Error::new_spanned(
                        attr,
                        format!("`{}` already has this role: a function takes each of `#[tile]`, `#[atom]`, `#[lane]`, `#[rank]` at most once", prev.ident),
                    ));
                    rejected.push(name.clone());
                    continue;
                }
                Role::Index(role)
            }
            None => match param_role(&pt.ty) {
                Ok(role) => role,
                Err(e) => {
                    errors.push(e);
                    rejected.push(name.clone());
                    continue;
                }
            },
        };
        if let Role::TileSet { .. } = role {
            if let Some(prev) = params
                .iter()
                .find(|p| matches!(p.role, Role::TileSet { .. }))
            {
                errors.push(syn::Error::new_spanned(
                    &pt.ty,
                    format!("a load-balanced function takes exactly one tile set, and `{}` is already it: pass other matrices as slices", prev.ident),
                ));
                rejected.push(name.clone());
                continue;
            }
        }
        params.push(SigParam { ident, role });
    }
    (params, rejected)
}

/// The names a parameter pattern binds (`(p, q)`, `&(a, b)`, `s @ _`): the body may use them
/// as the function declares them, and those uses are not mistakes of their own.
fn bound_names(pat: &Pat) -> Vec<String> {
    struct Names(Vec<String>);
    impl<'ast> syn::visit::Visit<'ast> for Names {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.push(p.ident.to_string());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut names = Names(Vec::new());
    syn::visit::Visit::visit_pat(&mut names, pat);
    names.0
}

/// What the signature must agree on with the attribute: the return type with `reduce`, the
/// `output` name, and the `lanes` and `tiles` parameters (their indices are returned).
fn with_attr(
    sig: &syn::Signature,
    args: &Args,
    params: &[SigParam],
    ret: Option<(STy, proc_macro2::Span)>,
    errors: &mut Errors,
) -> (Option<(STy, Reduce)>, Option<usize>, Option<usize>) {
    // Return type and `reduce` go together.
    let reduce = match (&args.reduce, ret, &sig.output) {
        (Some((op, _)), Some((t, span)), _) => {
            if t == STy::Bool || t == STy::Usize {
                let instead = if t == STy::Usize { "u64" } else { "u32" };
                errors.push(syn::Error::new(
                    span,
                    format!(
                        "a reduced value cannot be `{}`: return `{instead}`",
                        t.name()
                    ),
                ));
            }
            Some((t, *op))
        }
        (Some((_, span)), None, ReturnType::Default) => {
            errors.push(syn::Error::new(
                *span,
                format!("`reduce` combines the values the function returns, but `{}` returns nothing: add a return type, e.g. `-> f32`", sig.ident),
            ));
            None
        }
        (None, _, ReturnType::Type(_, ty)) => {
            errors.push(syn::Error::new_spanned(
                ty,
                "this function returns a value but the attribute has no `reduce`: add `reduce = \"sum\"` (or \"min\", \"max\") and `output = \"y\"`, or return nothing and store through a `&mut [T]` parameter",
            ));
            None
        }
        _ => None,
    };

    if let Some(out) = &args.output {
        let name = out.to_string();
        if RESERVED.contains(&name.as_str()) || name.starts_with("__lb") {
            errors.push(syn::Error::new(
                out.span(),
                format!("`{name}` is a name the generated launchers use: pick another output name"),
            ));
        }
        if params.iter().any(|p| p.ident == *out) {
            errors.push(syn::Error::new(
                out.span(),
                format!("the output `{out}` has the same name as a parameter: pick another name"),
            ));
        }
    }

    let lanes = find_named(
        params,
        args.lanes.as_ref(),
        "lanes",
        errors,
        |r| *r == Role::Scalar(STy::Usize),
        "a `usize` parameter (the lane count)",
    );
    let tiles = find_named(
        params,
        args.tiles.as_ref(),
        "tiles",
        errors,
        |r| {
            matches!(
                r,
                Role::Slice {
                    elem: STy::U32,
                    mutable: false
                }
            )
        },
        "a `&[u32]` parameter (the active tiles)",
    );
    match (&args.lanes, params.iter().find(|p| p.role == Role::Index(IndexRole::Lane))) {
        (None, Some(p)) => errors.push(syn::Error::new(
            p.ident.span(),
            "`#[lane]` needs the lane count: add `lanes = \"k\"` to the attribute, naming a `usize` parameter",
        )),
        (Some(lit), None) => errors.push(syn::Error::new(
            lit.span(),
            "`lanes` needs a `#[lane] j: usize` parameter that receives the lane index",
        )),
        _ => {}
    }

    (reduce, lanes, tiles)
}

/// Resolves `lanes = "k"` / `tiles = "frontier"` to a parameter of the right kind.
fn find_named(
    params: &[SigParam],
    name: Option<&syn::LitStr>,
    key: &str,
    errors: &mut Errors,
    ok: impl Fn(&Role) -> bool,
    what: &str,
) -> Option<usize> {
    let lit = name?;
    let value = lit.value();
    match params.iter().position(|p| p.ident == value) {
        Some(i) if ok(&params[i].role) => Some(i),
        Some(i) => {
            errors.push(syn::Error::new(
                lit.span(),
                format!(
                    "`{key}` must name {what}, but `{}` is {}",
                    params[i].ident,
                    describe(&params[i].role)
                ),
            ));
            None
        }
        None => {
            let names: Vec<String> = params.iter().map(|p| p.ident.to_string()).collect();
            let hint = match did_you_mean(&value, names.iter().map(String::as_str)) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            errors.push(syn::Error::new(
                lit.span(),
                format!("`{key}` must name {what}, but there is no parameter `{value}`{hint}"),
            ));
            None
        }
    }
}

fn describe(role: &Role) -> String {
    match role {
        Role::Index(_) => "an index role".to_string(),
        Role::TileSet {
            kind: TileSetKind::Tiles,
            ..
        } => "a `&Tiles`".to_string(),
        Role::TileSet { kind, value } => format!("a `&{}<{}>`", kind.name(), value.name()),
        Role::Queue => "a `&mut Queue`".to_string(),
        Role::Slice {
            elem,
            mutable: false,
        } => format!("a `&[{}]`", elem.name()),
        Role::Slice {
            elem,
            mutable: true,
        } => format!("a `&mut [{}]`", elem.name()),
        Role::Scalar(t) => format!("a `{}`", t.name()),
    }
}

fn is_usize(ty: &Type) -> bool {
    scalar(ty) == Some(STy::Usize)
}

/// A scalar type written as a bare name.
fn scalar(ty: &Type) -> Option<STy> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => tp
            .path
            .get_ident()
            .and_then(|i| STy::from_name(&i.to_string())),
        Type::Paren(p) => scalar(&p.elem),
        Type::Group(g) => scalar(&g.elem),
        _ => None,
    }
}

/// The role of a parameter without a role attribute, from its type.
fn param_role(ty: &Type) -> syn::Result<Role> {
    if let Some(t) = scalar(ty) {
        return Ok(Role::Scalar(t));
    }
    let unsupported = || {
        syn::Error::new_spanned(
            ty,
            format!("unsupported parameter type: write the tile set as `&Csr<T>`, `&Csc<T>`, `&Coo<T>` or `&Tiles`, inputs as `&[T]`, outputs as `&mut [T]` (T one of {ELEMENTS}), a queue as `&mut Queue`, or a scalar by value ({SCALARS})"),
        )
    };
    match ty {
        Type::Reference(r) => {
            if let Some(lt) = &r.lifetime {
                if lt.ident != "_" {
                    return Err(syn::Error::new_spanned(lt, "write the reference without a lifetime: the macro's functions choose their own"));
                }
            }
            match &*r.elem {
                Type::Slice(s) => {
                    let elem = element(&s.elem)?;
                    Ok(Role::Slice {
                        elem,
                        mutable: r.mutability.is_some(),
                    })
                }
                Type::Path(tp) if tp.qself.is_none() => {
                    let Some(last) = tp.path.segments.last() else {
                        return Err(unsupported());
                    };
                    let name = last.ident.to_string();
                    match name.as_str() {
                        "Tiles" => {
                            if r.mutability.is_some() || !last.arguments.is_empty() {
                                return Err(syn::Error::new_spanned(
                                    ty,
                                    "the tile-set contract is read-only and has no value type: \
                                     take it as `&Tiles`",
                                ));
                            }
                            // No values: the type slot is never read (a `Tiles` body reads no
                            // per-atom field), and `u32` is the width of its indices.
                            Ok(Role::TileSet {
                                kind: TileSetKind::Tiles,
                                value: STy::U32,
                            })
                        }
                        "Csr" | "Csc" | "Coo" => {
                            let kind = match name.as_str() {
                                "Csr" => TileSetKind::Csr,
                                "Csc" => TileSetKind::Csc,
                                _ => TileSetKind::Coo,
                            };
                            if let Some(m) = &r.mutability {
                                return Err(syn::Error::new_spanned(
                                    m,
                                    format!("the tile set is read-only: take it as `&{name}<T>`"),
                                ));
                            }
                            let value = single_type_arg(&last.arguments).ok_or_else(|| {
                                syn::Error::new_spanned(
                                    &last.arguments,
                                    format!(
                                        "write the value type: `&{name}<f32>` (one of {ELEMENTS})"
                                    ),
                                )
                            })?;
                            Ok(Role::TileSet {
                                kind,
                                value: element(value)?,
                            })
                        }
                        "Queue" => {
                            if r.mutability.is_none() {
                                return Err(syn::Error::new_spanned(
                                    ty,
                                    "a queue is written to: take it as `&mut Queue`",
                                ));
                            }
                            if !last.arguments.is_empty() {
                                return Err(syn::Error::new_spanned(&last.arguments, "`Queue` holds `u32` values and takes no type argument: write `&mut Queue`"));
                            }
                            Ok(Role::Queue)
                        }
                        "Vec" => Err(syn::Error::new_spanned(
                            ty,
                            "take a slice instead of a `Vec`: `&[T]` or `&mut [T]`",
                        )),
                        _ => Err(unsupported()),
                    }
                }
                _ => Err(unsupported()),
            }
        }
        Type::Path(tp) if tp.path.segments.last().is_some_and(|s| s.ident == "Csr") => Err(
            syn::Error::new_spanned(ty, "take the tile set by reference: `&Csr<T>`"),
        ),
        Type::Path(tp) if tp.path.segments.last().is_some_and(|s| s.ident == "Vec") => Err(
            syn::Error::new_spanned(ty, "take a slice instead of a `Vec`: `&[T]` or `&mut [T]`"),
        ),
        Type::Tuple(_) => Err(syn::Error::new_spanned(
            ty,
            "tuples cannot be kernel parameters: pass each value as its own parameter",
        )),
        Type::Array(_) => Err(syn::Error::new_spanned(
            ty,
            "arrays cannot be kernel parameters: pass a slice `&[T]`",
        )),
        _ => Err(unsupported()),
    }
}

fn single_type_arg(args: &syn::PathArguments) -> Option<&Type> {
    match args {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// A type that device memory can hold (no `usize`: its width differs between host and GPU).
fn element(ty: &Type) -> syn::Result<STy> {
    match scalar(ty) {
        Some(STy::Usize) => Err(syn::Error::new_spanned(
            ty,
            "device buffers cannot hold `usize`: use `u64` (or `u32`)",
        )),
        Some(t) => Ok(t),
        None => Err(syn::Error::new_spanned(
            ty,
            format!("unsupported element type: use one of {ELEMENTS}"),
        )),
    }
}
