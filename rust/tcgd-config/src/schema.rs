//! The probe config file, version 1 (documented in docs/compile-plugin.md).
//!
//! Every value the user can get wrong is kept with its span, so a validation error can
//! name the file, the line and the key, before any compilation starts.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::error::ConfigError;
use crate::select::{Action, GlobList, Matcher, Rule, SourceList};

pub const CONFIG_VERSION: i64 = 1;
/// The longest history a config may ask for (device memory: history x value size per site).
pub const MAX_HISTORY: i64 = 1024;

// The raw tables keep every value with its span, so that an error can name its line.

/// A key that may be left out.
type OptKey<T> = Option<Spanned<T>>;
/// A key holding a list of strings (left out: empty).
type ListKey = Vec<Spanned<String>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    version: Spanned<i64>,
    #[serde(default)]
    run: Option<RawRun>,
    #[serde(default)]
    select: Vec<RawRule>,
    #[serde(default)]
    exclude: Vec<RawMatch>,
    #[serde(default)]
    memory: Option<RawMemory>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    dir: OptKey<String>,
    name: OptKey<String>,
    points: Option<ListKey>,
    every: OptKey<i64>,
    reset_peaks: OptKey<bool>,
    overwrite: OptKey<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    name: OptKey<String>,
    dir: OptKey<String>,
    payload: OptKey<String>,
    history: OptKey<i64>,
    full_every: OptKey<i64>,
    trigger_nonfinite: OptKey<bool>,
    trigger_abs_max: OptKey<f64>,
    overwrite: OptKey<bool>,
}

/// Declares a config table that holds the matcher keys (`ops`, `modules`, ... `max_numel`)
/// and `$extra` keys. The keys are spliced in rather than `#[serde(flatten)]`ed: flatten
/// would drop the spans that error messages need, and `deny_unknown_fields` with it.
macro_rules! matcher_table {
    ($(#[$doc:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        struct $name {
            ops: ListKey,
            modules: ListKey,
            names: ListKey,
            sources: ListKey,
            graphs: ListKey,
            dtypes: ListKey,
            min_numel: OptKey<i64>,
            max_numel: OptKey<i64>,
            $($extra)*
        }
    };
}

matcher_table!(
    /// An `[[exclude]]` table: the matcher keys alone.
    RawMatch {}
);

matcher_table!(
    /// A `[[select]]` table: the matcher keys and what to do with the nodes they match.
    RawRule {
        actions: ListKey,
        every: OptKey<i64>,
        limit: OptKey<i64>,
    }
);

/// The matcher keys of a `[[select]]` table.
fn rule_match(raw: RawRule) -> RawMatch {
    RawMatch {
        ops: raw.ops,
        modules: raw.modules,
        names: raw.names,
        sources: raw.sources,
        graphs: raw.graphs,
        dtypes: raw.dtypes,
        min_numel: raw.min_numel,
        max_numel: raw.max_numel,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    Full,
    Summary,
}

impl Payload {
    /// The name the config file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Payload::Full => "full",
            Payload::Summary => "summary",
        }
    }
}

/// The `[run]` settings of a probe config, every default applied.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ProbeRunSettings",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunSettings {
    pub name: String,
    pub dir: Option<String>,
    /// `"full"` or `"summary"`.
    pub payload: Payload,
    /// Calls whose full values each site keeps on the device (0: none): the flight
    /// recorder's history, landed in the run when a trigger fires.
    pub history: u32,
    /// With summary payloads, also keep full values every this many calls (0: never).
    pub full_every: u32,
    /// A NaN or infinity in a summary fires the trigger.
    pub trigger_nonfinite: bool,
    /// A finite |x| above this fires the trigger (an infinity always does then).
    pub trigger_abs_max: Option<f64>,
    /// Replace a run that is already at the run's path (a re-run of the same script)
    /// instead of refusing to.
    pub overwrite: bool,
}

/// When the compile plugin records a memory point (`[memory] points`).
pub const MEMORY_POINTS: [&str; 3] = ["before_recording", "after_recording", "after_warmup"];

/// The `[memory]` settings of a probe config: the memory points the compile plugin
/// records on its own.
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(
        name = "ProbeMemorySettings",
        module = "torch_cudagraph_debug._native",
        frozen,
        get_all,
        skip_from_py_object
    )
)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MemorySettings {
    /// The memory run's job root (default: the probe run's root).
    pub dir: Option<String>,
    /// The memory run's name (default: the probe run's name with `-memory`).
    pub name: String,
    /// Which memory points (`before_recording`, `after_recording`, `after_warmup`), in
    /// the order given.
    pub points: Vec<String>,
    /// Also a point every this many calls of the compiled model (0: never).
    pub every: u32,
    /// Reset the allocator's peaks at each point, so each point's peaks are those since
    /// the previous one.
    pub reset_peaks: bool,
    /// Replace a memory run already at its path.
    pub overwrite: bool,
}

/// A validated config.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub source_name: String,
    pub run: RunSettings,
    /// `[memory]`: absent, no memory points.
    pub memory: Option<MemorySettings>,
    pub select: Vec<Rule>,
    pub exclude: Vec<Matcher>,
    /// blake3 of the file text and the producer version: the compile cache key part.
    pub digest: String,
}

pub(crate) const GRAPH_KINDS: [&str; 3] = ["forward", "backward", "inference"];
/// The dtype names a rule may name: those the recorder can record, by torch's names.
fn recordable_dtypes() -> impl Iterator<Item = &'static str> {
    tcgd_tensor::DType::ALL.iter().map(|d| d.torch_name())
}

/// Turns byte offsets into 1-based line numbers for error messages.
pub(crate) struct Locator<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Locator<'_> {
    pub fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    pub fn error(&self, offset: usize, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_owned(),
            line: self.line(offset),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// The file as its raw tables. A value serde cannot take (a string where a number goes, an
/// unknown key) is reported with the key path that leads to it (`select[0].every`), so the
/// message names the key as well as the line.
fn raw_config(at: &Locator<'_>, text: &str) -> Result<RawConfig, ConfigError> {
    let syntax = |e: toml::de::Error| ConfigError::Syntax {
        file: at.file.to_owned(),
        line: e.span().map_or(0, |s| at.line(s.start)),
        message: e.message().to_owned(),
    };
    let document = toml::Deserializer::parse(text).map_err(syntax)?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        let key = key_path(e.path());
        let inner = e.into_inner();
        if key.is_empty() {
            return syntax(inner);
        }
        ConfigError::Invalid {
            file: at.file.to_owned(),
            line: inner.span().map_or(0, |s| at.line(s.start)),
            key,
            message: inner.message().to_owned(),
        }
    })
}

/// `select[0].every` from the path serde took; the keys `Spanned` values use inside (named
/// `$__serde_spanned_private_...`) are not the user's.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if name.starts_with("$__") {
                    continue;
                }
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => {}
        }
    }
    key
}

impl ProbeConfig {
    /// Parses and validates config text. `file` names the source in error messages.
    pub fn parse(
        file: &str,
        text: &str,
        producer_version: &str,
    ) -> Result<ProbeConfig, ConfigError> {
        let at = Locator { file, text };
        let raw = raw_config(&at, text)?;
        if *raw.version.get_ref() != CONFIG_VERSION {
            return Err(at.error(
                raw.version.span().start,
                "version",
                format!(
                    "config version {} is not supported; this release reads version {CONFIG_VERSION}",
                    raw.version.get_ref()
                ),
            ));
        }
        let run = run_settings(&at, raw.run)?;
        let memory = raw
            .memory
            .map(|m| memory_settings(&at, &run, m))
            .transpose()?;
        if raw.select.is_empty() {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: 1,
                key: "select".into(),
                message: "no [[select]] table: nothing would be probed".into(),
            });
        }
        let select = raw
            .select
            .into_iter()
            .enumerate()
            .map(|(i, r)| rule(&at, i, r))
            .collect::<Result<Vec<_>, _>>()?;
        let exclude = raw
            .exclude
            .into_iter()
            .enumerate()
            .map(|(i, r)| matcher(&at, &format!("exclude[{i}]"), r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(producer_version.as_bytes());
        hasher.update(b"\0");
        hasher.update(text.as_bytes());
        Ok(ProbeConfig {
            source_name: file.to_owned(),
            run,
            memory,
            select,
            exclude,
            digest: hasher.finalize().to_hex().to_string(),
        })
    }

    pub fn load(path: &Path, producer_version: &str) -> Result<ProbeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        ProbeConfig::parse(&path.display().to_string(), &text, producer_version)
    }
}

fn run_settings(at: &Locator, raw: Option<RawRun>) -> Result<RunSettings, ConfigError> {
    let raw = raw.unwrap_or_default();
    let payload = match raw.payload {
        None => Payload::Full,
        Some(p) => match p.get_ref().as_str() {
            "full" => Payload::Full,
            "summary" => Payload::Summary,
            other => {
                return Err(at.error(
                    p.span().start,
                    "run.payload",
                    format!("'{other}' is not one of \"full\", \"summary\""),
                ))
            }
        },
    };
    let history = match raw.history {
        None => 0,
        Some(h) if *h.get_ref() == 0 => 0,
        Some(h) if *h.get_ref() < 0 => {
            return Err(at.error(h.span().start, "run.history", "must be >= 0"));
        }
        Some(h) if *h.get_ref() > MAX_HISTORY => {
            return Err(at.error(
                h.span().start,
                "run.history",
                format!(
                    "history = {} is more than {MAX_HISTORY} calls of full values per site \
                     kept on the device",
                    h.get_ref()
                ),
            ));
        }
        Some(h) if payload == Payload::Full => {
            return Err(at.error(
                h.span().start,
                "run.history",
                "a history needs payload = \"summary\": with \"full\" every call's values \
                 are in the run already",
            ));
        }
        Some(h) => *h.get_ref() as u32,
    };
    let full_every = match raw.full_every {
        None => 0,
        Some(k) if *k.get_ref() < 0 || *k.get_ref() > u32::MAX as i64 => {
            return Err(at.error(k.span().start, "run.full_every", "must be >= 0 (0: never)"));
        }
        Some(k) if *k.get_ref() > 0 && payload == Payload::Full => {
            return Err(at.error(
                k.span().start,
                "run.full_every",
                "full_every needs payload = \"summary\": with \"full\" every call keeps full \
                 values already",
            ));
        }
        Some(k) => *k.get_ref() as u32,
    };
    let trigger_abs_max = match raw.trigger_abs_max {
        Some(t) if !(t.get_ref().is_finite() && *t.get_ref() >= 0.0) => {
            return Err(at.error(
                t.span().start,
                "run.trigger_abs_max",
                format!("must be a finite number >= 0, got {}", t.get_ref()),
            ));
        }
        t => t.map(Spanned::into_inner),
    };
    let name = match raw.name {
        None => "compiled".to_owned(),
        Some(n) => {
            check_run_name(n.get_ref()).map_err(|why| at.error(n.span().start, "run.name", why))?;
            n.into_inner()
        }
    };
    Ok(RunSettings {
        name,
        dir: raw.dir.map(Spanned::into_inner),
        payload,
        history,
        full_every,
        trigger_nonfinite: raw.trigger_nonfinite.is_none_or(Spanned::into_inner),
        trigger_abs_max,
        overwrite: raw.overwrite.is_some_and(Spanned::into_inner),
    })
}

fn memory_settings(
    at: &Locator,
    run: &RunSettings,
    raw: RawMemory,
) -> Result<MemorySettings, ConfigError> {
    let points = match raw.points {
        None => vec!["before_recording".to_owned(), "after_recording".to_owned()],
        Some(list) => {
            let mut out: Vec<String> = Vec::new();
            for p in list {
                if !MEMORY_POINTS.contains(&p.get_ref().as_str()) {
                    return Err(at.error(
                        p.span().start,
                        "memory.points",
                        format!(
                            "'{}' is not one of {}",
                            p.get_ref(),
                            MEMORY_POINTS.map(|m| format!("\"{m}\"")).join(", ")
                        ),
                    ));
                }
                if !out.contains(p.get_ref()) {
                    out.push(p.into_inner());
                }
            }
            out
        }
    };
    let every = match raw.every {
        None => 0,
        Some(k) if *k.get_ref() < 0 || *k.get_ref() > u32::MAX as i64 => {
            return Err(at.error(k.span().start, "memory.every", "must be >= 0 (0: never)"));
        }
        Some(k) => *k.get_ref() as u32,
    };
    let name = match raw.name {
        None => format!("{}-memory", run.name),
        Some(n) => {
            check_run_name(n.get_ref())
                .map_err(|why| at.error(n.span().start, "memory.name", why))?;
            n.into_inner()
        }
    };
    Ok(MemorySettings {
        dir: raw.dir.map(Spanned::into_inner),
        name,
        points,
        every,
        reset_peaks: raw.reset_peaks.is_some_and(Spanned::into_inner),
        overwrite: raw.overwrite.is_some_and(Spanned::into_inner),
    })
}

/// A run name becomes one directory under `run.dir`: it must be a single path component
/// that stays inside it (no separators, not `.` or `..`), or a config could make the run
/// write anywhere the process may write.
pub fn check_run_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "must not be empty"
    } else if name == "." || name == ".." {
        "must not be '.' or '..'"
    } else if name.contains(['/', '\\']) {
        "must be a single directory name, without '/' or '\\'"
    } else if name.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(format!(
        "{why}, got {name:?}; the run goes to <run.dir>/<run.name>: to place it elsewhere, \
         set run.dir (or pass run_dir)"
    ))
}

fn positive(
    at: &Locator,
    key: &str,
    value: &Option<Spanned<i64>>,
) -> Result<Option<u64>, ConfigError> {
    match value {
        None => Ok(None),
        Some(v) if *v.get_ref() < 1 => Err(at.error(
            v.span().start,
            key,
            format!("must be >= 1, got {}", v.get_ref()),
        )),
        Some(v) => Ok(Some(*v.get_ref() as u64)),
    }
}

fn rule(at: &Locator, index: usize, mut raw: RawRule) -> Result<Rule, ConfigError> {
    let key = format!("select[{index}]");
    // What is left of `raw` is the matcher.
    let actions_raw = std::mem::take(&mut raw.actions);
    let (every, limit) = (raw.every.take(), raw.limit.take());
    let matcher = matcher(at, &key, rule_match(raw))?;
    let mut actions = Vec::new();
    for a in &actions_raw {
        actions.push(match a.get_ref().as_str() {
            "record" => Action::Record,
            "print" => Action::Print,
            "check" => {
                return Err(at.error(
                    a.span().start,
                    &format!("{key}.actions"),
                    "\"check\" needs expected values, which a config file cannot carry; \
                     use CheckAction on a TensorProbe",
                ))
            }
            other => {
                return Err(at.error(
                    a.span().start,
                    &format!("{key}.actions"),
                    format!("'{other}' is not one of \"record\", \"print\""),
                ))
            }
        });
    }
    if actions.is_empty() {
        actions.push(Action::Record);
    }
    Ok(Rule {
        index,
        matcher,
        actions,
        every: positive(at, &format!("{key}.every"), &every)?.unwrap_or(1),
        limit: positive(at, &format!("{key}.limit"), &limit)?,
    })
}

/// Parses each entry of the list `key`; an entry `parse` refuses is an error at its line.
fn parse_entries<T>(
    at: &Locator,
    key: &str,
    values: &[Spanned<String>],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, ConfigError> {
    values
        .iter()
        .map(|v| parse(v.get_ref()).map_err(|why| at.error(v.span().start, key, why)))
        .collect()
}

fn matcher(at: &Locator, key: &str, raw: RawMatch) -> Result<Matcher, ConfigError> {
    let globs = |field: &str, values: &[Spanned<String>]| {
        parse_entries(at, &format!("{key}.{field}"), values, GlobList::entry).map(GlobList::new)
    };
    for g in &raw.graphs {
        if !GRAPH_KINDS.contains(&g.get_ref().as_str()) {
            return Err(at.error(
                g.span().start,
                &format!("{key}.graphs"),
                format!("'{}' is not one of {GRAPH_KINDS:?}", g.get_ref()),
            ));
        }
    }
    for d in &raw.dtypes {
        if !recordable_dtypes().any(|name| name == d.get_ref()) {
            let known: Vec<&str> = recordable_dtypes().collect();
            return Err(at.error(
                d.span().start,
                &format!("{key}.dtypes"),
                format!(
                    "'{}' is not a recordable dtype; one of {known:?}",
                    d.get_ref()
                ),
            ));
        }
    }
    let min = positive(at, &format!("{key}.min_numel"), &raw.min_numel)?;
    let max = positive(at, &format!("{key}.max_numel"), &raw.max_numel)?;
    if let (Some(lo), Some(hi), Some(span)) = (min, max, raw.max_numel.as_ref()) {
        if lo > hi {
            return Err(at.error(
                span.span().start,
                &format!("{key}.max_numel"),
                format!("impossible range: min_numel {lo} > max_numel {hi}"),
            ));
        }
    }
    Ok(Matcher {
        ops: globs("ops", &raw.ops)?,
        modules: globs("modules", &raw.modules)?,
        names: globs("names", &raw.names)?,
        sources: parse_entries(
            at,
            &format!("{key}.sources"),
            &raw.sources,
            SourceList::entry,
        )
        .map(SourceList::new)?,
        graphs: raw.graphs.into_iter().map(Spanned::into_inner).collect(),
        dtypes: raw.dtypes.into_iter().map(Spanned::into_inner).collect(),
        min_numel: min,
        max_numel: max,
    })
}
