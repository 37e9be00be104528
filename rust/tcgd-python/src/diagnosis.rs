//! What the compile plugin's "why" analysis needs natively: the float64 judgement of
//! compiled values (tcgd-compare's `accuracy`), and report documents that Python fills
//! with content and Rust renders (tcgd-report's `document`), so no markup is written by
//! hand in Python.

use std::collections::HashSet;

use pyo3::prelude::*;
use tcgd_compare::{judge_against_float64 as judge, Float64Rule, RunData, SiteAccuracy};
use tcgd_report::{Block, Cell, Document, Series, Table};
use tcgd_store::RunKind;

use crate::errors::{guard, BindResult, BindingError};
use crate::results::serde_to_py;
use crate::store::RunAddress;

/// One site of one point, judged against the float64 run (docs/why.md has the rule).
#[pyclass(
    frozen,
    skip_from_py_object,
    name = "SiteAccuracy",
    module = "torch_cudagraph_debug._native"
)]
#[derive(Clone)]
pub struct PySiteAccuracy {
    #[pyo3(get)]
    point: String,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    invocation_index: i64,
    #[pyo3(get)]
    dtype: Option<String>,
    #[pyo3(get)]
    numel: u64,
    #[pyo3(get)]
    eager_rmse: Option<f64>,
    #[pyo3(get)]
    compiled_rmse: Option<f64>,
    #[pyo3(get)]
    error_ratio: Option<f64>,
    #[pyo3(get)]
    multiplier: f64,
    #[pyo3(get)]
    threshold: Option<f64>,
    /// `close`, `rounding`, `diverges` or `unjudged`.
    #[pyo3(get)]
    verdict: &'static str,
    #[pyo3(get)]
    reason: String,
    judged: SiteAccuracy,
}

impl From<SiteAccuracy> for PySiteAccuracy {
    fn from(a: SiteAccuracy) -> Self {
        PySiteAccuracy {
            point: a.point.clone(),
            name: a.name.clone(),
            invocation_index: a.invocation_index,
            dtype: a.dtype.clone(),
            numel: a.numel,
            eager_rmse: a.eager_rmse,
            compiled_rmse: a.compiled_rmse,
            error_ratio: a.error_ratio,
            multiplier: a.multiplier,
            threshold: a.threshold,
            verdict: a.verdict.as_str(),
            reason: a.reason.clone(),
            judged: a,
        }
    }
}

#[pymethods]
impl PySiteAccuracy {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.judged)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::classes::attrs_repr(slf.as_any(), &["point", "name", "verdict"])
    }
}

fn open(run: &RunAddress, names: &Option<HashSet<String>>) -> tcgd_compare::Result<RunData> {
    let mut data = RunData::open_selected(run.root(), &run.selector(RunKind::Tensor))?;
    if let Some(names) = names {
        data.retain_names(names);
    }
    Ok(data)
}

/// Judges the compiled run's values against the float64 run, with the eager run's own
/// error as the yardstick; `names` limits it to those observations.
#[pyfunction]
#[pyo3(signature = (float64, eager, compiled, names=None, tol=None))]
pub(crate) fn judge_against_float64(
    py: Python<'_>,
    float64: RunAddress,
    eager: RunAddress,
    compiled: RunAddress,
    names: Option<Vec<String>>,
    tol: Option<f64>,
) -> PyResult<Vec<PySiteAccuracy>> {
    guard(py, || {
        let rule = match tol {
            Some(tol) => Float64Rule::new(tol)?,
            None => Float64Rule::default(),
        };
        let names = names.map(|n| n.into_iter().collect::<HashSet<_>>());
        let judged = py.detach(|| -> tcgd_compare::Result<Vec<SiteAccuracy>> {
            let (f, e, c) = (
                open(&float64, &names)?,
                open(&eager, &names)?,
                open(&compiled, &names)?,
            );
            judge(&f, &e, &c, &rule, &tcgd_compare::Silent)
        })?;
        Ok(judged.into_iter().map(PySiteAccuracy::from).collect())
    })
}

/// A table cell from a Python value: None, bool, int, float or str.
fn cell(value: &Bound<'_, PyAny>) -> BindResult<Cell> {
    if value.is_none() {
        return Ok(Cell::Null);
    }
    if let Ok(b) = value.cast::<pyo3::types::PyBool>() {
        return Ok(Cell::Bool(b.is_true()));
    }
    if let Ok(i) = value.extract::<i64>() {
        return Ok(Cell::Int(i));
    }
    if let Ok(f) = value.extract::<f64>() {
        return Ok(Cell::Float(f));
    }
    if let Ok(s) = value.extract::<String>() {
        return Ok(Cell::Text(s));
    }
    Err(BindingError::InvalidInput(format!(
        "a report cell must be None, bool, int, float or str, got {}",
        value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

/// A report built block by block (headings, paragraphs, facts, tables, line charts,
/// code), rendered as text or as one standalone HTML page with every string escaped.
#[pyclass(name = "ReportDocument", module = "torch_cudagraph_debug._native")]
pub struct PyReportDocument {
    document: Document,
}

#[pymethods]
impl PyReportDocument {
    #[new]
    fn new(title: String) -> Self {
        PyReportDocument {
            document: Document::new(title),
        }
    }

    fn heading(&mut self, text: String) {
        self.document.push(Block::Heading(text));
    }

    fn paragraph(&mut self, text: String) {
        self.document.push(Block::Paragraph(text));
    }

    fn facts(&mut self, facts: Vec<(String, String)>) {
        self.document.push(Block::Facts(facts));
    }

    #[pyo3(signature = (columns, rows, limit=None))]
    fn table(
        &mut self,
        py: Python<'_>,
        columns: Vec<String>,
        rows: Vec<Vec<Bound<'_, PyAny>>>,
        limit: Option<usize>,
    ) -> PyResult<()> {
        guard(py, || {
            let mut table = Table::new(&columns);
            for row in &rows {
                if row.len() != columns.len() {
                    return Err(BindingError::InvalidInput(format!(
                        "a report row has {} cells for {} columns",
                        row.len(),
                        columns.len()
                    )));
                }
                table.push(row.iter().map(cell).collect::<BindResult<_>>()?);
            }
            self.document.push(Block::Table { table, limit });
            Ok(())
        })
    }

    fn line_chart(
        &mut self,
        title: String,
        y_label: String,
        x_labels: Vec<String>,
        series: Vec<(String, Vec<Option<f64>>)>,
    ) {
        self.document.push(Block::LineChart {
            title,
            y_label,
            x_labels,
            series: series
                .into_iter()
                .map(|(name, values)| Series { name, values })
                .collect(),
        });
    }

    fn code(&mut self, text: String) {
        self.document.push(Block::Code(text));
    }

    fn to_text(&self) -> String {
        self.document.to_text()
    }

    fn to_html(&self) -> String {
        self.document.to_html()
    }
}
