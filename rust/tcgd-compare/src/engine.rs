//! Aligning observations and deciding each pair, in the order the spec fixes: alignment
//! by key, metadata, digest shortcut, summary-only pairs, then element by element.

use std::collections::HashMap;
use std::sync::Arc;

use tcgd_store::PayloadKind;
use tcgd_tensor::DType;

use crate::error::{CompareError, Result};
use crate::format;
use crate::kernel::{self, Values};
use crate::model::{
    Kind, Metrics, ObservationComparison, ObservationMeta, PointComparison, PointRef, Status,
};
use crate::options::{CompareOptions, DtypePolicy, LayoutPolicy, Mode};

/// Bytes of one payload, owned by whoever produced them (a `Vec` read from a run, or a
/// tensor kept alive by the Python layer).
pub trait PayloadBuf: Send + Sync {
    fn bytes(&self) -> &[u8];
}

impl PayloadBuf for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl PayloadBuf for arrow::buffer::Buffer {
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Where the bytes of a set's observations come from. Called only for pairs that need an
/// element-wise comparison, possibly from a worker thread.
pub trait PayloadSource: Send + Sync {
    fn load(&self, index: usize, meta: &ObservationMeta) -> Result<Arc<dyn PayloadBuf>>;
}

/// The observations of one point or snapshot, with a way to fetch their bytes.
#[derive(Clone)]
pub struct ObservationSet {
    pub point: PointRef,
    pub observations: Vec<ObservationMeta>,
    pub source: Arc<dyn PayloadSource>,
}

/// Told how far an element-wise comparison has come, in payload bytes; may stop it by
/// returning an error (the CLI's Ctrl-C).
pub trait Progress: Sync {
    fn report(&self, done: u64, total: u64, current: &str) -> Result<()>;
}

/// A progress sink that reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn report(&self, _done: u64, _total: u64, _current: &str) -> Result<()> {
        Ok(())
    }
}

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
        idx.sort_by_key(|&i| side[i].order);
        let keys: Vec<(String, i64)> = idx
            .iter()
            .map(|&i| (side[i].name.clone(), side[i].invocation_index))
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

fn verdict(
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
        (Some(o), _) | (None, Some(o)) => (o.name.clone(), o.invocation_index),
        (None, None) => (String::new(), 0),
    };
    let template = ObservationComparison {
        position,
        name,
        invocation_index,
        status: Status::Match,
        kind: Kind::Values,
        reason: String::new(),
        reference: reference.map(ObservationMeta::side),
        candidate: candidate.map(ObservationMeta::side),
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
    if r.shape != c.shape {
        differences.push(format!(
            "shape {} vs {}",
            format::dims(&r.shape),
            format::dims(&c.shape)
        ));
    }
    if options.layout_policy == LayoutPolicy::Strict && r.stride != c.stride {
        differences.push(format!(
            "stride {} vs {}",
            format::dims(&r.stride),
            format::dims(&c.stride)
        ));
    }
    if options.dtype_policy == DtypePolicy::Strict && r.dtype != c.dtype {
        differences.push(format!("dtype {} vs {}", r.dtype, c.dtype));
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
    let nan_count = r.summary.map(|s| s.nan).or(c.summary.map(|s| s.nan));

    if r.dtype == c.dtype && r.digest.is_some() && r.digest == c.digest {
        let nans = nan_count.unwrap_or(0);
        if nans == 0 || options.equal_nan {
            return Decision::Done(verdict(
                &template,
                Status::Match,
                Kind::Digest,
                "identical bytes (equal digests)".into(),
                Some(identical_metrics(r.dtype, numel, nan_count)),
            ));
        }
        if !(r.has_payload() && c.has_payload()) {
            let mut metrics = identical_metrics(r.dtype, numel, nan_count);
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
                ("NaN", rs.nan, cs.nan),
                ("+inf", rs.posinf, cs.posinf),
                ("-inf", rs.neginf, cs.neginf),
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
        if options.mode == Mode::Exact && both_digests && r.dtype == c.dtype {
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
fn identical_metrics(dtype: DType, numel: u64, nan: Option<u64>) -> Metrics {
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
        max_ulp_distance: (float && finite > 0).then_some(0),
        nan_introduced: 0,
        inf_introduced: 0,
    }
}

/// Finishes an element-wise comparison: status and reason from the metrics.
fn elementwise_verdict(
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

/// One element-wise comparison waiting for its payloads.
struct Job {
    pair: usize,
    slot: usize,
    reference: usize,
    candidate: usize,
}

type Loaded = (Arc<dyn PayloadBuf>, Arc<dyn PayloadBuf>);

/// Compares pairs of observation sets. Payloads are read only for the pairs that need an
/// element-wise comparison; the next pair's payloads are read while the current pair is
/// compared, and a payload needed by consecutive pairs (a series' reference) is read once.
pub struct Engine<'a> {
    pub options: &'a CompareOptions,
    pub progress: &'a dyn Progress,
}

impl Engine<'_> {
    pub fn compare_pairs(
        &self,
        pairs: &[(&ObservationSet, &ObservationSet)],
    ) -> Result<Vec<Vec<ObservationComparison>>> {
        let mut results: Vec<Vec<Option<ObservationComparison>>> = Vec::new();
        let mut templates: HashMap<(usize, usize), ObservationComparison> = HashMap::new();
        let mut jobs = Vec::new();
        let mut total_bytes = 0u64;
        for (pair, (reference, candidate)) in pairs.iter().enumerate() {
            let aligned = align(&reference.observations, &candidate.observations)?;
            let mut row = Vec::with_capacity(aligned.len());
            for (slot, a) in aligned.iter().enumerate() {
                let r = a.reference.map(|i| &reference.observations[i]);
                let c = a.candidate.map(|i| &candidate.observations[i]);
                match decide(slot, r, c, self.options) {
                    Decision::Done(done) => row.push(Some(done)),
                    Decision::Elementwise(template) => {
                        let (Some(ri), Some(ci)) = (a.reference, a.candidate) else {
                            continue;
                        };
                        total_bytes += payload_len(&reference.observations[ri])
                            + payload_len(&candidate.observations[ci]);
                        templates.insert((pair, slot), template);
                        jobs.push(Job {
                            pair,
                            slot,
                            reference: ri,
                            candidate: ci,
                        });
                        row.push(None);
                    }
                }
            }
            results.push(row);
        }
        // Jobs that share a reference set run key by key, so a series reads each reference
        // payload once; otherwise they keep execution order.
        let set_id = |set: &ObservationSet| std::ptr::from_ref(set) as usize;
        let first_seen: HashMap<usize, usize> = pairs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, (r, _))| (set_id(r), i))
            .collect();
        jobs.sort_by_key(|j| (first_seen[&set_id(pairs[j.pair].0)], j.reference, j.pair));

        let mut done_bytes = 0u64;
        let mut cache = PayloadCache::default();
        let mut next = match jobs.first() {
            Some(job) => Some(self.load(pairs, job, &mut cache)?),
            None => None,
        };
        for (i, job) in jobs.iter().enumerate() {
            let (reference, candidate) = pairs[job.pair];
            let r = &reference.observations[job.reference];
            let c = &candidate.observations[job.candidate];
            self.progress.report(
                done_bytes,
                total_bytes,
                &format!(
                    "{} {}[{}]",
                    reference.point.display(),
                    r.name,
                    r.invocation_index
                ),
            )?;
            let Some(loaded) = next.take() else {
                break;
            };
            let upcoming = jobs.get(i + 1);
            let cache_ref = &mut cache;
            let (metrics, prefetched) = rayon::join(
                || {
                    kernel::compare(
                        Values {
                            dtype: r.dtype,
                            bytes: loaded.0.bytes(),
                        },
                        Values {
                            dtype: c.dtype,
                            bytes: loaded.1.bytes(),
                        },
                        &r.shape,
                        self.options,
                    )
                },
                || upcoming.map(|u| self.load(pairs, u, cache_ref)).transpose(),
            );
            let metrics = metrics?;
            next = prefetched?;
            done_bytes += payload_len(r) + payload_len(c);
            let template = templates
                .remove(&(job.pair, job.slot))
                .ok_or_else(|| CompareError::InvalidInput("internal: lost a comparison".into()))?;
            results[job.pair][job.slot] =
                Some(elementwise_verdict(template, metrics, self.options));
        }
        self.progress.report(done_bytes, total_bytes, "")?;
        Ok(results
            .into_iter()
            .map(|row| row.into_iter().flatten().collect())
            .collect())
    }

    fn load(
        &self,
        pairs: &[(&ObservationSet, &ObservationSet)],
        job: &Job,
        cache: &mut PayloadCache,
    ) -> Result<Loaded> {
        let (reference, candidate) = pairs[job.pair];
        let r = &reference.observations[job.reference];
        let c = &candidate.observations[job.candidate];
        let ref_key = (std::ptr::from_ref(reference) as usize, job.reference);
        let cached = cache.get(ref_key);
        let (ref_bytes, cand_bytes) = rayon::join(
            || match cached {
                Some(bytes) => Ok(bytes),
                None => fetch(reference, job.reference, "reference"),
            },
            || fetch(candidate, job.candidate, "candidate"),
        );
        let ref_bytes = ref_bytes?;
        let cand_bytes = cand_bytes?;
        check_len(r, ref_bytes.bytes().len(), "reference")?;
        check_len(c, cand_bytes.bytes().len(), "candidate")?;
        cache.put(ref_key, ref_bytes.clone());
        Ok((ref_bytes, cand_bytes))
    }
}

/// The last reference payload read, kept for the next job that needs it.
#[derive(Default)]
struct PayloadCache {
    last: Option<((usize, usize), Arc<dyn PayloadBuf>)>,
}

impl PayloadCache {
    fn get(&self, key: (usize, usize)) -> Option<Arc<dyn PayloadBuf>> {
        self.last
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, b)| b.clone())
    }

    fn put(&mut self, key: (usize, usize), bytes: Arc<dyn PayloadBuf>) {
        self.last = Some((key, bytes));
    }
}

fn fetch(set: &ObservationSet, index: usize, side: &'static str) -> Result<Arc<dyn PayloadBuf>> {
    let meta = &set.observations[index];
    set.source.load(index, meta).map_err(|e| match e {
        CompareError::InvalidInput(reason) => CompareError::Payload {
            side,
            name: meta.name.clone(),
            invocation: meta.invocation_index,
            reason,
        },
        other => other,
    })
}

fn payload_len(meta: &ObservationMeta) -> u64 {
    meta.numel()
        .unwrap_or(0)
        .saturating_mul(meta.dtype.itemsize() as u64)
}

fn check_len(meta: &ObservationMeta, len: usize, side: &'static str) -> Result<()> {
    let expected = payload_len(meta);
    if len as u64 != expected || meta.payload != PayloadKind::Full {
        return Err(CompareError::Payload {
            side,
            name: meta.name.clone(),
            invocation: meta.invocation_index,
            reason: format!(
                "{len} bytes, but {} {} needs {expected}",
                meta.dtype,
                format::dims(&meta.shape)
            ),
        });
    }
    Ok(())
}

/// Compares one set against another: a snapshot or point comparison.
pub fn compare_sets(
    reference: &ObservationSet,
    candidate: &ObservationSet,
    options: &CompareOptions,
    progress: &dyn Progress,
) -> Result<PointComparison> {
    let engine = Engine { options, progress };
    let mut rows = engine.compare_pairs(&[(reference, candidate)])?;
    let observations = rows.pop().unwrap_or_default();
    Ok(PointComparison::new(
        0,
        reference.point.clone(),
        candidate.point.clone(),
        observations,
    ))
}
