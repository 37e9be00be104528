//! Complex values: decoded as (re, im) pairs and compared by modulus.

use super::*;

/// Decodes the elements `block` (at most [`BLOCK`]) as complex values: a real value's
/// imaginary part is zero.
pub(super) fn decode_as_complex(
    values: Values<'_>,
    block: Range<usize>,
    out: &mut [(f64, f64)],
) -> Result<(), CompareError> {
    let bytes = values.range(block.start, block.end);
    if values.dtype.is_complex() {
        decode_complex(values.dtype, bytes, out).map_err(decode_error)?;
    } else {
        let mut real = [0.0f64; BLOCK];
        let real = &mut real[..out.len()];
        decode_real(values.dtype, bytes, real).map_err(decode_error)?;
        for (o, &x) in out.iter_mut().zip(real.iter()) {
            *o = (x, 0.0);
        }
    }
    Ok(())
}

pub(super) fn complex_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    range: Range<usize>,
    rule: Rule,
) -> Result<Acc, CompareError> {
    let mut acc = Acc::default();
    let mut c = [(0.0f64, 0.0f64); BLOCK];
    let mut r = [(0.0f64, 0.0f64); BLOCK];
    for block in blocks(range) {
        let (at, len) = (block.start, block.len());
        decode_as_complex(candidate, block.clone(), &mut c[..len])?;
        decode_as_complex(reference, block, &mut r[..len])?;
        for i in 0..len {
            let (a, b) = (c[i], r[i]);
            if !rule.complex_close(a, b) {
                acc.mismatches += 1;
                acc.first.get_or_insert((at + i) as u64);
            }
            let a_nan = a.0.is_nan() || a.1.is_nan();
            let b_nan = b.0.is_nan() || b.1.is_nan();
            let a_inf = !a_nan && (a.0.is_infinite() || a.1.is_infinite());
            let b_inf = !b_nan && (b.0.is_infinite() || b.1.is_infinite());
            acc.nan_introduced += u64::from(a_nan && !b_nan);
            acc.inf_introduced += u64::from(a_inf && !b_inf);
            if a_nan || b_nan || a_inf || b_inf {
                continue;
            }
            let e = (a.0 - b.0).hypot(a.1 - b.1);
            let (ma, mb) = (a.0.hypot(a.1), b.0.hypot(b.1));
            acc.finite_pairs += 1;
            acc.sum_abs += e;
            acc.max_abs = acc.max_abs.max(e);
            let rel = if mb > 0.0 {
                e / mb
            } else if e > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            acc.max_rel = acc.max_rel.max(rel);
            // Re<c, r> with the Hermitian inner product: 1 for equal vectors.
            acc.dot += a.0 * b.0 + a.1 * b.1;
            acc.ref_sq += b.0 * b.0 + b.1 * b.1;
            acc.cand_sq += a.0 * a.0 + a.1 * a.1;
            acc.diff_sq += e * e;
            acc.max_mag = acc.max_mag.max(ma).max(mb);
        }
    }
    Ok(acc)
}
