//! A small pickle writer: plain data only (dict with string keys, list, tuple, str, int,
//! bool, None, float), protocol 2 opcodes. What it writes never names a class or a
//! callable, so loading it runs nothing; it is how a point becomes a file PyTorch's
//! memory viewer (`torch.cuda._memory_viz`, pytorch.org/memory_viz) opens.

use std::io::{self, Write};

/// A plain value to pickle.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Keys in insertion order, as Python keeps them.
    Dict(Vec<(String, Value)>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    pub fn opt_int(v: Option<i64>) -> Value {
        v.map_or(Value::None, Value::Int)
    }

    pub fn dict<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        Value::Dict(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }
}

const PROTO: u8 = 0x80;
const STOP: u8 = b'.';
const NONE: u8 = b'N';
const NEWTRUE: u8 = 0x88;
const NEWFALSE: u8 = 0x89;
const BININT1: u8 = b'K';
const BININT2: u8 = b'M';
const BININT: u8 = b'J';
const LONG1: u8 = 0x8a;
const BINFLOAT: u8 = b'G';
const BINUNICODE: u8 = b'X';
const EMPTY_LIST: u8 = b']';
const EMPTY_DICT: u8 = b'}';
const EMPTY_TUPLE: u8 = b')';
const MARK: u8 = b'(';
const APPENDS: u8 = b'e';
const SETITEMS: u8 = b'u';
const TUPLE: u8 = b't';
const TUPLE1: u8 = 0x85;
const TUPLE2: u8 = 0x86;
const TUPLE3: u8 = 0x87;

/// Items per APPENDS / SETITEMS, as Python's own pickler batches them (bounds the
/// unpickler's stack).
const BATCH: usize = 1000;

/// The pickle of `value` (protocol 2).
pub fn to_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write(&mut out, value);
    out
}

/// Writes the pickle of `value` (protocol 2) to `w`.
pub fn write(w: &mut impl Write, value: &Value) -> io::Result<()> {
    w.write_all(&[PROTO, 2])?;
    write_value(w, value)?;
    w.write_all(&[STOP])
}

fn write_int(w: &mut impl Write, v: i64) -> io::Result<()> {
    if (0..=0xff).contains(&v) {
        w.write_all(&[BININT1, v as u8])
    } else if (0..=0xffff).contains(&v) {
        w.write_all(&[BININT2])?;
        w.write_all(&(v as u16).to_le_bytes())
    } else if i32::try_from(v).is_ok() {
        w.write_all(&[BININT])?;
        w.write_all(&(v as i32).to_le_bytes())
    } else {
        // Two's complement, little-endian, as few bytes as keep the sign.
        let bytes = v.to_le_bytes();
        let mut n = 8;
        while n > 1 {
            let top = bytes[n - 1];
            let below_sign = bytes[n - 2] & 0x80;
            if (top == 0 && below_sign == 0) || (top == 0xff && below_sign != 0) {
                n -= 1;
            } else {
                break;
            }
        }
        w.write_all(&[LONG1, n as u8])?;
        w.write_all(&bytes[..n])
    }
}

fn write_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    let len = u32::try_from(s.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "string over 4 GiB"))?;
    w.write_all(&[BINUNICODE])?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn write_value(w: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::None => w.write_all(&[NONE]),
        Value::Bool(true) => w.write_all(&[NEWTRUE]),
        Value::Bool(false) => w.write_all(&[NEWFALSE]),
        Value::Int(v) => write_int(w, *v),
        Value::Float(f) => {
            w.write_all(&[BINFLOAT])?;
            w.write_all(&f.to_be_bytes())
        }
        Value::Str(s) => write_str(w, s),
        Value::List(items) => {
            w.write_all(&[EMPTY_LIST])?;
            for chunk in items.chunks(BATCH) {
                w.write_all(&[MARK])?;
                for item in chunk {
                    write_value(w, item)?;
                }
                w.write_all(&[APPENDS])?;
            }
            Ok(())
        }
        Value::Tuple(items) => match items.as_slice() {
            [] => w.write_all(&[EMPTY_TUPLE]),
            [a] => {
                write_value(w, a)?;
                w.write_all(&[TUPLE1])
            }
            [a, b] => {
                write_value(w, a)?;
                write_value(w, b)?;
                w.write_all(&[TUPLE2])
            }
            [a, b, c] => {
                write_value(w, a)?;
                write_value(w, b)?;
                write_value(w, c)?;
                w.write_all(&[TUPLE3])
            }
            _ => {
                w.write_all(&[MARK])?;
                for item in items {
                    write_value(w, item)?;
                }
                w.write_all(&[TUPLE])
            }
        },
        Value::Dict(entries) => {
            w.write_all(&[EMPTY_DICT])?;
            for chunk in entries.chunks(BATCH) {
                w.write_all(&[MARK])?;
                for (k, v) in chunk {
                    write_str(w, k)?;
                    write_value(w, v)?;
                }
                w.write_all(&[SETITEMS])?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pickle::{parse, PickleValue};

    /// Integers at the edges of every integer opcode's range.
    const INTS: [i64; 10] = [
        0,
        255,
        256,
        65535,
        65536,
        -1,
        -129,
        i32::MAX as i64 + 1,
        i64::MIN,
        i64::MAX,
    ];

    #[test]
    fn round_trips_through_the_reader() {
        let value = Value::dict([
            ("none", Value::None),
            ("t", Value::Bool(true)),
            ("f", Value::Bool(false)),
            (
                "ints",
                Value::List(INTS.into_iter().map(Value::Int).collect()),
            ),
            ("pi", Value::Float(3.25)),
            ("pool", Value::Tuple(vec![Value::Int(1), Value::Int(2)])),
            ("s", Value::str("é")),
            ("many", Value::List((0..2500).map(Value::Int).collect())),
        ]);
        let bytes = to_bytes(&value);
        let tree = parse(&bytes).unwrap();
        let root = tree.root();
        let get = |k: &str| tree.get(root, tree.string_id(k).unwrap()).unwrap();
        assert_eq!(get("none"), PickleValue::None);
        assert_eq!(get("t"), PickleValue::Bool(true));
        assert_eq!(get("f"), PickleValue::Bool(false));
        assert_eq!(get("pi"), PickleValue::Float(3.25));
        let ints: Vec<PickleValue> = tree.items(get("ints")).unwrap().to_vec();
        let expect: Vec<PickleValue> = INTS.into_iter().map(PickleValue::Int).collect();
        assert_eq!(ints, expect);
        assert_eq!(tree.items(get("pool")).unwrap().len(), 2);
        assert_eq!(tree.items(get("many")).unwrap().len(), 2500);
        match get("s") {
            PickleValue::Str(id) => assert_eq!(tree.str(id), "é"),
            other => panic!("{other:?}"),
        }
    }
}
