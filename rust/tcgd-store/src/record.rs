//! What a producer hands the writer for one point: plain facts about tensors, never torch
//! objects. Bytes are borrowed host memory (contiguous, row-major, little-endian).

use serde::{Deserialize, Serialize};
use tcgd_tensor::{DType, TensorSummary};

use crate::error::{Result, StoreError};

/// Declares [`SiteLocation`], [`Site`] and [`SiteLocationRef`] from the one list of site
/// columns (given below), each also a nullable string column of the `observations`
/// table under the same name, so that the schema, the writer, the readers and the Python
/// classes take the site columns from this one list. With the `python` feature the two
/// owned forms are the native module's `ObservationSite` and `TensorSite`, their columns
/// its attributes.
macro_rules! site_location {
    ($($field:ident),* $(,)?) => {
        /// Where a compile pass placed the probe of a value: the graph node, its op, module
        /// and source line. All optional: hand-placed probes have none of it.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
        #[cfg_attr(
            feature = "python",
            pyo3::pyclass(
                name = "ObservationSite",
                module = "torch_cudagraph_debug._native",
                frozen,
                eq,
                get_all,
                skip_from_py_object
            )
        )]
        pub struct SiteLocation {
            $(pub $field: Option<String>,)*
        }

        /// Where a probed value came from, as recorded: its location's columns and
        /// whether the probe materialised it. What the probe pass writes into the graph
        /// (as JSON) and what a run's rows read back.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[cfg_attr(
            feature = "python",
            pyo3::pyclass(
                name = "TensorSite",
                module = "torch_cudagraph_debug._native",
                frozen,
                eq,
                hash,
                get_all,
                from_py_object
            )
        )]
        pub struct Site {
            $(pub $field: Option<String>,)*
            /// True when the probe forced the value out of a fused kernel (the observer
            /// effect: rounding downstream may differ from the unprobed graph).
            pub materialized_by_probe: Option<bool>,
        }

        impl SiteLocation {
            /// The site columns of the `observations` table, in their order.
            pub const COLUMNS: [&'static str; [$(stringify!($field)),*].len()] =
                [$(stringify!($field)),*];

            /// The value of each of [`Self::COLUMNS`], in the same order.
            pub fn column_values(&self) -> [&Option<String>; Self::COLUMNS.len()] {
                [$(&self.$field),*]
            }
        }

        impl Site {
            /// The site's location columns, in [`SiteLocation::COLUMNS`] order.
            pub fn column_values(&self) -> [&Option<String>; SiteLocation::COLUMNS.len()] {
                [$(&self.$field),*]
            }

            /// Where the site is, without what its probe did.
            pub fn location(&self) -> SiteLocation {
                SiteLocation { $($field: self.$field.clone()),* }
            }
        }

        /// A location whose probe is not known to have materialised the value.
        impl From<SiteLocation> for Site {
            fn from(location: SiteLocation) -> Self {
                Site { $($field: location.$field,)* materialized_by_probe: None }
            }
        }

        /// A [`SiteLocation`] borrowed from a table's columns: what a scan over many rows
        /// reads without copying; [`SiteLocationRef::to_site`] keeps one.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct SiteLocationRef<'a> {
            $(pub $field: Option<&'a str>,)*
        }

        impl<'a> SiteLocationRef<'a> {
            /// The location whose values of [`SiteLocation::COLUMNS`] are `values`.
            pub fn from_column_values(
                [$($field),*]: [Option<&'a str>; SiteLocation::COLUMNS.len()],
            ) -> Self {
                Self { $($field),* }
            }

            /// The recorded site at this location, `None` when every location column is
            /// null (a hand-placed probe's value).
            pub fn to_site(&self, materialized_by_probe: Option<bool>) -> Option<Site> {
                let site = Site {
                    $($field: self.$field.map(str::to_owned),)*
                    materialized_by_probe,
                };
                Some(site).filter(|s| !s.is_empty())
            }
        }
    };
}

// The site columns, in their order.
site_location! {
    site_id,
    graph_kind,
    node_name,
    aten_op,
    module_path,
    source_location,
    compile_id,
}

impl SiteLocation {
    pub fn is_empty(&self) -> bool {
        *self == SiteLocation::default()
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

impl Site {
    /// The attributes of a `TensorSite`, in order: the site columns, then whether the
    /// probe materialised the value.
    pub const ATTRIBUTES: [&'static str; SiteLocation::COLUMNS.len() + 1] = {
        let mut names = [""; SiteLocation::COLUMNS.len() + 1];
        let mut k = 0;
        while k < SiteLocation::COLUMNS.len() {
            names[k] = SiteLocation::COLUMNS[k];
            k += 1;
        }
        names[k] = "materialized_by_probe";
        names
    };

    /// No location and not known to be materialised by its probe: a hand-placed probe's.
    pub fn is_empty(&self) -> bool {
        self.column_values().iter().all(|v| v.is_none()) && self.materialized_by_probe != Some(true)
    }

    /// The sites of one probe group as the probe pass writes them into the graph: a JSON
    /// list of objects keyed by attribute.
    pub fn encode_group(sites: &[Site]) -> Result<String> {
        serde_json::to_string(sites).map_err(|e| StoreError::invalid("sites", e.to_string()))
    }

    /// The sites [`Site::encode_group`] wrote; an error names what is not a site list.
    pub fn decode_group(text: &str) -> Result<Vec<Site>> {
        serde_json::from_str(text)
            .map_err(|e| StoreError::invalid("sites", format!("not a probe group's sites: {e}")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// Bytes are stored; the value can be rebuilt.
    Full,
    /// Only the summary (and the digest when bytes were seen) is stored.
    Summary,
}

impl PayloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadKind::Full => "full",
            PayloadKind::Summary => "summary",
        }
    }

    pub fn parse(s: &str) -> Result<PayloadKind> {
        match s {
            "full" => Ok(PayloadKind::Full),
            "summary" => Ok(PayloadKind::Summary),
            other => Err(StoreError::invalid(
                "payload",
                format!("'{other}' is not one of \"full\", \"summary\""),
            )),
        }
    }
}

/// The value of one observation as the producer has it.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// Host bytes of the value; the writer digests and summarises them.
    Bytes(&'a [u8]),
    /// A summary computed elsewhere (on the device); no bytes were brought to the host.
    Summary(TensorSummary),
}

impl Value<'_> {
    /// Host bytes the value holds (a summary holds none): what a queued point keeps alive.
    pub fn held_bytes(&self) -> usize {
        match self {
            Value::Bytes(bytes) => bytes.len(),
            Value::Summary(_) => 0,
        }
    }
}

/// Elements of the value `name` of this shape; an error for a negative size or an overflow.
fn numel(name: &str, shape: &[i64]) -> Result<u64> {
    shape.iter().try_fold(1u64, |acc, &d| {
        let d = u64::try_from(d).map_err(|_| {
            StoreError::invalid(
                "shape",
                format!("observation '{name}' has negative size {d}"),
            )
        })?;
        acc.checked_mul(d)
            .ok_or_else(|| StoreError::invalid("shape", format!("observation '{name}' overflows")))
    })
}

/// What an observation is and where it stands in its point: everything about a recorded
/// value except its site and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservationDescriptor {
    pub order: i64,
    pub name: String,
    pub invocation_index: i64,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub stride: Vec<i64>,
    pub source_device: String,
    pub payload: PayloadKind,
}

impl ObservationDescriptor {
    /// `(name, invocation_index)`: what pairs an observation with another point's.
    pub fn key(&self) -> (&str, i64) {
        (&self.name, self.invocation_index)
    }

    /// Elements; an error for a shape with a negative size or one that overflows.
    pub fn numel(&self) -> Result<u64> {
        numel(&self.name, &self.shape)
    }
}

/// What stays the same about an observed value from point to point: its name, dtype,
/// layout, device and site. A producer that observes the same values at every point (the
/// device recorder's registered sites) builds these once and hands the same `Arc` to every
/// point: the writer keeps one copy per block of rows (65,536 rows) and the rows
/// refer to it by index, instead of every row owning copies of its strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteFacts {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub stride: Vec<i64>,
    pub source_device: String,
    pub site: Site,
}

impl SiteFacts {
    /// Elements; an error for a shape with a negative size or one that overflows.
    pub fn numel(&self) -> Result<u64> {
        numel(&self.name, &self.shape)
    }
}

/// One observation of a point: its site's facts (shared), where it stands in the point, and
/// its value.
#[derive(Debug, Clone)]
pub struct ObservationInput<'a> {
    pub facts: std::sync::Arc<SiteFacts>,
    pub order: i64,
    pub invocation_index: i64,
    pub payload: PayloadKind,
    pub value: Value<'a>,
}

impl<'a> ObservationInput<'a> {
    /// An observation whose facts are its own, not shared with other points (a value the
    /// host recorded once).
    pub fn new(descriptor: ObservationDescriptor, site: Site, value: Value<'a>) -> Self {
        let ObservationDescriptor {
            order,
            name,
            invocation_index,
            dtype,
            shape,
            stride,
            source_device,
            payload,
        } = descriptor;
        ObservationInput {
            facts: std::sync::Arc::new(SiteFacts {
                name,
                dtype,
                shape,
                stride,
                source_device,
                site,
            }),
            order,
            invocation_index,
            payload,
            value,
        }
    }

    /// `(name, invocation_index)`: what pairs an observation with another point's.
    pub fn key(&self) -> (&str, i64) {
        (&self.facts.name, self.invocation_index)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let d = &*self.facts;
        if d.shape.len() != d.stride.len() {
            return Err(StoreError::invalid(
                "stride",
                format!(
                    "observation '{}' has {} sizes but {} strides",
                    d.name,
                    d.shape.len(),
                    d.stride.len()
                ),
            ));
        }
        let numel = d.numel()?;
        match self.value {
            Value::Bytes(bytes) => {
                let expected = numel.saturating_mul(d.dtype.itemsize() as u64);
                if bytes.len() as u64 != expected {
                    return Err(StoreError::invalid(
                        "bytes",
                        format!(
                            "observation '{}' ({} {:?}) needs {expected} bytes, got {}",
                            d.name,
                            d.dtype,
                            d.shape,
                            bytes.len()
                        ),
                    ));
                }
            }
            Value::Summary(_) if self.payload == PayloadKind::Full => {
                return Err(StoreError::invalid(
                    "payload",
                    format!(
                        "observation '{}' asks for a full payload but carries only a summary",
                        d.name
                    ),
                ));
            }
            Value::Summary(s) if s.numel != numel => {
                return Err(StoreError::invalid(
                    "summary",
                    format!(
                        "observation '{}' has {numel} elements but its summary counts {}",
                        d.name, s.numel
                    ),
                ));
            }
            Value::Summary(_) => {}
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct PointInput {
    pub label: String,
    /// JSON text of the user's metadata (`{}` when none).
    pub metadata: String,
    pub replay_index: Option<i64>,
    /// Microseconds since the Unix epoch; the commit time when absent.
    pub timestamp_us: Option<i64>,
}

/// What the writer reports back once a point is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedPoint {
    pub point_index: u64,
    pub observations: u64,
    pub payload_chunks_written: u64,
    pub payloads_deduplicated: u64,
}
