//! A pickle reader for data only: the dicts, lists, tuples, strings, numbers and memo
//! references that `torch.cuda.memory._dump_snapshot` writes (protocols 2 to 5, plus the
//! protocol 0/1 container opcodes that cost nothing to accept).
//!
//! It never executes code: every opcode that would import a name, call an object, build
//! an instance or resolve a persistent id is refused with [`PickleError::Unsafe`], before
//! anything after it is read. It is a loop over the input with explicit stacks, so no
//! input can exhaust the native stack, and every length is checked against what is left of
//! the input before anything is allocated for it.

use std::collections::HashMap;

/// Why a pickle was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    #[error(
        "opcode {name} (0x{opcode:02x}) at byte {offset} would execute code; snapshots are \
         plain data, so this file was not written by torch.cuda.memory._dump_snapshot and \
         is refused unread"
    )]
    Unsafe {
        opcode: u8,
        name: &'static str,
        offset: usize,
    },
    #[error("opcode {name} (0x{opcode:02x}) at byte {offset} is not supported: {reason}")]
    Unsupported {
        opcode: u8,
        name: &'static str,
        offset: usize,
        reason: &'static str,
    },
    #[error("malformed pickle at byte {offset}: {reason}")]
    Malformed { offset: usize, reason: String },
}

/// A value read from a pickle. Containers and strings live in the [`PickleTree`] arena
/// and are referred to by index, so a value is small and `Copy`, and a memo reference
/// shares the container it names (as Python's unpickler does) instead of copying it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PickleValue {
    None,
    Bool(bool),
    Int(i64),
    /// An integer outside the signed 64-bit range; no allocator value is.
    BigInt,
    Float(f64),
    Str(u32),
    Bytes(u32),
    List(u32),
    Tuple(u32),
    Dict(u32),
    Set(u32),
}

/// Everything a pickle held, with its root value.
#[derive(Debug, Default)]
pub struct PickleTree {
    strings: Vec<Box<str>>,
    string_ids: HashMap<Box<str>, u32>,
    bytes: Vec<Vec<u8>>,
    /// Lists, tuples and sets.
    sequences: Vec<Vec<PickleValue>>,
    dicts: Vec<Vec<(PickleValue, PickleValue)>>,
    root: Option<PickleValue>,
}

impl PickleTree {
    pub fn root(&self) -> PickleValue {
        self.root.unwrap_or(PickleValue::None)
    }

    pub fn str(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    pub fn bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], |b| b)
    }

    /// The items of a list, tuple or set; `None` for any other value.
    pub fn items(&self, value: PickleValue) -> Option<&[PickleValue]> {
        match value {
            PickleValue::List(i) | PickleValue::Tuple(i) | PickleValue::Set(i) => {
                self.sequences.get(i as usize).map(Vec::as_slice)
            }
            _ => None,
        }
    }

    pub fn entries(&self, value: PickleValue) -> Option<&[(PickleValue, PickleValue)]> {
        match value {
            PickleValue::Dict(i) => self.dicts.get(i as usize).map(Vec::as_slice),
            _ => None,
        }
    }

    /// The id a string has in this tree, if the pickle holds it at all. Keys are looked up
    /// by id: equal strings share one id, so a dict lookup compares integers.
    pub fn string_id(&self, s: &str) -> Option<u32> {
        self.string_ids.get(s).copied()
    }

    /// `dict[key]` for a string key given by its id.
    pub fn get(&self, dict: PickleValue, key: u32) -> Option<PickleValue> {
        self.entries(dict)?
            .iter()
            .find(|(k, _)| *k == PickleValue::Str(key))
            .map(|(_, v)| *v)
    }

    fn intern(&mut self, s: &str) -> PickleValue {
        if let Some(&id) = self.string_ids.get(s) {
            return PickleValue::Str(id);
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.string_ids.insert(s.into(), id);
        PickleValue::Str(id)
    }
}

/// Names of the opcodes that would run code, for the error message.
fn unsafe_opcode(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        _ => return None,
    })
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where the opcode being executed starts, for messages.
    op_start: usize,
}

impl<'a> Reader<'a> {
    fn malformed(&self, reason: impl Into<String>) -> PickleError {
        PickleError::Malformed {
            offset: self.op_start,
            reason: reason.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| {
                self.malformed(format!(
                    "needs {n} more bytes, {} left",
                    self.data.len() - self.pos
                ))
            })?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len_u32(&mut self) -> Result<usize, PickleError> {
        Ok(u32::from_le_bytes(self.fixed()?) as usize)
    }

    fn len_u64(&mut self) -> Result<usize, PickleError> {
        let n = u64::from_le_bytes(self.fixed()?);
        usize::try_from(n).map_err(|_| self.malformed(format!("length {n} is too large")))
    }

    /// A newline-terminated ASCII argument of the protocol 0 opcodes.
    fn line(&mut self) -> Result<&'a str, PickleError> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.malformed("unterminated line argument"))?;
        let line = std::str::from_utf8(&rest[..end])
            .map_err(|_| self.malformed("line argument is not ASCII"))?;
        self.pos += end + 1;
        Ok(line)
    }

    /// The memo index of a PUT or GET: one byte (BINPUT, BINGET), four (LONG_BINPUT,
    /// LONG_BINGET) or a text line (PUT, GET).
    fn memo_index(&mut self, op: u8) -> Result<usize, PickleError> {
        match op {
            b'q' | b'h' => Ok(self.u8()? as usize),
            b'r' | b'j' => self.len_u32(),
            _ => {
                let what = if op == b'p' { "PUT" } else { "GET" };
                self.line()?
                    .parse()
                    .map_err(|_| self.malformed(format!("bad {what} index")))
            }
        }
    }
}

/// Little-endian two's complement, as LONG1 and LONG4 store integers.
fn long_from_bytes(bytes: &[u8]) -> PickleValue {
    let Some(&last) = bytes.last() else {
        return PickleValue::Int(0);
    };
    let negative = last & 0x80 != 0;
    let fill = if negative { 0xff } else { 0x00 };
    let mut buf = [fill; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    if bytes.len() > 8 {
        // Longer encodings fit only when every extra byte is sign extension and the low
        // eight bytes already carry the sign.
        let extension_only = bytes[8..].iter().all(|&b| b == fill);
        if !extension_only || (buf[7] & 0x80 != 0) != negative {
            return PickleValue::BigInt;
        }
    }
    PickleValue::Int(i64::from_le_bytes(buf))
}

fn text_int(text: &str) -> Option<PickleValue> {
    let text = text.trim_end_matches('L');
    match text {
        "00" => Some(PickleValue::Bool(false)),
        "01" => Some(PickleValue::Bool(true)),
        _ => match text.parse::<i64>() {
            Ok(v) => Some(PickleValue::Int(v)),
            Err(_) if is_decimal(text) => Some(PickleValue::BigInt),
            Err(_) => None,
        },
    }
}

fn is_decimal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Limits that keep a hostile file from using more memory than its size suggests.
const MAX_MEMO: usize = 1 << 32;

/// Reads a whole pickle. The input must end with STOP; trailing bytes are ignored, as
/// Python's `pickle.loads` ignores them.
pub fn parse(data: &[u8]) -> Result<PickleTree, PickleError> {
    let mut tree = PickleTree::default();
    let mut stack: Vec<PickleValue> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: HashMap<usize, PickleValue> = HashMap::new();
    let mut r = Reader {
        data,
        pos: 0,
        op_start: 0,
    };

    loop {
        r.op_start = r.pos;
        let op = match r.take(1) {
            Ok(b) => b[0],
            Err(_) => return Err(r.malformed("input ended before STOP")),
        };
        if let Some(name) = unsafe_opcode(op) {
            return Err(PickleError::Unsafe {
                opcode: op,
                name,
                offset: r.op_start,
            });
        }
        macro_rules! pop {
            () => {
                match stack.pop() {
                    Some(v) => v,
                    None => return Err(r.malformed("stack underflow")),
                }
            };
        }
        macro_rules! pop_mark {
            () => {{
                let mark = match marks.pop() {
                    Some(m) => m,
                    None => return Err(r.malformed("no MARK for this opcode")),
                };
                if mark > stack.len() {
                    return Err(r.malformed("MARK above the stack"));
                }
                stack.split_off(mark)
            }};
        }
        macro_rules! new_seq {
            ($items:expr, $variant:ident) => {{
                tree.sequences.push($items);
                PickleValue::$variant((tree.sequences.len() - 1) as u32)
            }};
        }
        macro_rules! new_str {
            ($bytes:expr) => {{
                let s = match std::str::from_utf8($bytes) {
                    Ok(s) => s,
                    Err(_) => return Err(r.malformed("string is not UTF-8")),
                };
                tree.intern(s)
            }};
        }
        match op {
            0x80 => {
                // PROTO
                let version = r.u8()?;
                if version > 5 {
                    return Err(r.malformed(format!("protocol {version} is newer than 5")));
                }
            }
            0x95 => {
                // FRAME: only a read-ahead hint.
                r.len_u64()?;
            }
            b'.' => {
                // STOP
                let root = pop!();
                tree.root = Some(root);
                return Ok(tree);
            }
            b'N' => stack.push(PickleValue::None),
            0x88 => stack.push(PickleValue::Bool(true)),
            0x89 => stack.push(PickleValue::Bool(false)),
            b'J' => stack.push(PickleValue::Int(i64::from(i32::from_le_bytes(r.fixed()?)))),
            b'K' => stack.push(PickleValue::Int(i64::from(r.u8()?))),
            b'M' => stack.push(PickleValue::Int(i64::from(u16::from_le_bytes(r.fixed()?)))),
            0x8a => {
                let n = r.u8()? as usize;
                let bytes = r.take(n)?;
                stack.push(long_from_bytes(bytes));
            }
            0x8b => {
                let n = r.len_u32()?;
                let bytes = r.take(n)?;
                stack.push(long_from_bytes(bytes));
            }
            b'I' | b'L' => {
                let line = r.line()?;
                let value = text_int(line).ok_or_else(|| r.malformed("bad integer text"))?;
                stack.push(value);
            }
            b'G' => stack.push(PickleValue::Float(f64::from_be_bytes(r.fixed()?))),
            b'F' => {
                let line = r.line()?;
                let value: f64 = line.parse().map_err(|_| r.malformed("bad float text"))?;
                stack.push(PickleValue::Float(value));
            }
            b'X' => {
                let n = r.len_u32()?;
                let v = new_str!(r.take(n)?);
                stack.push(v);
            }
            0x8c => {
                let n = r.u8()? as usize;
                let v = new_str!(r.take(n)?);
                stack.push(v);
            }
            0x8d => {
                let n = r.len_u64()?;
                let v = new_str!(r.take(n)?);
                stack.push(v);
            }
            b'T' | b'U' => {
                // Python 2 byte strings; Python 3 reads them as str (ASCII by default).
                let n = if op == b'T' {
                    r.len_u32()?
                } else {
                    r.u8()? as usize
                };
                let raw = r.take(n)?;
                let text: String = raw.iter().map(|&b| b as char).collect();
                stack.push(tree.intern(&text));
            }
            b'B' | b'C' | 0x8e | 0x96 => {
                let n = match op {
                    b'B' => r.len_u32()?,
                    b'C' => r.u8()? as usize,
                    _ => r.len_u64()?,
                };
                let bytes = r.take(n)?.to_vec();
                tree.bytes.push(bytes);
                stack.push(PickleValue::Bytes((tree.bytes.len() - 1) as u32));
            }
            b'}' => {
                tree.dicts.push(Vec::new());
                stack.push(PickleValue::Dict((tree.dicts.len() - 1) as u32));
            }
            b']' => {
                let v = new_seq!(Vec::new(), List);
                stack.push(v);
            }
            b')' => {
                let v = new_seq!(Vec::new(), Tuple);
                stack.push(v);
            }
            0x8f => {
                let v = new_seq!(Vec::new(), Set);
                stack.push(v);
            }
            b'(' => marks.push(stack.len()),
            b't' => {
                let items = pop_mark!();
                let v = new_seq!(items, Tuple);
                stack.push(v);
            }
            b'l' => {
                let items = pop_mark!();
                let v = new_seq!(items, List);
                stack.push(v);
            }
            0x91 => {
                let items = pop_mark!();
                let v = new_seq!(items, Set);
                stack.push(v);
            }
            b'd' => {
                let items = pop_mark!();
                if items.len() % 2 != 0 {
                    return Err(r.malformed("DICT with an odd number of items"));
                }
                let pairs = items.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect();
                tree.dicts.push(pairs);
                stack.push(PickleValue::Dict((tree.dicts.len() - 1) as u32));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    return Err(r.malformed("stack underflow"));
                }
                let items = stack.split_off(stack.len() - n);
                let v = new_seq!(items, Tuple);
                stack.push(v);
            }
            b'a' | b'e' | 0x90 => {
                // APPEND, APPENDS, ADDITEMS: onto the list (set) on top of the stack.
                let items = if op == b'a' {
                    vec![pop!()]
                } else {
                    pop_mark!()
                };
                let (name, kind) = match op {
                    b'a' => ("APPEND", "list"),
                    b'e' => ("APPENDS", "list"),
                    _ => ("ADDITEMS", "set"),
                };
                let id = match stack.last().copied() {
                    Some(PickleValue::List(id)) if kind == "list" => id,
                    Some(PickleValue::Set(id)) if kind == "set" => id,
                    _ => {
                        return Err(r.malformed(format!("{name} to something that is not a {kind}")))
                    }
                };
                tree.sequences[id as usize].extend(items);
            }
            b's' | b'u' => {
                // SETITEM, SETITEMS: into the dict on top of the stack.
                let (name, items) = if op == b's' {
                    let value = pop!();
                    ("SETITEM", vec![pop!(), value])
                } else {
                    ("SETITEMS", pop_mark!())
                };
                if items.len() % 2 != 0 {
                    return Err(r.malformed("SETITEMS with an odd number of items"));
                }
                let Some(PickleValue::Dict(id)) = stack.last().copied() else {
                    return Err(r.malformed(format!("{name} on something that is not a dict")));
                };
                tree.dicts[id as usize].extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
            }
            b'0' => {
                pop!();
            }
            b'1' => {
                let _ = pop_mark!();
            }
            b'2' => {
                let top = *stack.last().ok_or_else(|| r.malformed("stack underflow"))?;
                stack.push(top);
            }
            0x94 | b'q' | b'r' | b'p' => {
                let index = match op {
                    0x94 => memo.len(),
                    _ => r.memo_index(op)?,
                };
                if memo.len() >= MAX_MEMO {
                    return Err(r.malformed("memo is too large"));
                }
                let top = *stack
                    .last()
                    .ok_or_else(|| r.malformed("memoize on empty stack"))?;
                memo.insert(index, top);
            }
            b'h' | b'j' | b'g' => {
                let index = r.memo_index(op)?;
                let value = *memo
                    .get(&index)
                    .ok_or_else(|| r.malformed(format!("memo entry {index} is not defined")))?;
                stack.push(value);
            }
            b'S' | b'V' => {
                return Err(PickleError::Unsupported {
                    opcode: op,
                    name: if op == b'S' { "STRING" } else { "UNICODE" },
                    offset: r.op_start,
                    reason: "text strings of protocol 0; write the snapshot with protocol 2 \
                             or newer (pickle.dump's default)",
                })
            }
            0x97 | 0x98 => {
                return Err(PickleError::Unsupported {
                    opcode: op,
                    name: if op == 0x97 {
                        "NEXT_BUFFER"
                    } else {
                        "READONLY_BUFFER"
                    },
                    offset: r.op_start,
                    reason: "out-of-band buffers are not part of a snapshot",
                })
            }
            other => {
                return Err(r.malformed(format!("unknown opcode 0x{other:02x}")));
            }
        }
    }
}

#[cfg(test)]
mod tests;
