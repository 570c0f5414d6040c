//! Conversions between lb's host formats and those of `sprs` (feature `sprs`) and
//! `nalgebra-sparse` (feature `nalgebra-sparse`).
//!
//! Every conversion validates: into lb, indices must fit lb's u32 indices and the arrays must
//! form a valid matrix (`Csr::new` and friends); out of lb, the matrix must be valid, rows
//! (columns) are sorted where lb left them unsorted, and a repeated index is an error, since both
//! libraries require unique sorted indices (`Csr::from_triplets` sums duplicates). Failures are
//! [`Error::InvalidMatrix`]; a conversion never panics.

use crate::error::{Error, Result};

fn invalid(msg: String) -> Error {
    Error::InvalidMatrix(msg)
}

/// `usize` indices as lb's u32 ones; `what` names them in the error.
fn to_u32(indices: &[usize], what: &str) -> Result<Vec<u32>> {
    indices
        .iter()
        .enumerate()
        .map(|(e, &i)| {
            u32::try_from(i).map_err(|_| {
                invalid(format!(
                    "{what} {i} (entry {e}) exceeds the u32 index range of lb's formats"
                ))
            })
        })
        .collect()
}

/// The minor indices (as usize) and values of a compressed matrix with each major slice sorted
/// by index (stably, keeping lb's order among equals); a repeated index is an error naming the
/// `major` (row or column) at fault.
fn sorted_unique<T: Clone>(
    offsets: &[usize],
    indices: &[u32],
    values: &[T],
    major: &str,
) -> Result<(Vec<usize>, Vec<T>)> {
    let mut out_indices = Vec::with_capacity(indices.len());
    let mut out_values = Vec::with_capacity(values.len());
    let mut order: Vec<usize> = Vec::new();
    for (m, w) in offsets.windows(2).enumerate() {
        order.clear();
        order.extend(w[0]..w[1]);
        order.sort_by_key(|&e| indices[e]);
        for (k, &e) in order.iter().enumerate() {
            if k > 0 && indices[order[k - 1]] == indices[e] {
                return Err(invalid(format!(
                    "{major} {m} holds index {} twice: sprs and nalgebra-sparse need unique \
                     indices (sum duplicates first, as Csr::from_triplets does)",
                    indices[e]
                )));
            }
            out_indices.push(indices[e] as usize);
            out_values.push(values[e].clone());
        }
    }
    Ok((out_indices, out_values))
}

/// A COO's entries as (rows, cols, values) sorted by row, stably (the order lb's `Coo`
/// requires), from triplets in any order; indices must fit u32.
fn coo_from_triplets<T: Clone>(
    shape: (usize, usize),
    rows: &[usize],
    cols: &[usize],
    values: &[T],
) -> Result<crate::Coo<T>> {
    if rows.len() != cols.len() || rows.len() != values.len() {
        return Err(invalid(format!(
            "{} row indices, {} column indices and {} values: the lengths must agree",
            rows.len(),
            cols.len(),
            values.len()
        )));
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&e| rows[e]);
    let pick = |idx: &[usize]| order.iter().map(|&e| idx[e]).collect::<Vec<_>>();
    crate::Coo::new(
        shape.0,
        shape.1,
        to_u32(&pick(rows), "row index")?,
        to_u32(&pick(cols), "column index")?,
        order.iter().map(|&e| values[e].clone()).collect(),
    )
}

#[cfg(feature = "sprs")]
mod with_sprs {
    use sprs::{CsMat, TriMat};

    use super::{coo_from_triplets, invalid, sorted_unique, to_u32};
    use crate::error::{Error, Result};
    use crate::{Coo, Csc, Csr};

    /// The proper offsets of a sprs matrix (sprs may store a slice of a larger matrix).
    fn offsets<T>(m: &CsMat<T>) -> Vec<usize> {
        m.indptr().to_proper().into_owned()
    }

    /// sprs's structure error as lb's.
    fn refused(e: sprs::errors::StructureError) -> Error {
        invalid(format!("sprs refused the matrix: {e}"))
    }

    /// A CSR or CSC `CsMat` as a `Csr` (a CSC one is converted).
    impl<T: Clone> TryFrom<&CsMat<T>> for Csr<T> {
        type Error = Error;
        fn try_from(m: &CsMat<T>) -> Result<Csr<T>> {
            if m.is_csr() {
                let cols = to_u32(m.indices(), "column index")?;
                Csr::new(m.rows(), m.cols(), offsets(m), cols, m.data().to_vec())
            } else {
                Csc::try_from(m)?.to_csr()
            }
        }
    }

    /// A CSR or CSC `CsMat` as a `Csc` (a CSR one is converted).
    impl<T: Clone> TryFrom<&CsMat<T>> for Csc<T> {
        type Error = Error;
        fn try_from(m: &CsMat<T>) -> Result<Csc<T>> {
            if m.is_csr() {
                Csr::try_from(m)?.to_csc()
            } else {
                let rows = to_u32(m.indices(), "row index")?;
                Csc::new(m.rows(), m.cols(), offsets(m), rows, m.data().to_vec())
            }
        }
    }

    /// A CSR `CsMat`, each row sorted by column.
    impl<T: Clone> TryFrom<&Csr<T>> for CsMat<T> {
        type Error = Error;
        fn try_from(m: &Csr<T>) -> Result<CsMat<T>> {
            m.validate()?;
            let (cols, values) = sorted_unique(&m.row_offsets, &m.col_indices, &m.values, "row")?;
            CsMat::try_new(
                (m.num_rows, m.num_cols),
                m.row_offsets.clone(),
                cols,
                values,
            )
            .map_err(|(_, _, _, e)| refused(e))
        }
    }

    /// A CSC `CsMat`, each column sorted by row.
    impl<T: Clone> TryFrom<&Csc<T>> for CsMat<T> {
        type Error = Error;
        fn try_from(m: &Csc<T>) -> Result<CsMat<T>> {
            m.validate()?;
            let (rows, values) =
                sorted_unique(&m.col_offsets, &m.row_indices, &m.values, "column")?;
            CsMat::try_new_csc(
                (m.num_rows, m.num_cols),
                m.col_offsets.clone(),
                rows,
                values,
            )
            .map_err(|(_, _, _, e)| refused(e))
        }
    }

    /// Triplets in any order (duplicates kept), sorted by row as `Coo` requires.
    impl<T: Clone> TryFrom<&TriMat<T>> for Coo<T> {
        type Error = Error;
        fn try_from(m: &TriMat<T>) -> Result<Coo<T>> {
            coo_from_triplets(m.shape(), m.row_inds(), m.col_inds(), m.data())
        }
    }

    /// The same triplets, in the same order.
    impl<T: Clone> TryFrom<&Coo<T>> for TriMat<T> {
        type Error = Error;
        fn try_from(m: &Coo<T>) -> Result<TriMat<T>> {
            // `TriMat::from_triplets` panics on indices outside the shape: validate first.
            m.validate()?;
            Ok(TriMat::from_triplets(
                (m.num_rows, m.num_cols),
                m.row_indices.iter().map(|&r| r as usize).collect(),
                m.col_indices.iter().map(|&c| c as usize).collect(),
                m.values.clone(),
            ))
        }
    }
}

#[cfg(feature = "nalgebra-sparse")]
mod with_nalgebra_sparse {
    use nalgebra_sparse::{CooMatrix, CscMatrix, CsrMatrix};

    use super::{coo_from_triplets, invalid, sorted_unique, to_u32};
    use crate::error::{Error, Result};
    use crate::{Coo, Csc, Csr};

    /// nalgebra-sparse's format error as lb's.
    fn refused(e: nalgebra_sparse::SparseFormatError) -> Error {
        invalid(format!("nalgebra-sparse refused the matrix: {e}"))
    }

    impl<T: Clone> TryFrom<&CsrMatrix<T>> for Csr<T> {
        type Error = Error;
        fn try_from(m: &CsrMatrix<T>) -> Result<Csr<T>> {
            let (offsets, cols, values) = m.csr_data();
            let cols = to_u32(cols, "column index")?;
            Csr::new(
                m.nrows(),
                m.ncols(),
                offsets.to_vec(),
                cols,
                values.to_vec(),
            )
        }
    }

    /// Each row sorted by column.
    impl<T: Clone> TryFrom<&Csr<T>> for CsrMatrix<T> {
        type Error = Error;
        fn try_from(m: &Csr<T>) -> Result<CsrMatrix<T>> {
            m.validate()?;
            let (cols, values) = sorted_unique(&m.row_offsets, &m.col_indices, &m.values, "row")?;
            CsrMatrix::try_from_csr_data(
                m.num_rows,
                m.num_cols,
                m.row_offsets.clone(),
                cols,
                values,
            )
            .map_err(refused)
        }
    }

    impl<T: Clone> TryFrom<&CscMatrix<T>> for Csc<T> {
        type Error = Error;
        fn try_from(m: &CscMatrix<T>) -> Result<Csc<T>> {
            let (offsets, rows, values) = m.csc_data();
            let rows = to_u32(rows, "row index")?;
            Csc::new(
                m.nrows(),
                m.ncols(),
                offsets.to_vec(),
                rows,
                values.to_vec(),
            )
        }
    }

    /// Each column sorted by row.
    impl<T: Clone> TryFrom<&Csc<T>> for CscMatrix<T> {
        type Error = Error;
        fn try_from(m: &Csc<T>) -> Result<CscMatrix<T>> {
            m.validate()?;
            let (rows, values) =
                sorted_unique(&m.col_offsets, &m.row_indices, &m.values, "column")?;
            CscMatrix::try_from_csc_data(
                m.num_rows,
                m.num_cols,
                m.col_offsets.clone(),
                rows,
                values,
            )
            .map_err(refused)
        }
    }

    /// Triplets in any order (duplicates kept), sorted by row as `Coo` requires.
    impl<T: Clone> TryFrom<&CooMatrix<T>> for Coo<T> {
        type Error = Error;
        fn try_from(m: &CooMatrix<T>) -> Result<Coo<T>> {
            coo_from_triplets(
                (m.nrows(), m.ncols()),
                m.row_indices(),
                m.col_indices(),
                m.values(),
            )
        }
    }

    /// The same triplets, in the same order.
    impl<T: Clone> TryFrom<&Coo<T>> for CooMatrix<T> {
        type Error = Error;
        fn try_from(m: &Coo<T>) -> Result<CooMatrix<T>> {
            m.validate()?;
            CooMatrix::try_from_triplets(
                m.num_rows,
                m.num_cols,
                m.row_indices.iter().map(|&r| r as usize).collect(),
                m.col_indices.iter().map(|&c| c as usize).collect(),
                m.values.clone(),
            )
            .map_err(refused)
        }
    }
}
