//! The rows every report shows, built once so that text, HTML and CSV agree on content and
//! differ only in presentation.

use crate::format;
use crate::model::{
    Comparison, ComparisonKind, Divergence, ObservationComparison, PointComparison, RankComparison,
    SeriesPoint, Status,
};

/// One observation comparison as displayed.
pub struct ObservationRow<'a> {
    pub rank: Option<i64>,
    pub point: &'a PointComparison,
    pub observation: &'a ObservationComparison,
}

impl ObservationRow<'_> {
    pub fn point_label(&self, c: &Comparison) -> String {
        point_name(c, self.point)
    }

    pub fn dtype(&self) -> String {
        let o = self.observation;
        match (&o.reference, &o.candidate) {
            (Some(r), Some(c)) if r.dtype != c.dtype => format!("{} / {}", r.dtype, c.dtype),
            (Some(s), _) | (None, Some(s)) => s.dtype.clone(),
            (None, None) => String::new(),
        }
    }

    pub fn shape(&self) -> String {
        let o = self.observation;
        match (&o.reference, &o.candidate) {
            (Some(r), Some(c)) if r.shape != c.shape => {
                format!("{} / {}", format::dims(&r.shape), format::dims(&c.shape))
            }
            (Some(s), _) | (None, Some(s)) => format::dims(&s.shape),
            (None, None) => String::new(),
        }
    }

    /// `3/16 (18.75%)`, or `-` when no element was compared.
    pub fn mismatched(&self) -> String {
        match &self.observation.metrics {
            Some(m) => format!(
                "{}/{} ({})",
                m.mismatch_count,
                m.total,
                format::fraction(m.mismatch_fraction)
            ),
            None => "-".to_owned(),
        }
    }

    pub fn max_abs(&self) -> String {
        metric(
            self.observation
                .metrics
                .as_ref()
                .and_then(|m| m.max_abs_error),
        )
    }

    pub fn max_rel(&self) -> String {
        metric(
            self.observation
                .metrics
                .as_ref()
                .and_then(|m| m.max_rel_error),
        )
    }

    pub fn site(&self) -> String {
        self.observation
            .site()
            .and_then(|s| s.describe())
            .unwrap_or_default()
    }
}

pub fn metric(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), format::general)
}

/// Whether a comparison has one point pair only, so every observation is worth a row.
pub fn single_point(c: &Comparison) -> bool {
    matches!(c.kind, ComparisonKind::Snapshots | ComparisonKind::Points)
}

/// Whether a report lists matching rows: as asked, else every row for a single point pair
/// and only the rows that did not match otherwise.
pub fn keeps_matches(c: &Comparison, include_unchanged: Option<bool>) -> bool {
    include_unchanged.unwrap_or_else(|| single_point(c))
}

/// The observation rows a report lists (see [`keeps_matches`]). Returns the rows and how
/// many observations there are in all.
pub fn observation_rows(
    c: &Comparison,
    include_unchanged: Option<bool>,
) -> (Vec<ObservationRow<'_>>, usize) {
    let all = c.observations();
    let total = all.len();
    let keep_matches = keeps_matches(c, include_unchanged);
    let rows = all
        .into_iter()
        .filter(|(_, _, o)| keep_matches || o.status != Status::Match)
        .map(|(rank, point, observation)| ObservationRow {
            rank,
            point,
            observation,
        })
        .collect();
    (rows, total)
}

/// Point rows (with their rank for groups).
pub fn point_rows(c: &Comparison) -> Vec<(Option<i64>, &PointComparison)> {
    let mut rows: Vec<(Option<i64>, &PointComparison)> =
        c.points.iter().map(|p| (None, p)).collect();
    for r in &c.ranks {
        if let Some(inner) = &r.comparison {
            rows.extend(inner.points.iter().map(|p| (Some(r.rank), p)));
        }
    }
    rows
}

/// How a point pair is named in tables: in a series the reference is always the same
/// point, so the candidate's name says it all.
pub fn point_name(c: &Comparison, p: &PointComparison) -> String {
    match (&c.kind, &p.candidate) {
        (ComparisonKind::PointSeries, Some(candidate)) => candidate.display(),
        _ => p.display(),
    }
}

/// The largest `max_abs_error` among a point's observations.
pub fn worst_abs(p: &PointComparison) -> Option<f64> {
    p.observations
        .iter()
        .filter_map(|o| o.metrics.as_ref().and_then(|m| m.max_abs_error))
        .fold(None, |acc: Option<f64>, e| {
            Some(acc.map_or(e, |a| a.max(e)))
        })
}

pub fn series_point(p: &Option<SeriesPoint>) -> String {
    match p {
        None => "-".to_owned(),
        Some(p) => {
            let mut s = match (&p.label, p.index) {
                (Some(l), _) => format!("'{l}'"),
                (None, Some(i)) => format!("#{i}"),
                (None, None) => format!("#{}", p.point),
            };
            if let Some(r) = p.replay_index {
                s.push_str(&format!(" (replay {r})"));
            }
            s
        }
    }
}

pub fn divergence_points(d: &Divergence, total: usize) -> String {
    format!("{} of {total}", d.mismatched_points)
}

pub fn rank_detail(r: &RankComparison) -> String {
    match (&r.reason, &r.comparison) {
        (Some(reason), _) => reason.clone(),
        (None, Some(c)) => c
            .first_issue
            .as_ref()
            .map(|i| i.description.clone())
            .unwrap_or_default(),
        (None, None) => String::new(),
    }
}

/// Header lines shared by text and HTML: (label, value).
pub fn header(c: &Comparison) -> Vec<(&'static str, String)> {
    let mut lines = vec![
        ("status", c.status.shout().to_owned()),
        ("reference", c.reference.display()),
        ("candidate", c.candidate.display()),
        ("options", c.options.describe()),
    ];
    let mut compared = c.counts.describe("observation");
    if !single_point(c) {
        compared.push_str(&format!("; {}", c.point_counts.describe("point")));
    }
    if c.kind == ComparisonKind::RunGroups {
        let mut ranks = crate::model::Counts::default();
        for r in &c.ranks {
            ranks.add(r.status);
        }
        compared.push_str(&format!("; {}", ranks.describe("rank")));
    }
    lines.push(("compared", compared));
    if let Some(series) = &c.series {
        lines.push((
            "first divergence",
            match &series.first_divergence {
                Some(_) => series_point(&series.first_divergence),
                None => "none: every point matched or was inconclusive".to_owned(),
            },
        ));
    }
    lines.push((
        "first issue",
        c.first_issue
            .as_ref()
            .map_or_else(|| "none".to_owned(), |i| i.description.clone()),
    ));
    lines
}
