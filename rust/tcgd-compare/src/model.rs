//! The inputs and results of a comparison, as plain data. Results serialise to the JSON
//! report as they are: the JSON is the complete record, the other reports are views of it.

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use tcgd_store::PayloadKind;
use tcgd_tensor::DType;

use crate::options::CompareOptions;

/// Name written into every JSON report, so a program can recognise one.
pub const REPORT_SCHEMA: &str = "torch-cudagraph-debug/comparison";
/// Version of the JSON report layout; bumped when a field changes meaning or goes away.
pub const REPORT_VERSION: u32 = 1;

// ------------------------------------------------------------------------------ inputs

/// Native summary of a value, as stored in runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SummaryView {
    pub numel: u64,
    pub finite: u64,
    pub nan: u64,
    pub posinf: u64,
    pub neginf: u64,
    pub zero: u64,
    #[serde(serialize_with = "opt_float")]
    pub min: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub max: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub mean: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub std: Option<f64>,
    #[serde(serialize_with = "float")]
    pub l2: f64,
}

impl From<tcgd_tensor::TensorSummary> for SummaryView {
    fn from(s: tcgd_tensor::TensorSummary) -> SummaryView {
        SummaryView {
            numel: s.numel,
            finite: s.finite,
            nan: s.nan,
            posinf: s.pos_inf,
            neginf: s.neg_inf,
            zero: s.zero,
            min: s.min,
            max: s.max,
            mean: s.mean,
            std: s.std,
            l2: s.l2,
        }
    }
}

/// Where a value came from when a compile pass placed the probe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SiteView {
    pub site_id: Option<String>,
    pub graph_kind: Option<String>,
    pub node_name: Option<String>,
    pub aten_op: Option<String>,
    pub module_path: Option<String>,
    pub source_location: Option<String>,
    pub compile_id: Option<String>,
}

impl SiteView {
    pub fn is_empty(&self) -> bool {
        *self == SiteView::default()
    }

    /// `module.path (aten.op) at file.py:12`: the parts that are known.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(m) = &self.module_path {
            parts.push(m.clone());
        }
        if let Some(op) = &self.aten_op {
            parts.push(format!("({op})"));
        }
        if let Some(src) = &self.source_location {
            parts.push(format!("at {src}"));
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// Everything about one recorded value except its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservationMeta {
    pub order: i64,
    pub name: String,
    pub invocation_index: i64,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub stride: Vec<i64>,
    pub source_device: String,
    pub payload: PayloadKind,
    pub digest: Option<String>,
    pub summary: Option<SummaryView>,
    pub site: Option<SiteView>,
}

impl ObservationMeta {
    pub fn key(&self) -> (&str, i64) {
        (&self.name, self.invocation_index)
    }

    /// Elements, or `None` for a shape with a negative size or one that overflows.
    pub fn numel(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, &d| {
            u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
    }

    /// Whether the bytes can be read: a full payload with a digest to fetch them by.
    pub fn has_payload(&self) -> bool {
        self.payload == PayloadKind::Full && self.digest.is_some()
    }

    pub(crate) fn side(&self) -> ObservationSide {
        ObservationSide {
            order: self.order,
            dtype: self.dtype.torch_name().to_owned(),
            shape: self.shape.clone(),
            stride: self.stride.clone(),
            source_device: self.source_device.clone(),
            payload: self.payload.as_str().to_owned(),
            digest: self.digest.clone(),
            summary: self.summary,
            site: self.site.clone().filter(|s| !s.is_empty()),
        }
    }
}

/// Which point or snapshot a set of observations belongs to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PointRef {
    pub label: Option<String>,
    pub index: Option<i64>,
    pub replay_index: Option<i64>,
    pub snapshot_index: Option<i64>,
    pub timestamp: Option<String>,
}

impl PointRef {
    /// `'step3'`, `snapshot 2`, or `#4`: what a person calls this point.
    pub fn display(&self) -> String {
        match (&self.label, self.snapshot_index, self.index) {
            (Some(label), _, _) => format!("'{label}'"),
            (None, Some(s), _) => format!("snapshot {s}"),
            (None, None, Some(i)) => format!("#{i}"),
            (None, None, None) => "(unnamed)".to_owned(),
        }
    }
}

/// What was compared on one side: a snapshot, a point, a run or a run group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Subject {
    pub kind: String,
    pub name: Option<String>,
    pub path: Option<String>,
    pub run_id: Option<String>,
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    pub complete: Option<bool>,
    pub points: Option<usize>,
    pub detail: Option<String>,
}

impl Subject {
    pub fn display(&self) -> String {
        let mut s = self.kind.clone();
        if let Some(name) = &self.name {
            s.push_str(&format!(" '{name}'"));
        }
        let mut facts = Vec::new();
        if let Some(detail) = &self.detail {
            facts.push(detail.clone());
        }
        if let Some(rank) = self.rank {
            match self.world_size {
                Some(w) => facts.push(format!("rank {rank} of {w}")),
                None => facts.push(format!("rank {rank}")),
            }
        }
        if let Some(points) = self.points {
            facts.push(format!(
                "{points} point{}",
                if points == 1 { "" } else { "s" }
            ));
        }
        match self.complete {
            Some(true) => facts.push("complete".into()),
            Some(false) => facts.push("INCOMPLETE".into()),
            None => {}
        }
        if !facts.is_empty() {
            s.push_str(&format!(" ({})", facts.join(", ")));
        }
        if let Some(path) = &self.path {
            s.push_str(&format!(" at {path}"));
        }
        s
    }
}

// ----------------------------------------------------------------------------- results

/// The verdict of a comparison. Ordered by precedence: an aggregate takes the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Match,
    Inconclusive,
    Mismatch,
}

impl Status {
    /// Every status, by precedence.
    pub const ALL: [Status; 3] = [Status::Match, Status::Inconclusive, Status::Mismatch];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Inconclusive => "inconclusive",
            Status::Mismatch => "mismatch",
        }
    }

    /// Upper case for the statuses a reader must not miss.
    pub fn shout(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Inconclusive => "INCONCLUSIVE",
            Status::Mismatch => "MISMATCH",
        }
    }
}

/// How a verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The key exists only in the reference.
    ReferenceOnly,
    /// The key exists only in the candidate.
    CandidateOnly,
    /// Shape, stride or dtype differ.
    Metadata,
    /// Decided from the content digests alone.
    Digest,
    /// Decided element by element.
    Values,
    /// Decided (or left open) from the summaries: one side has no payload.
    Summary,
}

impl Kind {
    /// Every kind, in the order a pair is decided.
    pub const ALL: [Kind; 6] = [
        Kind::ReferenceOnly,
        Kind::CandidateOnly,
        Kind::Metadata,
        Kind::Digest,
        Kind::Values,
        Kind::Summary,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ReferenceOnly => "reference_only",
            Kind::CandidateOnly => "candidate_only",
            Kind::Metadata => "metadata",
            Kind::Digest => "digest",
            Kind::Values => "values",
            Kind::Summary => "summary",
        }
    }
}

/// An element value, exact: integers beyond 2^53 stay integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

impl Scalar {
    pub fn display(&self, dtype: DType) -> String {
        match *self {
            Scalar::Int(v) => v.to_string(),
            Scalar::Float(v) => crate::format::element(v, dtype),
            Scalar::Complex(re, im) => {
                let sign = if im.is_sign_negative() && !im.is_nan() {
                    '-'
                } else {
                    '+'
                };
                format!(
                    "({}{sign}{}j)",
                    crate::format::element(re, dtype),
                    crate::format::element(im.abs(), dtype)
                )
            }
        }
    }
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Scalar::Int(v) => s.serialize_i128(v),
            Scalar::Float(v) => float(&v, s),
            Scalar::Complex(re, im) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element(&JsonFloat(re))?;
                seq.serialize_element(&JsonFloat(im))?;
                seq.end()
            }
        }
    }
}

struct JsonFloat(f64);

impl Serialize for JsonFloat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        float(&self.0, s)
    }
}

/// JSON has no NaN or infinity: such values are written as the strings `"nan"`, `"inf"`
/// and `"-inf"` (documented in docs/comparison.md).
pub fn float<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else if x.is_nan() {
        s.serialize_str("nan")
    } else if *x > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

pub fn opt_float<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(v) => float(v, s),
        None => s.serialize_none(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstMismatch {
    /// Position in the row-major flattened value.
    pub index: u64,
    pub coordinate: Vec<u64>,
    pub reference: Scalar,
    pub candidate: Scalar,
}

/// Element-wise metrics of one observation pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// `float64`, `complex128` or `integer`: the type values were compared in.
    pub compared_as: &'static str,
    pub total: u64,
    pub mismatch_count: u64,
    #[serde(serialize_with = "float")]
    pub mismatch_fraction: f64,
    /// Elements where both values are finite: the error metrics cover these.
    pub finite_pairs: u64,
    #[serde(serialize_with = "opt_float")]
    pub max_abs_error: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub max_rel_error: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub mean_abs_error: Option<f64>,
    pub first_mismatch: Option<FirstMismatch>,
    #[serde(serialize_with = "opt_float")]
    pub cosine_similarity: Option<f64>,
    #[serde(serialize_with = "opt_float")]
    pub relative_l2_error: Option<f64>,
    pub max_ulp_distance: Option<u64>,
    pub nan_introduced: u64,
    pub inf_introduced: u64,
}

/// One side of an observation pair, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationSide {
    pub order: i64,
    pub dtype: String,
    pub shape: Vec<i64>,
    pub stride: Vec<i64>,
    pub source_device: String,
    pub payload: String,
    pub digest: Option<String>,
    pub summary: Option<SummaryView>,
    pub site: Option<SiteView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationComparison {
    /// Position in execution order within its point comparison.
    pub position: usize,
    pub name: String,
    pub invocation_index: i64,
    pub status: Status,
    pub kind: Kind,
    /// One sentence saying why.
    pub reason: String,
    pub reference: Option<ObservationSide>,
    pub candidate: Option<ObservationSide>,
    pub metrics: Option<Metrics>,
}

impl ObservationComparison {
    /// `name[invocation]`, e.g. `encoder[0]`.
    pub fn label(&self) -> String {
        format!("{}[{}]", self.name, self.invocation_index)
    }

    pub fn dtype(&self) -> Option<DType> {
        self.reference
            .as_ref()
            .or(self.candidate.as_ref())
            .and_then(|s| DType::from_torch_name(&s.dtype).ok())
    }

    pub fn site(&self) -> Option<&SiteView> {
        self.reference
            .as_ref()
            .and_then(|s| s.site.as_ref())
            .or_else(|| self.candidate.as_ref().and_then(|s| s.site.as_ref()))
    }

    /// How bad this comparison is, for ranking: status first, then the share of the value
    /// that differs (a missing or incomparable value counts as all of it), then the
    /// largest absolute and relative errors.
    pub fn severity(&self) -> (Status, f64, f64, f64) {
        let share = match (&self.metrics, self.status) {
            (_, Status::Match) => 0.0,
            (Some(m), _) if self.kind == Kind::Values => m.mismatch_fraction,
            _ => 1.0,
        };
        let (abs, rel) = self.metrics.as_ref().map_or((0.0, 0.0), |m| {
            (
                m.max_abs_error.unwrap_or(0.0),
                m.max_rel_error.unwrap_or(0.0),
            )
        });
        (self.status, share, nan_low(abs), nan_low(rel))
    }
}

fn nan_low(x: f64) -> f64 {
    if x.is_nan() {
        f64::NEG_INFINITY
    } else {
        x
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub total: usize,
    #[serde(rename = "match")]
    pub matched: usize,
    #[serde(rename = "mismatch")]
    pub mismatched: usize,
    pub inconclusive: usize,
}

impl Counts {
    pub fn add(&mut self, status: Status) {
        self.total += 1;
        match status {
            Status::Match => self.matched += 1,
            Status::Mismatch => self.mismatched += 1,
            Status::Inconclusive => self.inconclusive += 1,
        }
    }

    pub fn merge(&mut self, other: &Counts) {
        self.total += other.total;
        self.matched += other.matched;
        self.mismatched += other.mismatched;
        self.inconclusive += other.inconclusive;
    }

    /// `12 observations: 10 match, 2 mismatch, 0 inconclusive`.
    pub fn describe(&self, noun: &str) -> String {
        format!(
            "{} {noun}{}: {} match, {} mismatch, {} inconclusive",
            self.total,
            if self.total == 1 { "" } else { "s" },
            self.matched,
            self.mismatched,
            self.inconclusive
        )
    }
}

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
    /// `observation`, `point` or `rank`.
    pub scope: &'static str,
    pub status: Status,
    pub rank: Option<i64>,
    /// Position in `points` (of the rank's comparison for run groups).
    pub point: Option<usize>,
    /// Position in that point's `observations`.
    pub observation: Option<usize>,
    pub description: String,
}

/// A point of a series, by position and identity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub point: usize,
    pub label: Option<String>,
    pub index: Option<i64>,
    pub replay_index: Option<i64>,
}

/// When one observation of the reference point stopped matching across a series.
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
        let first_issue = first_issue(&points, &ranks);
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
}

fn first_issue(points: &[PointComparison], ranks: &[RankComparison]) -> Option<Issue> {
    for p in points {
        if p.status == Status::Match {
            continue;
        }
        if let Some(o) = p.observations.iter().find(|o| o.status != Status::Match) {
            return Some(Issue {
                scope: "observation",
                status: o.status,
                rank: None,
                point: Some(p.position),
                observation: Some(o.position),
                description: format!("point {}, {}: {}", p.display(), o.label(), o.reason),
            });
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
