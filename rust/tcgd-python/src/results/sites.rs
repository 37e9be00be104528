//! The site of a probed value, where a compile pass placed its probe: `TensorSite` as a run
//! records it, `ObservationSite` as a comparison reports it. Both are declared from the one
//! list of site columns ([`tcgd_store::site_columns!`]).

use tcgd_store::Site;

use super::*;

/// Declares the site classes and [`SITE_COLUMNS`], given the site columns: a getter per
/// column, so that the one list of them is also the classes' attributes.
macro_rules! site_classes {
    ($($column:ident),* $(,)?) => {
        /// Where a compared value came from when a compile pass placed its probe.
        #[pyclass(
            name = "ObservationSite",
            module = "torch_cudagraph_debug._native",
            frozen,
            eq,
            skip_from_py_object
        )]
        #[derive(Clone, PartialEq)]
        pub struct PySite {
            pub(crate) inner: SiteLocation,
        }

        impl From<SiteLocation> for PySite {
            fn from(inner: SiteLocation) -> Self {
                PySite { inner }
            }
        }

        #[pymethods]
        impl PySite {
            $(
                #[getter]
                fn $column(&self) -> Option<String> {
                    self.inner.$column.clone()
                }
            )*

            /// The value as its JSON report holds it.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                crate::classes::serde_to_py(py, &self.inner)
            }

            fn __repr__(&self) -> String {
                format!("ObservationSite({})", self.inner.describe().unwrap_or_default())
            }
        }

        /// Where a recorded value came from when a compile pass placed its probe (an
        /// observation of a hand-placed probe has no site).
        #[pyclass(
            name = "TensorSite",
            module = "torch_cudagraph_debug._native",
            frozen,
            eq,
            hash,
            skip_from_py_object
        )]
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub struct PyTensorSite {
            pub(crate) inner: Site,
        }

        impl From<Site> for PyTensorSite {
            fn from(inner: Site) -> Self {
                PyTensorSite { inner }
            }
        }

        #[pymethods]
        impl PyTensorSite {
            #[new]
            #[pyo3(signature = ($($column,)* materialized_by_probe = None))]
            #[allow(clippy::too_many_arguments)]
            fn new($($column: Option<String>,)* materialized_by_probe: Option<bool>) -> Self {
                let location = SiteLocation { $($column),* };
                Site { location, materialized_by_probe }.into()
            }

            $(
                #[getter]
                fn $column(&self) -> Option<String> {
                    self.inner.location.$column.clone()
                }
            )*

            /// True when the probe forced the value out of a fused kernel (the observer
            /// effect: rounding downstream may differ from the unprobed graph).
            #[getter]
            fn materialized_by_probe(&self) -> Option<bool> {
                self.inner.materialized_by_probe
            }

            /// Every attribute by name, in order.
            fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
                crate::classes::attrs_dict(slf.as_any(), &SITE_COLUMNS)
            }

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                crate::classes::attrs_repr(slf.as_any(), &SITE_COLUMNS)
            }

            /// Pickles (and copies) as the class called with its attributes, in order.
            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
                let s = &slf.get().inner;
                let args = ($(s.location.$column.clone(),)* s.materialized_by_probe);
                (slf.get_type(), args).into_pyobject(slf.py())
            }
        }

        /// The site columns of a run's `observations` table, in order: the attributes of a
        /// `TensorSite`.
        pub(crate) const SITE_COLUMNS: [&str; SiteLocation::COLUMNS.len() + 1] =
            [$(stringify!($column),)* stringify!(materialized_by_probe)];
    };
}

tcgd_store::site_columns!(site_classes);
