//! Element decoding: raw little-endian bytes of any [`DType`] to `f64` values.
//!
//! Every supported element is exactly representable in `f64` except `int64` and
//! `uint64` magnitudes above 2^53, which round to nearest like `tensor.double()`.
//!
//! Two levels are offered. [`decode_real`] and [`decode_complex`] fill a caller-owned
//! buffer, which suits walking two tensors in lock step. [`for_each_real_chunk`] and
//! [`for_each_complex_chunk`] walk a whole tensor through a stack buffer of
//! [`DECODE_CHUNK`] elements. Neither allocates.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use crate::dtype::DType;
use crate::float8;
/// Elements per chunk handed out by [`for_each_real_chunk`] and
/// [`for_each_complex_chunk`]; small enough that a chunk stays in L1 cache.
pub const DECODE_CHUNK: usize = 512;

/// Why bytes could not be summarised: they are not a whole number of elements (found
/// while decoding, so declared here, beside the decoders).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The byte length is not a multiple of the dtype's itemsize.
    #[error(
        "{len} bytes is not a whole number of {dtype} elements \
         ({len} is not a multiple of the itemsize {itemsize})"
    )]
    RaggedBytes {
        dtype: DType,
        len: usize,
        itemsize: usize,
    },
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The byte length is not a multiple of the dtype's itemsize: the error
    /// [`summarize`](crate::summarize) gives for such bytes too.
    #[error(transparent)]
    RaggedBytes(#[from] SummaryError),
    /// A complex dtype was given to a real decoder.
    #[error("dtype {0} is complex: decode it as (re, im) pairs")]
    Complex(DType),
    /// A real dtype was given to a complex decoder.
    #[error("dtype {0} is not complex: decode it as real values")]
    NotComplex(DType),
}

/// Decodes the leading elements of `bytes` (a real dtype) into `out`.
///
/// Decodes `min(out.len(), bytes.len() / dtype.itemsize())` elements and returns that
/// count. Integers convert with `as f64`, `bool` is 1.0 for any non-zero byte, float8
/// formats decode exactly through 256-entry tables, and NaN payloads are not preserved.
///
/// # Errors
/// [`DecodeError::Complex`] for complex dtypes, [`DecodeError::RaggedBytes`] when
/// `bytes` does not hold a whole number of elements.
pub fn decode_real(dtype: DType, bytes: &[u8], out: &mut [f64]) -> Result<usize, DecodeError> {
    decode_leading(dtype, bytes, out)
}

/// Decodes the leading elements of `bytes` (a complex dtype) into `(re, im)` pairs.
///
/// `complex32` is two `float16` parts, `complex64` two `float32`, `complex128` two
/// `float64`, real part first. Decodes `min(out.len(), bytes.len() / itemsize)`
/// elements and returns that count.
///
/// # Errors
/// [`DecodeError::NotComplex`] for real dtypes, [`DecodeError::RaggedBytes`] when
/// `bytes` does not hold a whole number of elements.
pub fn decode_complex(
    dtype: DType,
    bytes: &[u8],
    out: &mut [(f64, f64)],
) -> Result<usize, DecodeError> {
    decode_leading(dtype, bytes, out)
}

/// Calls `f` with consecutive chunks of at most [`DECODE_CHUNK`] decoded values,
/// covering every element of `bytes` in order.
///
/// # Errors
/// As [`decode_real`]; nothing is decoded when an error is returned.
pub fn for_each_real_chunk(
    dtype: DType,
    bytes: &[u8],
    f: impl FnMut(&[f64]),
) -> Result<(), DecodeError> {
    for_each_chunk(dtype, bytes, f)
}

/// Calls `f` with consecutive chunks of at most [`DECODE_CHUNK`] decoded `(re, im)`
/// pairs, covering every element of `bytes` in order.
///
/// # Errors
/// As [`decode_complex`]; nothing is decoded when an error is returned.
pub fn for_each_complex_chunk(
    dtype: DType,
    bytes: &[u8],
    f: impl FnMut(&[(f64, f64)]),
) -> Result<(), DecodeError> {
    for_each_chunk(dtype, bytes, f)
}

/// What a decoder writes: `f64` for the real dtypes, `(re, im)` for the complex ones.
trait Element: Copy {
    const ZERO: Self;
    /// `Ok` when `dtype` decodes to this element type.
    fn check_kind(dtype: DType) -> Result<(), DecodeError>;
    /// Decodes `out.len()` elements; `bytes` holds exactly that many.
    fn decode_exact(dtype: DType, bytes: &[u8], out: &mut [Self]);
}

impl Element for f64 {
    const ZERO: f64 = 0.0;

    fn check_kind(dtype: DType) -> Result<(), DecodeError> {
        match dtype.is_complex() {
            true => Err(DecodeError::Complex(dtype)),
            false => Ok(()),
        }
    }

    fn decode_exact(dtype: DType, bytes: &[u8], out: &mut [f64]) {
        decode_real_exact(dtype, bytes, out);
    }
}

impl Element for (f64, f64) {
    const ZERO: (f64, f64) = (0.0, 0.0);

    fn check_kind(dtype: DType) -> Result<(), DecodeError> {
        match dtype.is_complex() {
            true => Ok(()),
            false => Err(DecodeError::NotComplex(dtype)),
        }
    }

    fn decode_exact(dtype: DType, bytes: &[u8], out: &mut [(f64, f64)]) {
        decode_complex_exact(dtype, bytes, out);
    }
}

fn decode_leading<T: Element>(
    dtype: DType,
    bytes: &[u8],
    out: &mut [T],
) -> Result<usize, DecodeError> {
    T::check_kind(dtype)?;
    check_whole(dtype, bytes)?;
    let n = out.len().min(bytes.len() / dtype.itemsize());
    T::decode_exact(dtype, &bytes[..n * dtype.itemsize()], &mut out[..n]);
    Ok(n)
}

fn for_each_chunk<T: Element>(
    dtype: DType,
    bytes: &[u8],
    mut f: impl FnMut(&[T]),
) -> Result<(), DecodeError> {
    T::check_kind(dtype)?;
    check_whole(dtype, bytes)?;
    let mut buf = [T::ZERO; DECODE_CHUNK];
    for src in bytes.chunks(DECODE_CHUNK * dtype.itemsize()) {
        let out = &mut buf[..src.len() / dtype.itemsize()];
        T::decode_exact(dtype, src, out);
        f(out);
    }
    Ok(())
}

/// Checks that `bytes` holds a whole number of `dtype` elements.
pub(crate) fn check_whole(dtype: DType, bytes: &[u8]) -> Result<(), SummaryError> {
    let itemsize = dtype.itemsize();
    if bytes.len() % itemsize == 0 {
        Ok(())
    } else {
        Err(SummaryError::RaggedBytes {
            dtype,
            len: bytes.len(),
            itemsize,
        })
    }
}

/// Decodes `out.len()` real elements; callers guarantee a real dtype and
/// `bytes.len() == out.len() * itemsize`.
#[inline(always)]
pub(crate) fn decode_real_exact(dtype: DType, bytes: &[u8], out: &mut [f64]) {
    debug_assert!(!dtype.is_complex());
    debug_assert_eq!(bytes.len(), out.len() * dtype.itemsize());
    match dtype {
        DType::Float64 => map_le(bytes, out, f64::from_le_bytes),
        DType::Float32 => map_le(bytes, out, |b| f64::from(f32::from_le_bytes(b))),
        DType::Float16 => decode_f16(bytes, out),
        DType::BFloat16 => map_le(bytes, out, |b| {
            f64::from(bf16::from_bits(u16::from_le_bytes(b)).to_f32())
        }),
        DType::Float8E4M3Fn => map_table(bytes, out, &float8::F8_E4M3FN),
        DType::Float8E4M3Fnuz => map_table(bytes, out, &float8::F8_E4M3FNUZ),
        DType::Float8E5M2 => map_table(bytes, out, &float8::F8_E5M2),
        DType::Float8E5M2Fnuz => map_table(bytes, out, &float8::F8_E5M2FNUZ),
        DType::Float8E8M0Fnu => map_table(bytes, out, &float8::F8_E8M0FNU),
        DType::Int8 => map_le(bytes, out, |b| f64::from(i8::from_le_bytes(b))),
        DType::Int16 => map_le(bytes, out, |b| f64::from(i16::from_le_bytes(b))),
        DType::Int32 => map_le(bytes, out, |b| f64::from(i32::from_le_bytes(b))),
        DType::Int64 => map_le(bytes, out, |b| i64::from_le_bytes(b) as f64),
        DType::UInt8 => map_le(bytes, out, |b| f64::from(u8::from_le_bytes(b))),
        DType::UInt16 => map_le(bytes, out, |b| f64::from(u16::from_le_bytes(b))),
        DType::UInt32 => map_le(bytes, out, |b| f64::from(u32::from_le_bytes(b))),
        DType::UInt64 => map_le(bytes, out, |b| u64::from_le_bytes(b) as f64),
        DType::Bool => map_le(bytes, out, |[b]: [u8; 1]| f64::from(u8::from(b != 0))),
        DType::Complex32 | DType::Complex64 | DType::Complex128 => {}
    }
}

/// Decodes `out.len()` complex elements; callers guarantee a complex dtype and
/// `bytes.len() == out.len() * itemsize`.
pub(crate) fn decode_complex_exact(dtype: DType, bytes: &[u8], out: &mut [(f64, f64)]) {
    debug_assert!(dtype.is_complex());
    debug_assert_eq!(bytes.len(), out.len() * dtype.itemsize());
    match dtype {
        DType::Complex32 => map_le(bytes, out, |[a, b, c, d]: [u8; 4]| {
            let part = |lo, hi| f16::from_bits(u16::from_le_bytes([lo, hi])).to_f64();
            (part(a, b), part(c, d))
        }),
        DType::Complex64 => map_le(bytes, out, |b: [u8; 8]| {
            let [r0, r1, r2, r3, i0, i1, i2, i3] = b;
            (
                f64::from(f32::from_le_bytes([r0, r1, r2, r3])),
                f64::from(f32::from_le_bytes([i0, i1, i2, i3])),
            )
        }),
        DType::Complex128 => map_le(bytes, out, |b: [u8; 16]| {
            let mut re = [0u8; 8];
            let mut im = [0u8; 8];
            re.copy_from_slice(&b[..8]);
            im.copy_from_slice(&b[8..]);
            (f64::from_le_bytes(re), f64::from_le_bytes(im))
        }),
        _ => {}
    }
}

/// Each `N` bytes of `bytes` through `f`, into `out`.
#[inline(always)]
fn map_le<const N: usize, T>(bytes: &[u8], out: &mut [T], f: impl Fn([u8; N]) -> T) {
    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(N)) {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        *o = f(a);
    }
}

#[inline(always)]
fn map_table(bytes: &[u8], out: &mut [f64], table: &[f64; 256]) {
    for (o, &b) in out.iter_mut().zip(bytes) {
        *o = table[usize::from(b)];
    }
}

/// Goes through half's slice conversion, which uses F16C when the CPU has it;
/// the scalar fallback is several times slower.
fn decode_f16(bytes: &[u8], out: &mut [f64]) {
    const STAGE: usize = 256;
    let mut stage = [f16::ZERO; STAGE];
    for (src, dst) in bytes.chunks(STAGE * 2).zip(out.chunks_mut(STAGE)) {
        let halves = &mut stage[..dst.len()];
        for (h, c) in halves.iter_mut().zip(src.chunks_exact(2)) {
            *h = f16::from_bits(u16::from_le_bytes([c[0], c[1]]));
        }
        halves.convert_to_f64_slice(dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real(dtype: DType, bytes: &[u8]) -> Vec<f64> {
        let mut out = vec![f64::NAN; bytes.len() / dtype.itemsize()];
        let n = decode_real(dtype, bytes, &mut out).unwrap();
        assert_eq!(n, out.len());
        out
    }

    fn le_bytes<T: Copy, const N: usize>(xs: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        xs.iter().flat_map(|&x| to(x)).collect()
    }

    #[test]
    fn integer_extremes_convert_like_torch_double() {
        let cases: Vec<(DType, Vec<u8>, Vec<f64>)> = vec![
            (
                DType::Int8,
                le_bytes(&[i8::MIN, -1, 0, i8::MAX], i8::to_le_bytes),
                vec![-128.0, -1.0, 0.0, 127.0],
            ),
            (
                DType::Int16,
                le_bytes(&[i16::MIN, i16::MAX], i16::to_le_bytes),
                vec![-32768.0, 32767.0],
            ),
            (
                DType::Int32,
                le_bytes(&[i32::MIN, i32::MAX], i32::to_le_bytes),
                vec![-2147483648.0, 2147483647.0],
            ),
            (
                DType::Int64,
                le_bytes(&[i64::MIN, i64::MAX, -3], i64::to_le_bytes),
                // i64::MAX rounds up to 2^63, as in tensor.double().
                vec![-(2f64.powi(63)), 2f64.powi(63), -3.0],
            ),
            (
                DType::UInt8,
                le_bytes(&[0u8, 255], u8::to_le_bytes),
                vec![0.0, 255.0],
            ),
            (
                DType::UInt16,
                le_bytes(&[u16::MAX], u16::to_le_bytes),
                vec![65535.0],
            ),
            (
                DType::UInt32,
                le_bytes(&[u32::MAX], u32::to_le_bytes),
                vec![4294967295.0],
            ),
            (
                DType::UInt64,
                le_bytes(&[u64::MAX, 1], u64::to_le_bytes),
                vec![2f64.powi(64), 1.0],
            ),
            (DType::Bool, vec![0, 1, 2, 0xFF], vec![0.0, 1.0, 1.0, 1.0]),
        ];
        for (dtype, bytes, want) in cases {
            assert_eq!(real(dtype, &bytes), want, "{dtype}");
        }
    }

    #[test]
    fn half_precision_specials() {
        // The bits of 0, -0, 1, the largest finite value, the smallest subnormal, inf,
        // -inf and NaN; and the two values that differ between the formats.
        let cases: [(DType, [u16; 8], f64, f64); 2] = [
            (
                DType::Float16,
                [
                    0x0000, 0x8000, 0x3C00, 0x7BFF, 0x0001, 0x7C00, 0xFC00, 0x7E00,
                ],
                65504.0,
                2f64.powi(-24),
            ),
            (
                DType::BFloat16,
                [
                    0x0000, 0x8000, 0x3F80, 0x7F7F, 0x0001, 0x7F80, 0xFF80, 0x7FC0,
                ],
                f64::from(f32::from_bits(0x7F7F_0000)),
                2f64.powi(-133),
            ),
        ];
        for (dtype, bits, max, tiny) in cases {
            let got = real(dtype, &le_bytes(&bits, u16::to_le_bytes));
            assert_eq!(
                &got[..7],
                &[0.0, -0.0, 1.0, max, tiny, f64::INFINITY, f64::NEG_INFINITY],
                "{dtype}"
            );
            assert!(got[1].is_sign_negative());
            assert!(got[7].is_nan());
        }
    }

    #[test]
    fn f16_matches_scalar_conversion_across_stage_boundaries() {
        let bits: Vec<u16> = (0..1000u16).map(|i| i.wrapping_mul(65)).collect();
        let got = real(DType::Float16, &le_bytes(&bits, u16::to_le_bytes));
        for (g, b) in got.iter().zip(&bits) {
            let want = f16::from_bits(*b).to_f64();
            assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()));
        }
    }

    #[test]
    fn complex_parts_in_order() {
        let mut bytes = Vec::new();
        bytes.extend(f16::from_f64(1.5).to_le_bytes());
        bytes.extend(f16::from_f64(-2.0).to_le_bytes());
        let mut out = [(0.0, 0.0); 4];
        assert_eq!(decode_complex(DType::Complex32, &bytes, &mut out), Ok(1));
        assert_eq!(out[0], (1.5, -2.0));

        let bytes = le_bytes(&[3.25f32, -0.5, 7.0, 8.0], f32::to_le_bytes);
        assert_eq!(decode_complex(DType::Complex64, &bytes, &mut out), Ok(2));
        assert_eq!(&out[..2], &[(3.25, -0.5), (7.0, 8.0)]);

        let bytes = le_bytes(&[1e300f64, -1e-300], f64::to_le_bytes);
        assert_eq!(decode_complex(DType::Complex128, &bytes, &mut out), Ok(1));
        assert_eq!(out[0], (1e300, -1e-300));
    }

    #[test]
    fn partial_output_and_kind_errors() {
        let bytes = le_bytes(&[1.0f32, 2.0, 3.0], f32::to_le_bytes);
        let mut out = [0.0; 2];
        assert_eq!(decode_real(DType::Float32, &bytes, &mut out), Ok(2));
        assert_eq!(out, [1.0, 2.0]);
        assert_eq!(
            decode_real(DType::Float32, &bytes[..5], &mut out),
            Err(DecodeError::RaggedBytes(SummaryError::RaggedBytes {
                dtype: DType::Float32,
                len: 5,
                itemsize: 4
            }))
        );
        assert_eq!(
            decode_real(DType::Complex64, &bytes[..8], &mut out),
            Err(DecodeError::Complex(DType::Complex64))
        );
        let mut pairs = [(0.0, 0.0); 1];
        assert_eq!(
            decode_complex(DType::Float64, &bytes[..8], &mut pairs),
            Err(DecodeError::NotComplex(DType::Float64))
        );
    }

    #[test]
    fn chunk_walk_covers_every_element_in_order() {
        let n = 3 * DECODE_CHUNK + 7;
        let values: Vec<i32> = (0..n as i32).map(|i| i * 3 - 5).collect();
        let bytes = le_bytes(&values, i32::to_le_bytes);
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for_each_real_chunk(DType::Int32, &bytes, |c| {
            sizes.push(c.len());
            seen.extend_from_slice(c);
        })
        .unwrap();
        assert_eq!(sizes, vec![DECODE_CHUNK, DECODE_CHUNK, DECODE_CHUNK, 7]);
        let want: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(seen, want);

        let parts: Vec<f64> = (0..2 * n).map(|i| i as f64).collect();
        let bytes = le_bytes(&parts, f64::to_le_bytes);
        let mut count = 0;
        for_each_complex_chunk(DType::Complex128, &bytes, |c| {
            for &(re, im) in c {
                assert_eq!((re, im), ((2 * count) as f64, (2 * count + 1) as f64));
                count += 1;
            }
        })
        .unwrap();
        assert_eq!(count, n);
        assert!(for_each_real_chunk(DType::Complex128, &bytes, |_| {}).is_err());
        assert!(for_each_complex_chunk(DType::Float64, &bytes, |_| {}).is_err());
    }
}

/// The exact value of element `index` of an integer or bool dtype, or `None` for floating
/// and complex dtypes (and for an index past the end). Checks and comparisons use it so
/// that int64 / uint64 values beyond 2^53 compare exactly, which `f64` cannot.
pub fn integer_at(dtype: DType, bytes: &[u8], index: usize) -> Option<i128> {
    let size = dtype.itemsize();
    let start = index.checked_mul(size)?;
    let raw = bytes.get(start..start.checked_add(size)?)?;
    let mut le = [0u8; 8];
    le[..size.min(8)].copy_from_slice(&raw[..size.min(8)]);
    Some(match dtype {
        DType::Bool => i128::from(raw[0] != 0),
        DType::UInt8 => i128::from(raw[0]),
        DType::Int8 => i128::from(raw[0] as i8),
        DType::UInt16 => i128::from(u16::from_le_bytes([le[0], le[1]])),
        DType::Int16 => i128::from(i16::from_le_bytes([le[0], le[1]])),
        DType::UInt32 => i128::from(u32::from_le_bytes([le[0], le[1], le[2], le[3]])),
        DType::Int32 => i128::from(i32::from_le_bytes([le[0], le[1], le[2], le[3]])),
        DType::UInt64 => i128::from(u64::from_le_bytes(le)),
        DType::Int64 => i128::from(i64::from_le_bytes(le)),
        _ => return None,
    })
}

#[cfg(test)]
mod integer_tests {
    use super::*;

    #[test]
    fn integers_are_exact_beyond_f64_precision() {
        let big = (1u64 << 63) + 1;
        assert_eq!(
            integer_at(DType::UInt64, &big.to_le_bytes(), 0),
            Some(i128::from(big))
        );
        let neg = i64::MIN + 1;
        assert_eq!(
            integer_at(DType::Int64, &neg.to_le_bytes(), 0),
            Some(i128::from(neg))
        );
        assert_eq!(integer_at(DType::Int8, &[0xFF, 1], 1), Some(1));
        assert_eq!(integer_at(DType::Int8, &[0xFF], 0), Some(-1));
        assert_eq!(integer_at(DType::Bool, &[0, 2], 1), Some(1));
        assert_eq!(integer_at(DType::Float32, &[0; 4], 0), None);
        assert_eq!(integer_at(DType::Int32, &[0; 4], 1), None);
    }
}
