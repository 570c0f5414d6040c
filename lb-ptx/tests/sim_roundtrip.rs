//! Parser tests: emit → parse → emit is the identity on a module using every `Op` variant, and
//! malformed text gives a `ParseError` with the right line instead of a panic.

use lb_ptx::ir::*;
use lb_ptx::sim::parse;
use proptest::prelude::*;

fn r(class: RegClass, index: u32) -> Reg {
    Reg { class, index }
}

fn every_op_module() -> Module {
    use RegClass::*;
    let (p, b, d, f, fd) = (r(Pred, 1), r(B32, 2), r(B64, 3), r(F32, 4), r(F64, 0));
    let rg = Operand::Reg;
    let mut body: Vec<Instr> = Vec::new();
    let specials = [
        Special::TidX,
        Special::NtidX,
        Special::CtaidX,
        Special::NctaidX,
        Special::LaneId,
        Special::WarpId,
    ];
    for s in specials {
        body.push(
            Op::Mov {
                ty: Type::U32,
                dst: b,
                src: Operand::Special(s),
            }
            .into(),
        );
    }
    body.push(
        Op::Mov {
            ty: Type::U64,
            dst: d,
            src: Operand::Symbol("smem".into()),
        }
        .into(),
    );
    body.push(
        Op::Mov {
            ty: Type::F32,
            dst: f,
            src: Operand::F32(0x3F80_0000),
        }
        .into(),
    );
    body.push(
        Op::Mov {
            ty: Type::F64,
            dst: fd,
            src: Operand::F64(0xFFF0_0000_0000_0001),
        }
        .into(),
    );
    body.push(
        Op::Mov {
            ty: Type::S64,
            dst: d,
            src: Operand::Imm(i64::MIN),
        }
        .into(),
    );
    body.push(
        Op::Mov {
            ty: Type::Pred,
            dst: p,
            src: Operand::Imm(1),
        }
        .into(),
    );
    let bins = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::MulWide,
        BinOp::MulHi,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Min,
        BinOp::Max,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
    ];
    for op in bins {
        for ty in [Type::U32, Type::S64, Type::F32, Type::F64, Type::B32] {
            body.push(
                Op::Bin {
                    op,
                    ty,
                    dst: b,
                    a: rg(b),
                    b: Operand::Imm(-7),
                }
                .into(),
            );
        }
    }
    for op in [
        UnOp::Neg,
        UnOp::Not,
        UnOp::Abs,
        UnOp::Sqrt,
        UnOp::Popc,
        UnOp::Clz,
    ] {
        body.push(
            Op::Un {
                op,
                ty: Type::B64,
                dst: b,
                a: rg(d),
            }
            .into(),
        );
        body.push(
            Op::Un {
                op,
                ty: Type::F32,
                dst: f,
                a: rg(f),
            }
            .into(),
        );
    }
    body.push(
        Op::Fma {
            ty: Type::F32,
            dst: f,
            a: rg(f),
            b: Operand::F32(0x7FC0_0000),
            c: rg(f),
        }
        .into(),
    );
    for cmp in [
        Cmp::Eq,
        Cmp::Ne,
        Cmp::Lt,
        Cmp::Le,
        Cmp::Gt,
        Cmp::Ge,
        Cmp::Neu,
    ] {
        body.push(
            Op::Setp {
                cmp,
                ty: Type::S32,
                dst: p,
                a: rg(b),
                b: Operand::Imm(0),
            }
            .into(),
        );
    }
    body.push(
        Op::Selp {
            ty: Type::F64,
            dst: fd,
            a: rg(fd),
            b: Operand::F64(0),
            pred: p,
        }
        .into(),
    );
    for (rounding, dst_ty, src_ty) in [
        (Rounding::None, Type::U32, Type::U8),
        (Rounding::Rn, Type::F32, Type::S64),
        (Rounding::Rzi, Type::S32, Type::F64),
        (Rounding::None, Type::F64, Type::F32),
    ] {
        body.push(
            Op::Cvt {
                rounding,
                dst_ty,
                src_ty,
                dst: b,
                src: rg(b),
            }
            .into(),
        );
    }
    let addrs = [
        Address::Reg { base: d, offset: 0 },
        Address::Reg { base: d, offset: 8 },
        Address::Reg {
            base: d,
            offset: -8,
        },
        Address::Symbol {
            name: "smem".into(),
            offset: 4,
        },
    ];
    for (i, addr) in addrs.iter().enumerate() {
        let space = if i == 3 { Space::Shared } else { Space::Global };
        // Every cache policy of a global load round-trips.
        let cache = [
            LdCache::Default,
            LdCache::ReadOnly,
            LdCache::Stream,
            LdCache::Default,
        ][i % 4];
        body.push(
            Op::Ld {
                space,
                ty: Type::U8,
                dst: b,
                addr: addr.clone(),
                cache,
            }
            .into(),
        );
        body.push(
            Op::St {
                space,
                ty: Type::F32,
                addr: addr.clone(),
                src: rg(f),
            }
            .into(),
        );
    }
    // Vector accesses: four f32 read-only, two u32 streamed, a pair of f64 in shared memory.
    let quad: Vec<Reg> = (0..4).map(|i| r(F32, i)).collect();
    body.push(
        Op::LdVec {
            space: Space::Global,
            ty: Type::F32,
            dsts: quad.clone(),
            addr: Address::Reg {
                base: d,
                offset: 16,
            },
            cache: LdCache::ReadOnly,
        }
        .into(),
    );
    body.push(Instr {
        guard: Some(Guard {
            pred: p,
            negate: false,
        }),
        op: Op::StVec {
            space: Space::Global,
            ty: Type::F32,
            addr: Address::Reg { base: d, offset: 0 },
            srcs: quad.iter().rev().map(|&q| rg(q)).collect(),
        },
    });
    body.push(
        Op::LdVec {
            space: Space::Global,
            ty: Type::U32,
            dsts: vec![b, r(B32, 0)],
            addr: Address::Reg {
                base: d,
                offset: -8,
            },
            cache: LdCache::Stream,
        }
        .into(),
    );
    body.push(
        Op::LdVec {
            space: Space::Shared,
            ty: Type::F64,
            dsts: vec![fd, fd],
            addr: Address::Symbol {
                name: "smem".into(),
                offset: 16,
            },
            cache: LdCache::Default,
        }
        .into(),
    );
    body.push(
        Op::StVec {
            space: Space::Shared,
            ty: Type::B64,
            addr: Address::Reg { base: d, offset: 8 },
            srcs: vec![rg(d), Operand::Imm(-1)],
        }
        .into(),
    );
    body.push(
        Op::Ld {
            space: Space::Param,
            ty: Type::U64,
            dst: d,
            addr: Address::Symbol {
                name: "out".into(),
                offset: 0,
            },
            cache: LdCache::Default,
        }
        .into(),
    );
    for op in [
        AtomOp::Add,
        AtomOp::Min,
        AtomOp::Max,
        AtomOp::Exch,
        AtomOp::Cas,
        AtomOp::And,
        AtomOp::Or,
    ] {
        let c = (op == AtomOp::Cas).then_some(Operand::Imm(5));
        body.push(
            Op::Atom {
                space: Space::Shared,
                op,
                ty: Type::U32,
                dst: b,
                addr: Address::Reg { base: d, offset: 4 },
                b: rg(b),
                c,
            }
            .into(),
        );
    }
    body.push(Op::Label(Label(0)).into());
    body.push(Instr {
        guard: Some(Guard {
            pred: p,
            negate: true,
        }),
        op: Op::Bra { target: Label(0) },
    });
    body.push(Op::BarSync.into());
    body.push(Op::MemBar.into());
    for mode in [ShflMode::Up, ShflMode::Down, ShflMode::Bfly, ShflMode::Idx] {
        body.push(
            Op::Shfl {
                mode,
                dst: b,
                dst_pred: (mode == ShflMode::Up).then_some(p),
                a: rg(b),
                b: Operand::Imm(1),
                c: Operand::Imm(0x1f),
                mask: Operand::Imm(-1),
            }
            .into(),
        );
    }
    for mode in [VoteMode::All, VoteMode::Any, VoteMode::Ballot] {
        let dst = if mode == VoteMode::Ballot { b } else { p };
        body.push(
            Op::Vote {
                mode,
                dst,
                a: rg(p),
                mask: Operand::Imm(0xFFFF_FFFF),
            }
            .into(),
        );
    }
    body.push(Instr {
        guard: Some(Guard {
            pred: p,
            negate: false,
        }),
        op: Op::Ret,
    });
    let k1 = Kernel {
        name: "every_op".into(),
        params: vec![
            Param {
                name: "out".into(),
                ty: Type::U64,
            },
            Param {
                name: "n".into(),
                ty: Type::U32,
            },
        ],
        shared: vec![
            SharedDecl {
                name: "smem".into(),
                align: 4,
                bytes: 1024,
            },
            SharedDecl {
                name: "dyn".into(),
                align: 16,
                bytes: 0,
            },
        ],
        reg_counts: [2, 3, 4, 5, 1],
        body,
        max_registers: Some(64),
        occupancy: Some(Occupancy {
            max_threads: 256,
            min_blocks: 6,
        }),
    };
    let k2 = Kernel {
        name: "empty".into(),
        params: vec![],
        shared: vec![],
        reg_counts: [0; 5],
        body: vec![Op::Ret.into()],
        max_registers: None,
        occupancy: None,
    };
    Module {
        version: (7, 8),
        target: "sm_75".into(),
        kernels: vec![k1, k2],
    }
}

#[test]
fn round_trip_every_op() {
    let m = every_op_module();
    let text = m.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, m);
    assert_eq!(back.to_string(), text);
}

#[test]
fn hand_written_text_round_trips() {
    let text = "//\n// Generated by lb. Do not edit.\n//\n.version 8.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry k(\n\t.param .u64 a\n)\n{\n\t.reg .pred %p<2>;\n\t.reg .b64 %rd<3>;\n\
\t.extern .shared .align 8 .b8 dyn[];\n\tld.param.u64 %rd1, [a];\nL7:\n\
\t@!%p1 st.global.u8 [%rd1+-3], 255;\n\tret;\n}\n";
    let m = parse(text).unwrap();
    assert_eq!(m.to_string(), text);
    assert_eq!(m.kernels[0].reg_counts, [2, 0, 3, 0, 0]);
    assert_eq!(m.version, (8, 0));
}

#[test]
fn errors_carry_line_numbers() {
    let base = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k(\n)\n{\n";
    let cases = [
        ("\tfoo.u32 %r1, 2;\n}\n", 7, "unsupported instruction"),
        ("\tmov.u32 %r1, 2\n}\n", 7, "expected `;`"),
        ("\tmov.u32 %q1, 2;\n}\n", 7, "register"),
        ("\tmov.f32 %f1, 0f3F80;\n}\n", 7, "f32 immediate"),
        ("\tret;\n", 7, "not closed"),
        ("\tbra X1;\n}\n", 7, "label"),
    ];
    for (tail, line, msg) in cases {
        let e = parse(&format!("{base}{tail}")).unwrap_err();
        assert_eq!(e.line, line, "{tail:?}: {e}");
        assert!(e.message.contains(msg), "{tail:?}: {e}");
    }
}

#[test]
fn occupancy_directives_are_checked() {
    let head = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k(\n)\n";
    let cases = [
        (
            ".maxntid 256, 2, 1\n.minnctapersm 6\n{\n\tret;\n}\n",
            "second or third",
        ),
        (".maxntid 256, 1, 1\n{\n\tret;\n}\n", ".minnctapersm"),
        (
            ".maxntid 0, 1, 1\n.minnctapersm 6\n{\n\tret;\n}\n",
            "thread count",
        ),
        (
            ".maxntid 256, 1, 1\n.minnctapersm x\n{\n\tret;\n}\n",
            "block count",
        ),
    ];
    for (tail, msg) in cases {
        let e = parse(&format!("{head}{tail}")).unwrap_err();
        assert!(e.message.contains(msg), "{tail:?}: {e}");
    }
    let ok = format!("{head}.maxntid 128, 1, 1\n.minnctapersm 12\n{{\n\tret;\n}}\n");
    let m = parse(&ok).unwrap();
    assert_eq!(
        m.kernels[0].occupancy,
        Some(Occupancy {
            max_threads: 128,
            min_blocks: 12
        })
    );
}

proptest! {
    #[test]
    fn never_panics_on_mutated_text(cut in 0usize..4000, insert in "[ -~\n]{0,6}", del in 0usize..5) {
        let text = every_op_module().to_string();
        let mut bytes: Vec<char> = text.chars().collect();
        let at = cut % bytes.len();
        let end = (at + del).min(bytes.len());
        bytes.splice(at..end, insert.chars());
        let mutated: String = bytes.into_iter().collect();
        let _ = parse(&mutated);
    }

    #[test]
    fn never_panics_on_garbage(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }
}
