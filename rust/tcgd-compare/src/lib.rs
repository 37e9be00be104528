//! Comparison engine for recorded tensors, and the search for a run's first anomaly
//! ([`first_anomaly`]).
//!
//! Observations are aligned by `(name, invocation_index)` and each pair is decided in a
//! fixed order: one-sided keys, metadata (shape, stride, dtype), equal digests, summary-only
//! pairs, then element by element in parallel chunks ([`kernel`]'s semantics follow
//! `torch.isclose(candidate, reference)` and `torch.equal`). Results aggregate by
//! precedence: mismatch > inconclusive > match. [`report`] renders a [`Comparison`] as
//! text, JSON, HTML and CSV; docs/comparison.md is the user-facing description.

mod accuracy;
mod anomaly;
mod compare;
mod engine;
mod error;
pub mod format;
mod group;
mod kernel;
mod model;
mod options;
#[cfg(feature = "python")]
mod python;
pub mod report;
mod run;

pub use accuracy::{judge_against_float64, AccuracyVerdict, Float64Rule, SiteAccuracy};
pub use anomaly::{
    first_anomaly, first_anomaly_in_run, AnomalyQuery, AnomalyRule, AnomalySite, FirstAnomaly,
    Observation as AnomalyObservation, Point as AnomalyPoint, SiteFilter,
};
pub use compare::{
    compare_point_series, compare_run_groups, compare_runs, compare_sets, PointMapping,
    PointSelector,
};
pub use engine::{ObservationSet, PayloadBuf, PayloadSource, Progress, Silent};
pub use error::{CompareError, Result};
pub use group::{GroupMember, MemberPoint, RunGroup};
pub use model::{
    Comparison, ComparisonKind, Counts, Divergence, FirstMismatch, Issue, Kind, Metrics,
    ObservationComparison, ObservationMeta, ObservationSide, PointComparison, PointRef,
    RankComparison, Scalar, Series, SeriesPoint, SiteLocation, Status, Subject, TensorSummary,
    REPORT_SCHEMA, REPORT_VERSION,
};
pub use options::{CompareOptions, DtypePolicy, LayoutPolicy, Mode};
pub use run::RunData;
