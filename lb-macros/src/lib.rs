//! `#[load_balanced]`: turns the work of one atom, written as a Rust function, into PTX for the
//! requested schedules, their plans, a CPU reference and typed launchers (see the `lb` crate).
//!
//! The phases are one module each: `depth` (a guard on how deep the body nests), `attr` (the
//! attribute's keys), `parse` (parameter roles), `check` (names, types and validation of the
//! body, in one walk that builds the typed tree of `typed`, against the language's rules in
//! `valid`), `lower` (that tree to lb-ptx's body
//! IR), `expand` (the emitted items), `epilogue` (the attribute's epilogue closure, through the
//! same `check` and `lower`). `front` runs `attr`, `parse`, `check` and `epilogue` as one error
//! context: independent mistakes are reported together, one mistake once; nothing panics.
//! `generic` comes first: a kernel generic over its element type is expanded once per type
//! listed in `types`. Then `half` writes the half-precision element types (`f16`, `bf16`) of
//! the signature as the `f32` the body computes in, and remembers which arrays store 16 bits.

mod attr;
mod check;
mod depth;
mod epilogue;
mod expand;
mod front;
mod generic;
mod half;
mod lower;
mod parse;
mod typed;
mod types;
mod valid;

#[cfg(test)]
mod body_language_tests;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod fuzz_kernels;
#[cfg(test)]
mod proof_tests;
#[cfg(test)]
mod tests;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

/// Generates a load-balanced GPU kernel family from the function computing one atom.
///
/// ```text
/// #[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
/// fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
///     a.values[nz] * x[a.col_indices[nz] as usize]
/// }
/// ```
///
/// Keys: `types` (for a kernel generic over its element type, `fn spmv<T>(a: &Csr<T>, x: &[T],
/// …) -> T`: the types to instantiate it for, `"f32, f64"`; each instantiation is the kernel
/// family `spmv_f32`, … with `T` replaced everywhere, and a module `spmv` names them `spmv::f32`,
/// …), `schedule` (a name, `"a, b"`, `"auto"` for the built-in schedules the heuristic and tuning
/// choose among (the default), or `"every"` for those plus the built-in schedules registered as
/// tested everywhere but left out of `"auto"` (`lb::Schedule::EXTRA`, none at present); a
/// schedule written outside lb is not named here but passed to the generated `launch_custom`),
/// `reduce` (`"sum"`, `"min"`, `"max"`) with `output` (the output slice's name) and optionally
/// `epilogue` (a closure `|tile, value| ...`, or `|tile, value, old| ...` reading the output's
/// old value, applied once to each tile's final value; see docs/kernel-language.md), `tiles` (a
/// `&[u32]` parameter listing the active tiles), `lanes` (a `usize` parameter; needs a
/// `#[lane]` parameter), `block` (threads per block, a power of two from 32 to 1024; 256),
/// `items_per_thread` (1), `target` (`"sm_75"` or newer; `"sm_75"`), `index` (`"u32"`, `"u64"`,
/// `"auto"`), `checked` (debug mode: every access is tested and reported, see below), `fma`
/// (`true`: a product summed once is one fused multiply-add, as CUDA C++ compiles it; `false`
/// rounds every operation as the CPU reference does).
///
/// Tuning keys, each accepted only when its schedule is generated: `block_threshold` and
/// `warp_threshold` (`binning`: tiles of at least that many atoms are gathered by the block or by
/// a warp; the block size and 32; both ≥ 1, and warp < block when both are given),
/// `consolidate_threshold` (every `consolidate` level: tiles of at least that many atoms go to
/// the child kernel; 32, and 0 buffers every tile), `iteration_factor` (`multi_phase`'s rounds of
/// coalesced expansion per partition search, 1 to 8).
///
/// Parameters: exactly one `&Csr<T>` tile set; `#[atom]` (required), `#[tile]`, `#[lane]` and
/// `#[rank]` indices of type `usize`; `&[T]` inputs, `&mut [T]` read-write slices, scalars by
/// value (`T` one of `bool i32 u32 i64 u64 f32 f64`, scalars also `usize`; arrays and the output
/// also `f16` and `bf16`, stored in 16 bits and read as `f32`: the body computes in `f32`, a store
/// rounds to nearest even, see docs/kernel-language.md). With `reduce` the
/// function returns the atom's contribution; without it, it returns nothing.
///
/// The body: `let` (with or without a type), assignment and compound assignment to locals and
/// slice elements, arithmetic / comparison / logic / bit operators, `as` casts, `if` / `else`
/// (statement or value), `match` on integers (literals, `|`, ranges, guards, `_`), indexing
/// slices and `a.values`, `a.col_indices`, `a.row_offsets` with `usize` indices, `a.num_rows`,
/// `a.num_cols`, `s.len()`, `for i in a..b` / `a..=b`, `while`, `loop`, `break`, `continue`,
/// helper `fn`s declared inside the body (inlined at every call; not recursive), the methods
/// `min max abs sqrt mul_add clamp floor ceil round trunc powi` (floats), `exp exp2 ln log2 powf
/// sin cos tanh` (`f32`: the GPU's approximations, see docs/kernel-language.md for their error),
/// `pow leading_zeros trailing_zeros count_ones` (integers), `T::MIN` / `T::MAX` /
/// `T::INFINITY` / `T::NEG_INFINITY`, `atomic_add/min/max/exch(&mut s[i], v)` and
/// `atomic_cas(&mut s[i], compare, new)`, `return`. Anything else is a compile error saying what
/// to write instead.
///
/// Generated next to the function: a module of the same name and visibility with `PTX`,
/// `SCHEDULES`, `PLANS`, `UNCHECKED_PLANS`, `DEFAULT`, `IR` (the lowered body and options),
/// `cpu(...)` (the sequential reference, calling the function for every atom), `launch(dev,
/// ...)` and `launch_with(dev, schedule, ...)`, their `unsafe` twins `launch_unchecked` and
/// `launch_with_unchecked`, and `launch_custom(dev, &schedule, ...)` for a schedule written
/// outside lb (`lb::schedule`), built from `IR` at its first launch. The module
/// names nothing of its surroundings (the reference calls a copy of the function whose types are
/// spelled from `::lb`), so a kernel may be declared at module level or inside a function body;
/// not inside an `impl` or a trait, which cannot hold a module (rustc says so, pointing at the
/// attribute). Its name and its parameters' names become PTX names: ASCII letters, digits and
/// `_` (a raw identifier such as `r#type` is written without its `r#`).
///
/// Safe by default: `launch` and `launch_with` never access memory out of bounds. Before
/// anything is launched they check (each an `Err`, nothing written): the schedule was
/// generated; a plan admits the problem; the output holds tiles × lanes values; every slice the
/// body indexes with a bounded index holds enough elements: `a.num_cols()` for
/// `a.col_indices[atom]` (directly or through a `let` assigned once), `a.num_rows()` for
/// `a.row_indices[atom]`, the tile count for the `#[tile]` index, the atom count for the
/// `#[atom]` index, times `k` for `i * k + lane` with `k` the `lanes` parameter (not under
/// `checked = true`, whose kernels report the offending index instead); and every argument was
/// allocated by the launching `Device`. In the kernels, every other load, store and atomic is
/// tested, as is every frontier entry, and the first out of range is returned as
/// `Error::OutOfBounds { param, index }` after the launch. A body whose accesses are all proven
/// (SpMV, SpMM) runs exactly the unchecked kernels. `checked = true` tests every access, the
/// proven ones too (a debug mode). `launch_unchecked` / `launch_with_unchecked` (`unsafe`) make
/// the same host checks and run kernels that test nothing: their caller guarantees the unproven
/// indices and the frontier entries, as each function's `# Safety` section lists.
/// docs/runtime-contract.md has the whole table and docs/kernel-language.md the proofs.
///
/// A statement may nest at most 1024 operators and brackets (a sum of more terms is a compile
/// error asking for `let` steps).
#[proc_macro_attribute]
pub fn load_balanced(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (attr, item) = (
        proc_macro2::TokenStream::from(attr),
        proc_macro2::TokenStream::from(item),
    );
    match generic::instances(&attr, &item) {
        Ok(None) => expand_one(attr, item).0.into(),
        Ok(Some((instances, wrapper))) => {
            let mut out = TokenStream2::new();
            let mut failed = false;
            for instance in instances {
                if failed {
                    // A mistake of the first type is every type's mistake: reported once, the
                    // other types stand in without it.
                    out.extend(expand::stand_in(instance.attr, instance.item));
                    continue;
                }
                let (tokens, ok) = expand_one(instance.attr, instance.item);
                out.extend(tokens);
                failed = !ok;
            }
            out.extend(wrapper);
            out.into()
        }
        Err(error) => expand::fallback(attr, item, error).into(),
    }
}

/// One kernel's expansion, or its compile errors with stand-in items (and `false`).
fn expand_one(attr: TokenStream2, item: TokenStream2) -> (TokenStream2, bool) {
    match expand::expand(attr.clone(), item.clone()) {
        Ok(tokens) => (tokens, true),
        Err(error) => (expand::fallback(attr, item, error), false),
    }
}
