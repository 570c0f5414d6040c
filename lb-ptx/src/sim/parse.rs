//! Parser for the PTX subset that `ir`'s `Display` writes: text back into the same `ir::Module`.
//!
//! The lexer keeps dotted words (`add.rn.f32`, `%tid.x`, `.param`) whole, so the parser reads an
//! opcode as one token and splits it on dots. Every failure is a [`ParseError`] carrying a line
//! number; no input text makes the parser panic.

use crate::ir::{
    Address, AtomOp, BinOp, Cmp, DeviceFunc, Guard, Instr, Kernel, Label, LdCache, Module,
    Occupancy, Op, Operand, Param, ParamDeclTy, Reg, RegClass, Rounding, SharedDecl, ShflMode,
    Space, Special, Type, UnOp, VoteMode,
};

/// A parse failure: the 1-based line it was found on and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '%' | '$')
}

fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if matches!(chars.peek(), Some((_, '/'))) => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if matches!(chars.peek(), Some((_, '*'))) => {
                chars.next();
                let open = line;
                let mut prev = ' ';
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    return Err(ParseError {
                        line: open,
                        message: "unterminated `/*` comment".into(),
                    });
                }
            }
            c if is_word_char(c) => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, c)) = chars.peek() {
                    if !is_word_char(c) {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                out.push(Token {
                    tok: Tok::Word(text[start..end].to_string()),
                    line,
                });
            }
            ',' | ';' | ':' | '(' | ')' | '{' | '}' | '[' | ']' | '<' | '>' | '+' | '-' | '|'
            | '@' | '!' => out.push(Token {
                tok: Tok::Punct(c),
                line,
            }),
            c => {
                return Err(ParseError {
                    line,
                    message: format!("unexpected character `{c}`"),
                })
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    last_line: usize,
}

/// Parses PTX text written by `ir::Module`'s `Display` back into the module.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    let toks = lex(text)?;
    let last_line = text.lines().count().max(1);
    let mut p = Parser {
        toks,
        pos: 0,
        last_line,
    };
    p.module()
}

fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl Parser {
    fn line(&self) -> usize {
        self.toks.get(self.pos).map_or(self.last_line, |t| t.line)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            line: self.line(),
            message: message.into(),
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn peek_is(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(s)) if s == w)
    }

    fn word(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Word(w)) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            Some(Tok::Punct(c)) => self.err(format!("expected {what}, found `{c}`")),
            None => self.err(format!("expected {what}, found end of input")),
        }
    }

    fn expect_word(&mut self, w: &str) -> Result<(), ParseError> {
        if self.peek_word(w) {
            self.pos += 1;
            Ok(())
        } else {
            let found = self.describe();
            self.err(format!("expected `{w}`, found {found}"))
        }
    }

    fn punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.peek_is(c) {
            self.pos += 1;
            Ok(())
        } else {
            let found = self.describe();
            let message = format!("expected `{c}`, found {found}");
            // A missing `;` belongs to the statement before it, not to the line that follows.
            match (c, self.pos.checked_sub(1).and_then(|i| self.toks.get(i))) {
                (';', Some(prev)) => Err(ParseError {
                    line: prev.line,
                    message,
                }),
                _ => self.err(message),
            }
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            Some(Tok::Word(w)) => format!("`{w}`"),
            Some(Tok::Punct(c)) => format!("`{c}`"),
            None => "end of input".into(),
        }
    }

    fn number(&mut self, what: &str) -> Result<u32, ParseError> {
        let w = self.word(what)?;
        match parse_u32(&w) {
            Some(n) => Ok(n),
            None => {
                self.pos -= 1;
                self.err(format!("expected {what}, found `{w}`"))
            }
        }
    }

    fn module(&mut self) -> Result<Module, ParseError> {
        self.expect_word(".version")?;
        let v = self.word("a version like `7.8`")?;
        let version = match v.split_once('.') {
            Some((a, b)) => match (parse_u32(a), parse_u32(b)) {
                (Some(a), Some(b)) => (a, b),
                _ => return self.err(format!("bad version `{v}`")),
            },
            None => return self.err(format!("bad version `{v}`")),
        };
        self.expect_word(".target")?;
        let target = self.word("a target like `sm_75`")?;
        self.expect_word(".address_size")?;
        if self.number("address size")? != 64 {
            return self.err("only `.address_size 64` is supported");
        }
        let mut kernels = Vec::new();
        while self.peek().is_some() {
            if self.peek_word(".extern") {
                self.prototype()?;
            } else {
                kernels.push(self.kernel()?);
            }
        }
        Ok(Module {
            version,
            target,
            kernels,
        })
    }

    /// A module-level `.extern .func` prototype of a device-runtime function. `Module`'s
    /// `Display` derives the prototypes from the calls, so the text is checked and dropped.
    fn prototype(&mut self) -> Result<(), ParseError> {
        self.expect_word(".extern")?;
        self.expect_word(".func")?;
        self.punct('(')?;
        while !self.peek_is(')') {
            self.word("a return parameter")?;
        }
        self.punct(')')?;
        let name = self.word("a function name")?;
        let Some(func) = DeviceFunc::from_name(&name) else {
            self.pos -= 1;
            return self.err(format!("unknown external function `{name}`"));
        };
        let start = self.pos;
        while !self.peek_is(';') {
            if self.peek().is_none() {
                return self.err(format!("the prototype of `{name}` is not closed with `;`"));
            }
            self.pos += 1;
        }
        self.pos += 1;
        // The text must be exactly the prototype lb writes, or the round trip would not hold.
        let mut expected = Parser {
            toks: lex(func.prototype()).unwrap_or_default(),
            pos: 0,
            last_line: 1,
        };
        expected.pos = expected
            .toks
            .iter()
            .position(|t| t.tok == Tok::Word(name.clone()))
            .map_or(0, |i| i + 1);
        let got: Vec<&Tok> = self.toks[start..self.pos].iter().map(|t| &t.tok).collect();
        let want: Vec<&Tok> = expected.toks[expected.pos..]
            .iter()
            .map(|t| &t.tok)
            .collect();
        if got != want {
            return self.err(format!("unexpected prototype of `{name}`"));
        }
        Ok(())
    }

    fn kernel(&mut self) -> Result<Kernel, ParseError> {
        self.expect_word(".visible")?;
        self.expect_word(".entry")?;
        let name = self.word("kernel name")?;
        self.punct('(')?;
        let mut params = Vec::new();
        if !self.peek_is(')') {
            loop {
                self.expect_word(".param")?;
                let ty = self.type_word()?;
                let pname = self.word("parameter name")?;
                params.push(Param { name: pname, ty });
                if self.peek_is(',') {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        self.punct(')')?;
        let max_registers = if self.peek_word(".maxnreg") {
            self.pos += 1;
            let word = self.word("a register count")?;
            match word.parse::<u32>() {
                Ok(n) if n > 0 => Some(n),
                _ => return self.err(format!("`.maxnreg {word}` is not a register count")),
            }
        } else {
            None
        };
        let occupancy = self.occupancy()?;
        self.punct('{')?;
        let mut reg_counts = [0u32; 5];
        let mut shared = Vec::new();
        let mut body = Vec::new();
        // Open call scopes (`{` … `}` around a device-side launch's `.param` variables).
        let mut scopes = 0u32;
        loop {
            if self.peek_is('}') {
                self.pos += 1;
                if scopes == 0 {
                    break;
                }
                scopes -= 1;
                body.push(Instr::from(Op::ScopeEnd));
                continue;
            }
            if self.peek_is('{') {
                self.pos += 1;
                scopes += 1;
                body.push(Instr::from(Op::ScopeBegin));
                continue;
            }
            if self.peek_word(".param") && scopes > 0 {
                body.push(Instr::from(self.param_decl()?));
                continue;
            }
            if self.peek().is_none() {
                return self.err(format!("kernel `{name}` is not closed with `}}`"));
            }
            if self.peek_word(".reg") {
                self.pos += 1;
                let (class, n) = self.reg_decl()?;
                reg_counts[class as usize] = n;
            } else if self.peek_word(".shared") || self.peek_word(".extern") {
                shared.push(self.shared_decl()?);
            } else {
                body.push(self.instr()?);
            }
        }
        Ok(Kernel {
            name,
            params,
            shared,
            reg_counts,
            body,
            max_registers,
            occupancy,
        })
    }

    /// `.maxntid T, 1, 1` followed by `.minnctapersm M`, as [`Kernel`]'s `Display` writes them.
    fn occupancy(&mut self) -> Result<Option<Occupancy>, ParseError> {
        if !self.peek_word(".maxntid") {
            return Ok(None);
        }
        self.pos += 1;
        let max_threads = self.count("a thread count")?;
        for _ in 0..2 {
            self.punct(',')?;
            if self.count("a thread count")? != 1 {
                return self.err("`.maxntid` with a second or third dimension".to_string());
            }
        }
        self.expect_word(".minnctapersm")?;
        let min_blocks = self.count("a block count")?;
        Ok(Some(Occupancy {
            max_threads,
            min_blocks,
        }))
    }

    /// A positive count (`what` names it in the error).
    fn count(&mut self, what: &str) -> Result<u32, ParseError> {
        let word = self.word(what)?;
        match word.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => self.err(format!("`{word}` is not {what}")),
        }
    }

    /// `.param .b64 name;` or `.param .align A .b8 name[N];` inside a call scope.
    fn param_decl(&mut self) -> Result<Op, ParseError> {
        self.expect_word(".param")?;
        let ty = if self.peek_word(".align") {
            self.pos += 1;
            let align = self.number("an alignment")?;
            self.expect_word(".b8")?;
            let name = self.word("a parameter name")?;
            self.punct('[')?;
            let len = self.number("a byte count")?;
            self.punct(']')?;
            self.punct(';')?;
            return Ok(Op::ParamDecl {
                name,
                ty: ParamDeclTy::Bytes { align, len },
            });
        } else {
            self.type_word()?
        };
        let name = self.word("a parameter name")?;
        self.punct(';')?;
        Ok(Op::ParamDecl {
            name,
            ty: ParamDeclTy::Scalar(ty),
        })
    }

    /// The rest of `call.uni (ret), func, (args);` after the opcode (the `;` is the caller's).
    fn call(&mut self) -> Result<Op, ParseError> {
        let mut ret = None;
        if self.peek_is('(') {
            self.pos += 1;
            ret = Some(self.word("a return parameter")?);
            self.punct(')')?;
            self.comma()?;
        }
        let name = self.word("a function name")?;
        let Some(func) = DeviceFunc::from_name(&name) else {
            self.pos -= 1;
            return self.err(format!("unknown function `{name}`"));
        };
        self.comma()?;
        self.punct('(')?;
        let mut args = Vec::new();
        while !self.peek_is(')') {
            if !args.is_empty() {
                self.comma()?;
            }
            args.push(self.word("an argument parameter")?);
        }
        self.punct(')')?;
        Ok(Op::Call { ret, func, args })
    }

    fn type_word(&mut self) -> Result<Type, ParseError> {
        let w = self.word("a type like `.u32`")?;
        match w.strip_prefix('.').and_then(Type::from_suffix) {
            Some(t) => Ok(t),
            None => {
                self.pos -= 1;
                self.err(format!("unknown type `{w}`"))
            }
        }
    }

    fn reg_decl(&mut self) -> Result<(RegClass, u32), ParseError> {
        let ty = self.word("register type")?;
        let class = RegClass::ALL.into_iter().find(|c| c.decl_type() == ty);
        let Some(class) = class else {
            return self.err(format!("unknown register type `{ty}`"));
        };
        let name = self.word("register name")?;
        if name.strip_prefix('%') != Some(class.prefix()) {
            return self.err(format!(
                "`.reg {ty}` must declare `%{}<n>`, found `{name}`",
                class.prefix()
            ));
        }
        self.punct('<')?;
        let n = self.number("register count")?;
        self.punct('>')?;
        self.punct(';')?;
        Ok((class, n))
    }

    fn shared_decl(&mut self) -> Result<SharedDecl, ParseError> {
        let external = self.peek_word(".extern");
        if external {
            self.pos += 1;
        }
        self.expect_word(".shared")?;
        self.expect_word(".align")?;
        let align = self.number("alignment")?;
        self.expect_word(".b8")?;
        let name = self.word("shared variable name")?;
        self.punct('[')?;
        let bytes = if external {
            0
        } else {
            self.number("shared size in bytes")?
        };
        if !external && bytes == 0 {
            return self.err("a static `.shared` array must have a non-zero size");
        }
        self.punct(']')?;
        self.punct(';')?;
        Ok(SharedDecl { name, align, bytes })
    }

    fn label_name(&mut self) -> Result<Label, ParseError> {
        let w = self.word("label")?;
        match w.strip_prefix('L').and_then(parse_u32) {
            Some(n) => Ok(Label(n)),
            None => {
                self.pos -= 1;
                self.err(format!("expected a label like `L3`, found `{w}`"))
            }
        }
    }

    fn reg(&mut self) -> Result<Reg, ParseError> {
        let w = self.word("register")?;
        match parse_reg(&w) {
            Some(r) => Ok(r),
            None => {
                self.pos -= 1;
                self.err(format!("expected a register like `%r1`, found `{w}`"))
            }
        }
    }

    /// `ld.SPACE{.nc,.cs.nc}.vN.T {d, ..}, [addr]` or `st.SPACE.vN.T [addr], {a, ..}`, after the
    /// opcode. The braced list must hold N elements, which is all the round trip needs; which
    /// element types a vector may have is the interpreter's check, as for scalar loads.
    fn vector(&mut self, parts: &[&str]) -> Result<Op, ParseError> {
        let n = parts.len();
        let space = self.space_of(parts, parts[1])?;
        let count = match parts[n - 2] {
            "v2" => 2,
            "v4" => 4,
            _ => return self.unknown(parts),
        };
        let ty = self.ty_of(parts, parts[n - 1])?;
        let qualifiers = &parts[2..n - 2];
        Ok(if parts[0] == "ld" {
            let cache = match qualifiers {
                [] => LdCache::Default,
                ["nc"] if space == Space::Global => LdCache::ReadOnly,
                ["cs", "nc"] if space == Space::Global => LdCache::Stream,
                _ => return self.unknown(parts),
            };
            let dsts = self.braced(count, |p| p.reg())?;
            self.comma()?;
            let addr = self.address()?;
            Op::LdVec {
                space,
                ty,
                dsts,
                addr,
                cache,
            }
        } else {
            if !qualifiers.is_empty() {
                return self.unknown(parts);
            }
            let addr = self.address()?;
            self.comma()?;
            let srcs = self.braced(count, |p| p.operand())?;
            Op::StVec {
                space,
                ty,
                addr,
                srcs,
            }
        })
    }

    /// `{e, e, ..}`: the `count` elements of a vector operand.
    fn braced<T>(
        &mut self,
        count: usize,
        mut element: impl FnMut(&mut Parser) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        self.punct('{')?;
        let mut out = vec![element(self)?];
        while self.peek_is(',') {
            self.pos += 1;
            out.push(element(self)?);
        }
        if out.len() != count {
            return self.err(format!(
                "`.v{count}` moves {count} elements, but {} are listed",
                out.len()
            ));
        }
        self.punct('}')?;
        Ok(out)
    }

    /// `d, a, b, c` of a fused multiply-add.
    fn three_sources(&mut self) -> Result<(Reg, Operand, Operand, Operand), ParseError> {
        let dst = self.reg()?;
        self.comma()?;
        let a = self.operand()?;
        self.comma()?;
        let b = self.operand()?;
        self.comma()?;
        let c = self.operand()?;
        Ok((dst, a, b, c))
    }

    fn comma(&mut self) -> Result<(), ParseError> {
        self.punct(',')
    }

    fn operand(&mut self) -> Result<Operand, ParseError> {
        if self.peek_is('-') {
            self.pos += 1;
            let w = self.word("number")?;
            return match format!("-{w}").parse::<i64>() {
                Ok(v) if w.bytes().all(|b| b.is_ascii_digit()) => Ok(Operand::Imm(v)),
                _ => self.err(format!("bad integer `-{w}`")),
            };
        }
        let w = self.word("operand")?;
        let line = self.toks[self.pos - 1].line;
        let bad = |m: String| Err(ParseError { line, message: m });
        if let Some(rest) = w.strip_prefix('%') {
            if let Some(r) = parse_reg(&w) {
                return Ok(Operand::Reg(r));
            }
            let specials = [
                Special::TidX,
                Special::NtidX,
                Special::CtaidX,
                Special::NctaidX,
                Special::LaneId,
                Special::WarpId,
            ];
            return match specials.into_iter().find(|s| &s.name()[1..] == rest) {
                Some(s) => Ok(Operand::Special(s)),
                None => bad(format!("unknown register `{w}`")),
            };
        }
        let first = w.as_bytes()[0];
        if first.is_ascii_digit() {
            if let Some(hex) = w.strip_prefix("0f").or_else(|| w.strip_prefix("0F")) {
                return match (hex.len(), u32::from_str_radix(hex, 16)) {
                    (8, Ok(v)) => Ok(Operand::F32(v)),
                    _ => bad(format!(
                        "bad f32 immediate `{w}` (want `0f` and 8 hex digits)"
                    )),
                };
            }
            if let Some(hex) = w.strip_prefix("0d").or_else(|| w.strip_prefix("0D")) {
                return match (hex.len(), u64::from_str_radix(hex, 16)) {
                    (16, Ok(v)) => Ok(Operand::F64(v)),
                    _ => bad(format!(
                        "bad f64 immediate `{w}` (want `0d` and 16 hex digits)"
                    )),
                };
            }
            return match w.parse::<i64>() {
                Ok(v) if w.bytes().all(|b| b.is_ascii_digit()) => Ok(Operand::Imm(v)),
                _ => bad(format!("bad integer `{w}`")),
            };
        }
        if first.is_ascii_alphabetic() || first == b'_' || first == b'$' {
            return Ok(Operand::Symbol(w));
        }
        bad(format!("unexpected operand `{w}`"))
    }

    fn address(&mut self) -> Result<Address, ParseError> {
        self.punct('[')?;
        let w = self.word("address base")?;
        let base = parse_reg(&w);
        if base.is_none()
            && (w.starts_with('%') || !w.as_bytes()[0].is_ascii_alphabetic() && !w.starts_with('_'))
        {
            self.pos -= 1;
            return self.err(format!("bad address base `{w}`"));
        }
        let mut offset = 0i64;
        if self.peek_is('+') || self.peek_is('-') {
            let mut neg = self.peek_is('-');
            self.pos += 1;
            if self.peek_is('-') {
                neg = !neg;
                self.pos += 1;
            }
            let n = self.word("address offset")?;
            let text = if neg { format!("-{n}") } else { n.clone() };
            offset = match text.parse::<i64>() {
                Ok(v) if n.bytes().all(|b| b.is_ascii_digit()) => v,
                _ => return self.err(format!("bad address offset `{text}`")),
            };
        }
        self.punct(']')?;
        Ok(match base {
            Some(base) => Address::Reg { base, offset },
            None => Address::Symbol { name: w, offset },
        })
    }

    fn instr(&mut self) -> Result<Instr, ParseError> {
        let mut guard = None;
        if self.peek_is('@') {
            self.pos += 1;
            let negate = self.peek_is('!');
            if negate {
                self.pos += 1;
            }
            let pred = self.reg()?;
            if pred.class != RegClass::Pred {
                return self.err(format!(
                    "a guard must be a predicate register, found `{pred}`"
                ));
            }
            guard = Some(Guard { pred, negate });
        }
        let start = self.pos;
        let opcode = self.word("instruction")?;
        if guard.is_none() && self.peek_is(':') {
            self.pos = start;
            let l = self.label_name()?;
            self.punct(':')?;
            return Ok(Instr {
                guard: None,
                op: Op::Label(l),
            });
        }
        let parts: Vec<&str> = opcode.split('.').collect();
        let op = self.op(&parts)?;
        self.punct(';')?;
        Ok(Instr { guard, op })
    }

    fn unknown<T>(&self, parts: &[&str]) -> Result<T, ParseError> {
        let line = self
            .toks
            .get(self.pos.saturating_sub(1))
            .map_or(self.last_line, |t| t.line);
        Err(ParseError {
            line,
            message: format!("unsupported instruction `{}`", parts.join(".")),
        })
    }

    fn ty_of(&self, parts: &[&str], s: &str) -> Result<Type, ParseError> {
        match Type::from_suffix(s) {
            Some(t) => Ok(t),
            None => self.unknown(parts),
        }
    }

    fn space_of(&self, parts: &[&str], s: &str) -> Result<Space, ParseError> {
        match s {
            "global" => Ok(Space::Global),
            "shared" => Ok(Space::Shared),
            "param" => Ok(Space::Param),
            _ => self.unknown(parts),
        }
    }

    fn op(&mut self, parts: &[&str]) -> Result<Op, ParseError> {
        let head = parts[0];
        let n = parts.len();
        let last = parts[n - 1];
        let bin = match head {
            "add" => Some(BinOp::Add),
            "sub" => Some(BinOp::Sub),
            "mul" => Some(BinOp::Mul),
            "div" => Some(BinOp::Div),
            "rem" => Some(BinOp::Rem),
            "min" => Some(BinOp::Min),
            "max" => Some(BinOp::Max),
            "and" => Some(BinOp::And),
            "or" => Some(BinOp::Or),
            "xor" => Some(BinOp::Xor),
            "shl" => Some(BinOp::Shl),
            "shr" => Some(BinOp::Shr),
            _ => None,
        };
        if let Some(mut op) = bin {
            if !(2..=3).contains(&n) {
                return self.unknown(parts);
            }
            let ty = self.ty_of(parts, last)?;
            if n == 3 {
                op = match (op, parts[1]) {
                    (BinOp::Mul, "wide") => BinOp::MulWide,
                    (BinOp::Mul, "hi") => BinOp::MulHi,
                    (BinOp::Mul, "lo") if !ty.is_float() => BinOp::Mul,
                    (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, "rn") if ty.is_float() => {
                        op
                    }
                    _ => return self.unknown(parts),
                };
            }
            let dst = self.reg()?;
            self.comma()?;
            let a = self.operand()?;
            self.comma()?;
            let b = self.operand()?;
            return Ok(Op::Bin { op, ty, dst, a, b });
        }
        let un = match head {
            "neg" => Some(UnOp::Neg),
            "not" => Some(UnOp::Not),
            "abs" => Some(UnOp::Abs),
            "sqrt" => Some(UnOp::Sqrt),
            "popc" => Some(UnOp::Popc),
            "clz" => Some(UnOp::Clz),
            "brev" => Some(UnOp::Brev),
            "ex2" => Some(UnOp::Ex2),
            "lg2" => Some(UnOp::Lg2),
            "sin" => Some(UnOp::Sin),
            "cos" => Some(UnOp::Cos),
            "tanh" => Some(UnOp::Tanh),
            _ => None,
        };
        if let Some(op) = un {
            let ok = match op {
                UnOp::Sqrt => n == 3 && parts[1] == "rn",
                op if op.is_approx() => n == 3 && parts[1] == "approx",
                _ => n == 2,
            };
            if !ok {
                return self.unknown(parts);
            }
            let ty = self.ty_of(parts, last)?;
            let dst = self.reg()?;
            self.comma()?;
            let a = self.operand()?;
            return Ok(Op::Un { op, ty, dst, a });
        }
        match head {
            "mov" if n == 2 => {
                let ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let src = self.operand()?;
                Ok(Op::Mov { ty, dst, src })
            }
            "fma" if n == 3 && parts[1] == "rn" => {
                let ty = self.ty_of(parts, last)?;
                let (dst, a, b, c) = self.three_sources()?;
                Ok(Op::Fma { ty, dst, a, b, c })
            }
            "mad" if n == 3 && matches!(parts[1], "lo" | "wide") => {
                let ty = self.ty_of(parts, last)?;
                let (dst, a, b, c) = self.three_sources()?;
                let wide = parts[1] == "wide";
                Ok(Op::Mad {
                    wide,
                    ty,
                    dst,
                    a,
                    b,
                    c,
                })
            }
            "setp" if n == 3 => {
                let cmp = match parts[1] {
                    "eq" => Cmp::Eq,
                    "ne" => Cmp::Ne,
                    "lt" => Cmp::Lt,
                    "le" => Cmp::Le,
                    "gt" => Cmp::Gt,
                    "ge" => Cmp::Ge,
                    "neu" => Cmp::Neu,
                    _ => return self.unknown(parts),
                };
                let ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                Ok(Op::Setp { cmp, ty, dst, a, b })
            }
            "selp" if n == 2 => {
                let ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                self.comma()?;
                let pred = self.reg()?;
                Ok(Op::Selp {
                    ty,
                    dst,
                    a,
                    b,
                    pred,
                })
            }
            "cvt" if n == 3 || n == 4 => {
                let rounding = if n == 3 {
                    Rounding::None
                } else {
                    match parts[1] {
                        "rn" => Rounding::Rn,
                        "rzi" => Rounding::Rzi,
                        "rmi" => Rounding::Rmi,
                        "rpi" => Rounding::Rpi,
                        "rni" => Rounding::Rni,
                        _ => return self.unknown(parts),
                    }
                };
                let dst_ty = self.ty_of(parts, parts[n - 2])?;
                let src_ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let src = self.operand()?;
                Ok(Op::Cvt {
                    rounding,
                    dst_ty,
                    src_ty,
                    dst,
                    src,
                })
            }
            "ld" | "st" if n >= 4 && parts[n - 2].starts_with('v') => self.vector(parts),
            "ld" if (3..=5).contains(&n) => {
                let space = self.space_of(parts, parts[1])?;
                let cache = match &parts[2..n - 1] {
                    [] => LdCache::Default,
                    ["nc"] if space == Space::Global => LdCache::ReadOnly,
                    ["cs", "nc"] if space == Space::Global => LdCache::Stream,
                    _ => return self.unknown(parts),
                };
                let ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let addr = self.address()?;
                Ok(Op::Ld {
                    space,
                    ty,
                    dst,
                    addr,
                    cache,
                })
            }
            "st" if n == 3 => {
                let space = self.space_of(parts, parts[1])?;
                let ty = self.ty_of(parts, last)?;
                let addr = self.address()?;
                self.comma()?;
                let src = self.operand()?;
                Ok(Op::St {
                    space,
                    ty,
                    addr,
                    src,
                })
            }
            "atom" if n == 4 => {
                let space = self.space_of(parts, parts[1])?;
                let op = match parts[2] {
                    "add" => AtomOp::Add,
                    "min" => AtomOp::Min,
                    "max" => AtomOp::Max,
                    "exch" => AtomOp::Exch,
                    "cas" => AtomOp::Cas,
                    "and" => AtomOp::And,
                    "or" => AtomOp::Or,
                    _ => return self.unknown(parts),
                };
                let ty = self.ty_of(parts, last)?;
                let dst = self.reg()?;
                self.comma()?;
                let addr = self.address()?;
                self.comma()?;
                let b = self.operand()?;
                let c = if op == AtomOp::Cas {
                    self.comma()?;
                    Some(self.operand()?)
                } else {
                    None
                };
                Ok(Op::Atom {
                    space,
                    op,
                    ty,
                    dst,
                    addr,
                    b,
                    c,
                })
            }
            "bra" if n == 1 => Ok(Op::Bra {
                target: self.label_name()?,
            }),
            "bar" if n == 3 && parts[1] == "warp" && parts[2] == "sync" => Ok(Op::WarpSync {
                mask: self.operand()?,
            }),
            "bar" if n == 2 && parts[1] == "sync" => {
                if self.number("barrier number")? != 0 {
                    return self.err("only barrier 0 is supported");
                }
                Ok(Op::BarSync)
            }
            "membar" if n == 2 && parts[1] == "gl" => Ok(Op::MemBar),
            "fence" if n == 3 && parts[1] == "acq_rel" && parts[2] == "gpu" => Ok(Op::Fence),
            "ret" if n == 1 => Ok(Op::Ret),
            "call" if n == 2 && parts[1] == "uni" => self.call(),
            "activemask" if n == 2 && parts[1] == "b32" => Ok(Op::ActiveMask { dst: self.reg()? }),
            "shfl" if n == 4 && parts[1] == "sync" && parts[3] == "b32" => {
                let mode = match parts[2] {
                    "up" => ShflMode::Up,
                    "down" => ShflMode::Down,
                    "bfly" => ShflMode::Bfly,
                    "idx" => ShflMode::Idx,
                    _ => return self.unknown(parts),
                };
                let dst = self.reg()?;
                let dst_pred = if self.peek_is('|') {
                    self.pos += 1;
                    Some(self.reg()?)
                } else {
                    None
                };
                self.comma()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                self.comma()?;
                let c = self.operand()?;
                self.comma()?;
                let mask = self.operand()?;
                Ok(Op::Shfl {
                    mode,
                    dst,
                    dst_pred,
                    a,
                    b,
                    c,
                    mask,
                })
            }
            "vote" if n == 4 && parts[1] == "sync" => {
                let mode = match (parts[2], parts[3]) {
                    ("all", "pred") => VoteMode::All,
                    ("any", "pred") => VoteMode::Any,
                    ("ballot", "b32") => VoteMode::Ballot,
                    _ => return self.unknown(parts),
                };
                let dst = self.reg()?;
                self.comma()?;
                let a = self.operand()?;
                self.comma()?;
                let mask = self.operand()?;
                Ok(Op::Vote { mode, dst, a, mask })
            }
            _ => self.unknown(parts),
        }
    }
}

fn parse_reg(w: &str) -> Option<Reg> {
    let rest = w.strip_prefix('%')?;
    let split = rest.find(|c: char| c.is_ascii_digit())?;
    let (prefix, digits) = rest.split_at(split);
    let class = RegClass::ALL.into_iter().find(|c| c.prefix() == prefix)?;
    let index = parse_u32(digits)?;
    Some(Reg { class, index })
}
