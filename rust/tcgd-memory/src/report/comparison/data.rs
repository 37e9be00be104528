//! The comparison report as JSON (every metric of every node) and CSV (one row per
//! value).

use super::*;

pub(in crate::report) fn pair_json(pair: Pair<Option<i64>>) -> Value {
    json!({
        "reference": pair.reference,
        "candidate": pair.candidate,
        "change": pair.change(),
    })
}

pub(in crate::report) fn stats_json(stats: &Pair<MemoryStats>) -> Value {
    let mut m = Map::new();
    let (r, c) = (stats.reference.columns(), stats.candidate.columns());
    for ((name, rv), (_, cv)) in r.iter().zip(c.iter()) {
        m.insert(
            (*name).to_owned(),
            json!({"reference": rv, "candidate": cv, "change": cv.checked_sub(*rv)}),
        );
    }
    Value::Object(m)
}

pub(in crate::report) fn lifecycle_json(l: Option<Lifecycle>) -> Value {
    match l {
        None => Value::Null,
        Some(l) => {
            let m: Map<String, Value> = l
                .fields()
                .iter()
                .map(|(k, v)| (format!("{k}_bytes"), json!(v)))
                .collect();
            Value::Object(m)
        }
    }
}

pub(in crate::report) fn pool_json(p: Option<PoolId>) -> Value {
    p.map_or(Value::Null, |(a, b)| json!([a, b]))
}

pub fn comparison_json(comparison: &Comparison, options: ReportOptions) -> Value {
    let shown = view(comparison, options);
    let devices: Vec<Value> = shown
        .devices
        .iter()
        .map(|d| {
            let pools: Vec<Value> = d
                .pools
                .iter()
                .map(|p| {
                    let streams: Vec<Value> = p
                        .streams
                        .iter()
                        .map(|s| {
                            json!({
                                "reference_stream": s.reference_stream,
                                "candidate_stream": s.candidate_stream,
                                "stats": stats_json(&s.stats),
                                "lifecycle": lifecycle_json(s.lifecycle),
                            })
                        })
                        .collect();
                    json!({
                        "reference_pool": pool_json(p.reference_pool),
                        "candidate_pool": pool_json(p.candidate_pool),
                        "kind": p.kind.as_str(),
                        "stats": stats_json(&p.stats),
                        "lifecycle": lifecycle_json(p.lifecycle),
                        "streams": streams,
                    })
                })
                .collect();
            json!({
                "reference_device": d.reference_device,
                "candidate_device": d.candidate_device,
                "cuda_used": pair_json(d.cuda_used),
                "residual": pair_json(d.residual),
                "probe_slots": pair_json(d.probe_slots),
                "residual_other": pair_json(d.residual_other),
                "probe_pinned": pair_json(d.probe_pinned),
                "allocator": stats_json(&d.allocator),
                "lifecycle": lifecycle_json(d.lifecycle),
                "pools": pools,
            })
        })
        .collect();
    json!({
        "kind": if comparison.relation == Relation::Single { "memory_state" } else { "memory_comparison" },
        "reference": comparison.reference,
        "candidate": comparison.candidate,
        "relation": comparison.relation.as_str(),
        "lifecycle_label": comparison.lifecycle.as_str(),
        "include_unchanged": options.include_unchanged,
        "warnings": comparison.warnings,
        "suggested_pool_mapping": comparison.suggested_pool_mapping.iter().map(|((rd, rp), (cd, cp))| {
            json!({"reference": [rd, [rp.0, rp.1]], "candidate": [cd, [cp.0, cp.1]]})
        }).collect::<Vec<_>>(),
        "devices": devices,
    })
}

// ---------------------------------------------------------------------- CSV
pub(in crate::report) const CSV_HEADER: [&str; 12] = [
    "level",
    "reference_device",
    "candidate_device",
    "reference_pool",
    "candidate_pool",
    "pool_kind",
    "reference_stream",
    "candidate_stream",
    "metric",
    "reference",
    "candidate",
    "change",
];

/// Where a CSV/HTML row belongs: devices, pools (`a,b`), pool kind, streams.
type RowId = [Cell; 7];
type Row = [Cell; 12];

pub(in crate::report) fn push_row(
    rows: &mut Vec<Row>,
    level: &str,
    id: &RowId,
    metric: &str,
    values: [Option<i64>; 3],
) {
    let [a, b, c, d, e, f, g] = id.clone();
    rows.push([
        level.into(),
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        metric.into(),
        opt(values[0]),
        opt(values[1]),
        opt(values[2]),
    ]);
}

pub(in crate::report) fn push_stats(
    rows: &mut Vec<Row>,
    level: &str,
    id: &RowId,
    stats: &Pair<MemoryStats>,
    lifecycle: Option<Lifecycle>,
) {
    let pairs = stats
        .reference
        .columns()
        .into_iter()
        .zip(stats.candidate.columns());
    for ((name, r), (_, c)) in pairs {
        push_row(rows, level, id, name, [Some(r), Some(c), c.checked_sub(r)]);
    }
    if let Some(l) = lifecycle {
        for (name, v) in l.fields() {
            push_row(
                rows,
                level,
                id,
                &format!("lifecycle.{name}"),
                [None, None, Some(v)],
            );
        }
    }
}

/// One row per value of the pruned tree: what CSV and HTML tables show.
pub(in crate::report) fn comparison_rows(shown: &Comparison) -> Vec<Row> {
    let mut rows = Vec::new();
    for d in &shown.devices {
        let ids = |pools: [Option<PoolId>; 2], kind: &str, streams: [Option<i64>; 2]| -> RowId {
            [
                opt(d.reference_device),
                opt(d.candidate_device),
                opt_pool(pools[0]),
                opt_pool(pools[1]),
                kind.into(),
                opt(streams[0]),
                opt(streams[1]),
            ]
        };
        let device_id = ids([None, None], "", [None, None]);
        for (metric, pair) in d.readings() {
            let values = [pair.reference, pair.candidate, pair.change()];
            push_row(&mut rows, "device", &device_id, metric, values);
        }
        push_stats(
            &mut rows,
            "allocator",
            &device_id,
            &d.allocator,
            d.lifecycle,
        );
        for p in &d.pools {
            let pools = [p.reference_pool, p.candidate_pool];
            let kind = p.kind.as_str();
            let pool_id = ids(pools, kind, [None, None]);
            push_stats(&mut rows, "pool", &pool_id, &p.stats, p.lifecycle);
            for s in &p.streams {
                let stream_id = ids(pools, kind, [s.reference_stream, s.candidate_stream]);
                push_stats(&mut rows, "stream", &stream_id, &s.stats, s.lifecycle);
            }
        }
    }
    rows
}

pub fn comparison_csv(comparison: &Comparison, options: ReportOptions) -> String {
    let shown = view(comparison, options);
    let rows = comparison_rows(&shown).into_iter().map(Vec::from).collect();
    csv_table(&Table::with_rows(&CSV_HEADER, rows))
}
