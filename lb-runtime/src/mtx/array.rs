//! Array files: dense matrices and vectors (right-hand sides, initial guesses), one value a line
//! in column-major order.

use super::lex::{self, Lines};
use super::{err, read_size_line, Banner, Field, MtxValue};
use crate::error::Result;

/// The fewest bytes a value line takes: one digit and its newline.
const MIN_VALUE_BYTES: usize = 2;

/// A dense matrix read from an `array` file, stored column-major as the file lists it: the value
/// at row `i`, column `j` (0-based) is `values[i + j * num_rows]`. A vector is an `n × 1` matrix,
/// so its `values` are the vector.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMatrix<T> {
    pub num_rows: usize,
    pub num_cols: usize,
    pub values: Vec<T>,
}

impl<T: Copy> DenseMatrix<T> {
    /// The value at row `i`, column `j`; `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<T> {
        if i >= self.num_rows || j >= self.num_cols {
            return None;
        }
        self.values.get(i + j * self.num_rows).copied()
    }
}

/// Parses the size line and the values after the banner (`lines` run over `text` after it).
pub(super) fn parse<'a, T: MtxValue>(
    text: &'a [u8],
    banner: Banner,
    lines: Lines<'a>,
) -> Result<DenseMatrix<T>> {
    let size = read_size_line(text, lines, &["row count", "column count"], "rows cols")?;
    let (rows, cols) = (size.dims[0], size.dims[1]);
    if banner.symmetric && rows != cols {
        return Err(err(
            size.line,
            format!("a symmetric matrix must be square, not {rows} × {cols}"),
        ));
    }
    // A symmetric file lists the lower triangle with its diagonal.
    let listed = if banner.symmetric {
        rows.checked_add(1)
            .and_then(|n1| (rows as u128 * n1 as u128 / 2).try_into().ok())
    } else {
        rows.checked_mul(cols)
    };
    let rest = size.rest;
    let max_values = (rest + 1) / MIN_VALUE_BYTES;
    let values_fit = listed.filter(|&n| n <= max_values);
    let Some(listed) = values_fit else {
        return Err(err(
            size.line,
            format!(
                "a {rows} × {cols} {}array lists {} values, but the {rest} bytes after the size \
                 line hold at most {max_values} (a value line takes at least {MIN_VALUE_BYTES} \
                 bytes): the file is truncated or the size is wrong",
                if banner.symmetric { "symmetric " } else { "" },
                listed.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string()),
            ),
        ));
    };
    // `rows * cols` is at most `listed` (general) or under twice it (symmetric), and `listed`
    // fits the text, so the product neither overflows nor asks for more than twice the text.
    let total = rows * cols;
    let mut values = Vec::new();
    values.try_reserve_exact(total).map_err(|_| {
        err(
            size.line,
            format!(
                "a {rows} × {cols} matrix needs {} bytes, which the host cannot allocate",
                total.saturating_mul(std::mem::size_of::<T>())
            ),
        )
    })?;
    values.resize(total, T::ONE);
    // The (row, column) of the k-th listed value, column by column.
    let (mut i, mut j) = (0usize, 0usize);
    let mut read = 0usize;
    for (line, l) in Lines::new(size.body, size.body_line) {
        if !lex::is_content(l) {
            continue;
        }
        if read == listed {
            return Err(err(
                line,
                format!("more values than the {listed} the size line implies"),
            ));
        }
        let mut toks = lex::tokens(l);
        let (Some(v), None) = (toks.next(), toks.next()) else {
            return Err(err(
                line,
                format!("expected 1 value, found {}", lex::tokens(l).count()),
            ));
        };
        if banner.field == Field::Integer && !lex::is_integer(v) {
            return Err(err(
                line,
                format!("the value `{}` is not an integer", lex::show(v)),
            ));
        }
        let v = T::parse_token(v).ok_or_else(|| {
            err(
                line,
                format!("the value `{}` is not a number", lex::show(v)),
            )
        })?;
        values[i + j * rows] = v;
        if banner.symmetric {
            values[j + i * rows] = v;
        }
        read += 1;
        i += 1;
        if i == rows {
            j += 1;
            // A symmetric column starts at its diagonal.
            i = if banner.symmetric { j } else { 0 };
        }
    }
    if read < listed {
        let text = text.strip_prefix(super::BOM).unwrap_or(text);
        return Err(err(
            lex::count_lines(text) + 1,
            format!("the file ends after {read} of {listed} values"),
        ));
    }
    Ok(DenseMatrix {
        num_rows: rows,
        num_cols: cols,
        values,
    })
}
