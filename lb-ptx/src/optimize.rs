//! The IR passes every finished kernel goes through: contraction of a product into the sum that
//! consumes it (floating-point `fma`, integer `mad`), and removal of side-effect-free
//! instructions whose result nobody reads, among others.
//!
//! The schedules and the body generator emit straightforward code and leave these two
//! clean-ups here, so that a template never has to ask which of its parameters or temporaries a
//! given body ends up using. Both passes are flow-insensitive and only need a register's
//! static definitions and uses, which keeps them obviously correct on the structured code the
//! builder emits.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ir::{Address, BinOp, Instr, Kernel, Label, LdCache, Op, Operand, Reg, Space, Type};

/// Runs the passes on `kernel` in place; `fma` allows the contraction ([`crate::Options::fma`]).
pub fn kernel(kernel: &mut Kernel, fma: bool) {
    remove_branches_to_next(&mut kernel.body);
    remove_unused_labels(&mut kernel.body);
    coalesce_copies(&mut kernel.body);
    if fma {
        contract(&mut kernel.body, Contraction::Float);
    }
    narrow_zero_extensions(&mut kernel.body);
    reuse_common_values(&mut kernel.body);
    fold_address_offsets(&mut kernel.body);
    contract(&mut kernel.body, Contraction::Integer);
    remove_dead(&mut kernel.body);
}

/// The registers `instr` reads, guard included, in operand order (a register read twice appears
/// twice).
pub fn uses(instr: &Instr) -> Vec<Reg> {
    let mut out = Vec::new();
    visit_uses(&mut instr.clone(), &mut |r| out.push(*r));
    out
}

/// Replaces every read of `from` in `instr` by `to`.
fn rename_uses(instr: &mut Instr, from: Reg, to: Reg) {
    visit_uses(instr, &mut |r| {
        if *r == from {
            *r = to;
        }
    });
}

/// Calls `f` on every register `instr` reads, guard included, in operand order.
fn visit_uses(instr: &mut Instr, f: &mut dyn FnMut(&mut Reg)) {
    if let Some(g) = &mut instr.guard {
        f(&mut g.pred);
    }
    let operand = |o: &mut Operand, f: &mut dyn FnMut(&mut Reg)| {
        if let Operand::Reg(r) = o {
            f(r);
        }
    };
    let address = |a: &mut Address, f: &mut dyn FnMut(&mut Reg)| {
        if let Address::Reg { base, .. } = a {
            f(base);
        }
    };
    match &mut instr.op {
        Op::Mov { src, .. } | Op::Un { a: src, .. } | Op::Cvt { src, .. } => operand(src, f),
        Op::Bin { a, b, .. } | Op::Setp { a, b, .. } => {
            operand(a, f);
            operand(b, f);
        }
        Op::Fma { a, b, c, .. } | Op::Mad { a, b, c, .. } => {
            operand(a, f);
            operand(b, f);
            operand(c, f);
        }
        Op::Selp { a, b, pred, .. } => {
            operand(a, f);
            operand(b, f);
            f(pred);
        }
        Op::Ld { addr, .. } | Op::LdVec { addr, .. } => address(addr, f),
        Op::St { addr, src, .. } => {
            address(addr, f);
            operand(src, f);
        }
        Op::StVec { addr, srcs, .. } => {
            address(addr, f);
            for src in srcs {
                operand(src, f);
            }
        }
        Op::Atom { addr, b, c, .. } => {
            address(addr, f);
            operand(b, f);
            if let Some(c) = c {
                operand(c, f);
            }
        }
        Op::WarpSync { mask } => operand(mask, f),
        Op::Shfl { a, b, c, mask, .. } => {
            for o in [a, b, c, mask] {
                operand(o, f);
            }
        }
        Op::Vote { a, mask, .. } => {
            operand(a, f);
            operand(mask, f);
        }
        Op::Bra { .. }
        | Op::Label(_)
        | Op::BarSync
        | Op::MemBar
        | Op::Fence
        | Op::ActiveMask { .. }
        | Op::Ret
        | Op::ScopeBegin
        | Op::ScopeEnd
        | Op::ParamDecl { .. }
        | Op::Call { .. } => {}
    }
}

/// The register `op` writes when writing it is all it does: `None` for stores, atomics,
/// collectives, control flow and global or shared loads, vector ones included (a load may
/// fault, and a shared load may be what orders a warp's exchange).
fn pure_def(op: &Op) -> Option<Reg> {
    pure_def_mut(&mut op.clone()).copied()
}

/// Keeps the instructions whose `keep` entry is true.
fn retain_marked(body: &mut Vec<Instr>, keep: &[bool]) {
    let mut index = 0;
    body.retain(|_| {
        index += 1;
        keep[index - 1]
    });
}

/// The destination of a pure instruction, to rename it.
fn pure_def_mut(op: &mut Op) -> Option<&mut Reg> {
    match op {
        Op::Mov { dst, .. }
        | Op::Bin { dst, .. }
        | Op::Un { dst, .. }
        | Op::Fma { dst, .. }
        | Op::Mad { dst, .. }
        | Op::Setp { dst, .. }
        | Op::Selp { dst, .. }
        | Op::Cvt { dst, .. } => Some(dst),
        Op::Ld {
            space: Space::Param,
            dst,
            ..
        } => Some(dst),
        _ => None,
    }
}

/// The destination of an instruction whose value [`reuse_common_values`] may reuse: a pure one,
/// or a read-only global load (`.nc`: no thread writes that memory while the kernel runs, so a
/// second load of an address gives what the first gave, and the first did not fault). A body
/// evaluated for several lanes of one atom loads the atom's arrays once this way. A vector load
/// is not reused: it has several destinations, and a value here is one register.
fn reusable_def_mut(op: &mut Op) -> Option<&mut Reg> {
    match op {
        Op::Ld {
            space: Space::Global,
            cache: LdCache::ReadOnly | LdCache::Stream,
            dst,
            ..
        } => Some(dst),
        other => pure_def_mut(other),
    }
}

/// How many times each register is read anywhere in `body`.
fn use_counts(body: &[Instr]) -> BTreeMap<Reg, usize> {
    let mut counts = BTreeMap::new();
    for instr in body {
        for r in uses(instr) {
            *counts.entry(r).or_insert(0) += 1;
        }
    }
    counts
}

/// Removes the pure instructions whose destination no instruction reads, until none is left.
fn remove_dead(body: &mut Vec<Instr>) {
    loop {
        let counts = use_counts(body);
        let before = body.len();
        body.retain(|i| pure_def(&i.op).is_none_or(|d| counts.contains_key(&d)));
        if body.len() == before {
            return;
        }
    }
}

/// How many instructions write each register (pure ones and all others).
fn def_counts(body: &[Instr]) -> BTreeMap<Reg, usize> {
    let mut defs = BTreeMap::new();
    for instr in body {
        for d in writes(&instr.op) {
            *defs.entry(d).or_insert(0) += 1;
        }
    }
    defs
}

/// Removes an unconditional or guarded `bra L` when nothing but labels separates it from `L:`:
/// the body generator ends every `return` with one, and the last one falls through.
fn remove_branches_to_next(body: &mut Vec<Instr>) {
    let mut keep = vec![true; body.len()];
    for (i, instr) in body.iter().enumerate() {
        let Op::Bra { target } = instr.op else {
            continue;
        };
        let next = body[i + 1..]
            .iter()
            .find(|j| !matches!(j.op, Op::Label(l) if l != target));
        if next.is_some_and(|j| j.op == Op::Label(target)) {
            keep[i] = false;
        }
    }
    retain_marked(body, &keep);
}

/// Drops the labels no branch targets: they mark no control-flow merge, and without them the
/// straight-line stretches the other passes look at are longer.
fn remove_unused_labels(body: &mut Vec<Instr>) {
    let targets = branch_targets(body);
    body.retain(|i| !matches!(i.op, Op::Label(l) if !targets.contains(&l)));
}

fn branch_targets(body: &[Instr]) -> BTreeSet<Label> {
    body.iter()
        .filter_map(|i| match i.op {
            Op::Bra { target } => Some(target),
            _ => None,
        })
        .collect()
}

/// Where each register is read and written and where the labels sit, computed once per pass so
/// that the passes' questions about a stretch of the body cost a binary search, not a scan of the
/// stretch: a body of thousands of statements gives kernels of tens of thousands of
/// instructions, and scanning made the passes quadratic (minutes in the compiler).
struct Positions {
    /// The instructions that read each register, ascending, once each.
    reads: BTreeMap<Reg, Vec<usize>>,
    /// The instructions that write each register, ascending.
    written: BTreeMap<Reg, Vec<usize>>,
    /// `labels_before[k]`: how many labels `body[..k]` holds.
    labels_before: Vec<usize>,
}

impl Positions {
    fn of(body: &[Instr]) -> Positions {
        let mut reads: BTreeMap<Reg, Vec<usize>> = BTreeMap::new();
        let mut written: BTreeMap<Reg, Vec<usize>> = BTreeMap::new();
        let mut labels_before = Vec::with_capacity(body.len() + 1);
        labels_before.push(0);
        for (k, instr) in body.iter().enumerate() {
            for r in uses(instr) {
                let at = reads.entry(r).or_default();
                if at.last() != Some(&k) {
                    at.push(k);
                }
            }
            for w in writes(&instr.op) {
                written.entry(w).or_default().push(k);
            }
            let label = usize::from(matches!(instr.op, Op::Label(_)));
            labels_before.push(labels_before[k] + label);
        }
        Positions {
            reads,
            written,
            labels_before,
        }
    }

    /// Whether a label sits strictly between instructions `from` and `to`.
    fn label_between(&self, from: usize, to: usize) -> bool {
        to > from + 1 && self.labels_before[to] > self.labels_before[from + 1]
    }

    /// Whether an instruction strictly between `from` and `to` writes `reg`.
    fn written_between(&self, reg: Reg, from: usize, to: usize) -> bool {
        self.written.get(&reg).is_some_and(|at| {
            let first_after = at.partition_point(|&k| k <= from);
            at.get(first_after).is_some_and(|&k| k < to)
        })
    }

    /// Whether `reg` keeps its value from just after instruction `from` to just before `to`: no
    /// label (a merge point) and no write of `reg` in between.
    fn unchanged_between(&self, reg: Reg, from: usize, to: usize) -> bool {
        !self.label_between(from, to) && !self.written_between(reg, from, to)
    }

    /// The straight-line reads of a register written once at `def`: the indices of every
    /// instruction that reads it, when all of them follow `def` with no label in between.
    fn straight_uses(&self, reg: Reg, def: usize) -> Option<&[usize]> {
        let at = self.reads.get(&reg)?;
        let (&first, &last) = (at.first()?, at.last()?);
        (first > def && !self.label_between(def, last)).then_some(at.as_slice())
    }

    /// Records that instruction `at` now reads `to` where it read `from`.
    fn move_read(&mut self, at: usize, from: Reg, to: Reg) {
        if let Some(reads) = self.reads.get_mut(&from) {
            if let Ok(k) = reads.binary_search(&at) {
                reads.remove(k);
            }
        }
        let reads = self.reads.entry(to).or_default();
        if let Err(k) = reads.binary_search(&at) {
            reads.insert(k, at);
        }
    }
}

/// Every register `op` writes.
fn writes(op: &Op) -> Vec<Reg> {
    match op {
        Op::Ld { dst, .. }
        | Op::Atom { dst, .. }
        | Op::Vote { dst, .. }
        | Op::ActiveMask { dst } => vec![*dst],
        Op::LdVec { dsts, .. } => dsts.clone(),
        Op::Shfl { dst, dst_pred, .. } => std::iter::once(*dst).chain(*dst_pred).collect(),
        op => pure_def(op).into_iter().collect(),
    }
}

/// Folds `add.u64 t, base, k` into the loads and stores that use `t` as their address
/// (`[t+o]` becomes `[base+k+o]`) when that is all `t` is used for, within the same straight
/// line and with `base` unchanged: the walks address an atom's neighbours this way.
fn fold_address_offsets(body: &mut [Instr]) {
    let defs = def_counts(body);
    let mut positions = Positions::of(body);
    for i in 0..body.len() {
        let (t, base, k) = match (&body[i].guard, &body[i].op) {
            (
                None,
                Op::Bin {
                    op: BinOp::Add,
                    ty: Type::U64 | Type::S64 | Type::B64,
                    dst,
                    a: Operand::Reg(base),
                    b: Operand::Imm(k),
                },
            ) if defs.get(dst) == Some(&1) && *dst != *base => (*dst, *base, *k),
            _ => continue,
        };
        let Some(at) = positions.straight_uses(t, i).map(<[usize]>::to_vec) else {
            continue;
        };
        let only_addresses = at.iter().all(|&j| reads_only_as_address(&body[j].op, t));
        let last = *at.last().expect("straight_uses returns at least one use");
        if !only_addresses || !positions.unchanged_between(base, i, last) {
            continue;
        }
        for &j in &at {
            if let Op::Ld { addr, .. }
            | Op::St { addr, .. }
            | Op::LdVec { addr, .. }
            | Op::StVec { addr, .. } = &mut body[j].op
            {
                if let Address::Reg { base: b, offset } = addr {
                    *b = base;
                    *offset += k;
                    positions.move_read(j, t, base);
                }
            }
        }
    }
}

/// Whether `op` is a load or store that reads `t` only as its address base (a store of `t`
/// itself needs `t`'s value, which the fold does not keep).
fn reads_only_as_address(op: &Op, t: Reg) -> bool {
    let based_on_t = |a: &Address| matches!(a, Address::Reg { base, .. } if *base == t);
    let stores_other = |o: &Operand| {
        matches!(o, Operand::Imm(_) | Operand::F32(_) | Operand::F64(_))
            || matches!(o, Operand::Reg(r) if *r != t)
    };
    match op {
        Op::Ld { addr, .. } | Op::LdVec { addr, .. } => based_on_t(addr),
        Op::St { addr, src, .. } => based_on_t(addr) && stores_other(src),
        Op::StVec { addr, srcs, .. } => based_on_t(addr) && srcs.iter().all(stores_other),
        _ => false,
    }
}

/// The zero extensions `cvt.u64.u32 d, r` whose destination is written once: `d` → (where, `r`).
fn zero_extensions(body: &[Instr]) -> BTreeMap<Reg, (usize, Reg)> {
    let defs = def_counts(body);
    let mut extensions = BTreeMap::new();
    for (i, instr) in body.iter().enumerate() {
        if let (
            None,
            Op::Cvt {
                dst_ty: Type::U64,
                src_ty: Type::U32,
                dst,
                src: Operand::Reg(r),
                ..
            },
        ) = (&instr.guard, &instr.op)
        {
            if defs.get(dst) == Some(&1) {
                extensions.entry(*dst).or_insert((i, *r));
            }
        }
    }
    extensions
}

/// Works on the 32-bit values behind zero extensions where the 64-bit one is not needed:
/// `setp.CMP.u64` of two extended values compares the 32-bit ones, and `shl.b64 d, x, k` of an
/// extended `x` is `mul.wide.u32 d, r, 2^k`. The extension then usually has no reader left and
/// goes. The 32-bit offsets of a tile set are read this way.
fn narrow_zero_extensions(body: &mut [Instr]) {
    let extensions = zero_extensions(body);
    let zero_extended = |reg: &Reg| extensions.get(reg).copied();
    let positions = Positions::of(body);
    let unchanged_between = |reg, from, to| positions.unchanged_between(reg, from, to);
    for (j, instr) in body.iter_mut().enumerate() {
        let narrowed = match &instr.op {
            Op::Setp {
                cmp,
                ty: Type::U64,
                dst,
                a: Operand::Reg(a),
                b: Operand::Reg(b),
            } if !matches!(cmp, crate::ir::Cmp::Neu) => {
                match (zero_extended(a), zero_extended(b)) {
                    (Some((ia, ra)), Some((ib, rb)))
                        if ia < j
                            && ib < j
                            && unchanged_between(ra, ia, j)
                            && unchanged_between(rb, ib, j)
                            && unchanged_between(*a, ia, j)
                            && unchanged_between(*b, ib, j) =>
                    {
                        Some(Op::Setp {
                            cmp: *cmp,
                            ty: Type::U32,
                            dst: *dst,
                            a: Operand::Reg(ra),
                            b: Operand::Reg(rb),
                        })
                    }
                    _ => None,
                }
            }
            Op::Bin {
                op: BinOp::Shl,
                ty: Type::B64 | Type::U64,
                dst,
                a: Operand::Reg(a),
                b: Operand::Imm(k @ 0..=31),
            } => match zero_extended(a) {
                Some((ia, ra)) if ia < j && unchanged_between(ra, ia, j) => Some(Op::Bin {
                    op: BinOp::MulWide,
                    ty: Type::U32,
                    dst: *dst,
                    a: Operand::Reg(ra),
                    b: Operand::Imm(1 << k),
                }),
                _ => None,
            },
            _ => None,
        };
        if let Some(op) = narrowed {
            instr.op = op;
        }
    }
}

/// The instruction with its destination blanked: two pure instructions with the same key compute
/// the same value from the same operands.
fn value_key(instr: &Instr) -> Option<(Reg, String)> {
    if instr.guard.is_some() {
        return None;
    }
    // An integer scaled by a constant (an element size) is left to [`contract`], which fuses each
    // copy into the add after it: one `mad` per use instead of a shared `mul` and an `add` each.
    if let Op::Bin {
        op: BinOp::Mul | BinOp::MulWide,
        ty,
        b: Operand::Imm(_),
        ..
    } = instr.op
    {
        if !ty.is_float() {
            return None;
        }
    }
    let mut op = instr.op.clone();
    let dst = reusable_def_mut(&mut op)?;
    let def = *dst;
    dst.index = u32::MAX;
    Some((def, format!("{op:?}")))
}

/// Reuses a value computed earlier instead of computing it again (the tile's index scaled for the
/// offsets and again for the output, say), for instructions `i < j` with the same [`value_key`]
/// when `i`'s value is still there at `j` and after:
/// - `i`'s and `j`'s destinations are written once, and `i`'s operands nowhere in `(i, j)`;
/// - every label in `(i, j]` is the target only of branches inside `(i, j)`, so every path to
///   `j` comes through `i` since its last run;
/// - `j`'s value is read only in the straight line after `j`, where those reads are renamed.
fn reuse_common_values(body: &mut Vec<Instr>) {
    let defs = def_counts(body);
    let flow = Flow::of(body);
    let mut keep = vec![true; body.len()];
    // The kept instructions of each key whose destination is written once, ascending.
    let mut earlier: HashMap<String, Vec<usize>> = HashMap::new();
    for j in 0..body.len() {
        // Keyed after the renames so far, so that a value computed from a reused one (the
        // widened column of a column index loaded twice) is found the same in one pass.
        let Some((dst_j, key)) = value_key(&body[j]) else {
            continue;
        };
        if defs.get(&dst_j) != Some(&1) {
            continue;
        }
        let candidates = earlier.entry(key).or_default();
        // The nearest earlier computation whose value reaches `j`; a bounded look-back keeps
        // a body that computes one value thousands of times linear.
        let found = candidates
            .iter()
            .rev()
            .take(REUSE_LOOK_BACK)
            .copied()
            .find(|&i| flow.reaches(body, i, j));
        match found.and_then(|i| Some((i, flow.positions.straight_uses(dst_j, j)?))) {
            Some((i, at)) => {
                let dst_i = value_key(&body[i]).expect("a candidate has a key").0;
                keep[j] = false;
                for &u in at {
                    rename_uses(&mut body[u], dst_j, dst_i);
                }
            }
            None => candidates.push(j),
        }
    }
    retain_marked(body, &keep);
}

/// How many earlier computations of the same value [`reuse_common_values`] tries, nearest first.
const REUSE_LOOK_BACK: usize = 16;

/// The control flow [`reuse_common_values`] asks about: where the labels are and which branches
/// jump to each.
struct Flow {
    positions: Positions,
    /// Every label's position, ascending, with the first and last branch to it (`None`: no
    /// branch targets it).
    labels: Vec<(usize, Option<(usize, usize)>)>,
}

impl Flow {
    fn of(body: &[Instr]) -> Flow {
        let mut sources: BTreeMap<Label, (usize, usize)> = BTreeMap::new();
        for (k, instr) in body.iter().enumerate() {
            if let Op::Bra { target } = instr.op {
                let range = sources.entry(target).or_insert((k, k));
                range.1 = k;
            }
        }
        let labels = body
            .iter()
            .enumerate()
            .filter_map(|(k, instr)| match instr.op {
                Op::Label(l) => Some((k, sources.get(&l).copied())),
                _ => None,
            })
            .collect();
        Flow {
            positions: Positions::of(body),
            labels,
        }
    }

    /// Whether `i`'s operands keep their values to `j` and every path into `(i, j]` enters
    /// through `i` (see [`reuse_common_values`]).
    fn reaches(&self, body: &[Instr], i: usize, j: usize) -> bool {
        let first = self.labels.partition_point(|&(k, _)| k <= i);
        let entered_inside = self.labels[first..]
            .iter()
            .take_while(|&&(k, _)| k <= j)
            .all(|&(_, from)| from.is_none_or(|(lo, hi)| lo > i && hi < j));
        entered_inside
            && uses(&body[i])
                .into_iter()
                .all(|r| !self.positions.written_between(r, i, j))
    }
}

/// Folds `op s, ...; mov d, s` into `op d, ...` when `s` is written by that one instruction and
/// read by that one `mov`: the body generator copies a `return`ed value into the result register,
/// and the copy hides the product from [`contract`].
fn coalesce_copies(body: &mut Vec<Instr>) {
    let counts = use_counts(body);
    let defs = def_counts(body);
    let mut keep = vec![true; body.len()];
    for i in 1..body.len() {
        let (d, s) = match (&body[i].guard, &body[i].op) {
            (
                None,
                Op::Mov {
                    dst,
                    src: Operand::Reg(src),
                    ..
                },
            ) if dst.class == src.class => (*dst, *src),
            _ => continue,
        };
        if counts.get(&s) != Some(&1) || defs.get(&s) != Some(&1) || !keep[i - 1] {
            continue;
        }
        let prev = &mut body[i - 1];
        if prev.guard.is_some() {
            continue;
        }
        if let Some(dst) = pure_def_mut(&mut prev.op).filter(|dst| **dst == s) {
            *dst = d;
            keep[i] = false;
        }
    }
    retain_marked(body, &keep);
}

/// Which products [`contract`] fuses into the add that reads them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Contraction {
    /// `mul.rn d, a, b` directly followed by `add.rn e, x, d` (or `d, x`) becomes
    /// `fma.rn e, a, b, x`: the contraction CUDA C++ compilers apply by default
    /// (`--fmad=true`), one rounding instead of two, so the result is at least as accurate as
    /// the separately rounded pair, and the dot product at the heart of SpMV costs one
    /// instruction per atom instead of two. The add must be the very next instruction.
    Float,
    /// An integer `mul.lo d, a, b` or `mul.wide d, a, b` read by a later `add e, x, d` of the
    /// product's width becomes `mad.lo`/`mad.wide e, a, b, x`. Integer arithmetic is exact, so
    /// this changes no result; it is the address arithmetic of every gather (`base + index * 4`
    /// in one `mad.wide.u32`, as CUDA C++ compilers emit it). The add may come up to
    /// [`MAD_WINDOW`] instructions later.
    Integer,
}

/// How far an integer contraction looks for the one add that reads a product.
const MAD_WINDOW: usize = 16;

/// A product [`contract`] may fuse: `mul.wide` or not, the source type, the destination and
/// the factors.
struct Product {
    wide: bool,
    ty: Type,
    dst: Reg,
    a: Operand,
    b: Operand,
}

impl Contraction {
    /// The unguarded product of this kind that `instr` computes, if any.
    fn product(self, instr: &Instr) -> Option<Product> {
        let (None, Op::Bin { op, ty, dst, a, b }) = (&instr.guard, &instr.op) else {
            return None;
        };
        let (a, b) = match self {
            Contraction::Float if *op == BinOp::Mul && ty.is_float() => (a.clone(), b.clone()),
            Contraction::Integer
                if matches!(op, BinOp::Mul | BinOp::MulWide)
                    && matches!(ty, Type::U32 | Type::S32 | Type::U64 | Type::S64) =>
            {
                // `mad`'s first factor is a register; a product of two immediates stays.
                match (a, b) {
                    (Operand::Reg(_), _) => (a.clone(), b.clone()),
                    (_, Operand::Reg(_)) => (b.clone(), a.clone()),
                    _ => return None,
                }
            }
            _ => return None,
        };
        Some(Product {
            wide: *op == BinOp::MulWide,
            ty: *ty,
            dst: *dst,
            a,
            b,
        })
    }

    /// How many instructions after the product the add may come.
    fn window(self) -> usize {
        match self {
            Contraction::Float => 1,
            Contraction::Integer => MAD_WINDOW,
        }
    }

    /// The fused instruction, when `add` is an unguarded add of `p`'s result (read once) and
    /// something this kind can take as the addend.
    fn fuse(self, p: &Product, add: &Instr) -> Option<Op> {
        let (
            None,
            Op::Bin {
                op: BinOp::Add,
                ty,
                dst,
                a: x,
                b: y,
            },
        ) = (&add.guard, &add.op)
        else {
            return None;
        };
        let other = match (x, y) {
            (Operand::Reg(r), other) | (other, Operand::Reg(r)) if *r == p.dst => other,
            _ => return None,
        };
        let (a, b) = (p.a.clone(), p.b.clone());
        match self {
            Contraction::Float if *ty == p.ty => Some(Op::Fma {
                ty: p.ty,
                dst: *dst,
                a,
                b,
                c: other.clone(),
            }),
            Contraction::Integer => {
                let sum_ty = match (p.wide, p.ty) {
                    (true, Type::S32) => Type::S64,
                    (true, _) => Type::U64,
                    (false, ty) => ty,
                };
                let same_width = !ty.is_float() && *ty != Type::Pred && ty.size() == sum_ty.size();
                match other {
                    Operand::Reg(c) if same_width && *c != p.dst => Some(Op::Mad {
                        wide: p.wide,
                        ty: p.ty,
                        dst: *dst,
                        a,
                        b,
                        c: other.clone(),
                    }),
                    _ => None,
                }
            }
            Contraction::Float => None,
        }
    }
}

/// Fuses each product of `kind` whose result is written once and read once, by an add that
/// follows within the kind's window of straight-line code (no branch, no branch target) in
/// which neither factor is written again: both then run on exactly the same paths and the add
/// reads the factors the product read.
fn contract(body: &mut Vec<Instr>, kind: Contraction) {
    let targets = branch_targets(body);
    let counts = use_counts(body);
    let defs = def_counts(body);
    let mut removed = vec![false; body.len()];
    for i in 0..body.len() {
        let Some(p) = kind.product(&body[i]) else {
            continue;
        };
        if counts.get(&p.dst) != Some(&1) || defs.get(&p.dst) != Some(&1) {
            continue;
        }
        let factors: Vec<Reg> = [&p.a, &p.b]
            .into_iter()
            .filter_map(|o| match o {
                Operand::Reg(r) => Some(*r),
                _ => None,
            })
            .collect();
        let window = (i + 1..body.len()).take(kind.window());
        let Some(j) = reader_in(body, window, p.dst, &factors, &targets) else {
            continue;
        };
        if let Some(fused) = kind.fuse(&p, &body[j]) {
            body[j].op = fused;
            removed[i] = true;
        }
    }
    let keep: Vec<bool> = removed.iter().map(|r| !r).collect();
    retain_marked(body, &keep);
}

/// The first instruction of `window` that reads `d`, if none before it branches, is a branch
/// target or writes one of `factors`.
fn reader_in(
    body: &[Instr],
    window: impl Iterator<Item = usize>,
    d: Reg,
    factors: &[Reg],
    targets: &BTreeSet<Label>,
) -> Option<usize> {
    for j in window {
        let instr = &body[j];
        if uses(instr).contains(&d) {
            return Some(j);
        }
        let flow = match instr.op {
            Op::Label(l) => targets.contains(&l),
            Op::Bra { .. } | Op::Ret | Op::Call { .. } => true,
            _ => false,
        };
        if flow || writes(&instr.op).iter().any(|w| factors.contains(w)) {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KernelBuilder;
    use crate::ir::Cmp;

    fn optimized(k: KernelBuilder) -> String {
        let mut kernel = k.finish();
        super::kernel(&mut kernel, true);
        kernel.to_string()
    }

    #[test]
    fn a_product_summed_once_becomes_one_fma() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let a = k.ld(Space::Global, Type::F32, p);
        let acc = k.mov(Type::F32, Operand::F32(0));
        let prod = k.bin(BinOp::Mul, Type::F32, a, a);
        let skip = k.label();
        k.place(skip);
        k.bin_to(BinOp::Add, Type::F32, acc, acc, prod);
        k.st(Space::Global, Type::F32, p, acc);
        let text = optimized(k);
        assert!(text.contains("fma.rn.f32 %f1, %f0, %f0, %f1;"), "{text}");
        assert!(!text.contains("mul.rn"), "{text}");
    }

    #[test]
    fn a_product_read_twice_or_across_a_branch_target_stays() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let a = k.ld(Space::Global, Type::F32, p);
        let prod = k.bin(BinOp::Mul, Type::F32, a, a);
        let sum = k.bin(BinOp::Add, Type::F32, prod, a);
        k.st(Space::Global, Type::F32, p, prod);
        k.st(Space::Global, Type::F32, p, sum);
        let target = k.label();
        let pred = k.setp(Cmp::Lt, Type::F32, a, a);
        k.bra_if(pred, false, target);
        let other = k.bin(BinOp::Mul, Type::F32, a, a);
        k.place(target);
        let sum2 = k.bin(BinOp::Add, Type::F32, other, a);
        k.st(Space::Global, Type::F32, p, sum2);
        let text = optimized(k);
        assert!(!text.contains("fma"), "{text}");
    }

    #[test]
    fn a_returned_product_is_copied_into_place_and_contracted() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let a = k.ld(Space::Global, Type::F32, p);
        let acc = k.mov(Type::F32, Operand::F32(0));
        let result = k.reg_for(Type::F32);
        let ret = k.label();
        let prod = k.bin(BinOp::Mul, Type::F32, a, a);
        k.mov_to(Type::F32, result, prod);
        k.bra(ret);
        k.place(ret);
        k.bin_to(BinOp::Add, Type::F32, acc, acc, result);
        k.st(Space::Global, Type::F32, p, acc);
        let text = optimized(k);
        assert!(text.contains("fma.rn.f32 %f1, %f0, %f0, %f1;"), "{text}");
        assert!(
            !text.contains("bra") && !text.contains("mov.f32 %f2"),
            "{text}"
        );
    }

    #[test]
    fn unread_parameters_and_arithmetic_go() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let unused = k.load_param("n", Type::U64);
        let dead = k.bin(BinOp::Add, Type::U64, unused, Operand::Imm(1));
        let _deader = k.bin(BinOp::Shl, Type::B64, dead, Operand::Imm(2));
        k.st(Space::Global, Type::U64, p, p);
        let text = optimized(k);
        assert!(!text.contains("[n]") && !text.contains("shl"), "{text}");
        assert!(
            text.contains(".param .u64 n"),
            "the signature stays: {text}"
        );
        assert!(text.contains("ld.param.u64 %rd0, [p];"), "{text}");
    }

    #[test]
    fn a_scaled_index_added_once_becomes_one_mad() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let i = k.ld(Space::Global, Type::U32, p);
        let scaled = k.bin(BinOp::MulWide, Type::U32, i, Operand::Imm(4));
        let addr = k.bin(BinOp::Add, Type::U64, p, scaled);
        let v = k.ld(Space::Global, Type::F32, addr);
        k.st(Space::Global, Type::F32, p, v);
        let text = optimized(k);
        assert!(text.contains("mad.wide.u32 %rd2, %r0, 4, %rd0;"), "{text}");
        assert!(!text.contains("mul.wide"), "{text}");
    }

    #[test]
    fn a_product_read_twice_rewritten_between_or_across_a_target_stays() {
        // Read twice.
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let i = k.ld(Space::Global, Type::U32, p);
        let scaled = k.bin(BinOp::MulWide, Type::U32, i, Operand::Imm(4));
        let a = k.bin(BinOp::Add, Type::U64, p, scaled);
        let b = k.bin(BinOp::Add, Type::U64, a, scaled);
        k.st(Space::Global, Type::U64, b, a);
        assert!(!optimized(k).contains("mad"));
        // A factor written between the product and the add.
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let i = k.ld(Space::Global, Type::U32, p);
        let scaled = k.bin(BinOp::Mul, Type::U32, i, Operand::Imm(3));
        k.bin_to(BinOp::Add, Type::U32, i, i, Operand::Imm(1));
        let sum = k.bin(BinOp::Add, Type::U32, i, scaled);
        k.st(Space::Global, Type::U32, p, sum);
        assert!(!optimized(k).contains("mad"));
        // A branch target between them.
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let i = k.ld(Space::Global, Type::U32, p);
        let scaled = k.bin(BinOp::MulWide, Type::U32, i, Operand::Imm(4));
        let top = k.label();
        k.place(top);
        let addr = k.bin(BinOp::Add, Type::U64, p, scaled);
        k.st(Space::Global, Type::U64, addr, addr);
        let again = k.setp(Cmp::Ne, Type::U64, addr, p);
        k.bra_if(again, false, top);
        assert!(!optimized(k).contains("mad"));
    }

    #[test]
    fn an_unread_vector_load_stays_like_a_scalar_one() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let _unread = k.ld_global_vec_new(Type::F32, 4, (p, 16), LdCache::ReadOnly);
        let _unread = k.ld_global(Type::F32, (p, 32), LdCache::ReadOnly);
        let pair = k.ld_global_vec_new(Type::U32, 2, (p, 8), LdCache::Default);
        k.st(Space::Global, Type::U32, p, pair[1]);
        let text = optimized(k);
        // A load may fault, so it runs whether or not its value is read, vector or not.
        assert!(
            text.contains("ld.global.nc.v4.f32 {%f0, %f1, %f2, %f3}, [%rd0+16];"),
            "{text}"
        );
        assert!(text.contains("ld.global.nc.f32 %f4, [%rd0+32];"), "{text}");
        assert!(
            text.contains("ld.global.v2.u32 {%r0, %r1}, [%rd0+8];"),
            "{text}"
        );
        assert!(text.contains("st.global.u32 [%rd0], %r1;"), "{text}");
    }

    #[test]
    fn an_address_add_folds_into_vector_offsets() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let row = k.bin(BinOp::Add, Type::U64, p, Operand::Imm(64));
        let v = k.ld_global_vec_new(Type::F32, 4, (row, 16), LdCache::ReadOnly);
        let srcs: Vec<Operand> = v.iter().rev().map(|&r| r.into()).collect();
        k.st_vec(Space::Global, Type::F32, (row, 32), &srcs);
        let text = optimized(k);
        assert!(!text.contains("add.u64"), "{text}");
        assert!(
            text.contains("ld.global.nc.v4.f32 {%f0, %f1, %f2, %f3}, [%rd0+80];"),
            "{text}"
        );
        assert!(
            text.contains("st.global.v4.f32 [%rd0+96], {%f3, %f2, %f1, %f0};"),
            "{text}"
        );
    }

    #[test]
    fn an_address_stored_as_a_vector_element_is_not_folded() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let t = k.bin(BinOp::Add, Type::U64, p, Operand::Imm(16));
        k.st_vec(Space::Global, Type::U64, (t, 0), &[p.into(), t.into()]);
        let text = optimized(k);
        assert!(text.contains("add.u64 %rd1, %rd0, 16;"), "{text}");
        assert!(
            text.contains("st.global.v2.u64 [%rd1], {%rd0, %rd1};"),
            "{text}"
        );
    }

    #[test]
    fn a_reused_value_is_renamed_inside_vector_sources() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let x = k.ld_global(Type::U32, (p, 0), LdCache::Default);
        let a = k.bin(BinOp::Add, Type::U32, x, Operand::Imm(1));
        let b = k.bin(BinOp::Add, Type::U32, x, Operand::Imm(1));
        k.st_vec(Space::Global, Type::U32, (p, 8), &[a.into(), b.into()]);
        let text = optimized(k);
        assert_eq!(text.matches("add.u32").count(), 1, "{text}");
        assert!(
            text.contains("st.global.v2.u32 [%rd0+8], {%r1, %r1};"),
            "{text}"
        );
    }

    #[test]
    fn a_copy_read_by_a_vector_store_too_is_not_coalesced() {
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let x = k.ld_global(Type::F32, (p, 0), LdCache::Default);
        let s = k.bin(BinOp::Add, Type::F32, x, x);
        let d = k.mov(Type::F32, s);
        k.st_vec(Space::Global, Type::F32, (p, 8), &[s.into(), d.into()]);
        let text = optimized(k);
        assert!(text.contains("add.rn.f32 %f1, %f0, %f0;"), "{text}");
        assert!(text.contains("mov.f32 %f2, %f1;"), "{text}");
        assert!(
            text.contains("st.global.v2.f32 [%rd0+8], {%f1, %f2};"),
            "{text}"
        );
    }

    #[test]
    fn every_register_a_vector_load_writes_counts_as_written() {
        // A value whose operand a vector load overwrites in between is computed again.
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let x = k.ld_global(Type::U32, (p, 0), LdCache::Default);
        let y = k.reg_for(Type::U32);
        let a = k.bin(BinOp::Add, Type::U32, x, Operand::Imm(1));
        k.ld_global_vec(Type::U32, &[y, x], (p, 8), LdCache::Default);
        let b = k.bin(BinOp::Add, Type::U32, x, Operand::Imm(1));
        k.st_vec(Space::Global, Type::U32, (p, 16), &[a.into(), b.into()]);
        let text = optimized(k);
        assert_eq!(text.matches("add.u32").count(), 2, "{text}");
        // A product whose factor a vector load overwrites is not fused into a later add.
        let mut k = KernelBuilder::new("k");
        let p = k.load_param("p", Type::U64);
        let i = k.ld_global(Type::U32, (p, 0), LdCache::Default);
        let scaled = k.bin(BinOp::MulWide, Type::U32, i, Operand::Imm(4));
        let j = k.reg_for(Type::U32);
        k.ld_global_vec(Type::U32, &[i, j], (p, 8), LdCache::Default);
        let addr = k.bin(BinOp::Add, Type::U64, p, scaled);
        k.st_vec(Space::Global, Type::U32, (addr, 0), &[i.into(), j.into()]);
        let text = optimized(k);
        assert!(!text.contains("mad"), "{text}");
    }
}
