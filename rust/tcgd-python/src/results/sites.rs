//! The site of a probed value, where a compile pass placed its probe: `TensorSite` as a run
//! records it, `ObservationSite` as a comparison reports it. Both are declared from the one
//! list of site columns ([`tcgd_store::site_columns!`]).

use tcgd_store::Site;

use super::*;

/// Declares the site classes and [`SITE_COLUMNS`], given the site columns.
macro_rules! site_classes {
    ($($column:ident),* $(,)?) => {
        frozen_class! {
            /// Where a compared value came from when a compile pass placed its probe.
            #[pyclass(name = "ObservationSite", skip_from_py_object)]
            #[derive(Clone, PartialEq)]
            pub struct PySite(SiteLocation);
            |s, py| {
                $($column: Option<String> => s.$column.clone();)*
            }
            eq;
            to_dict(serde);
            {
                fn __repr__(&self) -> String {
                    format!(
                        "ObservationSite({})",
                        self.inner.describe().unwrap_or_default()
                    )
                }
            }
        }

        frozen_class! {
            /// Where a recorded value came from when a compile pass placed its probe (an
            /// observation of a hand-placed probe has no site).
            #[pyclass(name = "TensorSite", skip_from_py_object)]
            #[derive(Clone, PartialEq)]
            pub struct PyTensorSite(Site);
            |s, py| {
                $($column: Option<String> => s.location.$column.clone();)*
                /// True when the probe forced the value out of a fused kernel (the observer
                /// effect: rounding downstream may differ from the unprobed graph).
                materialized_by_probe: Option<bool> => s.materialized_by_probe;
            }
            eq;
            hash;
            to_dict(Python);
            repr(all);
            {
                #[new]
                #[pyo3(signature = ($($column,)* materialized_by_probe = None))]
                #[allow(clippy::too_many_arguments)]
                fn new($($column: Option<String>,)* materialized_by_probe: Option<bool>) -> Self {
                    let location = SiteLocation { $($column),* };
                    Site { location, materialized_by_probe }.into()
                }

                /// Pickles (and copies) as the class called with its attributes, in order.
                fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
                    let s = &slf.get().inner;
                    let args = ($(s.location.$column.clone(),)* s.materialized_by_probe);
                    (slf.get_type(), args).into_pyobject(slf.py())
                }
            }
        }

        /// The site columns of a run's `observations` table, in order: the attributes of a
        /// `TensorSite`.
        pub(crate) const SITE_COLUMNS: [&str; SiteLocation::COLUMNS.len() + 1] =
            [$(stringify!($column),)* stringify!(materialized_by_probe)];
    };
}

tcgd_store::site_columns!(site_classes);
