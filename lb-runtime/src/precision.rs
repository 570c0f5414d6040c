//! Half-precision elements: `half::f16` and `half::bf16` hold values in 16 bits in memory and
//! kernels compute with them in f32 (a load widens exactly, a store rounds to nearest even).
//! The CPU reference of a kernel with half-precision parameters runs the same f32 function on
//! widened copies and rounds what it writes back the same way, through the `half` crate's
//! IEEE conversions, so it computes what the GPU computes.

use crate::buffer::Element;
use crate::{Coo, Csc, Csr};

/// A 16-bit float element type: `half::f16` or `half::bf16`.
pub trait HalfElement: Element {
    /// The exact `f32` of this value.
    fn to_f32(self) -> f32;
    /// `value` rounded to nearest, ties to even (overflow gives infinity, NaN stays NaN).
    fn from_f32(value: f32) -> Self;
}

impl HalfElement for half::f16 {
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn from_f32(value: f32) -> Self {
        half::f16::from_f32(value)
    }
}

impl HalfElement for half::bf16 {
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
    fn from_f32(value: f32) -> Self {
        half::bf16::from_f32(value)
    }
}

/// The exact `f32` values of `values` (what a kernel computes with, and what the CPU reference
/// of a kernel with half-precision inputs runs on).
pub fn widen<H: HalfElement>(values: &[H]) -> Vec<f32> {
    values.iter().map(|&v| v.to_f32()).collect()
}

/// `values` rounded to nearest even (`lb::narrowed::<f16>(&x)`).
pub fn narrowed<H: HalfElement>(values: &[f32]) -> Vec<H> {
    values.iter().map(|&v| H::from_f32(v)).collect()
}

/// Rounds `wide` into `out` to nearest even, element by element (as a kernel's store does, and
/// the CPU reference's write-back).
pub fn narrow_into<H: HalfElement>(wide: &[f32], out: &mut [H]) {
    for (o, &w) in out.iter_mut().zip(wide) {
        // An element whose widened value is unchanged keeps its bits, as an element a kernel
        // never stores to does (a signaling NaN would come back quiet from a round trip).
        if w.to_bits() != o.to_f32().to_bits() {
            *o = H::from_f32(w);
        }
    }
}

impl<T: Copy> Csr<T> {
    /// The same matrix with every value mapped by `f`, e.g. `a.map_values(f16::from_f32)` for
    /// half-precision values.
    pub fn map_values<U>(&self, f: impl FnMut(T) -> U) -> Csr<U> {
        Csr {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            row_offsets: self.row_offsets.clone(),
            col_indices: self.col_indices.clone(),
            values: self.values.iter().copied().map(f).collect(),
        }
    }
}

impl<T: Copy> Csc<T> {
    /// The same matrix with every value mapped by `f`.
    pub fn map_values<U>(&self, f: impl FnMut(T) -> U) -> Csc<U> {
        Csc {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            col_offsets: self.col_offsets.clone(),
            row_indices: self.row_indices.clone(),
            values: self.values.iter().copied().map(f).collect(),
        }
    }
}

impl<T: Copy> Coo<T> {
    /// The same matrix with every value mapped by `f`.
    pub fn map_values<U>(&self, f: impl FnMut(T) -> U) -> Coo<U> {
        Coo {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            row_indices: self.row_indices.clone(),
            col_indices: self.col_indices.clone(),
            values: self.values.iter().copied().map(f).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn widening_is_exact_and_narrowing_rounds_to_nearest_even() {
        let h = [f16::from_f32(1.5), f16::MAX, f16::from_bits(1)];
        let w = widen(&h);
        assert_eq!(w, [1.5, 65504.0, 2f32.powi(-24)]);
        let mut back = [f16::ZERO; 3];
        // 1 + 2^-11 is halfway between 1 and the next f16: ties go to the even 1.
        narrow_into(&[1.0 + 2f32.powi(-11), 1e6, -0.0], &mut back);
        assert_eq!(back, [f16::ONE, f16::INFINITY, f16::NEG_ZERO]);
        // What the reference did not change keeps its bits: a signaling NaN stays signaling.
        let mut nan = [f16::from_bits(0x7c01)];
        narrow_into(&widen(&nan), &mut nan);
        assert_eq!(nan[0].to_bits(), 0x7c01);
        let mut b = [bf16::ZERO; 1];
        narrow_into(&[1.0 + 2f32.powi(-8)], &mut b);
        assert_eq!(b[0], bf16::ONE);
    }

    #[test]
    fn matrix_market_values_round_once_from_their_decimal() {
        let text = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 0.1\n2 2 1e6\n";
        let a = crate::mtx::parse_mtx::<f16>(text).unwrap();
        assert_eq!(a.values, [f16::from_f64(0.1), f16::INFINITY]);
        let b = crate::mtx::parse_mtx::<bf16>(text).unwrap();
        assert_eq!(b.values, [bf16::from_f64(0.1), bf16::from_f64(1e6)]);
    }
}
