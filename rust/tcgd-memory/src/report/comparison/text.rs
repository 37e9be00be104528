//! The comparison report as text: the tree, one line per value.

use super::*;

pub(in crate::report) struct Text<'a> {
    out: String,
    single: bool,
    comparison: &'a Comparison,
}

impl Text<'_> {
    fn line(&mut self, indent: usize, text: &str) {
        let _ = writeln!(self.out, "{}{}", "  ".repeat(indent), text);
    }

    fn bytes(&self, pair: Pair<Option<i64>>) -> String {
        if self.single {
            return opt_bytes(pair.candidate);
        }
        let change = pair
            .change()
            .map_or_else(|| "n/a".to_owned(), format_change);
        format!(
            "{} -> {} ({change})",
            opt_bytes(pair.reference),
            opt_bytes(pair.candidate)
        )
    }

    fn stat(&self, stats: &Pair<MemoryStats>, f: fn(&MemoryStats) -> i64) -> String {
        self.bytes(Pair {
            reference: Some(f(&stats.reference)),
            candidate: Some(f(&stats.candidate)),
        })
    }

    fn count(&self, stats: &Pair<MemoryStats>, f: fn(&MemoryStats) -> i64) -> String {
        let (r, c) = (f(&stats.reference), f(&stats.candidate));
        if self.single {
            return c.to_string();
        }
        let change = c
            .checked_sub(r)
            .map_or_else(|| "n/a".to_owned(), format_count_change);
        format!("{r} -> {c} ({change})")
    }

    fn stats(&mut self, indent: usize, stats: &Pair<MemoryStats>, private: bool) {
        let reserved = self.stat(stats, |s| s.reserved_bytes);
        self.line(indent, &format!("reserved: {reserved}"));
        let line = format!(
            "allocated: {}, active: {}, requested: {}",
            self.stat(stats, |s| s.allocated_bytes),
            self.stat(stats, |s| s.active_bytes),
            self.stat(stats, |s| s.requested_bytes)
        );
        self.line(indent, &line);
        let inactive = self.stat(stats, MemoryStats::inactive_bytes);
        let note = if private {
            " (reusable only inside this pool)"
        } else {
            ""
        };
        let line = format!(
            "inactive{note}: {inactive}, segments: {}, blocks: {}",
            self.count(stats, |s| s.segment_count),
            self.count(stats, |s| s.block_count)
        );
        self.line(indent, &line);
        let expandable = stats.reference.expandable_segment_count > 0
            || stats.candidate.expandable_segment_count > 0;
        if expandable {
            let line = format!(
                "expandable segments: {}, reserved: {}, inactive: {}",
                self.count(stats, |s| s.expandable_segment_count),
                self.stat(stats, |s| s.expandable_reserved_bytes),
                self.stat(stats, |s| s.expandable_inactive_bytes)
            );
            self.line(indent, &line);
        }
    }

    fn lifecycle(&mut self, indent: usize, lifecycle: Option<Lifecycle>) {
        if self.single {
            return;
        }
        let Some(l) = lifecycle else { return };
        let parts: Vec<String> = l
            .fields()
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(name, v)| format!("{}={}", name.replace('_', " "), format_bytes(*v)))
            .collect();
        if parts.is_empty() {
            self.line(indent, "lifecycle: no address changes");
        } else {
            self.line(indent, &format!("lifecycle: {}", parts.join(", ")));
        }
    }

    fn side_note(&self, reference: bool, candidate: bool) -> &'static str {
        match (self.single, reference, candidate) {
            (true, _, _) | (false, true, true) => "",
            (false, true, false) => ", reference only",
            (false, false, true) => ", candidate only",
            (false, false, false) => "",
        }
    }

    fn stream(&mut self, indent: usize, s: &StreamNode) {
        let name = match (s.reference_stream, s.candidate_stream) {
            (Some(r), Some(c)) if r != c => format!("{} -> {}", stream_name(r), stream_name(c)),
            (Some(x), _) | (None, Some(x)) => stream_name(x),
            (None, None) => "stream ?".to_owned(),
        };
        let note = self.side_note(s.reference_stream.is_some(), s.candidate_stream.is_some());
        let note = note.trim_start_matches(", ");
        if note.is_empty() {
            self.line(indent, &name);
        } else {
            self.line(indent, &format!("{name} ({note})"));
        }
        let stats = s.stats;
        let reserved = self.stat(&stats, |s| s.reserved_bytes);
        self.line(indent + 1, &format!("reserved: {reserved}"));
        let line = format!(
            "allocated: {}, active: {}, requested: {}",
            self.stat(&stats, |s| s.allocated_bytes),
            self.stat(&stats, |s| s.active_bytes),
            self.stat(&stats, |s| s.requested_bytes)
        );
        self.line(indent + 1, &line);
        self.lifecycle(indent + 1, s.lifecycle);
    }

    fn pool(&mut self, indent: usize, p: &PoolNode) {
        let name = match (p.reference_pool, p.candidate_pool) {
            (Some(r), Some(c)) if r != c => format!("{} -> {}", pool_name(r), pool_name(c)),
            (Some(x), _) | (None, Some(x)) => pool_name(x),
            (None, None) => "pool ?".to_owned(),
        };
        let note = self.side_note(p.reference_pool.is_some(), p.candidate_pool.is_some());
        self.line(indent, &format!("{name} ({}{note})", p.kind.as_str()));
        self.stats(indent + 1, &p.stats, p.kind == PoolKind::Private);
        self.lifecycle(indent + 1, p.lifecycle);
        for s in &p.streams {
            self.stream(indent + 1, s);
        }
    }

    fn device(&mut self, d: &DeviceNode) {
        let name = match (d.reference_device, d.candidate_device) {
            (Some(r), Some(c)) if r != c => format!("device[{r}] -> device[{c}]"),
            (Some(x), _) | (None, Some(x)) => format!("device[{x}]"),
            (None, None) => "device[?]".to_owned(),
        };
        let note = self.side_note(d.reference_device.is_some(), d.candidate_device.is_some());
        let note = note.trim_start_matches(", ");
        if note.is_empty() {
            self.line(1, &name);
        } else {
            self.line(1, &format!("{name} ({note})"));
        }
        let known = d.cuda_used.reference.is_some() || d.cuda_used.candidate.is_some();
        if known {
            let used = self.bytes(d.cuda_used);
            self.line(2, &format!("CUDA used: {used}"));
            let residual = self.bytes(d.residual);
            self.line(3, &format!("residual: {residual}"));
            if d.probe_slots.reference.is_some() || d.probe_slots.candidate.is_some() {
                let probe = self.bytes(d.probe_slots);
                let pinned = d.probe_pinned.candidate.unwrap_or(0);
                let pinned_note = if pinned > 0 {
                    format!(
                        " [plus {} of pinned host memory, not device memory]",
                        format_bytes(pinned)
                    )
                } else {
                    String::new()
                };
                self.line(
                    4,
                    &format!("probe slots (torch-cudagraph-debug): {probe}{pinned_note}"),
                );
                let other = self.bytes(d.residual_other);
                self.line(
                    4,
                    &format!(
                        "other (CUDA context, NCCL, other processes, raw cudaMalloc): {other}"
                    ),
                );
            }
            self.line(3, "allocator:");
        } else {
            self.line(
                2,
                "CUDA used: unavailable (no torch.cuda.mem_get_info reading with this state)",
            );
            self.line(2, "allocator:");
        }
        let indent = if known { 4 } else { 3 };
        self.stats(indent, &d.allocator, false);
        self.lifecycle(indent, d.lifecycle);
        for p in &d.pools {
            self.pool(indent, p);
        }
    }
}

pub(in crate::report) fn relation_words(c: &Comparison) -> &'static str {
    match c.relation {
        Relation::SameOrigin => match c.candidate.taken.source.as_str() {
            _ if c.candidate.origin.starts_with("probe:") => "same probe",
            _ => "same run",
        },
        Relation::CrossRun => "independent runs",
        Relation::Single => "single state",
    }
}

pub fn comparison_text(comparison: &Comparison, options: ReportOptions) -> String {
    let shown = view(comparison, options);
    let single = comparison.relation == Relation::Single;
    let mut t = Text {
        out: String::new(),
        single,
        comparison,
    };
    match &comparison.reference {
        Some(r) if !single => t.line(
            0,
            &format!(
                "Memory comparison '{}' -> '{}' ({})",
                r.title(),
                t.comparison.candidate.title(),
                relation_words(comparison)
            ),
        ),
        _ => t.line(
            0,
            &format!("Memory state '{}'", comparison.candidate.title()),
        ),
    }
    if !single {
        t.line(
            1,
            &format!("address lifecycle: {}", comparison.lifecycle.as_str()),
        );
    }
    t.line(
        1,
        "CUDA used is device-wide and includes other processes; residual = CUDA used - \
         allocator reserved; the two are read one after the other, not atomically.",
    );
    for w in &comparison.warnings {
        t.line(1, &format!("warning: {w}"));
    }
    for ((rd, rp), (cd, cp)) in &comparison.suggested_pool_mapping {
        t.line(
            1,
            &format!(
                "suggested pool mapping (not applied): device {rd} {} -> device {cd} {}",
                pool_name(*rp),
                pool_name(*cp)
            ),
        );
    }
    t.line(0, "");
    if shown.devices.is_empty() {
        t.line(1, "(no changes)");
    }
    for d in &shown.devices {
        t.device(d);
    }
    t.out
}
