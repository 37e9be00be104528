//! What a comparison is asked to decide: tolerance mode, NaN handling and the policies for
//! dtype and layout differences.

use serde::{Deserialize, Serialize};

use crate::error::CompareError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `|candidate - reference| <= atol + rtol * |reference|` per element.
    Allclose,
    /// Value equality per element, like `torch.equal`.
    Exact,
}

impl Mode {
    /// Every mode, in the order messages list them.
    pub const ALL: [Mode; 2] = [Mode::Allclose, Mode::Exact];

    /// The name users write.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Allclose => "allclose",
            Mode::Exact => "exact",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DtypePolicy {
    /// Different dtypes are a metadata mismatch.
    Strict,
    /// Different dtypes are compared by value in a common type.
    Promote,
}

impl DtypePolicy {
    pub const ALL: [DtypePolicy; 2] = [DtypePolicy::Strict, DtypePolicy::Promote];

    pub fn as_str(self) -> &'static str {
        match self {
            DtypePolicy::Strict => "strict",
            DtypePolicy::Promote => "promote",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutPolicy {
    /// Different strides are a metadata mismatch.
    Strict,
    /// Strides are reported but not compared (payloads are always row-major).
    Ignore,
}

impl LayoutPolicy {
    pub const ALL: [LayoutPolicy; 2] = [LayoutPolicy::Strict, LayoutPolicy::Ignore];

    pub fn as_str(self) -> &'static str {
        match self {
            LayoutPolicy::Strict => "strict",
            LayoutPolicy::Ignore => "ignore",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareOptions {
    pub mode: Mode,
    pub rtol: f64,
    pub atol: f64,
    pub equal_nan: bool,
    pub dtype_policy: DtypePolicy,
    pub layout_policy: LayoutPolicy,
    /// Rows shown per table in text and HTML reports; JSON and CSV are always complete.
    pub limit: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            mode: Mode::Allclose,
            rtol: 1e-5,
            atol: 1e-8,
            equal_nan: false,
            dtype_policy: DtypePolicy::Strict,
            layout_policy: LayoutPolicy::Strict,
            limit: 20,
        }
    }
}

impl CompareOptions {
    /// Parses options from JSON (every field required, none unknown) and checks them.
    pub fn from_json(text: &str) -> Result<CompareOptions, CompareError> {
        let options: CompareOptions =
            serde_json::from_str(text).map_err(|e| CompareError::InvalidOption {
                option: "options".into(),
                reason: e.to_string(),
            })?;
        options.validate()?;
        Ok(options)
    }

    /// Options from their names as users write them (`"allclose"`, `"strict"`, ...),
    /// checked: the one place where options are validated, so a bad value is refused when
    /// the options are made, not when a comparison first uses them.
    pub fn from_names(
        mode: &str,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
        dtype_policy: &str,
        layout_policy: &str,
        limit: usize,
    ) -> Result<CompareOptions, CompareError> {
        let options = CompareOptions {
            mode: choice("mode", mode, &Mode::ALL, |m| m.as_str())?,
            rtol,
            atol,
            equal_nan,
            dtype_policy: choice("dtype_policy", dtype_policy, &DtypePolicy::ALL, |d| {
                d.as_str()
            })?,
            layout_policy: choice("layout_policy", layout_policy, &LayoutPolicy::ALL, |l| {
                l.as_str()
            })?,
            limit,
        };
        options.validate()?;
        Ok(options)
    }

    /// Tolerances must be finite and non-negative: a NaN tolerance would make every
    /// verdict false and an infinite one every verdict true, silently.
    pub fn validate(&self) -> Result<(), CompareError> {
        for (option, value) in [("rtol", self.rtol), ("atol", self.atol)] {
            if !value.is_finite() || value < 0.0 {
                return Err(CompareError::InvalidOption {
                    option: option.into(),
                    reason: format!("must be a finite number >= 0, got {value}"),
                });
            }
        }
        Ok(())
    }

    /// One line naming every option, for report headers.
    pub fn describe(&self) -> String {
        let mode = match self.mode {
            Mode::Allclose => format!(
                "mode=allclose rtol={} atol={}",
                crate::format::general(self.rtol),
                crate::format::general(self.atol)
            ),
            Mode::Exact => "mode=exact".to_owned(),
        };
        format!(
            "{mode} equal_nan={} dtype_policy={} layout_policy={}",
            self.equal_nan,
            self.dtype_policy.as_str(),
            self.layout_policy.as_str()
        )
    }
}

/// The variant of an option's enum that `value` names; the error lists the names.
fn choice<T: Copy>(
    option: &str,
    value: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, CompareError> {
    all.iter()
        .copied()
        .find(|v| name(*v) == value)
        .ok_or_else(|| CompareError::InvalidOption {
            option: option.into(),
            reason: format!(
                "must be one of {}, got {value:?}",
                all.iter().map(|v| name(*v)).collect::<Vec<_>>().join(", ")
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_validation() {
        let text = serde_json::to_string(&CompareOptions::default()).unwrap();
        assert_eq!(
            CompareOptions::from_json(&text).unwrap(),
            CompareOptions::default()
        );
        let bad = serde_json::json!({
            "mode": "allclose", "rtol": -1.0, "atol": 0.0, "equal_nan": false,
            "dtype_policy": "strict", "layout_policy": "strict", "limit": 20
        })
        .to_string();
        let err = CompareOptions::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("rtol") && err.contains(">= 0"), "{err}");
        let unknown = text.replace("\"limit\"", "\"limt\"");
        assert!(CompareOptions::from_json(&unknown).is_err());
        let wrong_mode = text.replace("allclose", "close");
        assert!(CompareOptions::from_json(&wrong_mode).is_err());
    }

    #[test]
    fn fault_options_are_checked_when_made() {
        let made = CompareOptions::from_names("exact", 0.0, 1e-3, true, "promote", "ignore", 5);
        assert_eq!(
            made.unwrap(),
            CompareOptions {
                mode: Mode::Exact,
                rtol: 0.0,
                atol: 1e-3,
                equal_nan: true,
                dtype_policy: DtypePolicy::Promote,
                layout_policy: LayoutPolicy::Ignore,
                limit: 5,
            }
        );
        let refused = |mode, rtol, atol, dtype, layout| match CompareOptions::from_names(
            mode, rtol, atol, false, dtype, layout, 20,
        ) {
            Err(CompareError::InvalidOption { option, reason }) => (option, reason),
            other => panic!("expected an invalid option, got {other:?}"),
        };
        let strict = "strict";
        assert_eq!(
            refused("allclose", -1.0, 0.0, strict, strict),
            ("rtol".into(), "must be a finite number >= 0, got -1".into())
        );
        assert_eq!(
            refused("allclose", f64::NAN, 0.0, strict, strict),
            (
                "rtol".into(),
                "must be a finite number >= 0, got NaN".into()
            )
        );
        assert_eq!(
            refused("allclose", 0.0, f64::INFINITY, strict, strict),
            (
                "atol".into(),
                "must be a finite number >= 0, got inf".into()
            )
        );
        assert_eq!(
            refused("close", 0.0, 0.0, strict, strict),
            (
                "mode".into(),
                "must be one of allclose, exact, got \"close\"".into()
            )
        );
        assert_eq!(
            refused("exact", 0.0, 0.0, "loose", strict).0,
            "dtype_policy"
        );
        assert_eq!(
            refused("exact", 0.0, 0.0, strict, "Strict").0,
            "layout_policy"
        );
    }

    #[test]
    fn describe_names_every_option() {
        let o = CompareOptions::default();
        assert_eq!(
            o.describe(),
            "mode=allclose rtol=1e-05 atol=1e-08 equal_nan=false dtype_policy=strict \
             layout_policy=strict"
        );
        let exact = CompareOptions {
            mode: Mode::Exact,
            equal_nan: true,
            ..o
        };
        assert!(exact.describe().starts_with("mode=exact equal_nan=true"));
    }
}
