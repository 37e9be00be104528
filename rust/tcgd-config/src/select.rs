//! Which nodes of a compiled graph get a probe, and why (or why not).

use globset::{Glob, GlobMatcher};
use serde::Serialize;

/// What a selected site does: record its value, or print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Record,
    Print,
}

impl Action {
    /// The name the config file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Record => "record",
            Action::Print => "print",
        }
    }
}

/// A list of globs; empty matches everything.
#[derive(Debug, Clone, Default)]
pub struct GlobList {
    patterns: Vec<(String, GlobMatcher)>,
}

impl GlobList {
    /// A list of the parsed entries of [`GlobList::entry`].
    pub(crate) fn new(patterns: Vec<(String, GlobMatcher)>) -> GlobList {
        GlobList { patterns }
    }

    /// One glob, or what is wrong with it.
    pub(crate) fn entry(text: &str) -> Result<(String, GlobMatcher), String> {
        let glob = Glob::new(text).map_err(|e| format!("bad glob '{text}': {e}"))?;
        Ok((text.to_owned(), glob.compile_matcher()))
    }

    fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    fn matches_any(&self, candidates: &[&str]) -> bool {
        self.patterns
            .iter()
            .any(|(_, g)| candidates.iter().any(|c| g.is_match(c)))
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self.patterns.iter().map(|(p, _)| p.as_str()).collect();
        format!("{names:?}")
    }
}

/// One `file-glob[:line[-line]]` entry: its text, the file glob, the inclusive lines.
pub(crate) type SourceEntry = (String, GlobMatcher, Option<(u64, u64)>);

/// A line number as written in a source entry: digits only (no sign, no spaces).
fn line_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn source_entry(text: &str) -> Result<SourceEntry, String> {
    // Whatever follows the last ':' is the line part and must be one: a typo such as
    // `model.py:abc` would otherwise become a file glob that matches nothing.
    let (file, lines) = match text.rsplit_once(':') {
        None => (text, None),
        Some((file, range)) => {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let (Some(lo), Some(hi)) = (line_number(lo), line_number(hi)) else {
                return Err(format!(
                    "expected file-glob[:line[-line]], and '{range}' is not a line or a line \
                     range (e.g. model.py:120 or model.py:120-160)"
                ));
            };
            if lo == 0 || lo > hi {
                return Err("impossible line range (lines start at 1, first <= last)".into());
            }
            (file, Some((lo, hi)))
        }
    };
    if file.is_empty() {
        return Err("the file glob is empty (e.g. model.py, model.py:120 or *.py:120)".into());
    }
    let glob = Glob::new(file).map_err(|e| e.to_string())?;
    Ok((text.to_owned(), glob.compile_matcher(), lines))
}

/// `file-glob[:line[-line]]` entries.
#[derive(Debug, Clone, Default)]
pub struct SourceList {
    entries: Vec<SourceEntry>,
}

impl SourceList {
    /// A list of the parsed entries of [`SourceList::entry`].
    pub(crate) fn new(entries: Vec<SourceEntry>) -> SourceList {
        SourceList { entries }
    }

    /// One `file-glob[:line[-line]]` entry, or what is wrong with it.
    pub(crate) fn entry(text: &str) -> Result<SourceEntry, String> {
        source_entry(text).map_err(|why| format!("bad source '{text}': {why}"))
    }

    fn matches(&self, source: Option<&(String, u64)>) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let Some((file, line)) = source else {
            return false;
        };
        let base = file.rsplit('/').next().unwrap_or(file);
        self.entries.iter().any(|(_, glob, lines)| {
            (glob.is_match(file) || glob.is_match(base))
                && lines.is_none_or(|(lo, hi)| (lo..=hi).contains(line))
        })
    }
}

/// The criteria of one `[[select]]` or `[[exclude]]` table; all given criteria must hold.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    pub ops: GlobList,
    pub modules: GlobList,
    pub names: GlobList,
    pub sources: SourceList,
    pub graphs: Vec<String>,
    pub dtypes: Vec<String>,
    pub min_numel: Option<u64>,
    pub max_numel: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub index: usize,
    pub matcher: Matcher,
    pub actions: Vec<Action>,
    pub every: u64,
    pub limit: Option<u64>,
}

/// What the pass knows about one candidate node (raw, as torch has it; normalised here).
/// From Python: a dict with every key.
#[cfg_attr(feature = "python", derive(pyo3::FromPyObject), pyo3(from_item_all))]
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct NodeFacts {
    pub graph_kind: String,
    pub node_name: String,
    /// `aten.mm.default` style; empty for nodes that are not op calls.
    pub op: String,
    /// The innermost entry of `nn_module_stack`, as torch prints it (`L['self'].layers[0]`).
    pub module_path: Option<String>,
    /// `stack_trace` as torch records it; its last frame is the source location.
    pub stack_trace: Option<String>,
    pub dtype: Option<String>,
    pub numel: Option<u64>,
    /// False for nodes that produce no tensor (tuples, symbols, None).
    pub is_tensor: bool,
}

/// What the selection decided for one candidate node, and why.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ProbeDecision",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub node_name: String,
    pub op: String,
    pub module_path: Option<String>,
    pub source_location: Option<String>,
    pub selected: bool,
    /// The index of the `[[select]]` rule that selected the node.
    pub rule: Option<usize>,
    /// `"record"` and/or `"print"`.
    pub actions: Vec<Action>,
    pub reason: String,
}

/// `L['self'].layers[0].attn` -> `layers.0.attn`: paths are relative to the compiled
/// module, which Dynamo names after the frame's local (`L['self']`, `L['fn']`, ...).
pub fn normalize_module_path(raw: &str) -> String {
    let mut path = raw.trim();
    if let Some(rest) = path.strip_prefix("L[") {
        if let Some(end) = rest.find(']') {
            path = rest[end + 1..].trim_start_matches('.');
        }
    } else if let Some(rest) = path.strip_prefix("self.") {
        path = rest;
    }
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                let mut inner = String::new();
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                    inner.push(d);
                }
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(inner.trim_matches(|q| q == '\'' || q == '"'));
            }
            _ => out.push(c),
        }
    }
    out.split('.')
        .filter(|part| !part.is_empty() && *part != "_modules")
        .collect::<Vec<_>>()
        .join(".")
}

/// The last `File "...", line N` of a stack trace: where the user's code made the value.
pub fn source_location(stack_trace: &str) -> Option<(String, u64)> {
    stack_trace.lines().rev().find_map(|line| {
        let rest = line.trim().strip_prefix("File \"")?;
        let (file, rest) = rest.split_once('"')?;
        let rest = rest.trim_start_matches(',').trim().strip_prefix("line ")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        Some((file.to_owned(), digits.parse().ok()?))
    })
}

struct Facts<'a> {
    raw: &'a NodeFacts,
    packet: &'a str,
    module: Option<String>,
    source: Option<(String, u64)>,
}

fn why_not(m: &Matcher, f: &Facts) -> Option<String> {
    let raw = f.raw;
    if !m.graphs.is_empty() && !m.graphs.contains(&raw.graph_kind) {
        return Some(format!("graph '{}' not in {:?}", raw.graph_kind, m.graphs));
    }
    if !m.ops.is_empty() && !m.ops.matches_any(&[&raw.op, f.packet]) {
        return Some(format!("op '{}' not in {}", f.packet, m.ops.describe()));
    }
    if !m.names.is_empty() && !m.names.matches_any(&[&raw.node_name]) {
        return Some(format!(
            "name '{}' not in {}",
            raw.node_name,
            m.names.describe()
        ));
    }
    if !m.modules.is_empty() {
        match &f.module {
            Some(module) if m.modules.matches_any(&[module]) => {}
            Some(module) => {
                return Some(format!("module '{module}' not in {}", m.modules.describe()))
            }
            None => return Some("no module path".into()),
        }
    }
    if !m.sources.matches(f.source.as_ref()) {
        return Some(match &f.source {
            Some((file, line)) => format!("source {file}:{line} not selected"),
            None => "no source location".into(),
        });
    }
    if !m.dtypes.is_empty() && !raw.dtype.as_ref().is_some_and(|d| m.dtypes.contains(d)) {
        return Some(format!("dtype {:?} not in {:?}", raw.dtype, m.dtypes));
    }
    if let Some(lo) = m.min_numel {
        if raw.numel.is_some_and(|n| n < lo) {
            return Some(format!("numel {:?} < min_numel {lo}", raw.numel));
        }
    }
    if let Some(hi) = m.max_numel {
        if raw.numel.is_none_or(|n| n > hi) {
            return Some(format!("numel {:?} > max_numel {hi}", raw.numel));
        }
    }
    None
}

/// Decides every candidate node of one graph, in graph order. `every` and `limit` count
/// per rule within this graph.
pub fn select_nodes(select: &[Rule], exclude: &[Matcher], nodes: &[NodeFacts]) -> Vec<Decision> {
    let mut matched = vec![0u64; select.len()];
    let mut taken = vec![0u64; select.len()];
    nodes
        .iter()
        .map(|raw| {
            let packet = raw.op.rsplit_once('.').map_or(raw.op.as_str(), |(p, _)| p);
            let facts = Facts {
                raw,
                packet,
                module: raw.module_path.as_deref().map(normalize_module_path),
                source: raw.stack_trace.as_deref().and_then(source_location),
            };
            let mut decision = Decision {
                node_name: raw.node_name.clone(),
                op: raw.op.clone(),
                module_path: facts.module.clone(),
                source_location: facts.source.as_ref().map(|(f, l)| format!("{f}:{l}")),
                selected: false,
                rule: None,
                actions: Vec::new(),
                reason: String::new(),
            };
            if !raw.is_tensor {
                decision.reason = "produces no tensor".into();
                return decision;
            }
            if let Some(i) = exclude.iter().position(|m| why_not(m, &facts).is_none()) {
                decision.reason = format!("excluded by exclude[{i}]");
                return decision;
            }
            let mut first_miss = None;
            for rule in select {
                match why_not(&rule.matcher, &facts) {
                    Some(miss) => {
                        first_miss.get_or_insert_with(|| format!("select[{}]: {miss}", rule.index));
                    }
                    None => {
                        let i = rule.index;
                        matched[i] += 1;
                        decision.rule = Some(i);
                        if (matched[i] - 1) % rule.every != 0 {
                            decision.reason = format!(
                                "select[{i}] matched, skipped by every = {} (match {})",
                                rule.every, matched[i]
                            );
                        } else if rule.limit.is_some_and(|l| taken[i] >= l) {
                            decision.reason =
                                format!("select[{i}] matched, limit = {} reached", taken[i]);
                        } else {
                            taken[i] += 1;
                            decision.selected = true;
                            decision.actions = rule.actions.clone();
                            decision.reason = format!("select[{i}]");
                        }
                        return decision;
                    }
                }
            }
            decision.reason = first_miss.unwrap_or_else(|| "no select rule matched".into());
            decision
        })
        .collect()
}
