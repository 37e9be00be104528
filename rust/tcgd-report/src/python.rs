//! A report's JSON values as Python objects: what the `to_dict()` of a result class gives,
//! exactly what its report.json holds (non-finite floats included, as the report spells
//! them), with no JSON text in between.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;

pyo3::import_exception!(torch_cudagraph_debug.errors, TcgdInternalError);
pyo3::import_exception!(torch_cudagraph_debug.errors, InvalidInputError);

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

/// One table cell as its Python value (`None`, `int`, `float`, `str`, `bool`).
pub fn cell_to_python(py: Python<'_>, cell: crate::Cell) -> PyResult<Bound<'_, PyAny>> {
    use crate::Cell;
    Ok(match cell {
        Cell::Null => py.None().into_bound(py),
        Cell::Int(v) => v.into_pyobject(py)?.into_any(),
        Cell::UInt(v) => v.into_pyobject(py)?.into_any(),
        Cell::Float(v) => PyFloat::new(py, v).into_any(),
        Cell::Text(v) => v.into_pyobject(py)?.into_any(),
        Cell::Bool(v) => PyBool::new(py, v).to_owned().into_any(),
    })
}

/// A row of a CSV file as `{column: value}`, in column order: what a row's `to_row()`
/// gives, from the cells the file holds.
pub fn cells_to_python<'py, S: AsRef<str>>(
    py: Python<'py>,
    row: impl IntoIterator<Item = (S, crate::Cell)>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, cell) in row {
        dict.set_item(name.as_ref(), cell_to_python(py, cell)?)?;
    }
    Ok(dict)
}

/// How `to_dict()` gives an attribute's value: a class with a `to_dict()` as its dict,
/// anything else as is.
fn dict_value(value: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    if value.hasattr("to_dict")? {
        return value.call_method0("to_dict");
    }
    Ok(value)
}

/// `{name: value}` of the named attributes of `obj`, in order: the `to_dict()` of the
/// result classes whose attributes are their fields.
pub fn attrs_dict<'py>(obj: &Bound<'py, PyAny>, names: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(obj.py());
    for name in names {
        dict.set_item(name, dict_value(obj.getattr(name)?)?)?;
    }
    Ok(dict)
}

/// `Class(name=value, ...)` of the named attributes of `obj`, each as Python's `repr`
/// writes it: the `repr` of the result classes.
pub fn repr_of(obj: &Bound<'_, PyAny>, names: &[&str]) -> PyResult<String> {
    repr_with(obj, names, &[])
}

/// [`repr_of`], then `extra` fields already in Python's spelling (counts and values that
/// are not attributes).
pub fn repr_with(
    obj: &Bound<'_, PyAny>,
    names: &[&str],
    extra: &[(&str, String)],
) -> PyResult<String> {
    let mut fields = names
        .iter()
        .map(|name| Ok(format!("{name}={}", obj.getattr(*name)?.repr()?)))
        .collect::<PyResult<Vec<_>>>()?;
    fields.extend(extra.iter().map(|(name, value)| format!("{name}={value}")));
    Ok(format!("{}({})", obj.get_type().name()?, fields.join(", ")))
}

/// A Python value as JSON (what `json.dumps` accepts without a `default`, finite floats
/// only, string or integer keys): how a dict the user gives (run metadata) or the package
/// builds (provenance) crosses into Rust without JSON text. `what` names the argument in
/// the `InvalidInputError` a value with no JSON form raises.
pub fn python_to_json(value: &Bound<'_, PyAny>, what: &str) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    let invalid = |why: String| {
        InvalidInputError::new_err(format!("{what} must be JSON-serialisable: {why}"))
    };
    Ok(if value.is_none() {
        Value::Null
    } else if let Ok(b) = value.cast::<PyBool>() {
        Value::Bool(b.is_true())
    } else if value.is_instance_of::<PyInt>() {
        match value.extract::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => Value::from(value.extract::<u64>().map_err(|_| {
                invalid(format!(
                    "the integer {} is out of range",
                    value.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?),
        }
    } else if let Ok(f) = value.cast::<PyFloat>() {
        let f = f.value();
        serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| invalid(format!("{f} is not a finite number")))?
    } else if let Ok(s) = value.cast::<PyString>() {
        Value::String(s.to_str()?.to_owned())
    } else if let Ok(d) = value.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let key = if let Ok(s) = k.cast::<PyString>() {
                s.to_str()?.to_owned()
            } else if k.is_instance_of::<PyInt>() && !k.is_instance_of::<PyBool>() {
                k.str()?.to_str()?.to_owned()
            } else {
                return Err(invalid(format!(
                    "keys must be str or int, not {}",
                    k.get_type().name()?
                )));
            };
            map.insert(key, python_to_json(&v, what)?);
        }
        Value::Object(map)
    } else if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value
            .try_iter()?
            .map(|item| python_to_json(&item?, what))
            .collect::<PyResult<Vec<_>>>()?;
        Value::Array(items)
    } else {
        return Err(invalid(format!(
            "Object of type {} is not JSON serializable",
            value.get_type().name()?
        )));
    })
}
