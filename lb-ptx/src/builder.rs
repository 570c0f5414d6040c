//! `KernelBuilder`: allocates registers, labels, params and shared arrays, emits instructions and
//! structured control flow, and finishes into an [`crate::ir::Kernel`] with exact register counts.
//!
//! Control flow is token based (`if_begin` … `if_end`, `loop_begin` … `loop_end`) rather than
//! closure based, so that code generators holding other state next to the builder can nest
//! constructs freely. Everything is numbered in creation order, so output is deterministic.

use crate::ir::{
    Address, AtomOp, BinOp, Cmp, Guard, Instr, Kernel, Label, LdCache, Occupancy, Op, Operand,
    Param, Reg, RegClass, Rounding, SharedDecl, Space, Special, Type, UnOp,
};

/// Builds one `.entry`.
#[derive(Debug)]
pub struct KernelBuilder {
    name: String,
    params: Vec<Param>,
    shared: Vec<SharedDecl>,
    counts: [u32; 5],
    labels: u32,
    body: Vec<Instr>,
    occupancy: Option<Occupancy>,
}

/// An open `if`: created by [`KernelBuilder::if_begin`], closed by [`KernelBuilder::if_end`].
#[derive(Debug)]
pub struct IfScope {
    els: Label,
    end: Option<Label>,
}

/// An open loop. `head` is re-entered at the end of each iteration; branching to `exit` breaks.
#[derive(Clone, Copy, Debug)]
pub struct LoopScope {
    pub head: Label,
    pub exit: Label,
}

/// An open grid-stride loop over `0..count` (u64). Branching to `next` skips to the thread's next
/// item.
#[derive(Clone, Copy, Debug)]
pub struct GridStride {
    /// The current item (u64).
    pub item: Reg,
    count: Reg,
    stride: Reg,
    pub next: Label,
    scope: LoopScope,
}

/// `st.SPACE.T [addr], src`.
fn store(space: Space, ty: Type, addr: Reg, src: Operand) -> Op {
    Op::St {
        space,
        ty,
        addr: Address::Reg {
            base: addr,
            offset: 0,
        },
        src,
    }
}

/// Checks, in debug builds, that `n` elements of `ty` make a vector PTX has.
fn debug_assert_vector(ty: Type, n: usize) {
    debug_assert!(
        ty.vector_fits(n),
        "no vector access moves {n} elements of {}: 2 or 4 of 32 bits, or 2 of 64",
        ty.suffix()
    );
}

fn class_index(class: RegClass) -> usize {
    RegClass::ALL
        .iter()
        .position(|&c| c == class)
        .expect("RegClass::ALL lists every class")
}

impl KernelBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        KernelBuilder {
            name: name.into(),
            params: Vec::new(),
            shared: Vec::new(),
            counts: [0; 5],
            labels: 0,
            body: Vec::new(),
            occupancy: None,
        }
    }

    /// A fresh register of `class`.
    pub fn reg(&mut self, class: RegClass) -> Reg {
        let n = &mut self.counts[class_index(class)];
        let reg = Reg { class, index: *n };
        *n += 1;
        reg
    }

    /// A fresh register that holds a value of `ty`.
    pub fn reg_for(&mut self, ty: Type) -> Reg {
        self.reg(ty.reg_class())
    }

    pub fn label(&mut self) -> Label {
        let l = Label(self.labels);
        self.labels += 1;
        l
    }

    /// Names of the params declared so far, in order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|p| p.name.as_str())
    }

    /// Declares `.param ty name` and loads it into a fresh register at this point (call at entry).
    pub fn load_param(&mut self, name: impl Into<String>, ty: Type) -> Reg {
        let name = name.into();
        self.params.push(Param {
            name: name.clone(),
            ty,
        });
        let dst = self.reg_for(ty);
        self.emit(Op::Ld {
            space: Space::Param,
            ty,
            dst,
            addr: Address::Symbol { name, offset: 0 },
            cache: LdCache::Default,
        });
        dst
    }

    /// Declares a `.shared` array (`bytes == 0`: the dynamic shared memory). Declaring a name
    /// again reuses the array, grown to the larger size and alignment, so that two phases of a
    /// kernel may share a primitive that declares its own scratch (a block scan, say).
    pub fn shared(&mut self, name: impl Into<String>, align: u32, bytes: u32) {
        let name = name.into();
        if let Some(d) = self.shared.iter_mut().find(|d| d.name == name) {
            d.align = d.align.max(align);
            d.bytes = d.bytes.max(bytes);
            return;
        }
        self.shared.push(SharedDecl { name, align, bytes });
    }

    /// Bytes of static shared memory declared so far.
    pub fn shared_bytes(&self) -> u64 {
        self.shared.iter().map(|d| u64::from(d.bytes)).sum()
    }

    pub fn emit(&mut self, op: Op) {
        self.body.push(Instr::from(op));
    }

    pub fn emit_guarded(&mut self, pred: Reg, negate: bool, op: Op) {
        self.body.push(Instr {
            guard: Some(Guard { pred, negate }),
            op,
        });
    }

    pub fn place(&mut self, label: Label) {
        self.emit(Op::Label(label));
    }

    pub fn bra(&mut self, target: Label) {
        self.emit(Op::Bra { target });
    }

    /// Branches to `target` when `pred` is true (`negate`: when it is false).
    pub fn bra_if(&mut self, pred: Reg, negate: bool, target: Label) {
        self.emit_guarded(pred, negate, Op::Bra { target });
    }

    pub fn mov(&mut self, ty: Type, src: impl Into<Operand>) -> Reg {
        let dst = self.reg_for(ty);
        self.mov_to(ty, dst, src);
        dst
    }

    pub fn mov_to(&mut self, ty: Type, dst: Reg, src: impl Into<Operand>) {
        self.emit(Op::Mov {
            ty,
            dst,
            src: src.into(),
        });
    }

    /// Reads a special register into a fresh `.u32`.
    pub fn special(&mut self, s: Special) -> Reg {
        self.mov(Type::U32, Operand::Special(s))
    }

    pub fn bin(
        &mut self,
        op: BinOp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Reg {
        let dst = if op == BinOp::MulWide {
            self.reg(RegClass::B64)
        } else {
            self.reg_for(ty)
        };
        self.bin_to(op, ty, dst, a, b);
        dst
    }

    pub fn bin_to(
        &mut self,
        op: BinOp,
        ty: Type,
        dst: Reg,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) {
        self.emit(Op::Bin {
            op,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
        });
    }

    pub fn un(&mut self, op: UnOp, ty: Type, a: impl Into<Operand>) -> Reg {
        let dst = if matches!(op, UnOp::Popc | UnOp::Clz) {
            self.reg(RegClass::B32)
        } else {
            self.reg_for(ty)
        };
        self.emit(Op::Un {
            op,
            ty,
            dst,
            a: a.into(),
        });
        dst
    }

    pub fn setp(
        &mut self,
        cmp: Cmp,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Reg {
        let dst = self.reg(RegClass::Pred);
        self.emit(Op::Setp {
            cmp,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
        });
        dst
    }

    pub fn selp(
        &mut self,
        ty: Type,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        pred: Reg,
    ) -> Reg {
        let dst = self.reg_for(ty);
        self.emit(Op::Selp {
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            pred,
        });
        dst
    }

    pub fn cvt(&mut self, rounding: Rounding, dst_ty: Type, src_ty: Type, src: Reg) -> Reg {
        let dst = self.reg_for(dst_ty);
        self.emit(Op::Cvt {
            rounding,
            dst_ty,
            src_ty,
            dst,
            src: src.into(),
        });
        dst
    }

    pub fn ld_to(&mut self, space: Space, ty: Type, dst: Reg, addr: Reg) {
        self.emit(Op::Ld {
            space,
            ty,
            dst,
            addr: Address::Reg {
                base: addr,
                offset: 0,
            },
            cache: LdCache::Default,
        });
    }

    /// `ld.global{cache}.T dst, [addr+offset]`.
    pub fn ld_global_to(&mut self, ty: Type, dst: Reg, (addr, offset): (Reg, i64), cache: LdCache) {
        self.emit(Op::Ld {
            space: Space::Global,
            ty,
            dst,
            addr: Address::Reg { base: addr, offset },
            cache,
        });
    }

    /// `ld.global{cache}.T d, [addr+offset]` into a fresh register.
    pub fn ld_global(&mut self, ty: Type, (addr, offset): (Reg, i64), cache: LdCache) -> Reg {
        let dst = self.reg_for(ty);
        self.ld_global_to(ty, dst, (addr, offset), cache);
        dst
    }

    /// `ld.global{cache}.vN.T {dsts}, [addr+offset]`: `dsts.len()` consecutive elements in one
    /// load, `dsts[0]` from `addr+offset`. The address must be aligned to the whole vector
    /// (`dsts.len()` × the element size), or the load faults.
    pub fn ld_global_vec(
        &mut self,
        ty: Type,
        dsts: &[Reg],
        (addr, offset): (Reg, i64),
        cache: LdCache,
    ) {
        self.ld_vec(Space::Global, ty, dsts, (addr, offset), cache);
    }

    /// [`KernelBuilder::ld_global_vec`] of `n` elements into fresh registers, returned in
    /// address order.
    pub fn ld_global_vec_new(
        &mut self,
        ty: Type,
        n: usize,
        (addr, offset): (Reg, i64),
        cache: LdCache,
    ) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.reg_for(ty)).collect();
        self.ld_global_vec(ty, &dsts, (addr, offset), cache);
        dsts
    }

    /// `ld.shared.vN.T {dsts}, [addr+offset]`, aligned as for [`KernelBuilder::ld_global_vec`].
    pub fn ld_shared_vec(&mut self, ty: Type, dsts: &[Reg], (addr, offset): (Reg, i64)) {
        self.ld_vec(Space::Shared, ty, dsts, (addr, offset), LdCache::Default);
    }

    /// `ld.SPACE{cache}.vN.T {dsts}, [addr+offset]`.
    fn ld_vec(
        &mut self,
        space: Space,
        ty: Type,
        dsts: &[Reg],
        (addr, offset): (Reg, i64),
        cache: LdCache,
    ) {
        debug_assert_vector(ty, dsts.len());
        self.emit(Op::LdVec {
            space,
            ty,
            dsts: dsts.to_vec(),
            addr: Address::Reg { base: addr, offset },
            cache,
        });
    }

    /// `st.SPACE.vN.T [addr+offset], {srcs}`: `srcs.len()` consecutive elements in one store,
    /// `srcs[0]` to `addr+offset`, aligned as for [`KernelBuilder::ld_global_vec`].
    pub fn st_vec(&mut self, space: Space, ty: Type, (addr, offset): (Reg, i64), srcs: &[Operand]) {
        debug_assert_vector(ty, srcs.len());
        debug_assert!(space != Space::Param, "kernel parameters are read-only");
        self.emit(Op::StVec {
            space,
            ty,
            addr: Address::Reg { base: addr, offset },
            srcs: srcs.to_vec(),
        });
    }

    pub fn ld(&mut self, space: Space, ty: Type, addr: Reg) -> Reg {
        let dst = self.reg_for(ty);
        self.ld_to(space, ty, dst, addr);
        dst
    }

    pub fn st(&mut self, space: Space, ty: Type, addr: Reg, src: impl Into<Operand>) {
        self.emit(store(space, ty, addr, src.into()));
    }

    /// `@pred st.SPACE.T [addr], src`: a store by the threads where `pred` holds.
    pub fn st_if(&mut self, pred: Reg, space: Space, ty: Type, addr: Reg, src: impl Into<Operand>) {
        self.emit_guarded(pred, false, store(space, ty, addr, src.into()));
    }

    /// The address of element `index` (u64) of an array at `base` with `elem_bytes`-byte elements.
    pub fn elem_addr(&mut self, base: Reg, index: Reg, elem_bytes: u32) -> Reg {
        let offset = match elem_bytes {
            1 => index,
            n if n.is_power_of_two() => self.bin(
                BinOp::Shl,
                Type::B64,
                index,
                Operand::Imm(n.trailing_zeros().into()),
            ),
            n => self.bin(BinOp::Mul, Type::U64, index, Operand::Imm(n.into())),
        };
        self.bin(BinOp::Add, Type::U64, base, offset)
    }

    /// Opens `if pred` (`negate`: `if !pred`); the body follows.
    pub fn if_begin(&mut self, pred: Reg, negate: bool) -> IfScope {
        let els = self.label();
        self.bra_if(pred, !negate, els);
        IfScope { els, end: None }
    }

    /// Ends the `then` part and opens the `else` part.
    pub fn if_else(&mut self, scope: &mut IfScope) {
        let end = self.label();
        self.bra(end);
        self.place(scope.els);
        scope.end = Some(end);
    }

    pub fn if_end(&mut self, scope: IfScope) {
        match scope.end {
            Some(end) => self.place(end),
            None => self.place(scope.els),
        }
    }

    /// Opens an endless loop; leave it with [`KernelBuilder::break_if`] or a branch to `exit`.
    pub fn loop_begin(&mut self) -> LoopScope {
        let head = self.label();
        let exit = self.label();
        self.place(head);
        LoopScope { head, exit }
    }

    pub fn break_if(&mut self, scope: &LoopScope, pred: Reg, negate: bool) {
        self.bra_if(pred, negate, scope.exit);
    }

    pub fn loop_end(&mut self, scope: LoopScope) {
        self.bra(scope.head);
        self.place(scope.exit);
    }

    /// The thread's index in the grid and the grid's thread count (u64 both).
    pub fn grid_thread(&mut self) -> (Reg, Reg) {
        let tid = self.special(Special::TidX);
        let ntid = self.special(Special::NtidX);
        let ctaid = self.special(Special::CtaidX);
        let nctaid = self.special(Special::NctaidX);
        let base = self.bin(BinOp::MulWide, Type::U32, ctaid, ntid);
        let tid64 = self.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let thread = self.bin(BinOp::Add, Type::U64, base, tid64);
        let threads = self.bin(BinOp::MulWide, Type::U32, nctaid, ntid);
        (thread, threads)
    }

    /// Opens `for item in (global thread id..count).step_by(grid size)` with u64 `count`.
    pub fn grid_stride_begin(&mut self, count: Reg) -> GridStride {
        let (item, stride) = self.grid_thread();
        // Rotated: one test before the first item, then one per item at the bottom.
        let scope = LoopScope {
            head: self.label(),
            exit: self.label(),
        };
        let none = self.setp(Cmp::Ge, Type::U64, item, count);
        self.break_if(&scope, none, false);
        self.place(scope.head);
        let next = self.label();
        GridStride {
            item,
            count,
            stride,
            next,
            scope,
        }
    }

    pub fn grid_stride_end(&mut self, gs: GridStride) {
        self.place(gs.next);
        self.bin_to(BinOp::Add, Type::U64, gs.item, gs.item, gs.stride);
        let more = self.setp(Cmp::Lt, Type::U64, gs.item, gs.count);
        self.bra_if(more, false, gs.scope.head);
        self.place(gs.scope.exit);
    }

    /// `atom.global.OP.TY old, [base + offset], value`; returns `old` (a register of `ty`).
    pub fn atom_global(
        &mut self,
        op: AtomOp,
        ty: Type,
        at: (Reg, i64),
        value: impl Into<Operand>,
    ) -> Reg {
        self.atom(Space::Global, op, ty, at, value)
    }

    /// `atom.SPACE.OP.TY old, [base + offset], value`; returns `old` (a register of `ty`).
    pub fn atom(
        &mut self,
        space: Space,
        op: AtomOp,
        ty: Type,
        (base, offset): (Reg, i64),
        value: impl Into<Operand>,
    ) -> Reg {
        let dst = self.reg_for(ty);
        self.emit(Op::Atom {
            space,
            op,
            ty,
            dst,
            addr: Address::Reg { base, offset },
            b: value.into(),
            c: None,
        });
        dst
    }

    /// Asks ptxas for `occupancy` ([`Kernel::occupancy`]).
    pub fn set_occupancy(&mut self, occupancy: Occupancy) {
        self.occupancy = Some(occupancy);
    }

    /// Appends `ret;` and returns the kernel.
    pub fn finish(mut self) -> Kernel {
        self.emit(Op::Ret);
        Kernel {
            name: self.name,
            params: self.params,
            shared: self.shared,
            reg_counts: self.counts,
            max_registers: None,
            body: self.body,
            occupancy: self.occupancy,
        }
    }
}
