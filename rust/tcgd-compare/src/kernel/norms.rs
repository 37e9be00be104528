//! Norm sums rescaled so that squares neither overflow nor underflow.

use super::*;

/// Recomputes the summed metrics with both sides scaled by one power of two, for values
/// whose squares leave the range of `f64`. Cosine and relative L2 do not depend on a
/// common scale; the mean error is scaled back. Returns the scale the sums of squares
/// are left at.
pub(super) fn rescaled_norms(
    reference: Values<'_>,
    candidate: Values<'_>,
    acc: &mut Acc,
) -> Result<f64, CompareError> {
    let exponent = acc.max_mag.log2().floor() as i32;
    let scale = 2f64.powi((-exponent).clamp(-1000, 1000));
    let n = reference.len();
    let tasks = n.div_ceil(TASK);
    let partials: Vec<[f64; 5]> = (0..tasks)
        .into_par_iter()
        .map(|t| {
            let task = t * TASK..((t + 1) * TASK).min(n);
            let mut sums = [0.0f64; 5];
            let mut c = [(0.0f64, 0.0f64); BLOCK];
            let mut r = [(0.0f64, 0.0f64); BLOCK];
            for block in blocks(task) {
                let len = block.len();
                // Real values as complex ones with a zero imaginary part: the same sums.
                decode_as_complex(candidate, block.clone(), &mut c[..len])?;
                decode_as_complex(reference, block, &mut r[..len])?;
                for i in 0..len {
                    let finite = c[i].0.is_finite()
                        && c[i].1.is_finite()
                        && r[i].0.is_finite()
                        && r[i].1.is_finite();
                    if !finite {
                        continue;
                    }
                    let a = (c[i].0 * scale, c[i].1 * scale);
                    let b = (r[i].0 * scale, r[i].1 * scale);
                    let e = (a.0 - b.0).hypot(a.1 - b.1);
                    sums[0] += e;
                    sums[1] += a.0 * b.0 + a.1 * b.1;
                    sums[2] += b.0 * b.0 + b.1 * b.1;
                    sums[3] += a.0 * a.0 + a.1 * a.1;
                    sums[4] += e * e;
                }
            }
            Ok(sums)
        })
        .collect::<Result<_, CompareError>>()?;
    let mut sums = [0.0f64; 5];
    for p in &partials {
        for (s, v) in sums.iter_mut().zip(p) {
            *s += v;
        }
    }
    acc.sum_abs = sums[0] / scale;
    acc.dot = sums[1];
    acc.ref_sq = sums[2];
    acc.cand_sq = sums[3];
    acc.diff_sq = sums[4];
    Ok(scale)
}
