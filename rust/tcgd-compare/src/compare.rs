//! The comparisons users ask for: sets (snapshots, points), runs, a point against a series,
//! and run groups. Each returns a complete [`Comparison`].

use std::collections::HashMap;

use crate::engine::{align_ordered, Engine, ObservationSet, Progress};
use crate::error::{CompareError, Result};
use crate::group::RunGroup;
use crate::model::{
    Comparison, ComparisonKind, Divergence, PointComparison, RankComparison, Series, SeriesPoint,
    Status, Subject,
};
use crate::options::CompareOptions;
use crate::run::RunData;

/// Compares two observation sets: `kind` says whether they are snapshots or points.
pub fn compare_sets(
    kind: ComparisonKind,
    reference: (&ObservationSet, Subject),
    candidate: (&ObservationSet, Subject),
    options: &CompareOptions,
    progress: &dyn Progress,
) -> Result<Comparison> {
    options.validate()?;
    let point = crate::engine::compare_sets(reference.0, candidate.0, options, progress)?;
    Ok(Comparison::new(
        kind,
        options.clone(),
        reference.1,
        candidate.1,
        vec![point],
        Vec::new(),
        Vec::new(),
    ))
}

/// Picks a point of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointSelector {
    Label(String),
    Index(i64),
}

/// How the points of two runs are paired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PointMapping {
    /// Points with equal labels; one-sided labels are reported.
    ByLabel,
    /// The i-th point with the i-th point; extra points are reported.
    ByIndex,
    /// Exactly these pairs; other points are not compared.
    Pairs(Vec<(PointSelector, PointSelector)>),
}

fn find_point(run: &RunData, selector: &PointSelector, side: &str) -> Result<usize> {
    let found = match selector {
        PointSelector::Label(label) => run
            .points
            .iter()
            .position(|p| p.point.label.as_deref() == Some(label.as_str())),
        PointSelector::Index(i) => {
            let n = run.points.len() as i64;
            let at = if *i < 0 { n + i } else { *i };
            usize::try_from(at).ok().filter(|&a| a < run.points.len())
        }
    };
    found.ok_or_else(|| {
        let what = match selector {
            PointSelector::Label(l) => format!("no point labelled '{l}'"),
            PointSelector::Index(i) => format!("no point {i}"),
        };
        CompareError::InvalidInput(format!(
            "the {side} run '{}' has {what}; its labels are {:?}",
            run.subject.name.clone().unwrap_or_default(),
            run.labels()
        ))
    })
}

/// Compares two runs point by point.
pub fn compare_runs(
    reference: &RunData,
    candidate: &RunData,
    mapping: &PointMapping,
    options: &CompareOptions,
    progress: &dyn Progress,
) -> Result<Comparison> {
    options.validate()?;
    let aligned: Vec<(Option<usize>, Option<usize>)> = match mapping {
        PointMapping::ByLabel => {
            let labels = |run: &RunData| -> Vec<String> {
                run.points
                    .iter()
                    .map(|p| p.point.label.clone().unwrap_or_default())
                    .collect()
            };
            align_ordered(&labels(reference), &labels(candidate))
                .into_iter()
                .map(|a| (a.reference, a.candidate))
                .collect()
        }
        PointMapping::ByIndex => (0..reference.points.len().max(candidate.points.len()))
            .map(|i| {
                (
                    (i < reference.points.len()).then_some(i),
                    (i < candidate.points.len()).then_some(i),
                )
            })
            .collect(),
        PointMapping::Pairs(pairs) => {
            if pairs.is_empty() {
                return Err(CompareError::InvalidInput(
                    "point_mapping is empty: give at least one (reference, candidate) pair".into(),
                ));
            }
            pairs
                .iter()
                .map(|(r, c)| {
                    Ok((
                        Some(find_point(reference, r, "reference")?),
                        Some(find_point(candidate, c, "candidate")?),
                    ))
                })
                .collect::<Result<_>>()?
        }
    };

    let both: Vec<(&ObservationSet, &ObservationSet)> = aligned
        .iter()
        .filter_map(|&(r, c)| Some((&reference.points[r?], &candidate.points[c?])))
        .collect();
    let engine = Engine { options, progress };
    let mut compared = engine.compare_pairs(&both)?.into_iter();

    // Where each side's last point sits in the merged order: a point missing from an
    // incomplete run after that is explained by the run having stopped.
    let last_with =
        |pick: fn(&(Option<usize>, Option<usize>)) -> bool| aligned.iter().rposition(pick);
    let last_ref = last_with(|a| a.0.is_some());
    let last_cand = last_with(|a| a.1.is_some());

    let mut points = Vec::with_capacity(aligned.len());
    for (position, &(r, c)) in aligned.iter().enumerate() {
        let point = match (r, c) {
            (Some(r), Some(c)) => {
                let observations = compared.next().unwrap_or_default();
                PointComparison::new(
                    position,
                    reference.points[r].point.clone(),
                    candidate.points[c].point.clone(),
                    observations,
                )
            }
            (r, c) => {
                let (present, lacking, lacking_run, last) = if r.is_some() {
                    ("reference", "candidate", candidate, last_cand)
                } else {
                    ("candidate", "reference", reference, last_ref)
                };
                let after_end = last.is_none_or(|l| position > l);
                let (status, reason) = if !lacking_run.complete && after_end {
                    (
                        Status::Inconclusive,
                        format!(
                            "only in the {present}: the {lacking} run is incomplete and \
                             stopped before this point"
                        ),
                    )
                } else {
                    (
                        Status::Mismatch,
                        format!("recorded in the {present} run only"),
                    )
                };
                PointComparison {
                    position,
                    reference: r.map(|i| reference.points[i].point.clone()),
                    candidate: c.map(|i| candidate.points[i].point.clone()),
                    status,
                    reason: Some(reason),
                    counts: Default::default(),
                    observations: Vec::new(),
                }
            }
        };
        points.push(point);
    }

    let mut warnings = Vec::new();
    for (side, run) in [("reference", reference), ("candidate", candidate)] {
        if !run.complete {
            warnings.push(format!(
                "the {side} run is incomplete (complete=false): it ended with an error or \
                 was killed"
            ));
        }
    }
    if mapping == &PointMapping::ByLabel
        && points
            .iter()
            .all(|p| p.reference.is_none() || p.candidate.is_none())
        && !points.is_empty()
    {
        warnings.push(
            "no point label occurs in both runs: pass point_mapping (pairs of labels, or \
             \"index\") to say which points correspond"
                .into(),
        );
    }
    Ok(Comparison::new(
        ComparisonKind::Runs,
        options.clone(),
        reference.subject.clone(),
        candidate.subject.clone(),
        points,
        Vec::new(),
        warnings,
    ))
}

/// Compares one reference point against every point of a run, in order, and finds for each
/// observation the first point at which it stopped matching.
pub fn compare_point_series(
    reference: (&ObservationSet, Subject),
    run: &RunData,
    options: &CompareOptions,
    progress: &dyn Progress,
) -> Result<Comparison> {
    options.validate()?;
    let pairs: Vec<(&ObservationSet, &ObservationSet)> =
        run.points.iter().map(|p| (reference.0, p)).collect();
    let engine = Engine { options, progress };
    let rows = engine.compare_pairs(&pairs)?;
    let points: Vec<PointComparison> = rows
        .into_iter()
        .zip(&run.points)
        .enumerate()
        .map(|(position, (observations, p))| {
            PointComparison::new(
                position,
                reference.0.point.clone(),
                p.point.clone(),
                observations,
            )
        })
        .collect();

    let series_point = |p: &PointComparison| {
        let c = p.candidate.clone().unwrap_or_default();
        SeriesPoint {
            point: p.position,
            label: c.label,
            index: c.index,
            replay_index: c.replay_index,
        }
    };
    let mut order: Vec<(String, i64)> = Vec::new();
    let mut by_key: HashMap<(String, i64), Divergence> = HashMap::new();
    for p in &points {
        for o in &p.observations {
            let key = (o.name.clone(), o.invocation_index);
            let d = by_key.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                Divergence {
                    name: o.name.clone(),
                    invocation_index: o.invocation_index,
                    status: Status::Match,
                    first_mismatch: None,
                    first_inconclusive: None,
                    mismatched_points: 0,
                    max_abs_error: None,
                }
            });
            d.status = d.status.max(o.status);
            match o.status {
                Status::Mismatch => {
                    d.mismatched_points += 1;
                    if d.first_mismatch.is_none() {
                        d.first_mismatch = Some(series_point(p));
                    }
                }
                Status::Inconclusive if d.first_inconclusive.is_none() => {
                    d.first_inconclusive = Some(series_point(p));
                }
                _ => {}
            }
            if let Some(e) = o.metrics.as_ref().and_then(|m| m.max_abs_error) {
                d.max_abs_error = Some(d.max_abs_error.map_or(e, |m: f64| m.max(e)));
            }
        }
    }
    let observations: Vec<Divergence> = order
        .into_iter()
        .filter_map(|k| by_key.remove(&k))
        .collect();
    let first_divergence = points
        .iter()
        .find(|p| p.status == Status::Mismatch)
        .map(series_point);
    let mut warnings = Vec::new();
    if !run.complete {
        warnings.push("the candidate run is incomplete (complete=false)".into());
    }
    let mut comparison = Comparison::new(
        ComparisonKind::PointSeries,
        options.clone(),
        reference.1,
        run.subject.clone(),
        points,
        Vec::new(),
        warnings,
    );
    comparison.series = Some(Series {
        first_divergence,
        observations,
    });
    Ok(comparison)
}

fn group_subject(group: &RunGroup) -> Subject {
    Subject {
        kind: "run group".into(),
        name: Some(group.name.clone()),
        path: group.root.as_ref().map(|p| p.display().to_string()),
        run_id: None,
        rank: None,
        world_size: Some(group.world_size),
        complete: Some(group.complete),
        points: group.members.iter().map(|m| m.run.labels.len()).max(),
        detail: Some(format!(
            "{} of {} ranks",
            group.members.len(),
            group.world_size
        )),
    }
}

/// Compares two run groups rank by rank; a rank missing on either side is inconclusive.
pub fn compare_run_groups(
    reference: &RunGroup,
    candidate: &RunGroup,
    mapping: &PointMapping,
    options: &CompareOptions,
    progress: &dyn Progress,
) -> Result<Comparison> {
    options.validate()?;
    let world = reference.world_size.max(candidate.world_size);
    let mut ranks = Vec::new();
    for rank in 0..world {
        let entry = match (reference.member(rank), candidate.member(rank)) {
            (Some(r), Some(c)) => {
                let r = RunData::open_selected(&r.run.path, &r.selector())?;
                let c = RunData::open_selected(&c.run.path, &c.selector())?;
                let comparison = compare_runs(&r, &c, mapping, options, progress)?;
                RankComparison {
                    rank,
                    status: comparison.status,
                    reason: None,
                    comparison: Some(Box::new(comparison)),
                    in_reference: true,
                    in_candidate: true,
                }
            }
            (r, c) => {
                let missing = match (r, c) {
                    (None, None) => "either group",
                    (None, _) => "the reference group",
                    _ => "the candidate group",
                };
                RankComparison {
                    rank,
                    status: Status::Inconclusive,
                    reason: Some(format!("rank {rank} has no run in {missing}")),
                    comparison: None,
                    in_reference: r.is_some(),
                    in_candidate: c.is_some(),
                }
            }
        };
        ranks.push(entry);
    }
    let mut warnings = Vec::new();
    for (side, group) in [("reference", reference), ("candidate", candidate)] {
        for w in &group.warnings {
            warnings.push(format!("{side} group: {w}"));
        }
    }
    Ok(Comparison::new(
        ComparisonKind::RunGroups,
        options.clone(),
        group_subject(reference),
        group_subject(candidate),
        Vec::new(),
        ranks,
        warnings,
    ))
}
