//! The first anomaly of a recorded run: at which replay a value first held a NaN, an
//! infinity or a magnitude over a threshold, and which site came first in execution order
//! there.
//!
//! Only the summary columns are read (every observation row has them, whether its payload
//! was stored or not), so the search never touches payload bytes. Observations are visited
//! in execution order: by the replay index of their point (the point index for points
//! without one), then the point index (several points may read one replay), then the
//! observation's `ordinal` within its point.

use std::collections::HashMap;

use globset::{Glob, GlobMatcher};
use serde::Serialize;
use tcgd_store::{ObservationRows, RunKind, RunReader, Site, SiteLocationRef, Table};
use tcgd_tensor::TensorSummary;

use crate::error::{CompareError, Result};

/// What counts as an anomaly in an observation's summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AnomalyRule {
    /// At least one NaN.
    Nan,
    /// At least one +inf or -inf.
    Inf,
    /// A NaN or an infinity.
    NonFinite,
    /// The largest finite magnitude, max(|min|, |max|), is over `threshold`, or the value
    /// holds an infinity (whose magnitude is over any threshold).
    AbsMax { threshold: f64 },
}

impl AnomalyRule {
    /// The kinds `parse` takes, as users write them.
    pub const KINDS: [&'static str; 4] = ["nan", "inf", "nonfinite", "abs_max"];

    /// The rule of `kind`; `threshold` is required by `abs_max` and refused by the others
    /// (a threshold that is silently ignored would hide a typo in the kind).
    pub fn parse(kind: &str, threshold: Option<f64>) -> Result<AnomalyRule> {
        let allowed = AnomalyRule::KINDS.join(", ");
        let rule = match kind {
            "nan" => AnomalyRule::Nan,
            "inf" => AnomalyRule::Inf,
            "nonfinite" => AnomalyRule::NonFinite,
            "abs_max" => {
                let Some(threshold) = threshold else {
                    return Err(CompareError::InvalidInput(
                        "anomaly kind 'abs_max' needs a threshold: the magnitude a finite \
                         value must exceed"
                            .into(),
                    ));
                };
                if !threshold.is_finite() || threshold < 0.0 {
                    return Err(CompareError::InvalidInput(format!(
                        "anomaly threshold must be a finite number of at least 0, got \
                         {threshold}"
                    )));
                }
                return Ok(AnomalyRule::AbsMax { threshold });
            }
            other => {
                return Err(CompareError::InvalidInput(format!(
                    "anomaly kind must be one of {allowed}; got '{other}'"
                )))
            }
        };
        if threshold.is_some() {
            return Err(CompareError::InvalidInput(format!(
                "a threshold applies to anomaly kind 'abs_max' only, not to '{kind}'"
            )));
        }
        Ok(rule)
    }

    pub fn kind(&self) -> &'static str {
        match self {
            AnomalyRule::Nan => "nan",
            AnomalyRule::Inf => "inf",
            AnomalyRule::NonFinite => "nonfinite",
            AnomalyRule::AbsMax { .. } => "abs_max",
        }
    }

    pub fn threshold(&self) -> Option<f64> {
        match self {
            AnomalyRule::AbsMax { threshold } => Some(*threshold),
            _ => None,
        }
    }

    /// Whether a value with this summary is an anomaly (only its non-finite counts and
    /// finite extremes are read).
    pub fn hits(&self, v: &TensorSummary) -> bool {
        let nan = v.nan_count > 0;
        let inf = v.pos_inf_count > 0 || v.neg_inf_count > 0;
        match self {
            AnomalyRule::Nan => nan,
            AnomalyRule::Inf => inf,
            AnomalyRule::NonFinite => nan || inf,
            AnomalyRule::AbsMax { threshold } => inf || v.abs_max().is_some_and(|m| m > *threshold),
        }
    }
}

/// Which observations the search looks at: those whose name, or whose site's module path,
/// node name or site id, matches a glob (`*`, `?`, `[...]`; a pattern without them is an
/// exact name).
#[derive(Debug, Clone)]
pub struct SiteFilter {
    pattern: String,
    matcher: GlobMatcher,
}

impl SiteFilter {
    pub fn new(pattern: &str) -> Result<SiteFilter> {
        if pattern.is_empty() {
            return Err(CompareError::InvalidInput(
                "the site filter is empty: give an observation name, a module path or a glob \
                 such as 'layers.*'"
                    .into(),
            ));
        }
        let glob = Glob::new(pattern)
            .map_err(|e| CompareError::InvalidInput(format!("bad site glob '{pattern}': {e}")))?;
        Ok(SiteFilter {
            pattern: pattern.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    fn matches(&self, o: &Observation<'_>) -> bool {
        std::iter::once(Some(o.name))
            .chain([o.site.module_path, o.site.node_name, o.site.site_id])
            .flatten()
            .any(|candidate| self.matcher.is_match(candidate))
    }
}

/// The question: which rule, over which observations.
#[derive(Debug, Clone)]
pub struct AnomalyQuery {
    pub rule: AnomalyRule,
    pub site: Option<SiteFilter>,
}

impl AnomalyQuery {
    /// A query from the values users pass (`kind`, an optional threshold and site glob).
    pub fn parse(kind: &str, threshold: Option<f64>, site: Option<&str>) -> Result<AnomalyQuery> {
        Ok(AnomalyQuery {
            rule: AnomalyRule::parse(kind, threshold)?,
            site: site.map(SiteFilter::new).transpose()?,
        })
    }
}

/// A point of the run, as the search needs it.
#[derive(Debug, Clone, Copy)]
pub struct Point<'a> {
    pub index: i64,
    pub label: &'a str,
    pub replay_index: Option<i64>,
}

/// An observation row's identity, site and summary, borrowed from the run's table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observation<'a> {
    pub point_index: i64,
    pub order: i64,
    pub name: &'a str,
    pub invocation_index: i64,
    pub site: SiteLocationRef<'a>,
    pub materialized_by_probe: Option<bool>,
    pub summary: TensorSummary,
}

/// One observation that hit the rule: its point, its identity, its site (`None` for a
/// hand-placed probe) and its summary, as `TensorObservation` has them. In JSON its site
/// and summary are keys of the hit itself, beside its point and name.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "AnomalySite",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        subclass,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnomalySite {
    pub point_index: i64,
    pub label: String,
    pub replay_index: Option<i64>,
    pub order: i64,
    pub name: String,
    pub invocation_index: i64,
    #[serde(flatten)]
    pub site: Option<Site>,
    #[serde(flatten)]
    pub summary: TensorSummary,
}

impl AnomalySite {
    fn new(point: &Point<'_>, o: &Observation<'_>) -> AnomalySite {
        AnomalySite {
            point_index: point.index,
            label: point.label.to_owned(),
            replay_index: point.replay_index,
            order: o.order,
            name: o.name.to_owned(),
            invocation_index: o.invocation_index,
            site: o.site.to_site(o.materialized_by_probe),
            summary: o.summary,
        }
    }
}

/// The answer: the first hit in execution order and every hit at the same replay. In
/// Python it is an `AnomalySite` (the first hit) with the question and the other hits
/// added.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "FirstAnomaly",
        module = "torch_cudagraph_debug._native",
        extends = AnomalySite,
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Serialize)]
pub struct FirstAnomaly {
    /// `"nan"`, `"inf"`, `"nonfinite"` or `"abs_max"`.
    pub kind: &'static str,
    pub threshold: Option<f64>,
    /// The site filter the search used, as given.
    pub site_filter: Option<String>,
    /// Observations visited (those the site filter keeps) up to and including the first
    /// hit.
    pub scanned: u64,
    /// The hits at the first hit's replay (at its point, for a point without a replay
    /// index), in execution order; never empty, and the first one is the answer.
    pub sites: Vec<AnomalySite>,
}

impl FirstAnomaly {
    pub fn first(&self) -> &AnomalySite {
        &self.sites[0]
    }
}

/// Where an observation falls in execution order.
type Position = (i64, i64, i64);

fn position(point: &Point<'_>, o: &Observation<'_>) -> Position {
    (
        point.replay_index.unwrap_or(point.index),
        point.index,
        o.order,
    )
}

/// The replay a point read, or the point itself when it has no replay index: the set the
/// "other sites at that replay" are taken from.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Moment {
    Replay(i64),
    Point(i64),
}

fn moment(point: &Point<'_>) -> Moment {
    match point.replay_index {
        Some(r) => Moment::Replay(r),
        None => Moment::Point(point.index),
    }
}

/// The first anomaly among `observations` (of `points`), or `None`. Observations of a
/// point missing from `points` are not part of the run (a point that never committed) and
/// are skipped. Two passes over the rows (the first hit; then what came before it and the
/// other hits of its replay), and no sort of the whole run.
pub fn first_anomaly(
    points: &[Point<'_>],
    observations: &[Observation<'_>],
    query: &AnomalyQuery,
) -> Option<FirstAnomaly> {
    let by_index: HashMap<i64, &Point<'_>> = points.iter().map(|p| (p.index, p)).collect();
    let keep = |o: &Observation<'_>| query.site.as_ref().is_none_or(|f| f.matches(o));
    let hit = |o: &Observation<'_>| query.rule.hits(&o.summary);

    // The earliest hit.
    let mut first: Option<(Position, &Point<'_>)> = None;
    for o in observations {
        let Some(point) = by_index.get(&o.point_index) else {
            continue;
        };
        if !keep(o) || !hit(o) {
            continue;
        }
        let at = position(point, o);
        if first.is_none_or(|(best, _)| at < best) {
            first = Some((at, point));
        }
    }
    let (first_at, first_point) = first?;
    let at_moment = moment(first_point);

    // What was visited before it, and the other hits of its replay.
    let mut scanned = 0u64;
    let mut hits: Vec<(Position, AnomalySite)> = Vec::new();
    for o in observations {
        let Some(point) = by_index.get(&o.point_index) else {
            continue;
        };
        if !keep(o) {
            continue;
        }
        let at = position(point, o);
        if at <= first_at {
            scanned += 1;
        }
        if moment(point) == at_moment && hit(o) {
            hits.push((at, AnomalySite::new(point, o)));
        }
    }
    hits.sort_by_key(|(at, _)| *at);
    Some(FirstAnomaly {
        kind: query.rule.kind(),
        threshold: query.rule.threshold(),
        site_filter: query.site.as_ref().map(|f| f.pattern.clone()),
        scanned,
        sites: hits.into_iter().map(|(_, h)| h).collect(),
    })
}

/// The first anomaly of a tensor run opened by the store's reader: its points and the
/// summaries of its observations (committed rows only; no payload is read).
pub fn first_anomaly_in_run(
    reader: &RunReader,
    query: &AnomalyQuery,
) -> Result<Option<FirstAnomaly>> {
    if reader.manifest().header.kind != RunKind::Tensor {
        return Err(CompareError::InvalidInput(format!(
            "'{}' is a memory run; anomalies are searched in tensor runs",
            reader.dir().display()
        )));
    }
    let recorded = reader.points()?;
    let points: Vec<Point<'_>> = recorded
        .iter()
        .map(|p| Point {
            index: p.index,
            label: &p.label,
            replay_index: p.replay_index,
        })
        .collect();
    let table = reader.table(Table::Observations)?;
    let rows = ObservationRows::new(reader.dir(), &table)?;
    let observations: Vec<Observation<'_>> = (0..rows.len())
        .map(|i| Observation {
            point_index: rows.point_index(i),
            order: rows.order(i),
            name: rows.name(i),
            invocation_index: rows.invocation_index(i),
            site: rows.site_location(i),
            materialized_by_probe: rows.materialized_by_probe(i),
            summary: rows.summary(i),
        })
        .collect();
    Ok(first_anomaly(&points, &observations, query))
}

#[cfg(test)]
mod tests;
