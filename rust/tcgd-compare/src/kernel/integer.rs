//! Integer and bool values: exact comparison over their whole range.

use super::*;

pub(super) fn integer_task(
    reference: Values<'_>,
    candidate: Values<'_>,
    range: Range<usize>,
) -> Result<Acc, CompareError> {
    let wide = |d: DType| d.itemsize() == 8;
    if !wide(reference.dtype) && !wide(candidate.dtype) {
        // Up to 32 bits every value is exact in f64, so the float loop (exact rule) is
        // exact too, and much faster than going through i128.
        let rule = Rule::exact(false);
        return real_task(reference, candidate, range, rule, None);
    }
    let mut acc = Acc::default();
    for i in range {
        let (Some(c), Some(r)) = (
            integer_at(candidate.dtype, candidate.bytes, i),
            integer_at(reference.dtype, reference.bytes, i),
        ) else {
            return Err(CompareError::InvalidInput(format!(
                "element {i} of an integer payload is out of range"
            )));
        };
        let e = c.abs_diff(r) as f64;
        if c != r {
            acc.mismatches += 1;
            acc.first.get_or_insert(i as u64);
        }
        let (cf, rf) = (c as f64, r as f64);
        acc.finite_pairs += 1;
        acc.sum_abs += e;
        acc.max_abs = acc.max_abs.max(e);
        let rel = if r != 0 {
            e / rf.abs()
        } else if e > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        acc.max_rel = acc.max_rel.max(rel);
        acc.dot += cf * rf;
        acc.ref_sq += rf * rf;
        acc.cand_sq += cf * cf;
        acc.diff_sq += e * e;
        acc.max_mag = acc.max_mag.max(cf.abs()).max(rf.abs());
    }
    Ok(acc)
}
