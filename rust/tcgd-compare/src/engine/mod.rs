//! Aligning observations and deciding each pair, in the order the spec fixes: alignment
//! by key, metadata, digest shortcut, summary-only pairs, then element by element.

use std::collections::HashMap;
use std::sync::Arc;

use tcgd_store::PayloadKind;

use crate::error::{CompareError, Result};
use crate::format;
use crate::kernel::{self, Values};
use crate::model::{ObservationComparison, ObservationMeta, PointComparison, PointRef};
use crate::options::CompareOptions;

/// Bytes of one payload, owned by whoever produced them (a `Vec` read from a run, or a
mod verdict;

pub(crate) use verdict::*;

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
                    r.descriptor.name,
                    r.descriptor.invocation_index
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
                            dtype: r.descriptor.dtype,
                            bytes: loaded.0.bytes(),
                        },
                        Values {
                            dtype: c.descriptor.dtype,
                            bytes: loaded.1.bytes(),
                        },
                        &r.descriptor.shape,
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
            name: meta.descriptor.name.clone(),
            invocation: meta.descriptor.invocation_index,
            reason,
        },
        other => other,
    })
}

fn payload_len(meta: &ObservationMeta) -> u64 {
    meta.numel()
        .unwrap_or(0)
        .saturating_mul(meta.descriptor.dtype.itemsize() as u64)
}

fn check_len(meta: &ObservationMeta, len: usize, side: &'static str) -> Result<()> {
    let expected = payload_len(meta);
    if len as u64 != expected || meta.descriptor.payload != PayloadKind::Full {
        return Err(CompareError::Payload {
            side,
            name: meta.descriptor.name.clone(),
            invocation: meta.descriptor.invocation_index,
            reason: format!(
                "{len} bytes, but {} {} needs {expected}",
                meta.descriptor.dtype,
                format::dims(&meta.descriptor.shape)
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
