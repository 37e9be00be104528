//! What the result classes share: the `to_dict()` and `repr` that read a class's own
//! attributes by name, a CSV row as a dict, and the paths a report's `write()` returns.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A row of a result's CSV file as `{column: value}`: what `to_row()` gives, from the
/// same cells the file holds.
pub(crate) fn csv_row_dict<'py, S: AsRef<str>>(
    py: Python<'py>,
    names: impl IntoIterator<Item = S>,
    cells: impl IntoIterator<Item = tcgd_report::Cell>,
) -> PyResult<Bound<'py, PyDict>> {
    tcgd_report::python::cells_to_python(py, names.into_iter().zip(cells))
}

/// `{name: value}` of the named attributes of an object, in order: the report crate's,
/// one implementation for every class.
pub(crate) use tcgd_report::python::attrs_dict;

/// `Class(name=value, ...)` of the named attributes of an object: the report crate's, one
/// implementation for every class.
pub(crate) use tcgd_report::python::repr_of as attrs_repr;

/// A Rust value as Python's `repr` writes it.
pub(crate) fn py_repr<'py>(
    py: Python<'py>,
    value: impl pyo3::IntoPyObjectExt<'py>,
) -> PyResult<String> {
    let object = value.into_bound_py_any(py)?;
    Ok(object.repr()?.to_string())
}

/// [`attrs_repr`] with `extra` fields in Python's spelling (values that are not
/// attributes) after the named ones.
pub(crate) use tcgd_report::python::repr_with as attrs_repr_with;

/// What every report's `write()` returns: `{format: Path}`, the report files (`report.txt`, ...) as
/// `text`, `json` and `html` and each CSV file by its stem (`points` for points.csv).
pub(crate) fn paths_by_format(
    py: Python<'_>,
    written: Vec<std::path::PathBuf>,
) -> PyResult<Bound<'_, PyDict>> {
    let path = py.import("pathlib")?.getattr("Path")?;
    let by_format = PyDict::new(py);
    for p in written {
        let stem = p.file_stem().and_then(|f| f.to_str()).unwrap_or_default();
        let key = match p.extension().and_then(|e| e.to_str()) {
            Some("txt") => "text",
            Some("json") => "json",
            Some("html") => "html",
            _ => stem,
        }
        .to_owned();
        by_format.set_item(key, path.call1((p,))?)?;
    }
    Ok(by_format)
}

pub(crate) use tcgd_report::python::to_python as serde_to_py;
