//! CSV tables (RFC 4180): every row, no display limit, numbers at full precision; text
//! cells that a spreadsheet would run as a formula start with `'`.

use tcgd_report::csv::{self as safe, Ending};
use tcgd_report::{Cell, Table};

use crate::format;
use crate::model::{
    Comparison, ComparisonKind, ObservationComparison, PointComparison, PointRef, Scalar,
    SeriesPoint,
};
use crate::report::rows;

/// A table as a CSV file: an Arrow record batch through the shared writer, which
/// neutralises text a spreadsheet would run as a formula (`=HYPERLINK(...)` in a label)
/// and leaves numbers as numbers; lines end in CRLF as Python's `csv` module writes them.
pub(crate) fn write(table: &Table) -> String {
    table.csv(Ending::CrLf)
}

/// Full precision; non-finite values as in the JSON report.
fn float(x: Option<f64>) -> Cell {
    x.into()
}

fn opt<T: Into<Cell>>(x: Option<T>) -> Cell {
    x.into()
}

fn scalar(s: &Scalar) -> String {
    match *s {
        Scalar::Int(v) => v.to_string(),
        Scalar::Float(v) => safe::float(v),
        Scalar::Complex(re, im) => format!(
            "{}{}{}j",
            safe::float(re),
            if im.is_sign_negative() && !im.is_nan() {
                ""
            } else {
                "+"
            },
            safe::float(im)
        ),
    }
}

fn point_cells(p: &Option<PointRef>) -> [Cell; 3] {
    match p {
        Some(p) => [
            Cell::text(p.label.clone()),
            opt(p.index.or(p.snapshot_index)),
            opt(p.replay_index),
        ],
        None => [Cell::Null, Cell::Null, Cell::Null],
    }
}

/// The columns that say which points a row compares.
const POINT_PAIR: [&str; 6] = [
    "reference_point",
    "reference_point_index",
    "reference_replay_index",
    "candidate_point",
    "candidate_point_index",
    "candidate_replay_index",
];

/// A row's [`POINT_PAIR`] cells.
fn point_pair(p: &PointComparison) -> [Cell; 6] {
    let [rl, ri, rr] = point_cells(&p.reference);
    let [cl, ci, cr] = point_cells(&p.candidate);
    [rl, ri, rr, cl, ci, cr]
}

/// The columns of one observation comparison, after the rank and point columns of
/// `observations.csv`.
pub const OBSERVATION_COLUMNS: [&str; 31] = [
    "position",
    "name",
    "invocation_index",
    "status",
    "kind",
    "reason",
    "reference_dtype",
    "candidate_dtype",
    "reference_shape",
    "candidate_shape",
    "compared_as",
    "total",
    "mismatch_count",
    "mismatch_fraction",
    "finite_pairs",
    "max_abs_error",
    "max_rel_error",
    "mean_abs_error",
    "first_mismatch_index",
    "first_mismatch_coordinate",
    "first_mismatch_reference",
    "first_mismatch_candidate",
    "cosine_similarity",
    "relative_l2_error",
    "rmse",
    "max_ulp_distance",
    "nan_introduced",
    "inf_introduced",
    "reference_digest",
    "candidate_digest",
    "site",
];

/// The [`OBSERVATION_COLUMNS`] cells of one observation comparison: its line of
/// `observations.csv` without the rank and point columns, and its `to_row()`.
pub fn observation_cells(o: &ObservationComparison) -> Vec<Cell> {
    let m = o.metrics.as_ref();
    let first = m.and_then(|m| m.first_mismatch.as_ref());
    let side = |s: &Option<crate::model::ObservationSide>| {
        s.as_ref()
            .map(|s| {
                (
                    Cell::from(&s.dtype),
                    Cell::from(format::dims(&s.shape)),
                    Cell::text(s.digest.clone()),
                )
            })
            .unwrap_or((Cell::Null, Cell::Null, Cell::Null))
    };
    let (rd, rs, rdig) = side(&o.reference);
    let (cd, cs, cdig) = side(&o.candidate);
    vec![
        o.position.into(),
        o.name.as_str().into(),
        o.invocation_index.into(),
        o.status.as_str().into(),
        o.kind.as_str().into(),
        o.reason.as_str().into(),
        rd,
        cd,
        rs,
        cs,
        Cell::text(m.map(|m| m.compared_as)),
        opt(m.map(|m| m.total)),
        opt(m.map(|m| m.mismatch_count)),
        float(m.map(|m| m.mismatch_fraction)),
        opt(m.map(|m| m.finite_pairs)),
        float(m.and_then(|m| m.max_abs_error)),
        float(m.and_then(|m| m.max_rel_error)),
        float(m.and_then(|m| m.mean_abs_error)),
        opt(first.map(|f| f.index)),
        Cell::text(first.map(|f| format::coordinate(&f.coordinate))),
        Cell::text(first.map(|f| scalar(&f.reference))),
        Cell::text(first.map(|f| scalar(&f.candidate))),
        float(m.and_then(|m| m.cosine_similarity)),
        float(m.and_then(|m| m.relative_l2_error)),
        float(m.and_then(|m| m.rmse)),
        opt(m.and_then(|m| m.max_ulp_distance)),
        opt(m.map(|m| m.nan_introduced)),
        opt(m.map(|m| m.inf_introduced)),
        rdig,
        cdig,
        Cell::text(o.site().and_then(|s| s.describe())),
    ]
}

pub fn observations(c: &Comparison) -> String {
    let mut header = vec!["rank", "point_position"];
    header.extend(POINT_PAIR);
    header.extend(OBSERVATION_COLUMNS);
    let mut table = Table::new(&header);
    for (rank, p, o) in c.observations() {
        let mut row = vec![opt(rank), p.position.into()];
        row.extend(point_pair(p));
        row.extend(observation_cells(o));
        table.push(row);
    }
    write(&table)
}

pub fn points(c: &Comparison) -> String {
    let mut header = vec!["rank", "position"];
    header.extend(POINT_PAIR);
    header.extend([
        "status",
        "reason",
        "observations",
        "match",
        "mismatch",
        "inconclusive",
        "worst_max_abs_error",
    ]);
    let mut table = Table::new(&header);
    for (rank, p) in rows::point_rows(c) {
        let mut row = vec![opt(rank), p.position.into()];
        row.extend(point_pair(p));
        row.extend([
            p.status.as_str().into(),
            Cell::text(p.reason.clone()),
            p.counts.total.into(),
            p.counts.r#match.into(),
            p.counts.mismatch.into(),
            p.counts.inconclusive.into(),
            float(rows::worst_abs(p)),
        ]);
        table.push(row);
    }
    write(&table)
}

fn series_cells(p: &Option<SeriesPoint>) -> [Cell; 3] {
    match p {
        Some(p) => [
            p.point.into(),
            Cell::text(p.label.clone()),
            opt(p.replay_index),
        ],
        None => [Cell::Null, Cell::Null, Cell::Null],
    }
}

pub fn divergence(c: &Comparison) -> Option<String> {
    let series = c.series.as_ref()?;
    let header = [
        "name",
        "invocation_index",
        "status",
        "first_mismatch_position",
        "first_mismatch_point",
        "first_mismatch_replay_index",
        "first_inconclusive_position",
        "first_inconclusive_point",
        "first_inconclusive_replay_index",
        "mismatched_points",
        "max_abs_error",
    ];
    let mut table = Table::new(&header);
    for d in &series.observations {
        let [mp, ml, mr] = series_cells(&d.first_mismatch);
        let [ip, il, ir] = series_cells(&d.first_inconclusive);
        table.push(vec![
            d.name.as_str().into(),
            d.invocation_index.into(),
            d.status.as_str().into(),
            mp,
            ml,
            mr,
            ip,
            il,
            ir,
            d.mismatched_points.into(),
            float(d.max_abs_error),
        ]);
    }
    Some(write(&table))
}

pub fn ranks(c: &Comparison) -> Option<String> {
    if c.kind != ComparisonKind::RunGroups {
        return None;
    }
    let header = [
        "rank",
        "status",
        "reason",
        "points",
        "observations",
        "match",
        "mismatch",
        "inconclusive",
    ];
    let mut table = Table::new(&header);
    for r in &c.ranks {
        let counts = r
            .comparison
            .as_ref()
            .map(|c| (c.point_counts.total, c.counts));
        table.push(vec![
            r.rank.into(),
            r.status.as_str().into(),
            rows::rank_detail(r).into(),
            opt(counts.map(|c| c.0)),
            opt(counts.map(|c| c.1.total)),
            opt(counts.map(|c| c.1.r#match)),
            opt(counts.map(|c| c.1.mismatch)),
            opt(counts.map(|c| c.1.inconclusive)),
        ]);
    }
    Some(write(&table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_at_full_precision() {
        assert_eq!(float(Some(0.1)).to_string(), "0.1");
        assert_eq!(float(Some(f64::NEG_INFINITY)).to_string(), "-inf");
        assert_eq!(float(None).to_string(), "");
    }

    #[test]
    fn fault_csv_cells_cannot_run_as_formulas() {
        let table = Table::with_rows(
            &["a", "b", "c", "d", "e"],
            vec![vec![
                "=HYPERLINK(\"http://x\")".into(),
                "@x".into(),
                float(Some(-0.5)),
                scalar(&Scalar::Complex(-1.0, -2.0)).into(),
                "-3".into(),
            ]],
        );
        assert_eq!(
            write(&table),
            "a,b,c,d,e\r\n\"'=HYPERLINK(\"\"http://x\"\")\",'@x,-0.5,-1.0-2.0j,-3\r\n"
        );
    }
}
