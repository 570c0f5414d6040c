//! The `--tol` option of the iterative examples (CG, PageRank). Included by those alone
//! (`#[path]`), so the other examples do not carry it.

/// The next argument as a tolerance: a finite number strictly between 0 and 1.
pub fn tolerance(it: &mut impl Iterator<Item = String>) -> Result<f64, String> {
    let v = it.next().ok_or("--tol needs a value")?;
    match v.parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 && t < 1.0 => Ok(t),
        _ => Err(format!("--tol needs a number between 0 and 1, got `{v}`")),
    }
}
