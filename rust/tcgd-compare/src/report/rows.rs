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

/// How a cell of a text or HTML table is shown.
pub enum Shown {
    /// Plain text; a number when its column is numeric.
    Text(String),
    /// A status: its name in capitals, coloured in HTML.
    Status(Status),
    /// An observation's name: code in HTML.
    Name(String),
}

impl Shown {
    /// The cell as plain text.
    pub fn plain(&self) -> &str {
        match self {
            Shown::Text(s) | Shown::Name(s) => s,
            Shown::Status(s) => s.shout(),
        }
    }
}

impl From<String> for Shown {
    fn from(s: String) -> Shown {
        Shown::Text(s)
    }
}

impl From<Status> for Shown {
    fn from(s: Status) -> Shown {
        Shown::Status(s)
    }
}

/// A column of a text or HTML table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    /// Right-aligned in text, a number cell in HTML.
    pub numeric: bool,
    /// Shown in HTML only, so that text tables stay narrow enough for a terminal.
    pub html_only: bool,
}

impl Column {
    pub const fn text(name: &'static str) -> Column {
        Column {
            name,
            numeric: false,
            html_only: false,
        }
    }

    pub const fn number(name: &'static str) -> Column {
        Column {
            name,
            numeric: true,
            html_only: false,
        }
    }

    pub const fn html_only(self) -> Column {
        Column {
            html_only: true,
            ..self
        }
    }
}

/// One table of a text or HTML report: its heading, columns and the rows it shows.
pub struct Section {
    /// The HTML table's `id`.
    pub id: &'static str,
    /// The heading as text writes it (`points (3)`); HTML capitalises it.
    pub title: String,
    pub columns: Vec<Column>,
    /// The first `limit` rows.
    pub rows: Vec<Vec<Shown>>,
    /// How many rows there are in all.
    pub total: usize,
    pub limit: usize,
    /// Whether an empty section says so instead of showing an empty table.
    pub none_if_empty: bool,
}

impl Section {
    /// A section of `items`, the first `limit` of them as rows of `cells`.
    pub fn new<T>(
        id: &'static str,
        title: String,
        columns: Vec<Column>,
        items: &[T],
        limit: usize,
        cells: impl Fn(&T) -> Vec<Shown>,
    ) -> Section {
        Section {
            id,
            title,
            columns,
            rows: items.iter().take(limit).map(cells).collect(),
            total: items.len(),
            limit,
            none_if_empty: false,
        }
    }
}

/// The tables of a comparison's text and HTML reports, in order: ranks (run groups),
/// points (unless there is one point pair), divergence (series) and observations.
/// `include_unchanged`: whether matching ranks, points and observations get rows (`None`:
/// [`keeps_matches`]'s default); headings count every row either way.
pub fn sections(c: &Comparison, limit: usize, include_unchanged: Option<bool>) -> Vec<Section> {
    let grouped = c.kind == ComparisonKind::RunGroups;
    let mut sections = Vec::new();
    if grouped {
        let ranks: Vec<&RankComparison> = c
            .ranks
            .iter()
            .filter(|r| include_unchanged != Some(false) || r.status != Status::Match)
            .collect();
        let columns = vec![
            Column::number("rank"),
            Column::text("status"),
            Column::number("points"),
            Column::number("observations"),
            Column::number("mismatch"),
            Column::number("inconclusive"),
            Column::text("detail"),
        ];
        let title = format!("ranks ({})", c.ranks.len());
        sections.push(Section::new("ranks", title, columns, &ranks, limit, |r| {
            let counts = match &r.comparison {
                Some(inner) => [
                    inner.point_counts.total,
                    inner.counts.total,
                    inner.counts.mismatch,
                    inner.counts.inconclusive,
                ]
                .map(|n| n.to_string()),
                None => ["-"; 4].map(str::to_owned),
            };
            let mut row = vec![r.rank.to_string().into(), r.status.into()];
            row.extend(counts.map(Shown::from));
            row.push(rank_detail(r).into());
            row
        }));
    }
    if !single_point(c) {
        let mut points = point_rows(c);
        if include_unchanged == Some(false) {
            points.retain(|(_, p)| p.status != Status::Match);
        }
        let mut columns = Vec::new();
        if grouped {
            columns.push(Column::number("rank"));
        }
        columns.extend([
            Column::text("point"),
            Column::number("replay").html_only(),
            Column::text("status"),
            Column::number("observations"),
            Column::number("mismatch"),
            Column::number("inconclusive"),
            Column::number("worst max abs"),
            Column::text("detail"),
        ]);
        let title = format!("points ({})", points.len());
        sections.push(Section::new(
            "points",
            title,
            columns,
            &points,
            limit,
            |(rank, p)| {
                let mut row = Vec::new();
                if grouped {
                    row.push(rank.map(|r| r.to_string()).unwrap_or_default().into());
                }
                let replay = p
                    .candidate
                    .as_ref()
                    .or(p.reference.as_ref())
                    .and_then(|r| r.replay_index)
                    .map_or_else(|| "-".to_owned(), |r| r.to_string());
                row.extend([
                    point_name(c, p).into(),
                    replay.into(),
                    p.status.into(),
                    p.counts.total.to_string().into(),
                    p.counts.mismatch.to_string().into(),
                    p.counts.inconclusive.to_string().into(),
                    metric(worst_abs(p)).into(),
                    p.reason.clone().unwrap_or_default().into(),
                ]);
                row
            },
        ));
    }
    if let Some(series) = &c.series {
        let total = c.points.len();
        let columns = vec![
            Column::text("observation"),
            Column::text("status"),
            Column::text("first mismatch"),
            Column::text("first inconclusive"),
            Column::number("mismatched points"),
            Column::number("max abs"),
        ];
        let title = format!("divergence per observation ({})", series.observations.len());
        let divergence = &series.observations;
        sections.push(Section::new(
            "divergence",
            title,
            columns,
            divergence,
            limit,
            |d| {
                vec![
                    format!("{}[{}]", d.name, d.invocation_index).into(),
                    d.status.into(),
                    series_point(&d.first_mismatch).into(),
                    series_point(&d.first_inconclusive).into(),
                    divergence_points(d, total).into(),
                    metric(d.max_abs_error).into(),
                ]
            },
        ));
    }
    sections.push(observation_section(c, limit, include_unchanged));
    sections
}

fn observation_section(c: &Comparison, limit: usize, include_unchanged: Option<bool>) -> Section {
    let grouped = c.kind == ComparisonKind::RunGroups;
    let multi = !single_point(c);
    let (rows, total) = observation_rows(c, include_unchanged);
    let title = if keeps_matches(c, include_unchanged) {
        format!("observations ({total}, execution order)")
    } else {
        format!(
            "observations not matching ({} of {total}, execution order)",
            rows.len()
        )
    };
    let mut columns = Vec::new();
    if grouped {
        columns.push(Column::number("rank"));
    }
    if multi {
        columns.push(Column::text("point"));
    }
    columns.extend([
        Column::text("observation"),
        Column::text("site").html_only(),
        Column::text("status"),
        Column::text("kind"),
        Column::text("dtype"),
        Column::text("shape"),
        Column::number("mismatched"),
        Column::number("max abs"),
        Column::number("max rel"),
        Column::number("cosine").html_only(),
        Column::number("max ULP").html_only(),
        Column::text("detail"),
    ]);
    let mut section = Section::new("observations", title, columns, &rows, limit, |row| {
        let o = row.observation;
        let m = o.metrics.as_ref();
        let mut cells = Vec::new();
        if grouped {
            cells.push(row.rank.map(|r| r.to_string()).unwrap_or_default().into());
        }
        if multi {
            cells.push(row.point_label(c).into());
        }
        cells.extend([
            Shown::Name(o.label()),
            row.site().into(),
            o.status.into(),
            o.kind.as_str().to_owned().into(),
            row.dtype().into(),
            row.shape().into(),
            row.mismatched().into(),
            row.max_abs().into(),
            row.max_rel().into(),
            metric(m.and_then(|m| m.cosine_similarity)).into(),
            m.and_then(|m| m.max_ulp_distance)
                .map_or_else(|| "-".to_owned(), |u| u.to_string())
                .into(),
            o.reason.clone().into(),
        ]);
        cells
    });
    section.none_if_empty = true;
    section
}
