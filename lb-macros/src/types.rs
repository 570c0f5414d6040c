//! The scalar types of the kernel body as the macro sees them: the body IR's types plus `usize`,
//! which the macro must tell apart from `u64` (indices must be `usize`, as in Rust) but which
//! lowers to `u64` on the GPU.

use lb_ptx::body::Ty;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum STy {
    Bool,
    I32,
    U32,
    I64,
    U64,
    Usize,
    F32,
    F64,
}

impl STy {
    pub const ALL: [STy; 8] = [
        STy::Bool,
        STy::I32,
        STy::U32,
        STy::I64,
        STy::U64,
        STy::Usize,
        STy::F32,
        STy::F64,
    ];

    pub fn from_name(name: &str) -> Option<STy> {
        STy::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            STy::Bool => "bool",
            STy::I32 => "i32",
            STy::U32 => "u32",
            STy::I64 => "i64",
            STy::U64 => "u64",
            STy::Usize => "usize",
            STy::F32 => "f32",
            STy::F64 => "f64",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, STy::F32 | STy::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(self, STy::I32 | STy::U32 | STy::I64 | STy::U64 | STy::Usize)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, STy::I32 | STy::I64 | STy::F32 | STy::F64)
    }

    /// The GPU type: `usize` is 64-bit there.
    pub fn lower(self) -> Ty {
        match self {
            STy::Bool => Ty::Bool,
            STy::I32 => Ty::I32,
            STy::U32 => Ty::U32,
            STy::I64 => Ty::I64,
            STy::U64 | STy::Usize => Ty::U64,
            STy::F32 => Ty::F32,
            STy::F64 => Ty::F64,
        }
    }
}

/// Levenshtein distance, for "did you mean" suggestions (names are short, so the quadratic
/// table is fine and saves a dependency).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `name`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Errors collected across a phase, reported together.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// The value, or `None` after recording the error.
    pub fn take<T>(&mut self, r: syn::Result<T>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    pub fn finish(self) -> syn::Result<()> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
