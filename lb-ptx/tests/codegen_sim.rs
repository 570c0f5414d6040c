//! Runs generated kernels on the simulator against sequential CPU loops: bitwise-equal
//! reductions, lanes, float atomics on negative values, and `checked` error reporting.

mod codegen_common;

use codegen_common::*;
use lb_ptx::sim::{self, LaunchConfig, Memory};
use lb_ptx::{generate, Options};

fn upload(mem: &mut Memory, bytes: &[u8]) -> u64 {
    let addr = mem.alloc(bytes.len().max(1) as u64).unwrap();
    mem.write(addr, bytes).unwrap();
    addr
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(mem: &Memory, addr: u64, n: usize) -> Vec<f32> {
    mem.read(addr, 4 * n as u64)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A small CSR matrix with empty rows, a long row and awkward float values.
struct Matrix {
    rows: usize,
    cols: usize,
    offsets: Vec<u64>,
    indices: Vec<u32>,
    values: Vec<f32>,
}

fn matrix(rows: usize, cols: usize) -> Matrix {
    let mut offsets = vec![0u64];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let n = match r % 7 {
            0 => 0,
            3 => 40,
            k => k,
        };
        for j in 0..n {
            indices.push(((r * 31 + j * 17) % cols) as u32);
            values.push(((r as f32) * 0.37 - (j as f32) * 1.93).sin() * 1e3 + 1e-4);
        }
        offsets.push(indices.len() as u64);
    }
    Matrix {
        rows,
        cols,
        offsets,
        indices,
        values,
    }
}

/// Uploads the six CSR slots.
fn csr_args(mem: &mut Memory, m: &Matrix) -> Vec<u64> {
    let off: Vec<u8> = m.offsets.iter().flat_map(|x| x.to_le_bytes()).collect();
    let idx: Vec<u8> = m.indices.iter().flat_map(|x| x.to_le_bytes()).collect();
    vec![
        upload(mem, &off),
        upload(mem, &idx),
        upload(mem, &f32_bytes(&m.values)),
        m.rows as u64,
        m.cols as u64,
        m.values.len() as u64,
    ]
}

fn run(ptx: &str, entry: &str, args: &[u64], mem: &mut Memory) {
    let module = sim::parse(ptx).unwrap();
    let cfg = LaunchConfig {
        grid: 2,
        block: 32,
        dynamic_shared: 0,
    };
    // No output mirrors: table and count 0 after the temporaries.
    let args: Vec<u64> = args.iter().copied().chain([0, 0]).collect();
    sim::launch(&module, entry, cfg, &args, mem).unwrap();
}

/// `thread_mapped` SpMV against the sequential loop, bitwise: with fused multiply-adds by default
/// (`acc = v.mul_add(x, acc)`), and rounding every operation as the CPU does under `fma: false`.
#[test]
fn spmv_matches_the_sequential_loop_bitwise() {
    let m = matrix(150, 90);
    let x: Vec<f32> = (0..m.cols).map(|i| (i as f32 * 0.71).cos() * 3.3).collect();
    for fma in [true, false] {
        let mut mem = Memory::new();
        let mut args = csr_args(&mut mem, &m);
        args.push(upload(&mut mem, &f32_bytes(&x)));
        args.push(x.len() as u64);
        let y = upload(&mut mem, &vec![0xAB; 4 * m.rows]);
        args.extend([y, m.rows as u64]);
        let opts = Options {
            fma,
            ..Options::default()
        };
        let g = generate(&spmv(), &opts).unwrap();
        assert_eq!(g.ptx.contains("fma.rn.f32"), fma, "fma: {fma}");
        run(&g.ptx, "spmv_thread_mapped", &args, &mut mem);

        let got = read_f32(&mem, y, m.rows);
        for (r, got) in got.iter().enumerate() {
            let mut acc = 0f32;
            for nz in m.offsets[r] as usize..m.offsets[r + 1] as usize {
                let (v, xv) = (m.values[nz], x[m.indices[nz] as usize]);
                acc = if fma {
                    v.mul_add(xv, acc)
                } else {
                    acc + v * xv
                };
            }
            assert_eq!(got.to_bits(), acc.to_bits(), "fma: {fma}: row {r}");
        }
    }
}

#[test]
fn spmm_lanes_match() {
    let m = matrix(40, 30);
    let k = 3usize;
    let b: Vec<f32> = (0..m.cols * k).map(|i| i as f32 * 0.25 - 7.0).collect();
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, &m);
    args.push(upload(&mut mem, &f32_bytes(&b)));
    args.extend([b.len() as u64, k as u64]);
    let c = upload(&mut mem, &vec![0xAB; 4 * m.rows * k]);
    args.extend([c, (m.rows * k) as u64]);
    let opts = Options {
        lanes: Some(2),
        ..Options::default()
    };
    let g = generate(&spmm(), &opts).unwrap();
    run(&g.ptx, "spmm_thread_mapped", &args, &mut mem);

    let got = read_f32(&mem, c, m.rows * k);
    for r in 0..m.rows {
        for j in 0..k {
            let mut acc = 0f32;
            for nz in m.offsets[r] as usize..m.offsets[r + 1] as usize {
                acc = m.values[nz].mul_add(b[m.indices[nz] as usize * k + j], acc);
            }
            assert_eq!(got[r * k + j].to_bits(), acc.to_bits(), "row {r} lane {j}");
        }
    }
}

#[test]
fn relax_float_atomic_min_handles_negative_values() {
    // Every vertex of the frontier relaxes its edges; weights are negative, so the float min
    // must not be an integer min on the bits.
    let mut m = matrix(20, 20);
    for v in &mut m.values {
        *v = -v.abs() - 1.0;
    }
    let frontier: Vec<u32> = vec![3, 10, 17, 5];
    for c in &mut m.indices {
        if frontier.contains(c) {
            *c = 0;
        }
    }
    let dist0: Vec<f32> = (0..m.rows).map(|i| i as f32 - 4.5).collect();
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, &m);
    let fr: Vec<u8> = frontier.iter().flat_map(|x| x.to_le_bytes()).collect();
    args.extend([upload(&mut mem, &fr), frontier.len() as u64]);
    let dist = upload(&mut mem, &f32_bytes(&dist0));
    args.extend([dist, m.rows as u64]);
    let changed = upload(&mut mem, &vec![0u8; m.rows]);
    args.extend([changed, m.rows as u64]);
    let flag = upload(&mut mem, &[0u8; 16]);
    args.push(flag);
    let opts = Options {
        tiles: Some(1),
        checked: true,
        ..Options::default()
    };
    let g = generate(&relax(), &opts).unwrap();
    run(&g.ptx, "relax_thread_mapped", &args, &mut mem);

    // No edge leads into the frontier, so every dist[u] read is the initial one and the result
    // does not depend on the order of the atomics.
    let mut want = dist0.clone();
    let mut flags = vec![false; m.rows];
    for &u in &frontier {
        let u = u as usize;
        for nz in m.offsets[u] as usize..m.offsets[u + 1] as usize {
            let v = m.indices[nz] as usize;
            let d = dist0[u] + m.values[nz];
            flags[v] |= d < want[v];
            want[v] = want[v].min(d);
        }
    }
    assert_eq!(read_f32(&mem, dist, m.rows), want);
    let got_flags: Vec<bool> = mem
        .read(changed, m.rows as u64)
        .unwrap()
        .iter()
        .map(|&b| b != 0)
        .collect();
    assert_eq!(got_flags, flags);
    assert_eq!(mem.read(flag, 16).unwrap(), vec![0u8; 16]);
}

#[test]
fn checked_reports_the_first_out_of_range_index() {
    let mut m = matrix(10, 8);
    m.indices[5] = 1000;
    let x = vec![1f32; m.cols];
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, &m);
    args.extend([upload(&mut mem, &f32_bytes(&x)), x.len() as u64]);
    let y = upload(&mut mem, &vec![0u8; 4 * m.rows]);
    args.extend([y, m.rows as u64]);
    let flag = upload(&mut mem, &[0u8; 16]);
    args.push(flag);
    let opts = Options {
        checked: true,
        ..Options::default()
    };
    let g = generate(&spmv(), &opts).unwrap();
    run(&g.ptx, "spmv_thread_mapped", &args, &mut mem);
    let words: Vec<u64> = mem
        .read(flag, 16)
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(words, [2, 1000], "x (parameter 1) indexed at 1000");
    let got = read_f32(&mem, y, m.rows);
    for (r, got) in got.iter().enumerate() {
        let mut acc = 0f32;
        for nz in m.offsets[r] as usize..m.offsets[r + 1] as usize {
            let xv = if nz == 5 { 0.0 } else { x[0] };
            acc += m.values[nz] * xv;
        }
        assert_eq!(
            got.to_bits(),
            acc.to_bits(),
            "row {r}: the bad load yields 0"
        );
    }
}

#[test]
fn mix_matches_the_rust_function() {
    let m = matrix(60, 50);
    let values: Vec<f64> = m.values.iter().map(|&v| f64::from(v) * 1e-3).collect();
    let x: Vec<f64> = (0..m.cols).map(|i| (i as f64 * 0.9).sin() * 20.0).collect();
    let flags: Vec<bool> = (0..m.cols).map(|i| i % 3 != 0).collect();
    let (scale, on) = (0.75f32, true);
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, &m);
    let vbytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    args[2] = upload(&mut mem, &vbytes);
    let xbytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    args.extend([upload(&mut mem, &xbytes), x.len() as u64]);
    let fbytes: Vec<u8> = flags.iter().map(|&b| u8::from(b)).collect();
    args.extend([upload(&mut mem, &fbytes), flags.len() as u64]);
    let lo = upload(&mut mem, &f32_bytes(&vec![5.0; m.rows]));
    args.extend([lo, m.rows as u64]);
    let counts = upload(&mut mem, &vec![0u8; 4 * m.rows]);
    args.extend([counts, m.rows as u64]);
    args.extend([u64::from(scale.to_bits()), u64::from(on)]);
    let y = upload(&mut mem, &vec![0xAB; 8 * m.rows]);
    args.extend([y, m.rows as u64]);
    let g = generate(&mix(), &Options::default()).unwrap();
    run(&g.ptx, "mix_thread_mapped", &args, &mut mem);

    let (mut want_lo, mut want_counts) = (vec![5f32; m.rows], vec![0i32; m.rows]);
    let mut atom = |row: usize, nz: usize, r: usize| -> f64 {
        let c = m.indices[nz] as usize;
        let w = if flags[c] && on { x[c] } else { -x[c] * 0.5 };
        let mut s: i32 = 0;
        for j in 0..(r as i32) {
            s = s.wrapping_add(j.wrapping_shl(33)).wrapping_sub(j / 3);
        }
        // Exactly the body's `max(..).min(..)`: `clamp` treats NaN differently.
        #[allow(clippy::manual_clamp)]
        let f = (w as f32).mul_add(scale, 1.0).max(0.0).min(10.0);
        want_lo[row] = want_lo[row].min(f);
        #[allow(clippy::eq_op)]
        if s != 0 || f != f {
            want_counts[row] = want_counts[row].wrapping_add(s);
        } else {
            return 0.0;
        }
        w + s as f64 + (f as f64).sqrt().abs()
    };
    let mut want_y = vec![0f64; m.rows];
    for (row, out) in want_y.iter_mut().enumerate() {
        let begin = m.offsets[row] as usize;
        for nz in begin..m.offsets[row + 1] as usize {
            *out += atom(row, nz, nz - begin);
        }
    }
    let got_y: Vec<u64> = mem
        .read(y, 8 * m.rows as u64)
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want_bits: Vec<u64> = want_y.iter().map(|v| v.to_bits()).collect();
    assert_eq!(got_y, want_bits);
    assert_eq!(read_f32(&mem, lo, m.rows), want_lo);
    let got_counts: Vec<i32> = mem
        .read(counts, 4 * m.rows as u64)
        .unwrap()
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got_counts, want_counts);
}
