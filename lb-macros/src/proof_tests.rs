//! Unit tests of the bounds proofs (`lb_ptx::body::Proofs`) on bodies lowered from real Rust:
//! which accesses a safe kernel still tests, and which host checks the others rely on.

use lb_ptx::body::{GatherBound, Guards};
use proc_macro2::TokenStream;
use quote::quote;

use crate::tests::lower_fn;

/// The parameters a safe kernel tests, and the host checks `(slice, bound, times lanes)`.
type Proven = (Vec<String>, Vec<(String, GatherBound, bool)>);

fn proofs(attr: TokenStream, item: TokenStream) -> Proven {
    let body = lower_fn(attr, item).expect("the body lowers");
    let lanes = body.params.iter().position(|p| p.name == "k");
    let guards = Guards::Unproven { lanes };
    let name = |p: usize| body.params[p].name.clone();
    let gathers = body
        .gathers(guards)
        .into_iter()
        .map(|g| (name(g.slice), g.bound, g.lanes.is_some()))
        .collect();
    (
        body.unproven_params(guards).into_iter().map(name).collect(),
        gathers,
    )
}

fn reducing(body: TokenStream) -> Proven {
    proofs(
        quote!(schedule = "thread_mapped", reduce = "sum", output = "y"),
        quote! {
            fn f(a: &Csr<f32>, x: &[f32], w: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
                #body
            }
        },
    )
}

fn gather(slice: &str, bound: GatherBound) -> (String, GatherBound, bool) {
    (slice.to_string(), bound, false)
}

#[test]
fn spmv_is_proven_by_one_host_check() {
    let (tested, gathers) = reducing(quote!(a.values[nz] * x[a.col_indices[nz] as usize]));
    assert!(tested.is_empty(), "{tested:?}");
    assert_eq!(gathers, [gather("x", GatherBound::Columns)]);
}

/// The proofs of an SpMM-shaped body (`lanes = "k"`, lane `j`) whose value is `body`.
fn spmm_proofs(body: TokenStream) -> Proven {
    proofs(
        quote!(
            schedule = "thread_mapped",
            reduce = "sum",
            output = "c",
            lanes = "k"
        ),
        quote! {
            fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
                #body
            }
        },
    )
}

#[test]
fn spmm_lanes_are_proven_by_the_lane_count() {
    let (tested, gathers) =
        spmm_proofs(quote!(a.values[nz] * b[a.col_indices[nz] as usize * k + j]));
    assert!(tested.is_empty(), "{tested:?}");
    assert_eq!(gathers, [("b".to_string(), GatherBound::Columns, true)]);
    // The lane added to anything but `i * k`, or `i * k` without the lane, is not proven.
    for body in [
        quote!(b[a.col_indices[nz] as usize * 2 + j]),
        quote!(b[a.col_indices[nz] as usize * k + nz]),
        quote!(b[a.col_indices[nz] as usize * k + j + 1]),
    ] {
        let (tested, _) = spmm_proofs(body.clone());
        assert_eq!(tested, ["b"], "{body}");
    }
}

#[test]
fn arithmetic_on_a_bounded_index_is_not_proven() {
    for body in [
        quote!(x[a.col_indices[nz] as usize + 1]),
        quote!(x[nz % 7]),
        quote!(x[a.col_indices[nz] as i32 as usize]),
        quote!(x[a.values[nz] as usize]),
        quote!(x[x.len() - 1]),
    ] {
        let (tested, gathers) = reducing(body.clone());
        assert_eq!(tested, ["x"], "{body}");
        assert!(gathers.is_empty(), "{body}: {gathers:?}");
    }
    let (tested, _) = reducing(quote!(a.values[nz + 1]));
    assert_eq!(tested, ["a"]);
}

#[test]
fn locals_are_proven_only_when_assigned_once() {
    let (tested, gathers) = reducing(quote! {
        let c = a.col_indices[nz];
        let d = c as usize;
        x[d] + w[nz]
    });
    assert!(tested.is_empty(), "{tested:?}");
    assert_eq!(
        gathers,
        [
            gather("x", GatherBound::Columns),
            gather("w", GatherBound::Atoms)
        ]
    );
    let (tested, _) = reducing(quote! {
        let mut c = a.col_indices[nz] as usize;
        c += 1;
        x[c]
    });
    assert_eq!(tested, ["x"]);
    let (tested, _) = reducing(quote! {
        let mut s = 0.0;
        for j in 0..4 {
            s += x[j];
        }
        s
    });
    assert_eq!(tested, ["x"]);
}

#[test]
fn tile_offsets_are_proven_at_the_tile_and_the_next() {
    let (tested, _) = reducing(quote! {
        (a.row_offsets[row + 1] - a.row_offsets[row]) as f32 + x[row]
    });
    assert!(tested.is_empty(), "{tested:?}");
    let (tested, _) = reducing(quote!(a.row_offsets[row + 2] as f32));
    assert_eq!(tested, ["a"]);
}

#[test]
fn stores_and_atomics_at_bounded_indices_are_proven() {
    let (tested, gathers) = proofs(
        quote!(schedule = "thread_mapped", tiles = "frontier"),
        quote! {
            fn relax(g: &Csr<f32>, frontier: &[u32], dist: &mut [f32], hits: &mut [u32],
                     next: &mut Queue, #[tile] u: usize, #[atom] e: usize) {
                let v = g.col_indices[e] as usize;
                let d = dist[u] + g.values[e];
                if d < atomic_min(&mut dist[v], d) {
                    next.push(v as u32);
                }
                hits[e] = 1;
                atomic_add(&mut hits[(v + 3) % 5], 1);
            }
        },
    );
    assert_eq!(tested, ["hits"]);
    assert_eq!(
        gathers,
        [
            gather("dist", GatherBound::Tiles),
            gather("dist", GatherBound::Columns),
            gather("hits", GatherBound::Atoms)
        ]
    );
}
