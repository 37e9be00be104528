//! Points, series, ranks and the whole comparison.

use serde::Serialize;

use crate::options::CompareOptions;

use super::*;

/// One point (or snapshot) of the reference against one of the candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointComparison {
    /// Position in the list of point comparisons.
    pub position: usize,
    /// `None` when the point exists only in the candidate.
    pub reference: Option<PointRef>,
    /// `None` when the point exists only in the reference.
    pub candidate: Option<PointRef>,
    pub status: Status,
    /// Set for a one-sided point.
    pub reason: Option<String>,
    pub counts: Counts,
    pub observations: Vec<ObservationComparison>,
}

impl PointComparison {
    /// A point pair built from its observation comparisons.
    pub fn new(
        position: usize,
        reference: PointRef,
        candidate: PointRef,
        observations: Vec<ObservationComparison>,
    ) -> PointComparison {
        let mut counts = Counts::default();
        for o in &observations {
            counts.add(o.status);
        }
        PointComparison {
            position,
            status: observations
                .iter()
                .map(|o| o.status)
                .max()
                .unwrap_or(Status::Match),
            reference: Some(reference),
            candidate: Some(candidate),
            reason: None,
            counts,
            observations,
        }
    }

    /// `'step1' vs 'step1'`, or one label with the side it is missing from.
    pub fn display(&self) -> String {
        match (&self.reference, &self.candidate) {
            (Some(r), Some(c)) if r.display() == c.display() => r.display(),
            (Some(r), Some(c)) => format!("{} vs {}", r.display(), c.display()),
            (Some(r), None) => format!("{} (reference only)", r.display()),
            (None, Some(c)) => format!("{} (candidate only)", c.display()),
            (None, None) => "(none)".to_owned(),
        }
    }
}

/// Where the first problem is, in execution order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    /// `observation`, `point`, `rank`, or `comparison` when nothing was compared.
    pub scope: &'static str,
    pub status: Status,
    pub rank: Option<i64>,
    /// Position in `points` (of the rank's comparison for run groups).
    pub point: Option<usize>,
    /// Position in that point's `observations`.
    pub observation: Option<usize>,
    pub description: String,
}

/// A point of a series: its position in `point_comparisons` and its identity in the run.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "SeriesPointRef",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub point: usize,
    pub label: Option<String>,
    pub index: Option<i64>,
    pub replay_index: Option<i64>,
}

/// When one observation of the reference point stopped matching across a series.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "SeriesDivergence",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    pub name: String,
    pub invocation_index: i64,
    /// The worst status over the series.
    pub status: Status,
    pub first_mismatch: Option<SeriesPoint>,
    pub first_inconclusive: Option<SeriesPoint>,
    pub mismatched_points: usize,
    /// The largest `max_abs_error` over the series.
    #[serde(serialize_with = "opt_float")]
    pub max_abs_error: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// The first point at which any observation mismatched.
    pub first_divergence: Option<SeriesPoint>,
    /// One entry per observation key, in the reference point's order.
    pub observations: Vec<Divergence>,
}

/// One rank of a run group comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankComparison {
    pub rank: i64,
    pub status: Status,
    /// Why the rank could not be compared (missing on one side).
    pub reason: Option<String>,
    pub comparison: Option<Box<Comparison>>,
    /// Whether each group has a run of this rank (the report says it in `reason`).
    #[serde(skip)]
    pub in_reference: bool,
    #[serde(skip)]
    pub in_candidate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonKind {
    Snapshots,
    Points,
    Runs,
    PointSeries,
    RunGroups,
}

impl ComparisonKind {
    /// The name the JSON report writes under `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            ComparisonKind::Snapshots => "snapshots",
            ComparisonKind::Points => "points",
            ComparisonKind::Runs => "runs",
            ComparisonKind::PointSeries => "point_series",
            ComparisonKind::RunGroups => "run_groups",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            ComparisonKind::Snapshots => "snapshot comparison",
            ComparisonKind::Points => "point comparison",
            ComparisonKind::Runs => "run comparison",
            ComparisonKind::PointSeries => "point series comparison",
            ComparisonKind::RunGroups => "run group comparison",
        }
    }
}

/// A complete comparison: what the JSON report holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub format_version: u32,
    pub kind: ComparisonKind,
    pub status: Status,
    /// `status == match`.
    pub ok: bool,
    /// `status != inconclusive`.
    pub conclusive: bool,
    pub options: CompareOptions,
    pub reference: Subject,
    pub candidate: Subject,
    /// Observation comparisons over every point (and rank).
    pub counts: Counts,
    /// Point comparisons (over every rank).
    pub point_counts: Counts,
    pub first_issue: Option<Issue>,
    pub warnings: Vec<String>,
    pub points: Vec<PointComparison>,
    pub series: Option<Series>,
    pub ranks: Vec<RankComparison>,
}

impl Comparison {
    /// Assembles a comparison and derives everything aggregate from its parts: status by
    /// precedence (mismatch > inconclusive > match), counts, and the first issue in
    /// execution order.
    pub fn new(
        kind: ComparisonKind,
        options: CompareOptions,
        reference: Subject,
        candidate: Subject,
        points: Vec<PointComparison>,
        ranks: Vec<RankComparison>,
        warnings: Vec<String>,
    ) -> Comparison {
        let mut counts = Counts::default();
        let mut point_counts = Counts::default();
        let mut status = Status::Match;
        for p in &points {
            counts.merge(&p.counts);
            point_counts.add(p.status);
            status = status.max(p.status);
        }
        for r in &ranks {
            status = status.max(r.status);
            if let Some(c) = &r.comparison {
                counts.merge(&c.counts);
                point_counts.merge(&c.point_counts);
            }
        }
        let mut first_issue = first_issue(&points, &ranks);
        // No verdict beyond the evidence: when no observation was compared, nothing was
        // found equal either, whatever the points and ranks say.
        if counts.total == 0 && status == Status::Match {
            status = Status::Inconclusive;
            first_issue = Some(Issue {
                scope: "comparison",
                status,
                rank: None,
                point: None,
                observation: None,
                description: nothing_compared(kind, &points, &ranks),
            });
        }
        Comparison {
            schema: REPORT_SCHEMA,
            format_version: REPORT_VERSION,
            kind,
            status,
            ok: status == Status::Match,
            conclusive: status != Status::Inconclusive,
            options,
            reference,
            candidate,
            counts,
            point_counts,
            first_issue,
            warnings,
            points,
            series: None,
            ranks,
        }
    }

    /// Every observation comparison with the rank and point it belongs to, in execution
    /// order.
    pub fn observations(&self) -> Vec<(Option<i64>, &PointComparison, &ObservationComparison)> {
        let mut out = Vec::new();
        for p in &self.points {
            for o in &p.observations {
                out.push((None, p, o));
            }
        }
        for r in &self.ranks {
            if let Some(c) = &r.comparison {
                for (_, p, o) in c.observations() {
                    out.push((Some(r.rank), p, o));
                }
            }
        }
        out
    }

    /// The `n` worst observation comparisons (all when `None`), worst first; ties keep
    /// execution order. Matches are included only when nothing worse is left.
    pub fn worst(
        &self,
        n: Option<usize>,
    ) -> Vec<(Option<i64>, &PointComparison, &ObservationComparison)> {
        let mut all = self.observations();
        // A stable sort keeps execution order among equals.
        all.sort_by(|a, b| {
            let (sa, sb) = (a.2.severity(), b.2.severity());
            sb.0.cmp(&sa.0)
                .then(sb.1.total_cmp(&sa.1))
                .then(sb.2.total_cmp(&sa.2))
                .then(sb.3.total_cmp(&sa.3))
        });
        if let Some(n) = n {
            all.truncate(n);
        }
        all
    }

    /// [`Comparison::worst`] as issues: each names the rank, point and observation it is
    /// at, so that the same site at two points reads as two places.
    pub fn worst_issues(&self, n: Option<usize>) -> Vec<Issue> {
        self.worst(n)
            .into_iter()
            .map(|(rank, p, o)| observation_issue(rank, p, o))
            .collect()
    }
}

/// Why a comparison that compared no observation is inconclusive.
fn nothing_compared(
    kind: ComparisonKind,
    points: &[PointComparison],
    ranks: &[RankComparison],
) -> String {
    let why = match (kind, points.len()) {
        (ComparisonKind::RunGroups, _) if ranks.is_empty() => "neither group has a rank".to_owned(),
        (ComparisonKind::PointSeries, 0) => "the series run has no point".to_owned(),
        (_, 0) => "neither run has a point".to_owned(),
        (ComparisonKind::Snapshots, 1) => "neither snapshot holds an observation".to_owned(),
        (_, 1) => "neither point holds an observation".to_owned(),
        (_, n) => format!("none of the {n} point pairs holds an observation on either side"),
    };
    format!(
        "nothing was compared: {why}; a match needs at least one observation compared \
         (were the probes or observe() calls reached?)"
    )
}

/// An observation comparison as an issue: where it is (rank, point, observation) and why.
fn observation_issue(rank: Option<i64>, p: &PointComparison, o: &ObservationComparison) -> Issue {
    let at = rank.map_or_else(String::new, |r| format!("rank {r}: "));
    Issue {
        scope: "observation",
        status: o.status,
        rank,
        point: Some(p.position),
        observation: Some(o.position),
        description: format!("{at}point {}, {}: {}", p.display(), o.label(), o.reason),
    }
}

pub(crate) fn first_issue(points: &[PointComparison], ranks: &[RankComparison]) -> Option<Issue> {
    for p in points {
        if p.status == Status::Match {
            continue;
        }
        if let Some(o) = p.observations.iter().find(|o| o.status != Status::Match) {
            return Some(observation_issue(None, p, o));
        }
        return Some(Issue {
            scope: "point",
            status: p.status,
            rank: None,
            point: Some(p.position),
            observation: None,
            description: format!(
                "point {}: {}",
                p.display(),
                p.reason.clone().unwrap_or_default()
            ),
        });
    }
    for r in ranks {
        if r.status == Status::Match {
            continue;
        }
        if let Some(issue) = r.comparison.as_ref().and_then(|c| c.first_issue.clone()) {
            return Some(Issue {
                rank: Some(r.rank),
                description: format!("rank {}: {}", r.rank, issue.description),
                ..issue
            });
        }
        return Some(Issue {
            scope: "rank",
            status: r.status,
            rank: Some(r.rank),
            point: None,
            observation: None,
            description: format!("rank {}: {}", r.rank, r.reason.clone().unwrap_or_default()),
        });
    }
    None
}
