//! A report's JSON values as Python objects: what the `to_dict()` of a result class gives,
//! exactly what its report.json holds (non-finite floats included, as the report spells
//! them), with no JSON text in between.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList};
use serde::Serialize;

pyo3::import_exception!(torch_cudagraph_debug.errors, TcgdInternalError);

/// A JSON value as the Python value `json.loads` would give for it.
pub fn json_to_python<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            (None, None) => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_python(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Any serialisable result as plain Python values (dicts, lists, numbers, strings), as its
/// JSON report holds it: the one way a native result becomes Python values.
pub fn to_python<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| TcgdInternalError::new_err(format!("cannot encode the result: {e}")))?;
    json_to_python(py, &value)
}

/// `Class(name=value, ...)` of the named attributes of `obj`, each as Python's `repr`
/// writes it: the `repr` of the result classes.
pub fn repr_of(obj: &Bound<'_, PyAny>, names: &[&str]) -> PyResult<String> {
    let fields = names
        .iter()
        .map(|name| Ok(format!("{name}={}", obj.getattr(*name)?.repr()?)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(format!("{}({})", obj.get_type().name()?, fields.join(", ")))
}
