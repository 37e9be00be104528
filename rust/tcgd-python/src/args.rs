//! Argument mappings as Python hands them over, and the groups of keys several of them
//! hold: each group is one struct, read from the same mapping as the rest.

use pyo3::prelude::*;
use tcgd_store::{ObservationDescriptor, PayloadKind};

use crate::errors::BindResult;
use crate::parse_dtype;

/// Two argument structs read from one mapping, each taking the keys it names (pyo3's
/// derive has no `flatten`).
pub(crate) struct Joined<A, B>(pub(crate) A, pub(crate) B);

impl<'a, 'py, A, B> FromPyObject<'a, 'py> for Joined<A, B>
where
    A: FromPyObjectOwned<'py>,
    B: FromPyObjectOwned<'py>,
{
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Joined(
            obj.extract().map_err(Into::into)?,
            obj.extract().map_err(Into::into)?,
        ))
    }
}

/// An observation as Python hands it over: one mapping with every key present (None where
/// a value is absent), its descriptor's keys, its site's, and those of its value `V`.
pub(crate) type ObservationArgs<V> = Joined<DescriptorArgs, Joined<V, SiteArgs>>;

/// What an observation is and where it stands in its point.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct DescriptorArgs {
    order: i64,
    name: String,
    invocation_index: i64,
    dtype: String,
    shape: Vec<i64>,
    stride: Vec<i64>,
    source_device: String,
    payload: String,
}

impl DescriptorArgs {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor checked: its dtype and payload kind known.
    pub(crate) fn check(self) -> BindResult<ObservationDescriptor> {
        Ok(ObservationDescriptor {
            dtype: parse_dtype(&self.dtype)?,
            payload: PayloadKind::parse(&self.payload)?,
            order: self.order,
            name: self.name,
            invocation_index: self.invocation_index,
            shape: self.shape,
            stride: self.stride,
            source_device: self.source_device,
        })
    }
}

/// Where a compile pass placed the probe of a value: its `site` key, a `TensorSite`
/// (`None` for a hand-placed probe's value).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct SiteArgs {
    site: Option<tcgd_store::Site>,
}

impl From<SiteArgs> for tcgd_store::Site {
    fn from(args: SiteArgs) -> Self {
        args.site.unwrap_or_default()
    }
}
