//! `f64` `exp`, `exp2`, `ln`, `log2`, `powf`, `sin`, `cos` and `tanh` in software: PTX has
//! approximations of the transcendental functions in `f32` only (`ex2`, `lg2`, `sin`, `cos`,
//! `tanh`), so these are built from additions, multiplications, fused multiply-adds and
//! divisions, which a GPU rounds exactly as IEEE 754 and the simulator do.
//!
//! The methods are the classical ones of Sun's fdlibm (as in FreeBSD's `msun`), written here from
//! their description, not from its code:
//! - Cody and Waite's argument reduction by a constant split in parts, so that the first
//!   product is exact: `exp(x) = 2^k · e^r` with `x = k ln 2 + r`, `|r| ≤ ln 2 / 2`, and
//!   `sin`/`cos` from `x = q π/2 + r`, `|r| ≤ π/4`, with π/2 in three parts (the reduction is
//!   exact for `|x|` up to about `2^20`; beyond that the result loses accuracy, as it would
//!   without Payne and Hanek's reduction, which this does not do);
//! - `ln(1 + f) = 2 atanh(s)`, `s = f / (2 + f)`, for the mantissa `1 + f` in `[√2/2, √2)`,
//!   summed in two parts (a double-double) so that `powf` keeps its accuracy when `y · ln x` is
//!   large: `x^y = e^(y ln x)` amplifies an error of `ln x` by `|y ln x|`;
//! - the result scaled by `2^k` in two factors, so that a subnormal result is rounded once.
//!
//! The polynomials are truncated Taylor series, longer than fdlibm's minimax
//! ones (whose coefficients are not used here), evaluated by Horner's rule with fused
//! multiply-adds. The special values follow Rust's `std` (C99's `exp`, `log`, `pow`, ...). The
//! errors measured against `std` are in docs/kernel-language.md; `tests/body_language.rs` checks
//! them.

use crate::body::Method;
use crate::builder::KernelBuilder;
use crate::ir::{BinOp, Cmp, Op, Operand, Reg, Rounding, Type, UnOp};

const F: Type = Type::F64;

/// ln 2 in two parts: the first has 21 trailing zero bits (32 significant ones), so
/// `k · LN2_HI` is exact for any integer `|k| < 2^21`.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// ln 2 rounded, and what is left of it.
const LN2: f64 = std::f64::consts::LN_2;
const LN2_TAIL: f64 = 2.319_046_813_846_299_6e-17;
/// What is left of log2 e after its rounding.
const LOG2_E_TAIL: f64 = 2.035_527_374_093_103_2e-17;
/// π/2 in three parts whose sum is π/2 to about 160 bits.
const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5444_2d18);
const PIO2_2: f64 = f64::from_bits(0x3c91_a626_3314_5c07);
const PIO2_3: f64 = f64::from_bits(0xb91f_1976_b7ed_8fbc);

/// The body's `f64` transcendental `m` of `x` (and `y` for `powf`).
pub fn call(b: &mut KernelBuilder, m: Method, x: Reg, y: Option<Reg>) -> Reg {
    match (m, y) {
        (Method::Exp, _) => exp(b, x),
        (Method::Exp2, _) => exp2(b, x),
        (Method::Ln, _) => ln(b, x),
        (Method::Log2, _) => log2(b, x),
        (Method::Powf, Some(y)) => powf(b, x, y),
        (Method::Sin, _) => sin_cos(b, x, false),
        (Method::Cos, _) => sin_cos(b, x, true),
        _ => tanh(b, x),
    }
}

fn c(x: f64) -> Operand {
    Operand::F64(x.to_bits())
}

fn fma(
    b: &mut KernelBuilder,
    x: impl Into<Operand>,
    y: impl Into<Operand>,
    z: impl Into<Operand>,
) -> Reg {
    let dst = b.reg_for(F);
    b.emit(Op::Fma {
        ty: F,
        dst,
        a: x.into(),
        b: y.into(),
        c: z.into(),
    });
    dst
}

fn mul(b: &mut KernelBuilder, x: impl Into<Operand>, y: impl Into<Operand>) -> Reg {
    b.bin(BinOp::Mul, F, x, y)
}

fn add(b: &mut KernelBuilder, x: impl Into<Operand>, y: impl Into<Operand>) -> Reg {
    b.bin(BinOp::Add, F, x, y)
}

fn sub(b: &mut KernelBuilder, x: impl Into<Operand>, y: impl Into<Operand>) -> Reg {
    b.bin(BinOp::Sub, F, x, y)
}

/// `pred ? a : other`.
fn pick(b: &mut KernelBuilder, pred: Reg, a: impl Into<Operand>, other: Reg) -> Reg {
    b.selp(F, a, other, pred)
}

/// `Σ coeffs[i] · x^i` by Horner's rule.
fn horner(b: &mut KernelBuilder, x: Reg, coeffs: &[f64]) -> Reg {
    let (&last, rest) = coeffs.split_last().expect("a polynomial has coefficients");
    let mut acc = b.mov(F, c(last));
    for &k in rest.iter().rev() {
        acc = fma(b, acc, x, c(k));
    }
    acc
}

/// `1 / n!`, rounded once from the exact product (below 2^53, so exact up to 18!).
fn inv_factorial(n: u32) -> f64 {
    1.0 / (1..=n).map(f64::from).product::<f64>()
}

/// `2^e` for an integer `e` (s32) in `[-1022, 1023]`, from its bits.
fn pow2(b: &mut KernelBuilder, e: Reg) -> Reg {
    let biased = b.bin(BinOp::Add, Type::S32, e, Operand::Imm(1023));
    let wide = b.cvt(Rounding::None, Type::U64, Type::S32, biased);
    let bits = b.bin(BinOp::Shl, Type::B64, wide, Operand::Imm(52));
    let f = b.reg_for(F);
    b.mov_to(Type::B64, f, bits);
    f
}

/// `p · 2^k` for `k` an integer-valued f64 in `[-1100, 1100]`: two factors `2^⌊k/2⌋` and
/// `2^(k - ⌊k/2⌋)`, both normal, so a result that overflows is infinite and one in the
/// subnormal range is rounded once, by the second product.
fn scale(b: &mut KernelBuilder, p: Reg, k: Reg) -> Reg {
    let ki = b.cvt(Rounding::Rzi, Type::S32, F, k);
    let k1 = b.bin(BinOp::Shr, Type::S32, ki, Operand::Imm(1));
    let k2 = b.bin(BinOp::Sub, Type::S32, ki, k1);
    let f1 = pow2(b, k1);
    let f2 = pow2(b, k2);
    let t = mul(b, p, f1);
    mul(b, t, f2)
}

/// `e^r` for `|r| ≤ ln 2 / 2`: Taylor to `r^15 / 15!`, whose first neglected term is below
/// `2^-68` relative.
fn exp_poly(b: &mut KernelBuilder, r: Reg) -> Reg {
    let coeffs: Vec<f64> = (0..=15).map(inv_factorial).collect();
    horner(b, r, &coeffs)
}

/// `x != x`.
fn is_nan(b: &mut KernelBuilder, x: Reg) -> Reg {
    b.setp(Cmp::Neu, F, x, x)
}

/// `e^x`. Arguments past the range where the result is finite and nonzero are clamped (the
/// clamped ones overflow to infinity or round to zero in `scale`); a NaN stays NaN.
pub fn exp(b: &mut KernelBuilder, x: Reg) -> Reg {
    let xc = b.bin(BinOp::Min, F, x, c(710.0));
    let xc = b.bin(BinOp::Max, F, xc, c(-746.0));
    let t = mul(b, xc, c(std::f64::consts::LOG2_E));
    let k = b.cvt(Rounding::Rni, F, F, t);
    let nk = b.un(UnOp::Neg, F, k);
    let r = fma(b, nk, c(LN2_HI), xc);
    let r = fma(b, nk, c(LN2_LO), r);
    let p = exp_poly(b, r);
    let res = scale(b, p, k);
    let nan = is_nan(b, x);
    pick(b, nan, x, res)
}

/// `2^x`: `x = k + r`, `|r| ≤ 1/2` exactly, and `2^r = e^(r ln 2)` with the product's rounding
/// and the rest of ln 2 added back to first order.
pub fn exp2(b: &mut KernelBuilder, x: Reg) -> Reg {
    let xc = b.bin(BinOp::Min, F, x, c(1025.0));
    let xc = b.bin(BinOp::Max, F, xc, c(-1076.0));
    let k = b.cvt(Rounding::Rni, F, F, xc);
    let r = sub(b, xc, k);
    let t = mul(b, r, c(LN2));
    let nt = b.un(UnOp::Neg, F, t);
    let corr = fma(b, r, c(LN2), nt);
    let corr = fma(b, r, c(LN2_TAIL), corr);
    let p = exp_poly(b, t);
    let p = fma(b, p, corr, p);
    let res = scale(b, p, k);
    let nan = is_nan(b, x);
    pick(b, nan, x, res)
}

/// `ln x` as `hi + lo` (|lo| ≤ half an ulp of `hi`; about 2^-61 relative) for a finite `x > 0`,
/// and `dk`, `x`'s binary exponent (with the mantissa `m` in `[√2/2, √2)`), and `ln m` as
/// `ln_m + ln_m_lo`, for `log2`. Other arguments give garbage that the callers replace.
struct LnParts {
    hi: Reg,
    lo: Reg,
    dk: Reg,
    ln_m: Reg,
    ln_m_lo: Reg,
}

fn ln_parts(b: &mut KernelBuilder, x: Reg) -> LnParts {
    // Subnormals: scaled into the normal range first.
    let tiny = b.setp(Cmp::Lt, F, x, c(f64::MIN_POSITIVE));
    let scaled = mul(b, x, c(2f64.powi(54)));
    let xs = pick(b, tiny, scaled, x);
    let bits = b.mov(Type::B64, xs);
    let ebits = b.bin(BinOp::Shr, Type::U64, bits, Operand::Imm(52));
    let ebits = b.bin(BinOp::And, Type::B64, ebits, Operand::Imm(0x7ff));
    let e = b.cvt(Rounding::None, Type::S32, Type::U64, ebits);
    let bias = b.selp(Type::S32, Operand::Imm(1023 + 54), Operand::Imm(1023), tiny);
    let e = b.bin(BinOp::Sub, Type::S32, e, bias);
    let mbits = b.bin(
        BinOp::And,
        Type::B64,
        bits,
        Operand::Imm(0x000f_ffff_ffff_ffff),
    );
    let mbits = b.bin(
        BinOp::Or,
        Type::B64,
        mbits,
        Operand::Imm(0x3ff0_0000_0000_0000),
    );
    let m = b.reg_for(F);
    b.mov_to(Type::B64, m, mbits);
    let big = b.setp(Cmp::Gt, F, m, c(std::f64::consts::SQRT_2));
    let half = mul(b, m, c(0.5));
    let m = pick(b, big, half, m);
    let up = b.selp(Type::S32, Operand::Imm(1), Operand::Imm(0), big);
    let e = b.bin(BinOp::Add, Type::S32, e, up);
    let dk = b.cvt(Rounding::Rn, F, Type::S32, e);
    // m ∈ [√2/2, √2): f = m - 1 is exact, and so is 2 + f as u + u_lo.
    let f = sub(b, m, c(1.0));
    let two = b.mov(F, c(2.0));
    let (u, u_lo) = fast_two_sum(b, two, f);
    // s = f / (2 + f) as s + s_lo: the rounding of s alone would cost ln up to 2^-57.
    let s = b.bin(BinOp::Div, F, f, u);
    let ns = b.un(UnOp::Neg, F, s);
    let rem = fma(b, ns, u, f);
    let rem = fma(b, ns, u_lo, rem);
    let s_lo = b.bin(BinOp::Div, F, rem, u);
    let z = mul(b, s, s);
    // 2 atanh(s) = 2s + s·z·(2/3 + 2z/5 + ...) with z = s² ≤ 0.0295: to z^14, the first
    // neglected term below 2^-80 relative.
    let coeffs: Vec<f64> = (1..=14).map(|j| 2.0 / f64::from(2 * j + 1)).collect();
    let poly = horner(b, z, &coeffs);
    let r = mul(b, z, poly);
    // ln(1 + f) = f - f²/2 + s·(f²/2 + R), with f²/2 = hf + hf_err exactly and the last
    // product in two parts.
    let half_f = mul(b, f, c(0.5));
    let hf = mul(b, half_f, f);
    let neg_hf = b.un(UnOp::Neg, F, hf);
    let hf_err = fma(b, half_f, f, neg_hf);
    let (a_hi, a_lo) = two_sum(b, hf, r);
    let a_lo = add(b, a_lo, hf_err);
    let t_hi = mul(b, s, a_hi);
    let nt = b.un(UnOp::Neg, F, t_hi);
    let t_err = fma(b, s, a_hi, nt);
    let t_lo = mul(b, s_lo, a_hi);
    let t_lo = fma(b, s, a_lo, t_lo);
    let t_lo = add(b, t_lo, t_err);
    let (bb, bb_err) = two_sum(b, f, neg_hf);
    // ln m = (bb + t_hi) + (bb_err - hf_err + t_lo).
    let (m1, m_err) = two_sum(b, bb, t_hi);
    let m_lo = add(b, m_err, bb_err);
    let m_lo = sub(b, m_lo, hf_err);
    let m_lo = add(b, m_lo, t_lo);
    let (ln_m, ln_m_lo) = fast_two_sum(b, m1, m_lo);
    // ln x = dk · ln2_hi (exact) + ln m + dk · ln2_lo.
    let a = mul(b, dk, c(LN2_HI));
    let (hi, hi_err) = two_sum(b, a, ln_m);
    let dk_lo = mul(b, dk, c(LN2_LO));
    let lo = add(b, hi_err, ln_m_lo);
    let lo = add(b, lo, dk_lo);
    let (hi, lo) = fast_two_sum(b, hi, lo);
    LnParts {
        hi,
        lo,
        dk,
        ln_m,
        ln_m_lo,
    }
}

/// `(s, e)` with `s = a + b` rounded and `s + e = a + b` exactly (Knuth).
fn two_sum(b: &mut KernelBuilder, x: Reg, y: Reg) -> (Reg, Reg) {
    let s = add(b, x, y);
    let v = sub(b, s, x);
    let sv = sub(b, s, v);
    let ex = sub(b, x, sv);
    let ey = sub(b, y, v);
    (s, add(b, ex, ey))
}

/// [`two_sum`] when `|x| ≥ |y|` or `x` is 0 (Dekker).
fn fast_two_sum(b: &mut KernelBuilder, x: Reg, y: Reg) -> (Reg, Reg) {
    let s = add(b, x, y);
    let v = sub(b, s, x);
    (s, sub(b, y, v))
}

/// Rust's special values of `ln` and `log2`: -∞ at ±0, NaN below 0, +∞ at +∞, NaN at NaN.
fn log_specials(b: &mut KernelBuilder, x: Reg, res: Reg) -> Reg {
    let zero = b.setp(Cmp::Eq, F, x, c(0.0));
    let res = pick(b, zero, c(f64::NEG_INFINITY), res);
    let negative = b.setp(Cmp::Lt, F, x, c(0.0));
    let res = pick(b, negative, c(f64::NAN), res);
    let inf = b.setp(Cmp::Eq, F, x, c(f64::INFINITY));
    let res = pick(b, inf, c(f64::INFINITY), res);
    let nan = is_nan(b, x);
    pick(b, nan, x, res)
}

/// `ln x`.
pub fn ln(b: &mut KernelBuilder, x: Reg) -> Reg {
    let p = ln_parts(b, x);
    let res = add(b, p.hi, p.lo);
    log_specials(b, x, res)
}

/// `log2 x = k + ln(m) · log2 e`, the product in two parts: exact at powers of two.
pub fn log2(b: &mut KernelBuilder, x: Reg) -> Reg {
    let p = ln_parts(b, x);
    let l2e = c(std::f64::consts::LOG2_E);
    let q = mul(b, p.ln_m, l2e.clone());
    let nq = b.un(UnOp::Neg, F, q);
    let q_err = fma(b, p.ln_m, l2e.clone(), nq);
    let q_lo = fma(b, p.ln_m, c(LOG2_E_TAIL), q_err);
    let q_lo = fma(b, p.ln_m_lo, l2e, q_lo);
    let (s, s_err) = two_sum(b, p.dk, q);
    let lo = add(b, s_err, q_lo);
    let res = add(b, s, lo);
    log_specials(b, x, res)
}

/// `x^y = e^(y ln |x|)` with `y · ln |x|` in two parts, and Rust's (C99's) special cases:
/// `x^0 = 1` and `1^y = 1` even for a NaN, `(-1)^±∞ = 1`, a negative `x` gives NaN unless `y`
/// is an integer (odd integers keep the sign, also of `-0` and `-∞`).
pub fn powf(b: &mut KernelBuilder, x: Reg, y: Reg) -> Reg {
    let ax = b.un(UnOp::Abs, F, x);
    let l = ln_parts(b, ax);
    let lhi = log_specials(b, ax, l.hi);
    // lo only where ln |x| is finite and nonzero.
    let finite = b.setp(Cmp::Lt, F, ax, c(f64::INFINITY));
    let positive = b.setp(Cmp::Gt, F, ax, c(0.0));
    let usable = b.bin(BinOp::And, Type::Pred, finite, positive);
    let lo = b.selp(F, l.lo, c(0.0), usable);
    let t = mul(b, y, lhi);
    let nt = b.un(UnOp::Neg, F, t);
    let t_err = fma(b, y, lhi, nt);
    let t_lo = fma(b, y, lo, t_err);
    // The correction only where `t` (so `t_lo`) and `e` are finite: an infinite `e` times a
    // small `t_lo` added to itself could be NaN.
    let at = b.un(UnOp::Abs, F, t);
    let t_finite = b.setp(Cmp::Lt, F, at, c(1e300));
    let e = exp(b, t);
    let e_finite = b.setp(Cmp::Lt, F, e, c(f64::INFINITY));
    let bounded = b.bin(BinOp::And, Type::Pred, t_finite, e_finite);
    let corrected = fma(b, e, t_lo, e);
    let res = pick(b, bounded, corrected, e);
    // Sign and NaN of a negative base.
    let whole = b.cvt(Rounding::Rzi, F, F, y);
    let integer = b.setp(Cmp::Eq, F, whole, y);
    let half = mul(b, y, c(0.5));
    let half_whole = b.cvt(Rounding::Rzi, F, F, half);
    let odd_half = b.setp(Cmp::Ne, F, half_whole, half);
    let odd = b.bin(BinOp::And, Type::Pred, integer, odd_half);
    let xbits = b.mov(Type::B64, x);
    let sign = b.setp(Cmp::Lt, Type::S64, xbits, Operand::Imm(0));
    let flip = b.bin(BinOp::And, Type::Pred, sign, odd);
    let neg = b.un(UnOp::Neg, F, res);
    let res = pick(b, flip, neg, res);
    let below = b.setp(Cmp::Lt, F, x, c(0.0));
    let not_minf = b.setp(Cmp::Ne, F, x, c(f64::NEG_INFINITY));
    let fraction = b.setp(Cmp::Ne, F, whole, y);
    let undefined = b.bin(BinOp::And, Type::Pred, below, not_minf);
    let undefined = b.bin(BinOp::And, Type::Pred, undefined, fraction);
    let res = pick(b, undefined, c(f64::NAN), res);
    let ay = b.un(UnOp::Abs, F, y);
    let minus_one = b.setp(Cmp::Eq, F, x, c(-1.0));
    let infinite_y = b.setp(Cmp::Eq, F, ay, c(f64::INFINITY));
    let one_anyway = b.bin(BinOp::And, Type::Pred, minus_one, infinite_y);
    let res = pick(b, one_anyway, c(1.0), res);
    let unit_base = b.setp(Cmp::Eq, F, x, c(1.0));
    let res = pick(b, unit_base, c(1.0), res);
    let zero_exp = b.setp(Cmp::Eq, F, y, c(0.0));
    pick(b, zero_exp, c(1.0), res)
}

/// `sin x` (`cos` false) or `cos x`: `x = q π/2 + r`, then `±sin r` or `±cos r` by `q mod 4`.
pub fn sin_cos(b: &mut KernelBuilder, x: Reg, cos: bool) -> Reg {
    let t = mul(b, x, c(std::f64::consts::FRAC_2_PI));
    let q = b.cvt(Rounding::Rni, F, F, t);
    let nq = b.un(UnOp::Neg, F, q);
    let r = fma(b, nq, c(PIO2_1), x);
    let r = fma(b, nq, c(PIO2_2), r);
    let r = fma(b, nq, c(PIO2_3), r);
    let z = mul(b, r, r);
    // sin r = r + r³ (-1/3! + z/5! - ...) to r^17, cos r = 1 - z/2! + ... to r^18: on
    // |r| ≤ π/4 the first neglected terms are below 2^-62 relative.
    let sin_coeffs: Vec<f64> = (1..=8)
        .map(|j| {
            let v = inv_factorial(2 * j + 1);
            if j % 2 == 1 {
                -v
            } else {
                v
            }
        })
        .collect();
    let cos_coeffs: Vec<f64> = (0..=9)
        .map(|j| {
            let v = inv_factorial(2 * j);
            if j % 2 == 1 {
                -v
            } else {
                v
            }
        })
        .collect();
    let sp = horner(b, z, &sin_coeffs);
    let r3 = mul(b, r, z);
    let sr = fma(b, r3, sp, r);
    let cr = horner(b, z, &cos_coeffs);
    let qi = b.cvt(Rounding::Rzi, Type::S64, F, q);
    let qi = if cos {
        b.bin(BinOp::Add, Type::S64, qi, Operand::Imm(1))
    } else {
        qi
    };
    let odd_bit = b.bin(BinOp::And, Type::B64, qi, Operand::Imm(1));
    let odd = b.setp(Cmp::Ne, Type::U64, odd_bit, Operand::Imm(0));
    let neg_bit = b.bin(BinOp::And, Type::B64, qi, Operand::Imm(2));
    let negative = b.setp(Cmp::Ne, Type::U64, neg_bit, Operand::Imm(0));
    // sin: q = 0, 1, 2, 3 → sin r, cos r, -sin r, -cos r; cos x = sin(x + π/2): q + 1.
    let v = pick(b, odd, cr, sr);
    let nv = b.un(UnOp::Neg, F, v);
    let res = pick(b, negative, nv, v);
    // Past |x| = 2^20 the three parts of π/2 no longer reduce exactly, and past about 2^60 the
    // reduced argument is not small: the result is kept in [-1, 1] (NaN for ±∞ and NaN).
    let res = b.bin(BinOp::Min, F, res, c(1.0));
    let res = b.bin(BinOp::Max, F, res, c(-1.0));
    let ax = b.un(UnOp::Abs, F, x);
    let finite = b.setp(Cmp::Lt, F, ax, c(f64::INFINITY));
    let res = b.selp(F, res, c(f64::NAN), finite);
    if cos {
        res
    } else {
        // sin(±0) = ±0 (the polynomial's sum would give +0 for -0).
        let zero = b.setp(Cmp::Eq, F, x, c(0.0));
        pick(b, zero, x, res)
    }
}

/// `tanh x`: `expm1(2|x|) / (expm1(2|x|) + 2)` below |x| = 0.55 (no cancellation; `expm1` by
/// its Taylor series to `u^21`), `1 - 2 / (e^(2|x|) + 1)` above, with `x`'s sign.
pub fn tanh(b: &mut KernelBuilder, x: Reg) -> Reg {
    let a = b.un(UnOp::Abs, F, x);
    let u = add(b, a, a);
    let coeffs: Vec<f64> = (1..=21).map(inv_factorial).collect();
    let p = horner(b, u, &coeffs);
    let em = mul(b, u, p);
    let em2 = add(b, em, c(2.0));
    let small_t = b.bin(BinOp::Div, F, em, em2);
    let e = exp(b, u);
    let e1 = add(b, e, c(1.0));
    let q = b.bin(BinOp::Div, F, c(2.0), e1);
    let large_t = sub(b, c(1.0), q);
    let small = b.setp(Cmp::Lt, F, a, c(0.55));
    let t = pick(b, small, small_t, large_t);
    let negative = b.setp(Cmp::Lt, F, x, c(0.0));
    let nt = b.un(UnOp::Neg, F, t);
    let res = pick(b, negative, nt, t);
    let zero = b.setp(Cmp::Eq, F, x, c(0.0));
    pick(b, zero, x, res)
}
