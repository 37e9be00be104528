//! Verdicts, observation kinds and JSON-safe scalars.

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use tcgd_tensor::DType;

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

pub(crate) struct JsonFloat(f64);

impl Serialize for JsonFloat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        float(&self.0, s)
    }
}

pub use tcgd_tensor::json::{float, opt_float};
