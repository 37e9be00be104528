//! Probe config files: a versioned TOML schema, validated with errors that name file, line
//! and key, and the node selection the compile pass asks for (with a reason for every
//! selected and rejected candidate, which `explain` shows).

mod error;
#[cfg(feature = "python")]
mod python;
mod schema;
mod select;

pub use error::ConfigError;
pub use schema::{
    check_run_name, MemorySettings, Payload, ProbeConfig, RunSettings, CONFIG_VERSION,
    MEMORY_POINTS,
};
pub use select::{
    normalize_module_path, select_nodes, source_location, Action, Decision, Matcher, NodeFacts,
    Rule,
};

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
version = 1

[run]
name = "gpt-cg"
dir = "runs"
payload = "summary"

[[select]]
ops = ["aten.mm", "aten.addmm", "aten._scaled_dot_product_*"]
modules = ["layers.*.attn"]
graphs = ["forward", "backward"]
dtypes = ["float32", "bfloat16"]
max_numel = 100_000_000
actions = ["record"]
every = 1
limit = 2

[[select]]
names = ["relu*"]
sources = ["model.py:120-160"]

[[exclude]]
ops = ["aten.view", "aten.t"]
"#;

    fn parse(text: &str) -> Result<ProbeConfig, ConfigError> {
        ProbeConfig::parse("probes.toml", text, "0.1.0")
    }

    fn node(name: &str, op: &str, module: &str, kind: &str) -> NodeFacts {
        NodeFacts {
            graph_kind: kind.into(),
            node_name: name.into(),
            op: op.into(),
            module_path: Some(module.into()),
            stack_trace: Some(
                "  File \"/src/model.py\", line 130, in forward\n    y = x @ w\n".into(),
            ),
            dtype: Some("float32".into()),
            numel: Some(64),
            is_tensor: true,
        }
    }

    #[test]
    fn a_good_config_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.run.name, "gpt-cg");
        assert_eq!(c.run.payload, Payload::Summary);
        assert_eq!(c.select.len(), 2);
        assert_eq!(c.select[0].limit, Some(2));
        assert_eq!(c.digest.len(), 64);
        assert_ne!(
            c.digest,
            parse(&GOOD.replace("limit = 2", "limit = 3"))
                .unwrap()
                .digest
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // (text replaced in GOOD, its replacement, the line and a part of the message)
        let cases = [
            ("every = 1", "evry = 1", 16, "unknown field `evry`"),
            (
                "[\"layers.*.attn\"]",
                "[\"layers[.attn\"]",
                11,
                "select[0].modules",
            ),
            (
                "max_numel = 100_000_000",
                "max_numel = 0",
                14,
                "select[0].max_numel",
            ),
            (
                "\"forward\", \"backward\"",
                "\"fwd\"",
                12,
                "select[0].graphs",
            ),
            (
                "model.py:120-160",
                "model.py:160-120",
                21,
                "select[1].sources",
            ),
            (
                "payload = \"summary\"",
                "payload = \"half\"",
                7,
                "run.payload",
            ),
            ("version = 1", "version = 2", 2, "version"),
            ("[\"record\"]", "[\"check\"]", 15, "select[0].actions"),
        ];
        for (from, to, line, needle) in cases {
            let err = parse(&GOOD.replace(from, to)).unwrap_err().to_string();
            assert!(err.starts_with(&format!("probes.toml:{line}:")), "{err}");
            assert!(err.contains(needle), "{err}");
        }
        let empty = parse("version = 1\n").unwrap_err().to_string();
        assert!(empty.contains("no [[select]]"), "{empty}");
        let both = "version = 1\n[[select]]\nmin_numel = 10\nmax_numel = 5\n";
        assert!(parse(both)
            .unwrap_err()
            .to_string()
            .contains("impossible range"));
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_key() {
        // (text replaced in GOOD, its replacement, the line and the key path)
        let cases = [
            ("every = 1", "every = \"two\"", 16, "select[0].every"),
            ("limit = 2", "limit = 2.5", 17, "select[0].limit"),
            ("payload = \"summary\"", "payload = 3", 7, "run.payload"),
            (
                "names = [\"relu*\"]",
                "names = [\"relu*\", 4]",
                20,
                "select[1].names[1]",
            ),
            (
                "ops = [\"aten.view\", \"aten.t\"]",
                "ops = \"aten.view\"",
                24,
                "exclude[0].ops",
            ),
            ("version = 1", "version = \"1\"", 2, "version"),
        ];
        for (from, to, line, key) in cases {
            let text = GOOD.replace(from, to);
            assert_ne!(text, GOOD, "{from}");
            let err = parse(&text).unwrap_err();
            match &err {
                ConfigError::Invalid {
                    file,
                    line: at,
                    key: named,
                    message,
                } => {
                    assert_eq!(
                        (file.as_str(), *at, named.as_str()),
                        ("probes.toml", line, key),
                        "{err}"
                    );
                    assert!(message.starts_with("invalid type"), "{err}");
                }
                other => panic!("{from}: not an invalid-value error: {other}"),
            }
            assert!(
                err.to_string()
                    .starts_with(&format!("probes.toml:{line}: {key}: invalid type")),
                "{err}"
            );
        }
        let memory = parse(&format!("{GOOD}\n[memory]\nevery = \"often\"\n")).unwrap_err();
        assert!(
            memory.to_string().contains(": memory.every: invalid type"),
            "{memory}"
        );
    }

    #[test]
    fn fault11_run_name_must_be_one_safe_path_component() {
        // TOML literals: the last is a name with a control character in it.
        for bad in [
            r#""../../x""#,
            r#""a/b""#,
            "\"..\"",
            "\".\"",
            r#""a\\b""#,
            "\"\"",
            r#""x\u0001y""#,
        ] {
            let text = GOOD.replace("name = \"gpt-cg\"", &format!("name = {bad}"));
            let err = parse(&text).unwrap_err().to_string();
            assert!(
                err.starts_with("probes.toml:5: run.name: "),
                "{bad:?}: {err}"
            );
            assert!(err.contains("run.dir"), "{bad:?}: {err}");
        }
        for good in ["gpt-cg", "run.2", "..x", "a b"] {
            let text = GOOD.replace("name = \"gpt-cg\"", &format!("name = {good:?}"));
            assert_eq!(parse(&text).unwrap().run.name, good);
        }
        assert!(check_run_name("ok").is_ok() && check_run_name("../x").is_err());
    }

    #[test]
    fn fault11_sources_syntax_is_checked_at_load_time() {
        for bad in [
            "model.py:abc",
            "model.py:",
            "model.py:12-",
            "model.py:-12",
            "model.py:1-x",
            "model.py: 12",
            ":12",
            "",
        ] {
            let text = GOOD.replace("model.py:120-160", bad);
            let err = parse(&text).unwrap_err().to_string();
            assert!(
                err.starts_with("probes.toml:21: select[1].sources: bad source"),
                "{bad:?}: {err}"
            );
        }
        let abc = parse(&GOOD.replace("model.py:120-160", "model.py:abc"))
            .unwrap_err()
            .to_string();
        assert!(abc.contains("'abc' is not a line"), "{abc}");
        for good in ["model.py", "model.py:7", "*/model.py:1-9", "src/*.py"] {
            assert!(
                parse(&GOOD.replace("model.py:120-160", good)).is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn run_overwrite_is_read_and_defaults_to_false() {
        assert!(!parse(GOOD).unwrap().run.overwrite);
        let on = GOOD.replace(
            "payload = \"summary\"",
            "payload = \"summary\"\noverwrite = true",
        );
        assert!(parse(&on).unwrap().run.overwrite);
        let bad = GOOD.replace(
            "payload = \"summary\"",
            "payload = \"summary\"\noverwrite = 1",
        );
        assert!(parse(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("probes.toml:8:"));
    }

    #[test]
    fn selection_with_reasons_every_and_limit() {
        let c = parse(GOOD).unwrap();
        let nodes = vec![
            node(
                "mm",
                "aten.mm.default",
                "L['self'].layers[0].attn",
                "forward",
            ),
            node(
                "mm_1",
                "aten.mm.default",
                "L['self'].layers[1].attn",
                "forward",
            ),
            node(
                "mm_2",
                "aten.mm.default",
                "L['self'].layers[2].attn",
                "forward",
            ),
            node(
                "view",
                "aten.view.default",
                "L['self'].layers[0].attn",
                "forward",
            ),
            node("relu", "aten.relu.default", "L['self'].mlp", "inference"),
            node("add", "aten.add.Tensor", "L['self'].mlp", "forward"),
            NodeFacts {
                is_tensor: false,
                ..node("split", "aten.split.Tensor", "L['self'].mlp", "forward")
            },
        ];
        let d = select_nodes(&c.select, &c.exclude, &nodes);
        let summary: Vec<(bool, &str)> =
            d.iter().map(|d| (d.selected, d.reason.as_str())).collect();
        assert_eq!(summary[0], (true, "select[0]"));
        assert_eq!(summary[1], (true, "select[0]"));
        assert_eq!(summary[2], (false, "select[0] matched, limit = 2 reached"));
        assert_eq!(summary[3], (false, "excluded by exclude[0]"));
        assert_eq!(summary[4], (true, "select[1]"));
        assert!(
            summary[5].1.starts_with("select[0]: op 'aten.add' not in"),
            "{:?}",
            summary[5]
        );
        assert_eq!(summary[6], (false, "produces no tensor"));
        assert_eq!(d[0].module_path.as_deref(), Some("layers.0.attn"));
        assert_eq!(d[0].source_location.as_deref(), Some("/src/model.py:130"));
    }

    #[test]
    fn every_nth_match() {
        let c = parse("version = 1\n[[select]]\nops = [\"aten.mm\"]\nevery = 2\n").unwrap();
        let nodes: Vec<NodeFacts> = (0..5)
            .map(|i| node(&format!("mm_{i}"), "aten.mm.default", "m", "forward"))
            .collect();
        let picked: Vec<bool> = select_nodes(&c.select, &c.exclude, &nodes)
            .iter()
            .map(|d| d.selected)
            .collect();
        assert_eq!(picked, [true, false, true, false, true]);
    }

    #[test]
    fn module_paths_normalise() {
        for (raw, want) in [
            ("L['self'].layers[0].attn", "layers.0.attn"),
            ("L['self']._modules['h']._modules['0'].mlp", "h.0.mlp"),
            ("L['self']", ""),
            ("L['fn'][0]", "0"),
            ("transformer.h.0", "transformer.h.0"),
        ] {
            assert_eq!(normalize_module_path(raw), want, "module path {raw:?}");
        }
    }

    #[test]
    fn memory_table_settings() {
        let cfg = parse(GOOD).unwrap();
        assert_eq!(cfg.memory, None);
        let text = format!(
            "{GOOD}\n[memory]\ndir = \"mem\"\npoints = [\"after_warmup\", \"after_recording\"]\nevery = 10\nreset_peaks = true\n"
        );
        let m = parse(&text).unwrap().memory.unwrap();
        assert_eq!(m.dir.as_deref(), Some("mem"));
        assert_eq!(m.name, "gpt-cg-memory");
        assert_eq!(m.points, vec!["after_warmup", "after_recording"]);
        assert_eq!(m.every, 10);
        assert!(m.reset_peaks);
        assert!(!m.overwrite);
        let defaults = parse(&format!("{GOOD}\n[memory]\n"))
            .unwrap()
            .memory
            .unwrap();
        assert_eq!(defaults.points, vec!["before_recording", "after_recording"]);
        assert_eq!(defaults.every, 0);
        let bad = parse(&format!("{GOOD}\n[memory]\npoints = [\"sometimes\"]\n")).unwrap_err();
        assert!(bad.to_string().contains("memory.points"), "{bad}");
        let bad = parse(&format!("{GOOD}\n[memory]\nevery = -1\n")).unwrap_err();
        assert!(bad.to_string().contains("memory.every"), "{bad}");
        let bad = parse(&format!("{GOOD}\n[memory]\nname = \"../x\"\n")).unwrap_err();
        assert!(bad.to_string().contains("memory.name"), "{bad}");
    }
}
