//! CSV tables (RFC 4180): every row, no display limit, numbers at full precision; text
//! cells that a spreadsheet would run as a formula start with `'`.

use crate::format;
use crate::model::{Comparison, ComparisonKind, PointRef, Scalar, SeriesPoint};
use crate::report::rows;

/// Cells go through the shared writer, which neutralises text a spreadsheet would run as
/// a formula (`=HYPERLINK(...)` in a label) and leaves numbers as numbers.
fn line(out: &mut String, cells: &[String]) {
    tcgd_report::csv::line(out, cells, "\r\n");
}

/// Full precision; non-finite values as in the JSON report.
fn float(x: Option<f64>) -> String {
    match x {
        None => String::new(),
        Some(v) if v.is_nan() => "nan".into(),
        Some(v) if v == f64::INFINITY => "inf".into(),
        Some(v) if v == f64::NEG_INFINITY => "-inf".into(),
        Some(v) => format!("{v:?}"),
    }
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

fn scalar(s: &Scalar) -> String {
    match *s {
        Scalar::Int(v) => v.to_string(),
        Scalar::Float(v) => float(Some(v)),
        Scalar::Complex(re, im) => format!(
            "{}{}{}j",
            float(Some(re)),
            if im.is_sign_negative() && !im.is_nan() {
                ""
            } else {
                "+"
            },
            float(Some(im))
        ),
    }
}

fn point_cells(p: &Option<PointRef>) -> [String; 3] {
    match p {
        Some(p) => [
            p.label.clone().unwrap_or_default(),
            opt(p.index.or(p.snapshot_index)),
            opt(p.replay_index),
        ],
        None => Default::default(),
    }
}

pub fn observations(c: &Comparison) -> String {
    let mut out = String::new();
    let header = [
        "rank",
        "point_position",
        "reference_point",
        "reference_point_index",
        "reference_replay_index",
        "candidate_point",
        "candidate_point_index",
        "candidate_replay_index",
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
        "max_ulp_distance",
        "nan_introduced",
        "inf_introduced",
        "reference_digest",
        "candidate_digest",
        "site",
    ];
    line(&mut out, &header.map(str::to_owned));
    for (rank, p, o) in c.observations() {
        let m = o.metrics.as_ref();
        let first = m.and_then(|m| m.first_mismatch.as_ref());
        let [rl, ri, rr] = point_cells(&p.reference);
        let [cl, ci, cr] = point_cells(&p.candidate);
        let side = |s: &Option<crate::model::ObservationSide>| {
            s.as_ref()
                .map(|s| (s.dtype.clone(), format::dims(&s.shape), s.digest.clone()))
                .unwrap_or_default()
        };
        let (rd, rs, rdig) = side(&o.reference);
        let (cd, cs, cdig) = side(&o.candidate);
        line(
            &mut out,
            &[
                opt(rank),
                p.position.to_string(),
                rl,
                ri,
                rr,
                cl,
                ci,
                cr,
                o.position.to_string(),
                o.name.clone(),
                o.invocation_index.to_string(),
                o.status.as_str().to_owned(),
                o.kind.as_str().to_owned(),
                o.reason.clone(),
                rd,
                cd,
                rs,
                cs,
                m.map(|m| m.compared_as.to_owned()).unwrap_or_default(),
                opt(m.map(|m| m.total)),
                opt(m.map(|m| m.mismatch_count)),
                float(m.map(|m| m.mismatch_fraction)),
                opt(m.map(|m| m.finite_pairs)),
                float(m.and_then(|m| m.max_abs_error)),
                float(m.and_then(|m| m.max_rel_error)),
                float(m.and_then(|m| m.mean_abs_error)),
                opt(first.map(|f| f.index)),
                first
                    .map(|f| format::coordinate(&f.coordinate))
                    .unwrap_or_default(),
                first.map(|f| scalar(&f.reference)).unwrap_or_default(),
                first.map(|f| scalar(&f.candidate)).unwrap_or_default(),
                float(m.and_then(|m| m.cosine_similarity)),
                float(m.and_then(|m| m.relative_l2_error)),
                opt(m.and_then(|m| m.max_ulp_distance)),
                opt(m.map(|m| m.nan_introduced)),
                opt(m.map(|m| m.inf_introduced)),
                rdig.unwrap_or_default(),
                cdig.unwrap_or_default(),
                o.site().and_then(|s| s.describe()).unwrap_or_default(),
            ],
        );
    }
    out
}

pub fn points(c: &Comparison) -> String {
    let mut out = String::new();
    let header = [
        "rank",
        "position",
        "reference_point",
        "reference_point_index",
        "reference_replay_index",
        "candidate_point",
        "candidate_point_index",
        "candidate_replay_index",
        "status",
        "reason",
        "observations",
        "match",
        "mismatch",
        "inconclusive",
        "worst_max_abs_error",
    ];
    line(&mut out, &header.map(str::to_owned));
    for (rank, p) in rows::point_rows(c) {
        let [rl, ri, rr] = point_cells(&p.reference);
        let [cl, ci, cr] = point_cells(&p.candidate);
        line(
            &mut out,
            &[
                opt(rank),
                p.position.to_string(),
                rl,
                ri,
                rr,
                cl,
                ci,
                cr,
                p.status.as_str().to_owned(),
                p.reason.clone().unwrap_or_default(),
                p.counts.total.to_string(),
                p.counts.matched.to_string(),
                p.counts.mismatched.to_string(),
                p.counts.inconclusive.to_string(),
                float(rows::worst_abs(p)),
            ],
        );
    }
    out
}

fn series_cells(p: &Option<SeriesPoint>) -> [String; 3] {
    match p {
        Some(p) => [
            p.point.to_string(),
            p.label.clone().unwrap_or_default(),
            opt(p.replay_index),
        ],
        None => Default::default(),
    }
}

pub fn divergence(c: &Comparison) -> Option<String> {
    let series = c.series.as_ref()?;
    let mut out = String::new();
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
    line(&mut out, &header.map(str::to_owned));
    for d in &series.observations {
        let [mp, ml, mr] = series_cells(&d.first_mismatch);
        let [ip, il, ir] = series_cells(&d.first_inconclusive);
        line(
            &mut out,
            &[
                d.name.clone(),
                d.invocation_index.to_string(),
                d.status.as_str().to_owned(),
                mp,
                ml,
                mr,
                ip,
                il,
                ir,
                d.mismatched_points.to_string(),
                float(d.max_abs_error),
            ],
        );
    }
    Some(out)
}

pub fn ranks(c: &Comparison) -> Option<String> {
    if c.kind != ComparisonKind::RunGroups {
        return None;
    }
    let mut out = String::new();
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
    line(&mut out, &header.map(str::to_owned));
    for r in &c.ranks {
        let counts = r
            .comparison
            .as_ref()
            .map(|c| (c.point_counts.total, c.counts));
        line(
            &mut out,
            &[
                r.rank.to_string(),
                r.status.as_str().to_owned(),
                rows::rank_detail(r),
                opt(counts.map(|c| c.0)),
                opt(counts.map(|c| c.1.total)),
                opt(counts.map(|c| c.1.matched)),
                opt(counts.map(|c| c.1.mismatched)),
                opt(counts.map(|c| c.1.inconclusive)),
            ],
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_at_full_precision() {
        assert_eq!(float(Some(0.1)), "0.1");
        assert_eq!(float(Some(f64::NEG_INFINITY)), "-inf");
        assert_eq!(float(None), "");
    }

    #[test]
    fn fault_csv_cells_cannot_run_as_formulas() {
        let mut out = String::new();
        let cells = [
            "=HYPERLINK(\"http://x\")".to_owned(),
            "@x".to_owned(),
            float(Some(-0.5)),
            scalar(&Scalar::Complex(-1.0, -2.0)),
            "-3".to_owned(),
        ];
        line(&mut out, &cells);
        assert_eq!(
            out,
            "\"'=HYPERLINK(\"\"http://x\"\")\",'@x,-0.5,-1.0-2.0j,-3\r\n"
        );
    }
}
