//! How much of a memory report text and HTML show: rows (`limit`) and frames per stack
//! (`stack_depth`). The one declaration of these options and their defaults; JSON, CSV and
//! the result objects keep every row and frame.

/// Rows and frames per stack that the text and HTML of an attribution or lifetime report
/// show (JSON, CSV and the result objects keep everything). Both are at least 1.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "MemoryDisplayOptions",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        eq,
        hash,
        from_py_object
    )
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Display {
    /// Frames shown per allocation stack.
    pub stack_depth: usize,
    /// Rows (attribution rows, cohorts) shown per table.
    pub limit: usize,
}

impl Display {
    /// Attribution sections: two frames per stack, twenty rows.
    pub const ATTRIBUTION: Display = Display {
        stack_depth: 2,
        limit: 20,
    };
    /// Lifetime reports: four frames per stack (a cohort is named by its stack), twenty
    /// cohorts.
    pub const LIFETIMES: Display = Display {
        stack_depth: 4,
        limit: 20,
    };

    /// The options, or why they are not valid (each must be at least 1).
    pub fn new(stack_depth: i64, limit: i64) -> Result<Display, String> {
        let count = |name: &str, value: i64| match usize::try_from(value) {
            Ok(v) if v >= 1 => Ok(v),
            _ => Err(format!("{name} must be an integer >= 1, got {value}")),
        };
        Ok(Display {
            stack_depth: count("stack_depth", stack_depth)?,
            limit: count("limit", limit)?,
        })
    }
}

impl Default for Display {
    fn default() -> Self {
        Display::ATTRIBUTION
    }
}
