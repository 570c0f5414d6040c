//! Vector loads and stores (`ld.v2`/`ld.v4`, `st.v2`/`st.v4`) built with `KernelBuilder`: the
//! text round-trips through the parser, ptxas accepts it, and the simulator moves the elements in
//! address order, counts one instruction per vector access, and faults on a vector that is not
//! aligned to its whole size or not inside one allocation.

use lb_ptx::builder::KernelBuilder;
use lb_ptx::ir::{BinOp, Kernel, LdCache, Module, Op, Operand, Space, Special, Type};
use lb_ptx::sim::{launch, parse, LaunchConfig, Memory, SimError};

fn module(kernels: Vec<Kernel>) -> Module {
    Module {
        version: (7, 8),
        target: "sm_75".into(),
        kernels,
    }
}

/// The module as the simulator sees it: emitted and parsed back.
fn through_text(m: &Module) -> Module {
    let text = m.to_string();
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn cfg(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        dynamic_shared: 0,
    }
}

fn upload<const N: usize>(mem: &mut Memory, words: impl IntoIterator<Item = [u8; N]>) -> u64 {
    let bytes: Vec<u8> = words.into_iter().flatten().collect();
    let a = mem.alloc(bytes.len() as u64).unwrap();
    mem.write(a, &bytes).unwrap();
    a
}

fn download_u32(mem: &Memory, a: u64, n: usize) -> Vec<u32> {
    mem.read(a, 4 * n as u64)
        .unwrap()
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn download_u64(mem: &Memory, a: u64, n: usize) -> Vec<u64> {
    mem.read(a, 8 * n as u64)
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `quad(src, dst, skew)`: thread `t` loads the four f32 at `src + 16 t + skew` with one
/// `ld.global.nc.v4.f32` and stores them doubled, in reverse order, at `dst + 16 t` with one
/// `st.global.v4.f32`.
fn quad() -> Kernel {
    let mut k = KernelBuilder::new("quad");
    let src = k.load_param("src", Type::U64);
    let dst = k.load_param("dst", Type::U64);
    let skew = k.load_param("skew", Type::U64);
    let tid = k.special(Special::TidX);
    let row = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(16));
    let from = k.bin(BinOp::Add, Type::U64, src, row);
    let from = k.bin(BinOp::Add, Type::U64, from, skew);
    let v = k.ld_global_vec_new(Type::F32, 4, (from, 0), LdCache::ReadOnly);
    let doubled: Vec<Operand> = v
        .iter()
        .rev()
        .map(|&x| k.bin(BinOp::Add, Type::F32, x, x).into())
        .collect();
    let to = k.bin(BinOp::Add, Type::U64, dst, row);
    k.st_vec(Space::Global, Type::F32, (to, 0), &doubled);
    k.finish()
}

/// `pairs(a, b, out)`: thread `t` swaps the f64 pair at `a + 16 t` into `out + 32 t`, and writes
/// the second u32 of the pair at `b + 8 t + 8` (a constant offset in the address) next to 7 at
/// `out + 32 t + 16`.
fn pairs() -> Kernel {
    let mut k = KernelBuilder::new("pairs");
    let a = k.load_param("a", Type::U64);
    let b = k.load_param("b", Type::U64);
    let out = k.load_param("out", Type::U64);
    let tid = k.special(Special::TidX);
    let at_a = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(16));
    let at_a = k.bin(BinOp::Add, Type::U64, a, at_a);
    let d = k.ld_global_vec_new(Type::F64, 2, (at_a, 0), LdCache::Default);
    let at_b = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(8));
    let at_b = k.bin(BinOp::Add, Type::U64, b, at_b);
    let r = [k.reg_for(Type::U32), k.reg_for(Type::U32)];
    k.ld_global_vec(Type::U32, &r, (at_b, 8), LdCache::Stream);
    let at_out = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(32));
    let at_out = k.bin(BinOp::Add, Type::U64, out, at_out);
    k.st_vec(
        Space::Global,
        Type::F64,
        (at_out, 0),
        &[d[1].into(), d[0].into()],
    );
    k.st_vec(
        Space::Global,
        Type::U32,
        (at_out, 16),
        &[r[1].into(), Operand::Imm(7)],
    );
    k.finish()
}

/// `rotate(out, skew)`: 64 threads store `{t, t+1, t+2, t+3}` to shared memory with one
/// `st.shared.v4.u32` each, then each reads its neighbour's vector at `skew` bytes past it with
/// one `ld.shared.v4.u32` and stores it to `out + 16 t`.
fn rotate() -> Kernel {
    let mut k = KernelBuilder::new("rotate");
    k.shared("tile", 16, 64 * 16);
    let out = k.load_param("out", Type::U64);
    let skew = k.load_param("skew", Type::U64);
    let tile = k.mov(Type::U64, Operand::Symbol("tile".into()));
    let tid = k.special(Special::TidX);
    let mine = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(16));
    let mine = k.bin(BinOp::Add, Type::U64, tile, mine);
    let mut values = vec![Operand::Reg(tid)];
    for i in 1..4 {
        values.push(k.bin(BinOp::Add, Type::U32, tid, Operand::Imm(i)).into());
    }
    k.st_vec(Space::Shared, Type::U32, (mine, 0), &values);
    k.emit(Op::BarSync);
    let next = k.bin(BinOp::Add, Type::U32, tid, Operand::Imm(1));
    let next = k.bin(BinOp::And, Type::B32, next, Operand::Imm(63));
    let theirs = k.bin(BinOp::MulWide, Type::U32, next, Operand::Imm(16));
    let theirs = k.bin(BinOp::Add, Type::U64, tile, theirs);
    let theirs = k.bin(BinOp::Add, Type::U64, theirs, skew);
    let got = [(); 4].map(|_| k.reg_for(Type::U32));
    k.ld_shared_vec(Type::U32, &got, (theirs, 0));
    let to = k.bin(BinOp::MulWide, Type::U32, tid, Operand::Imm(16));
    let to = k.bin(BinOp::Add, Type::U64, out, to);
    let got: Vec<Operand> = got.iter().map(|&r| r.into()).collect();
    k.st_vec(Space::Global, Type::U32, (to, 0), &got);
    k.finish()
}

/// Every kernel of this file, optimized as generated kernels are.
fn kernels() -> Module {
    let mut kernels = vec![quad(), pairs(), rotate()];
    for k in &mut kernels {
        lb_ptx::optimize::kernel(k, true);
    }
    module(kernels)
}

#[test]
fn the_builder_writes_the_vector_forms() {
    let text = kernels().to_string();
    for line in [
        "ld.global.nc.v4.f32 {%f0, %f1, %f2, %f3}, [%rd5];",
        "st.global.v4.f32 [%rd6], {%f4, %f5, %f6, %f7};",
        "ld.global.v2.f64 {%fd0, %fd1}, [%rd4];",
        "ld.global.cs.nc.v2.u32 {%r1, %r2}, [%rd6+8];",
        "st.global.v2.f64 [%rd8], {%fd1, %fd0};",
        "st.global.v2.u32 [%rd8+16], {%r2, 7};",
        "st.shared.v4.u32 [%rd4], {%r0, %r1, %r2, %r3};",
        "ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%rd7];",
    ] {
        assert!(text.contains(line), "`{line}` missing from\n{text}");
    }
}

#[test]
fn vector_forms_round_trip() {
    let m = kernels();
    let text = m.to_string();
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, m);
    assert_eq!(back.to_string(), text);
    // The forms as written by hand, guards and every cache policy included.
    let body = "\tld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5+16];\n\
\tst.global.v4.f32 [%rd6], {%f7, %f8, %f9, %f10};\n\
\t@!%p1 ld.global.cs.nc.v2.f64 {%fd1, %fd0}, [%rd5+-16];\n\
\tld.global.v2.b64 {%rd1, %rd2}, [%rd5];\n\
\t@%p1 st.shared.v2.s32 [smem+8], {%r1, -3};\n\
\tst.global.v4.b32 [%rd6+32], {%r1, %r1, %r1, %r1};\n\tret;\n";
    let text = format!(
        "//\n// Generated by lb. Do not edit.\n//\n.version 7.8\n.target sm_75\n.address_size 64\n\n\
.visible .entry k(\n)\n{{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<7>;\n\
\t.reg .f32 %f<11>;\n\t.reg .f64 %fd<2>;\n\t.shared .align 16 .b8 smem[64];\n{body}}}\n"
    );
    let m = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.to_string(), text);
    let guarded = &m.kernels[0].body[2];
    assert!(matches!(
        guarded.op,
        Op::LdVec {
            cache: LdCache::Stream,
            ..
        }
    ));
    assert!(guarded.guard.is_some_and(|g| g.negate));
}

#[test]
fn malformed_vector_forms_are_parse_errors() {
    let base = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k(\n)\n{\n";
    let cases = [
        (
            "\tld.global.v4.f32 {%f1, %f2}, [%rd1];\n}\n",
            "`.v4` moves 4 elements",
        ),
        (
            "\tst.global.v2.f32 [%rd1], {%f1, %f2, %f3};\n}\n",
            "`.v2` moves 2",
        ),
        (
            "\tld.global.v3.f32 {%f1, %f2, %f3}, [%rd1];\n}\n",
            "unsupported",
        ),
        (
            "\tst.global.nc.v2.f32 [%rd1], {%f1, %f2};\n}\n",
            "unsupported",
        ),
        (
            "\tld.shared.nc.v2.f32 {%f1, %f2}, [%rd1];\n}\n",
            "unsupported",
        ),
        ("\tld.global.v2.f32 {%f1, 2}, [%rd1];\n}\n", "register"),
        ("\tld.global.v2.f32 {}, [%rd1];\n}\n", "register"),
        ("\tst.global.v2.f32 [%rd1], {%f1, %f2;\n}\n", "expected `}`"),
    ];
    for (tail, msg) in cases {
        let e = parse(&format!("{base}{tail}")).unwrap_err();
        assert_eq!(e.line, 7, "{tail:?}: {e}");
        assert!(e.message.contains(msg), "{tail:?}: {e}");
    }
}

#[test]
fn vector_accesses_assemble() {
    lb_ptx::ptxas::assert_assembles("vector accesses", &kernels().to_string());
}

#[test]
fn a_quad_moves_four_elements_in_order_as_one_instruction() {
    let m = through_text(&module(vec![quad()]));
    let mut mem = Memory::new();
    let input: Vec<f32> = (0..32 * 4).map(|i| i as f32 * 0.5 - 3.0).collect();
    let src = upload(&mut mem, input.iter().map(|x| x.to_le_bytes()));
    let dst = mem.alloc(32 * 16).unwrap();
    let stats = launch(&m, "quad", cfg(1, 32), &[src, dst, 0], &mut mem).unwrap();
    let got = download_u32(&mem, dst, 32 * 4);
    for (t, (out, inp)) in got.chunks(4).zip(input.chunks(4)).enumerate() {
        let want: Vec<u32> = inp.iter().rev().map(|x| (x + x).to_bits()).collect();
        assert_eq!(out, want, "thread {t}");
    }
    // One per instruction of the body (`ret` included), whatever the vectors' widths.
    let body = m.kernels[0].body.len() as u64;
    assert_eq!(stats.instructions, 32 * body);
    assert_eq!(stats.warp_issues, body);
}

#[test]
fn pairs_of_64_and_32_bits_move_and_take_immediates() {
    let m = through_text(&module(vec![pairs()]));
    let mut mem = Memory::new();
    let a_values: Vec<f64> = (0..16).map(|i| f64::from(i) * 1.25 - 7.0).collect();
    let a = upload(&mut mem, a_values.iter().map(|x| x.to_le_bytes()));
    let b = upload(&mut mem, (0..18u32).map(|i| (i * 3 + 1).to_le_bytes()));
    let out = mem.alloc(8 * 32).unwrap();
    launch(&m, "pairs", cfg(1, 8), &[a, b, out], &mut mem).unwrap();
    let got = download_u64(&mem, out, 8 * 4);
    for (t, slots) in got.chunks(4).enumerate() {
        let pair = [a_values[2 * t + 1].to_bits(), a_values[2 * t].to_bits()];
        assert_eq!(slots[..2], pair, "thread {t}");
        let second = (2 * t as u64 + 3) * 3 + 1;
        assert_eq!(slots[2], second | 7 << 32, "thread {t}");
        assert_eq!(slots[3], 0, "thread {t} wrote past its pair");
    }
}

#[test]
fn shared_memory_vectors_move_between_threads() {
    let m = through_text(&module(vec![rotate()]));
    let mut mem = Memory::new();
    let out = mem.alloc(64 * 16).unwrap();
    launch(&m, "rotate", cfg(2, 64), &[out, 0], &mut mem).unwrap();
    let got = download_u32(&mem, out, 64 * 4);
    for (t, v) in got.chunks(4).enumerate() {
        let n = (t as u32 + 1) % 64;
        assert_eq!(v, [n, n + 1, n + 2, n + 3], "thread {t}");
    }
    // Eight bytes past a 16-byte-aligned vector is aligned for each element, not for the vector.
    let e = launch(&m, "rotate", cfg(1, 64), &[out, 8], &mut mem).unwrap_err();
    assert!(
        matches!(&e, SimError::Misaligned { bytes: 16, addr, instr, .. }
            if addr % 16 == 8 && instr.contains("ld.shared.v4.u32")),
        "{e:?}"
    );
}

#[test]
fn a_misaligned_vector_faults() {
    let m = through_text(&module(vec![quad()]));
    let mut mem = Memory::new();
    let src = mem.alloc(64 * 16 + 16).unwrap();
    let dst = mem.alloc(64 * 16).unwrap();
    // Each f32 of the vector is aligned, the vector itself is not.
    for skew in [4, 8, 12] {
        let e = launch(&m, "quad", cfg(1, 64), &[src, dst, skew], &mut mem).unwrap_err();
        match &e {
            SimError::Misaligned {
                addr,
                bytes: 16,
                block: 0,
                thread: 0,
                instr,
            } => {
                assert_eq!(*addr, src + skew);
                assert!(instr.contains("ld.global.nc.v4.f32"), "{instr}");
            }
            other => panic!("skew {skew}: {other:?}"),
        }
        assert!(e.to_string().contains("must be a multiple of 16"), "{e}");
    }
    // Stores: a pair at `dst + 8` and a quad at `dst + 16`.
    let mut k = KernelBuilder::new("store");
    let dst = k.load_param("dst", Type::U64);
    let (one, two, three) = (
        Operand::F32(0x3F80_0000),
        Operand::F32(0x4000_0000),
        Operand::F32(0x4040_0000),
    );
    k.st_vec(Space::Global, Type::F32, (dst, 8), &[one, two]);
    k.st_vec(Space::Global, Type::F32, (dst, 16), &vec![three; 4]);
    let m = through_text(&module(vec![k.finish()]));
    let out = mem.alloc(56).unwrap();
    launch(&m, "store", cfg(1, 1), &[out], &mut mem).unwrap();
    let (one, two, three) = (1f32.to_bits(), 2f32.to_bits(), 3f32.to_bits());
    assert_eq!(
        download_u32(&mem, out, 8),
        [0, 0, one, two, three, three, three, three]
    );
    let e = launch(&m, "store", cfg(1, 1), &[out + 4], &mut mem).unwrap_err();
    assert!(
        matches!(e, SimError::Misaligned { bytes: 8, addr, .. } if addr == out + 12),
        "{e:?}"
    );
    // Aligned, with its first half inside the allocation: the whole vector must be, and a
    // store that faults writes nothing.
    let e = launch(&m, "store", cfg(1, 1), &[out + 32], &mut mem).unwrap_err();
    assert!(
        matches!(e, SimError::OutOfBounds { bytes: 16, addr, .. } if addr == out + 48),
        "{e:?}"
    );
    assert_eq!(download_u32(&mem, out + 40, 4), [one, two, 0, 0]);
}

#[test]
fn vectors_ptx_lacks_are_errors_not_panics() {
    let base = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k(\n\t.param .u64 a\n)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .f64 %fd<4>;\n\tld.param.u64 %rd1, [a];\n";
    for line in [
        "ld.global.v4.f64 {%fd0, %fd1, %fd2, %fd3}, [%rd1];",
        "st.global.v4.b64 [%rd1], {%rd0, %rd1, %rd2, %rd3};",
        "ld.global.v2.u8 {%r0, %r1}, [%rd1];",
        "ld.param.v2.u32 {%r0, %r1}, [a];",
        "st.param.v2.u32 [a], {%r0, %r1};",
    ] {
        let m = parse(&format!("{base}\t{line}\n\tret;\n}}\n")).unwrap();
        let mut mem = Memory::new();
        let a = mem.alloc(64).unwrap();
        let e = launch(&m, "k", cfg(1, 1), &[a], &mut mem).unwrap_err();
        assert!(matches!(e, SimError::Unsupported(_)), "{line}: {e:?}");
    }
}

#[test]
fn a_guarded_off_vector_access_neither_moves_nor_faults() {
    // Odd threads move their pair; even threads would store to a misaligned address.
    let text = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k(\n\t.param .u64 a\n)\n{\n\
\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd0, [a];\n\
\tmov.u32 %r0, %tid.x;\n\tand.b32 %r1, %r0, 1;\n\tsetp.eq.u32 %p1, %r1, 1;\n\
\tmul.wide.u32 %rd1, %r0, 8;\n\tadd.u64 %rd2, %rd0, %rd1;\n\
\t@%p1 ld.global.v2.u32 {%r2, %r3}, [%rd2];\n\t@%p1 st.global.v2.u32 [%rd2], {%r3, %r2};\n\
\t@!%p1 st.global.v2.u32 [%rd2+4], {%r0, %r0};\n\tret;\n}\n";
    let m = parse(text).unwrap();
    let mut mem = Memory::new();
    let a = upload(&mut mem, (0..8u32).map(|i| (10 + i).to_le_bytes()));
    let e = launch(&m, "k", cfg(1, 4), &[a], &mut mem).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::Misaligned {
                thread: 0,
                bytes: 8,
                ..
            }
        ),
        "{e:?}"
    );
    let m = parse(&text.replace("\t@!%p1 st.global.v2.u32 [%rd2+4], {%r0, %r0};\n", "")).unwrap();
    let a = upload(&mut mem, (0..8u32).map(|i| (10 + i).to_le_bytes()));
    launch(&m, "k", cfg(1, 4), &[a], &mut mem).unwrap();
    assert_eq!(download_u32(&mem, a, 8), [10, 11, 13, 12, 14, 15, 17, 16]);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "no vector access moves 4 elements of .f64")]
fn the_builder_refuses_a_vector_ptx_lacks() {
    let mut k = KernelBuilder::new("k");
    let p = k.load_param("p", Type::U64);
    k.ld_global_vec_new(Type::F64, 4, (p, 0), LdCache::Default);
}
