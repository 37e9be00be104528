//! Alignment of the two sides and the verdict of each pair, from metadata to element-wise metrics.

use std::collections::HashMap;

use tcgd_tensor::DType;

use crate::error::{CompareError, Result};
use crate::format;
use crate::model::{
    Kind, Metrics, ObservationComparison, ObservationMeta, ObservationSide, Status,
};
use crate::options::{CompareOptions, DtypePolicy, LayoutPolicy, Mode};

/// One aligned key: an index into each side's observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Aligned {
    pub reference: Option<usize>,
    pub candidate: Option<usize>,
}

/// Aligns two key sequences, each already in execution order: the reference's order,
/// with each candidate-only key placed right after the key that precedes it in the
/// candidate's order. Keys must be unique within each side.
pub(crate) fn align_ordered<K: std::hash::Hash + Eq>(
    reference: &[K],
    candidate: &[K],
) -> Vec<Aligned> {
    let ref_pos: HashMap<&K, usize> = reference.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let cand_pos: HashMap<&K, usize> = candidate.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let mut inserts: Vec<Vec<usize>> = vec![Vec::new(); reference.len() + 1];
    let mut anchor = 0;
    for (c, key) in candidate.iter().enumerate() {
        match ref_pos.get(key) {
            Some(&r) => anchor = r + 1,
            None => inserts[anchor].push(c),
        }
    }
    let mut out = Vec::with_capacity(reference.len() + candidate.len());
    for (pos, slot) in inserts.into_iter().enumerate() {
        out.extend(slot.into_iter().map(|c| Aligned {
            reference: None,
            candidate: Some(c),
        }));
        if let Some(key) = reference.get(pos) {
            out.push(Aligned {
                reference: Some(pos),
                candidate: cand_pos.get(key).copied(),
            });
        }
    }
    out
}

/// Aligns two observation lists by `(name, invocation_index)` in execution order (see
/// [`align_ordered`]); indices refer to the unsorted lists.
pub(crate) fn align(
    reference: &[ObservationMeta],
    candidate: &[ObservationMeta],
) -> Result<Vec<Aligned>> {
    type Sorted = (Vec<usize>, Vec<(String, i64)>);
    let sorted = |side: &[ObservationMeta], what: &str| -> Result<Sorted> {
        let mut idx: Vec<usize> = (0..side.len()).collect();
        idx.sort_by_key(|&i| side[i].descriptor.order);
        let keys: Vec<(String, i64)> = idx
            .iter()
            .map(|&i| {
                (
                    side[i].descriptor.name.clone(),
                    side[i].descriptor.invocation_index,
                )
            })
            .collect();
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        for (name, inv) in &keys {
            if !seen.insert((name, inv)) {
                return Err(CompareError::InvalidInput(format!(
                    "the {what} has observation ('{name}', invocation {inv}) twice; keys \
                     must be unique within a point"
                )));
            }
        }
        Ok((idx, keys))
    };
    let (ref_idx, ref_keys) = sorted(reference, "reference")?;
    let (cand_idx, cand_keys) = sorted(candidate, "candidate")?;
    Ok(align_ordered(&ref_keys, &cand_keys)
        .into_iter()
        .map(|a| Aligned {
            reference: a.reference.map(|i| ref_idx[i]),
            candidate: a.candidate.map(|i| cand_idx[i]),
        })
        .collect())
}

/// The verdict on one pair before any bytes are read, or the need to read them.
pub(crate) enum Decision {
    Done(ObservationComparison),
    Elementwise(ObservationComparison),
}

pub(crate) fn verdict(
    template: &ObservationComparison,
    status: Status,
    kind: Kind,
    reason: String,
    metrics: Option<Metrics>,
) -> ObservationComparison {
    ObservationComparison {
        status,
        kind,
        reason,
        metrics,
        ..template.clone()
    }
}

/// Applies every rule that needs no payload bytes.
pub(crate) fn decide(
    position: usize,
    reference: Option<&ObservationMeta>,
    candidate: Option<&ObservationMeta>,
    options: &CompareOptions,
) -> Decision {
    let (name, invocation_index) = match (reference, candidate) {
        (Some(o), _) | (None, Some(o)) => {
            (o.descriptor.name.clone(), o.descriptor.invocation_index)
        }
        (None, None) => (String::new(), 0),
    };
    let template = ObservationComparison {
        position,
        name,
        invocation_index,
        status: Status::Match,
        kind: Kind::Values,
        reason: String::new(),
        reference: reference.map(ObservationSide::of),
        candidate: candidate.map(ObservationSide::of),
        metrics: None,
    };
    let (r, c) = match (reference, candidate) {
        (Some(r), Some(c)) => (r, c),
        (Some(_), None) => {
            return Decision::Done(verdict(
                &template,
                Status::Mismatch,
                Kind::ReferenceOnly,
                "recorded in the reference only".into(),
                None,
            ))
        }
        _ => {
            return Decision::Done(verdict(
                &template,
                Status::Mismatch,
                Kind::CandidateOnly,
                "recorded in the candidate only".into(),
                None,
            ))
        }
    };

    let mut differences = Vec::new();
    if r.descriptor.shape != c.descriptor.shape {
        differences.push(format!(
            "shape {} vs {}",
            format::dims(&r.descriptor.shape),
            format::dims(&c.descriptor.shape)
        ));
    }
    if options.layout_policy == LayoutPolicy::Strict && r.descriptor.stride != c.descriptor.stride {
        differences.push(format!(
            "stride {} vs {}",
            format::dims(&r.descriptor.stride),
            format::dims(&c.descriptor.stride)
        ));
    }
    if options.dtype_policy == DtypePolicy::Strict && r.descriptor.dtype != c.descriptor.dtype {
        differences.push(format!(
            "dtype {} vs {}",
            r.descriptor.dtype, c.descriptor.dtype
        ));
    }
    if !differences.is_empty() {
        return Decision::Done(verdict(
            &template,
            Status::Mismatch,
            Kind::Metadata,
            differences.join("; "),
            None,
        ));
    }
    let numel = r.numel().unwrap_or(0);
    let nan_count = r
        .summary
        .map(|s| s.nan_count)
        .or(c.summary.map(|s| s.nan_count));

    if r.descriptor.dtype == c.descriptor.dtype && r.digest.is_some() && r.digest == c.digest {
        let nans = nan_count.unwrap_or(0);
        if nans == 0 || options.equal_nan {
            return Decision::Done(verdict(
                &template,
                Status::Match,
                Kind::Digest,
                "identical bytes (equal digests)".into(),
                Some(identical_metrics(r.descriptor.dtype, numel, nan_count)),
            ));
        }
        if !(r.has_payload() && c.has_payload()) {
            let mut metrics = identical_metrics(r.descriptor.dtype, numel, nan_count);
            metrics.mismatch_count = nans;
            metrics.mismatch_fraction = nans as f64 / numel.max(1) as f64;
            return Decision::Done(verdict(
                &template,
                Status::Mismatch,
                Kind::Digest,
                format!(
                    "identical bytes, but {nans} NaN element{} and equal_nan is off",
                    if nans == 1 { "" } else { "s" }
                ),
                Some(metrics),
            ));
        }
        // Both payloads are there: compare them to locate the NaNs.
    }

    if !(r.has_payload() && c.has_payload()) {
        if let (Some(rs), Some(cs)) = (r.summary, c.summary) {
            let classes = [
                ("NaN", rs.nan_count, cs.nan_count),
                ("+inf", rs.pos_inf_count, cs.pos_inf_count),
                ("-inf", rs.neg_inf_count, cs.neg_inf_count),
            ];
            let differing: Vec<String> = classes
                .iter()
                .filter(|(_, a, b)| a != b)
                .map(|(what, a, b)| format!("{what} count {a} vs {b}"))
                .collect();
            if !differing.is_empty() {
                // Some element is NaN (or infinite) on one side only: never close.
                return Decision::Done(verdict(
                    &template,
                    Status::Mismatch,
                    Kind::Summary,
                    format!("summaries differ: {}", differing.join(", ")),
                    None,
                ));
            }
        }
        let both_digests = r.digest.is_some() && c.digest.is_some();
        if options.mode == Mode::Exact && both_digests && r.descriptor.dtype == c.descriptor.dtype {
            return Decision::Done(verdict(
                &template,
                Status::Mismatch,
                Kind::Digest,
                "different bytes (digests differ) in exact mode; values were not stored, so \
                 no element is located"
                    .into(),
                None,
            ));
        }
        let missing: Vec<&str> = [("reference", r), ("candidate", c)]
            .iter()
            .filter(|(_, o)| !o.has_payload())
            .map(|(side, _)| *side)
            .collect();
        return Decision::Done(verdict(
            &template,
            Status::Inconclusive,
            Kind::Summary,
            format!(
                "the {} {} only a summary; record with payload=\"full\" to compare values",
                missing.join(" and "),
                if missing.len() == 1 { "has" } else { "have" }
            ),
            None,
        ));
    }
    Decision::Elementwise(template)
}

/// Metrics of two identical byte strings: nothing differs except NaNs, which differ from
/// themselves unless `equal_nan`.
pub(crate) fn identical_metrics(dtype: DType, numel: u64, nan: Option<u64>) -> Metrics {
    let finite = numel.saturating_sub(nan.unwrap_or(0));
    let float = dtype.is_floating_point() || dtype.is_complex();
    Metrics {
        compared_as: if dtype.is_complex() {
            "complex128"
        } else if dtype.is_floating_point() {
            "float64"
        } else {
            "integer"
        },
        total: numel,
        mismatch_count: 0,
        mismatch_fraction: 0.0,
        finite_pairs: finite,
        max_abs_error: (finite > 0).then_some(0.0),
        max_rel_error: (finite > 0).then_some(0.0),
        mean_abs_error: (finite > 0).then_some(0.0),
        first_mismatch: None,
        cosine_similarity: (finite > 0).then_some(1.0),
        relative_l2_error: (finite > 0).then_some(0.0),
        rmse: (finite > 0).then_some(0.0),
        max_ulp_distance: (float && finite > 0).then_some(0),
        nan_introduced: 0,
        inf_introduced: 0,
    }
}

/// Finishes an element-wise comparison: status and reason from the metrics.
pub(crate) fn elementwise_verdict(
    template: ObservationComparison,
    metrics: Metrics,
    options: &CompareOptions,
) -> ObservationComparison {
    let n = metrics.total;
    let dtype = template.dtype().unwrap_or(DType::Float64);
    let (status, reason) = if metrics.mismatch_count == 0 {
        let how = if options.mode == Mode::Exact || metrics.compared_as == "integer" {
            "equal"
        } else {
            "within tolerance"
        };
        (
            Status::Match,
            match n {
                0 => "empty: nothing to compare".to_owned(),
                1 => format!("the element is {how}"),
                _ => format!("all {n} elements {how}"),
            },
        )
    } else {
        let mut reason = format!(
            "{} of {n} element{} differ{} ({})",
            metrics.mismatch_count,
            if n == 1 { "" } else { "s" },
            if metrics.mismatch_count == 1 { "s" } else { "" },
            format::fraction(metrics.mismatch_fraction)
        );
        if let Some(first) = &metrics.first_mismatch {
            let cand_dtype = template
                .candidate
                .as_ref()
                .and_then(|s| DType::from_torch_name(&s.dtype).ok())
                .unwrap_or(dtype);
            reason.push_str(&format!(
                "; first at {}: reference {}, candidate {}",
                format::coordinate(&first.coordinate),
                first.reference.display(dtype),
                first.candidate.display(cand_dtype)
            ));
        }
        if let Some(max_abs) = metrics.max_abs_error.filter(|&m| m > 0.0) {
            reason.push_str(&format!("; max abs error {}", format::general(max_abs)));
        }
        (Status::Mismatch, reason)
    };
    ObservationComparison {
        status,
        kind: Kind::Values,
        reason,
        metrics: Some(metrics),
        ..template
    }
}
