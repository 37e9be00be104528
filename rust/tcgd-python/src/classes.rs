//! How native values become frozen Python classes, written once for every result class:
//! a class over one Rust value whose getters are a table of `name: Type => expression`
//! ([`frozen_class!`]), and the `to_dict()` and `repr` that read a class's own attributes
//! by name.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One CSV cell as its Python value (`None`, `int`, `float`, `str`, `bool`).
fn cell_value<'py>(py: Python<'py>, cell: tcgd_report::Cell) -> PyResult<Bound<'py, PyAny>> {
    use tcgd_report::Cell;
    Ok(match cell {
        Cell::Null => py.None().into_bound(py),
        Cell::Int(v) => v.into_pyobject(py)?.into_any(),
        Cell::UInt(v) => v.into_pyobject(py)?.into_any(),
        Cell::Float(v) => v.into_pyobject(py)?.into_any(),
        Cell::Text(v) => v.into_pyobject(py)?.into_any(),
        Cell::Bool(v) => pyo3::types::PyBool::new(py, v).to_owned().into_any(),
    })
}

/// A row of a result's CSV file as `{column: value}`: what `to_row()` gives, from the
/// same cells the file holds.
pub(crate) fn csv_row_dict<'py, S: AsRef<str>>(
    py: Python<'py>,
    names: impl IntoIterator<Item = S>,
    cells: impl IntoIterator<Item = tcgd_report::Cell>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, cell) in names.into_iter().zip(cells) {
        dict.set_item(name.as_ref(), cell_value(py, cell)?)?;
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

/// A getter's Python name (`r#match` is `match`).
fn attribute(name: &str) -> &str {
    name.trim_start_matches("r#")
}

/// `{name: value}` of the named attributes of `obj`, in order.
pub(crate) fn attrs_dict<'py>(
    obj: &Bound<'py, PyAny>,
    names: &[&str],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(obj.py());
    for name in names.iter().map(|n| attribute(n)) {
        dict.set_item(name, dict_value(obj.getattr(name)?)?)?;
    }
    Ok(dict)
}

/// `Class(name=value, ...)` of the named attributes of `obj`, each as Python's `repr`
/// writes it.
pub(crate) fn attrs_repr(obj: &Bound<'_, PyAny>, names: &[&str]) -> PyResult<String> {
    let names: Vec<&str> = names.iter().map(|n| attribute(n)).collect();
    tcgd_report::python::repr_of(obj, &names)
}

/// A frozen class over one Rust value, `inner`, given as:
///
/// ```text
/// frozen_class! {
///     /// Docs.
///     #[pyclass(name = "PythonName", ...)]   // module and `frozen` are added
///     #[derive(Clone, PartialEq)]
///     pub struct PyClass(RustValue);
///     |value, py| {
///         /// A getter's docs.
///         getter_name: ReturnType => expression;   // `'py` is the interpreter's lifetime
///     }
///     // Then, each optional, in this order (see `class_methods!`):
///     eq;
///     hash;
///     to_dict(serde);     // or `to_dict(Python)`: the getters by name, in table order
///     repr(all);          // or `repr(getter, ...)`
///     { /* the class's own methods */ }
/// }
/// ```
///
/// It is `From` its value. `impl PyClass |value, py| { ... } ...` gives the methods alone,
/// for a class written by hand with a field `inner`.
macro_rules! frozen_class {
    (
        $(#$meta:tt)*
        $vis:vis struct $class:ident($inner:ty);
        $($rest:tt)*
    ) => {
        $(#$meta)*
        #[pyo3(module = "torch_cudagraph_debug._native", frozen)]
        $vis struct $class {
            pub(crate) inner: $inner,
        }

        impl From<$inner> for $class {
            fn from(inner: $inner) -> Self {
                $class { inner }
            }
        }

        $crate::classes::frozen_class!(impl $class $($rest)*);
    };
    (
        impl $class:ident |$v:ident, $py:ident| {
            $($(#[$gmeta:meta])* $getter:ident: $ret:ty => $value:expr;)*
        }
        $($options:tt)*
    ) => {
        $crate::classes::class_methods!($class [$($getter)*] [inner] [
            $(
                $(#[$gmeta])*
                #[getter]
                #[allow(unused_variables)]
                fn $getter<'py>(&self, $py: Python<'py>) -> $ret {
                    let $v = &self.inner;
                    $value
                }
            )*
        ] $($options)*);
    };
}

/// The one `#[pymethods]` block of a class: its attribute methods (`$methods`: getters),
/// then what its options ask for, then its own methods. `$names` are its attributes, in
/// order; `$value` the field that holds the value it stands for (none: the class itself).
///
/// - `eq;`: equal to an object of this class whose value is equal (`NotImplemented` for any
///   other object, as Python's protocol has it). A method, not pyo3's `eq` option: the code
///   pyo3 writes for that option does not resolve inside a macro's expansion.
/// - `hash;`: the hash of the value (`eq;` first: equal objects hash alike).
/// - `to_dict(serde);`: the value's serde form ([`crate::classes::serde_to_py`]);
///   `to_dict(Python);`: the attributes by name, a class with a `to_dict()` as its dict.
/// - `repr(all);` or `repr(name, ...);`: `Class(name=value, ...)` of those attributes.
macro_rules! class_methods {
    ($class:ident [$($name:ident)*] [$($value:ident)?] [$($methods:tt)*] eq; $($rest:tt)*) => {
        $crate::classes::class_methods!($class [$($name)*] [$($value)?] [
            $($methods)*
            fn __eq__(&self, other: &Bound<'_, PyAny>) -> Py<PyAny> {
                let py = other.py();
                match other.cast::<Self>() {
                    Ok(o) => pyo3::types::PyBool::new(py, &o.get()$(.$value)? == &self$(.$value)?)
                        .to_owned()
                        .into_any()
                        .unbind(),
                    Err(_) => py.NotImplemented(),
                }
            }
        ] $($rest)*);
    };
    ($class:ident [$($name:ident)*] [$value:ident] [$($methods:tt)*] hash; $($rest:tt)*) => {
        $crate::classes::class_methods!($class [$($name)*] [$value] [
            $($methods)*
            fn __hash__(&self) -> u64 {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                self.$value.hash(&mut hasher);
                hasher.finish()
            }
        ] $($rest)*);
    };
    (
        $class:ident [$($name:ident)*] [$value:ident] [$($methods:tt)*]
        to_dict(serde); $($rest:tt)*
    ) => {
        $crate::classes::class_methods!($class [$($name)*] [$value] [
            $($methods)*
            /// The value as its JSON report holds it.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                $crate::classes::serde_to_py(py, &self.$value)
            }
        ] $($rest)*);
    };
    (
        $class:ident [$($name:ident)*] [$($value:ident)?] [$($methods:tt)*]
        to_dict(Python); $($rest:tt)*
    ) => {
        $crate::classes::class_methods!($class [$($name)*] [$($value)?] [
            $($methods)*
            /// Every attribute by name, in order.
            fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
                $crate::classes::attrs_dict(
                    slf.as_any(),
                    &[$(stringify!($name)),*],
                )
            }
        ] $($rest)*);
    };
    (
        $class:ident [$($name:ident)*] [$($value:ident)?] [$($methods:tt)*]
        repr(all); $($rest:tt)*
    ) => {
        $crate::classes::class_methods!(
            $class [$($name)*] [$($value)?] [$($methods)*] repr($($name),*); $($rest)*
        );
    };
    (
        $class:ident [$($name:ident)*] [$($value:ident)?] [$($methods:tt)*]
        repr($($shown:ident),* $(,)?); $($rest:tt)*
    ) => {
        $crate::classes::class_methods!($class [$($name)*] [$($value)?] [
            $($methods)*
            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                $crate::classes::attrs_repr(slf.as_any(), &[$(stringify!($shown)),*])
            }
        ] $($rest)*);
    };
    ($class:ident [$($name:ident)*] [$($value:ident)?] [$($methods:tt)*] $({ $($own:tt)* })?) => {
        #[pymethods]
        impl $class {
            $($methods)*
            $($($own)*)?
        }
    };
}

pub(crate) use {class_methods, frozen_class};

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
