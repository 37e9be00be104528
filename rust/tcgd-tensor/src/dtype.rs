//! The torch dtypes whose raw bytes this crate can decode.

use std::fmt;

/// A torch tensor dtype that can be decoded from raw little-endian host bytes.
///
/// Quantized dtypes (`qint8`, ...), packed sub-byte dtypes (`float4_e2m1fn_x2`,
/// `uint4`, ...) and bit dtypes (`bits8`, ...) are deliberately absent: their bytes do
/// not map one-to-one onto numeric elements without extra metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Float64,
    Float32,
    Float16,
    BFloat16,
    Float8E4M3Fn,
    Float8E4M3Fnuz,
    Float8E5M2,
    Float8E5M2Fnuz,
    Float8E8M0Fnu,
    Complex32,
    Complex64,
    Complex128,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Bool,
}

impl DType {
    /// Every supported dtype, in declaration order.
    pub const ALL: [DType; 21] = [
        DType::Float64,
        DType::Float32,
        DType::Float16,
        DType::BFloat16,
        DType::Float8E4M3Fn,
        DType::Float8E4M3Fnuz,
        DType::Float8E5M2,
        DType::Float8E5M2Fnuz,
        DType::Float8E8M0Fnu,
        DType::Complex32,
        DType::Complex64,
        DType::Complex128,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Bool,
    ];

    /// Parses a canonical torch dtype name, with or without the `torch.` prefix
    /// (`"float32"` and `"torch.float32"` both give [`DType::Float32`]).
    ///
    /// Only canonical names are accepted; aliases such as `"float"`, `"half"` or
    /// `"cfloat"` are rejected because `str(tensor.dtype)` never produces them.
    pub fn from_torch_name(name: &str) -> Result<DType, UnsupportedDtype> {
        let bare = name.strip_prefix("torch.").unwrap_or(name);
        DType::ALL
            .into_iter()
            .find(|d| d.torch_name() == bare)
            .ok_or_else(|| UnsupportedDtype {
                name: name.to_owned(),
            })
    }

    /// The canonical torch name, without the `torch.` prefix.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Float64 => "float64",
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float8E4M3Fn => "float8_e4m3fn",
            DType::Float8E4M3Fnuz => "float8_e4m3fnuz",
            DType::Float8E5M2 => "float8_e5m2",
            DType::Float8E5M2Fnuz => "float8_e5m2fnuz",
            DType::Float8E8M0Fnu => "float8_e8m0fnu",
            DType::Complex32 => "complex32",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Bool => "bool",
        }
    }

    /// Bytes per element; a complex element counts both parts (`complex32` is 4).
    pub fn itemsize(self) -> usize {
        match self {
            DType::Float8E4M3Fn
            | DType::Float8E4M3Fnuz
            | DType::Float8E5M2
            | DType::Float8E5M2Fnuz
            | DType::Float8E8M0Fnu
            | DType::Int8
            | DType::UInt8
            | DType::Bool => 1,
            DType::Float16 | DType::BFloat16 | DType::Int16 | DType::UInt16 => 2,
            DType::Float32 | DType::Complex32 | DType::Int32 | DType::UInt32 => 4,
            DType::Float64 | DType::Complex64 | DType::Int64 | DType::UInt64 => 8,
            DType::Complex128 => 16,
        }
    }

    /// True for real floating-point dtypes, float8 included; false for complex,
    /// matching `torch.dtype.is_floating_point`.
    pub fn is_floating_point(self) -> bool {
        matches!(
            self,
            DType::Float64
                | DType::Float32
                | DType::Float16
                | DType::BFloat16
                | DType::Float8E4M3Fn
                | DType::Float8E4M3Fnuz
                | DType::Float8E5M2
                | DType::Float8E5M2Fnuz
                | DType::Float8E8M0Fnu
        )
    }

    /// True for `complex32`, `complex64` and `complex128`.
    pub fn is_complex(self) -> bool {
        matches!(
            self,
            DType::Complex32 | DType::Complex64 | DType::Complex128
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.torch_name())
    }
}

/// A dtype name that [`DType::from_torch_name`] does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsupported dtype '{name}': supported dtypes are {supported} \
     (quantized, packed sub-byte and bit types cannot be probed)",
    supported = SupportedNames
)]
pub struct UnsupportedDtype {
    /// The name as given, prefix included.
    pub name: String,
}

/// Lists [`DType::ALL`] lazily so the error message cannot drift from the enum.
struct SupportedNames;

impl fmt::Display for SupportedNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in DType::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(d.torch_name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_with_and_without_prefix() {
        for d in DType::ALL {
            assert_eq!(DType::from_torch_name(d.torch_name()).unwrap(), d);
            let prefixed = format!("torch.{d}");
            assert_eq!(DType::from_torch_name(&prefixed).unwrap(), d);
            assert_eq!(d.to_string(), d.torch_name());
        }
    }

    #[test]
    fn all_is_exhaustive_and_distinct() {
        let mut names: Vec<_> = DType::ALL.iter().map(|d| d.torch_name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 21);
    }

    #[test]
    fn unsupported_names_are_reported_with_the_supported_list() {
        for bad in [
            "float4_e2m1fn_x2",
            "qint8",
            "torch.qint8",
            "float",
            "Float32",
            "",
        ] {
            let err = DType::from_torch_name(bad).unwrap_err();
            assert_eq!(err.name, bad);
            let msg = err.to_string();
            assert!(msg.contains(&format!("'{bad}'")), "{msg}");
            for d in DType::ALL {
                assert!(msg.contains(d.torch_name()), "{msg} lacks {d}");
            }
            assert!(
                msg.contains("quantized, packed sub-byte and bit types"),
                "{msg}"
            );
        }
    }

    #[test]
    fn itemsizes_and_kinds() {
        let expect = [
            (DType::Float64, 8, true, false),
            (DType::Float32, 4, true, false),
            (DType::Float16, 2, true, false),
            (DType::BFloat16, 2, true, false),
            (DType::Float8E4M3Fn, 1, true, false),
            (DType::Float8E4M3Fnuz, 1, true, false),
            (DType::Float8E5M2, 1, true, false),
            (DType::Float8E5M2Fnuz, 1, true, false),
            (DType::Float8E8M0Fnu, 1, true, false),
            (DType::Complex32, 4, false, true),
            (DType::Complex64, 8, false, true),
            (DType::Complex128, 16, false, true),
            (DType::Int8, 1, false, false),
            (DType::Int16, 2, false, false),
            (DType::Int32, 4, false, false),
            (DType::Int64, 8, false, false),
            (DType::UInt8, 1, false, false),
            (DType::UInt16, 2, false, false),
            (DType::UInt32, 4, false, false),
            (DType::UInt64, 8, false, false),
            (DType::Bool, 1, false, false),
        ];
        assert_eq!(expect.len(), DType::ALL.len());
        for (d, size, float, complex) in expect {
            assert_eq!(d.itemsize(), size, "{d}");
            assert_eq!(d.is_floating_point(), float, "{d}");
            assert_eq!(d.is_complex(), complex, "{d}");
        }
    }
}
