//! The gate, the profile, the command builders and the built-in reader, without a sandbox. The runner is
//! tested through the real binary in `crates/cli/tests/suite/quarantine.rs`.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::*;

const FILE: &str = "/src/PROJECT.yaml";
const TEXT: &str = "name: demo\nhomepage: https://example.com/demo\r\n\u{202E}evil: x\nlast line";

fn sources() -> SourceSet {
    let mut set = SourceSet::default();
    set.add(
        Path::new("PROJECT.yaml"),
        PathBuf::from(FILE),
        TEXT.to_string(),
    );
    set
}

fn reference(file: &str, line: usize, quote: &str, value: &str) -> serde_json::Value {
    json!({"kind": "url", "value": value, "source": {"file": file, "line": line, "quote": quote}})
}

#[test]
fn the_gate_passes_only_what_is_literally_in_the_source() {
    let set = sources();
    let url = "https://example.com/demo";
    let cases = [
        (
            reference(FILE, 2, "homepage: https://example.com/demo", url),
            None,
        ),
        (reference("PROJECT.yaml", 2, url, url), None),
        (
            reference("/other/file", 2, url, url),
            Some("not one of the input files"),
        ),
        (reference(FILE, 9, url, url), Some("line 9 does not exist")),
        (reference(FILE, 0, url, url), Some("line 0 does not exist")),
        (
            reference(FILE, 1, url, url),
            Some("does not appear verbatim on line 1"),
        ),
        (
            reference(FILE, 2, "homepage:", url),
            Some("value does not appear in its quote"),
        ),
        (reference(FILE, 2, url, ""), Some("value is empty")),
        (reference(FILE, 3, "\u{202E}evil: x", "x"), Some("U+202E")),
        (
            reference(FILE, 2, url, &"a".repeat(MAX_VALUE_BYTES + 1)),
            Some("over 2048"),
        ),
        (
            json!({"kind": "shell-command", "value": "x", "source": {"file": FILE, "line": 1, "quote": "x"}}),
            Some("unknown variant"),
        ),
        (
            json!({"kind": "url", "value": "x", "source": {"file": FILE, "line": 1, "quote": "x"}, "run": "rm"}),
            Some("unknown field"),
        ),
        (json!("just a string"), Some("not a TypedReference")),
        (json!(12), Some("expected struct TypedReference")),
        (
            json!({"kind": "url", "value": "x", "source": "s"}),
            Some("expected struct Source"),
        ),
    ];
    let output: Vec<_> = cases
        .iter()
        .map(|(value, _)| serde_json::value::to_raw_value(value).unwrap())
        .collect();
    let (valid, rejected) = set.validate(output);
    assert_eq!(valid.len(), 2);
    assert!(
        valid.iter().all(|r| r.source.file == FILE),
        "file names are made canonical"
    );
    let expected: Vec<_> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, (_, why))| why.map(|w| (i, w)))
        .collect();
    assert_eq!(rejected.len(), expected.len());
    for (r, (index, why)) in rejected.iter().zip(expected) {
        assert_eq!(r.index, index);
        assert!(
            r.reason.contains(why),
            "case {index}: {} lacks {why:?}",
            r.reason
        );
        // Described, never quoted: the reader's strings appear in no reason.
        for text in [
            "shell-command",
            "/other/file",
            "just a string",
            "\u{202E}",
            "run",
        ] {
            assert!(
                !r.reason.contains(text),
                "case {index} quotes {text:?}: {}",
                r.reason
            );
        }
    }
    assert_eq!(set.len(), 1);
    assert!(!set.is_empty());
}

#[test]
fn profiles_are_validated_strictly_with_the_field_named() {
    let origin = Path::new("profile.json");
    let builtin = CrossProjectProfile::builtin();
    assert!(builtin.allows_tool("Read") && builtin.allows_tool("WebFetch"));
    assert!(!builtin.allows_tool("Bash") && !builtin.allows_tool("mcp__github__create_issue"));
    let text = serde_json::to_string(&builtin).unwrap();
    assert_eq!(CrossProjectProfile::parse(&text, origin).unwrap(), builtin);
    let bad = [
        (
            r#"{"name":"p","allowedTools":[],"deniedTools":[],"deniedPaths":[],"extra":1}"#,
            "unknown field",
        ),
        (
            r#"{"name":"","allowedTools":[],"deniedTools":[],"deniedPaths":[]}"#,
            "name is empty",
        ),
        (
            r#"{"name":"p","allowedTools":[""],"deniedTools":[],"deniedPaths":[]}"#,
            "allowedTools[0]",
        ),
        (
            r#"{"name":"p","allowedTools":["Read","mcp__x"],"deniedTools":["mcp__*"],"deniedPaths":[]}"#,
            "allowedTools[1] \"mcp__x\" is also denied",
        ),
        (
            r#"{"name":"p","allowedTools":[],"deniedTools":[],"deniedPaths":["secrets/"]}"#,
            "deniedPaths[0]",
        ),
        (r#"{"name":"p","allowedTools":[]}"#, "missing field"),
    ];
    for (text, why) in bad {
        let err = CrossProjectProfile::parse(text, origin)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(why) && err.contains("profile.json"),
            "{err} lacks {why:?}"
        );
    }
    assert_eq!(profile_schema()["title"], "CrossProjectProfile");
    assert_eq!(reference_schema()["title"], "TypedReference");
}

#[test]
fn command_builders_are_the_seed_s_and_pluggable() {
    let profile = CrossProjectProfile::builtin();
    let files = vec![
        PathBuf::from("/a/PROJECT.yaml"),
        PathBuf::from("/a/README.md"),
    ];
    let k = build_command(&Reader::K, &files, &profile);
    assert_eq!(
        (k.cmd.as_str(), k.args.clone()),
        (
            "k",
            vec![
                "cross-project".to_string(),
                "/a/PROJECT.yaml".into(),
                "/a/README.md".into()
            ]
        )
    );
    let extract = build_command(
        &Reader::Extract {
            program: "/bin/stockade".into(),
        },
        &files,
        &profile,
    );
    assert_eq!(extract.args[0], "extract");
    let claude = build_command(&Reader::Claude, &files, &profile);
    assert_eq!(claude.cmd, "claude");
    let flag = |name: &str| {
        claude
            .args
            .iter()
            .position(|a| a == name)
            .map(|i| claude.args[i + 1].clone())
    };
    // No host granted: WebFetch is not offered; Read is pre-approved for exactly the inputs.
    assert_eq!(flag("--tools").unwrap(), "Read,Glob,Grep");
    assert_eq!(
        flag("--disallowedTools").unwrap(),
        "Bash,Write,Edit,MultiEdit,NotebookEdit,mcp__*"
    );
    assert_eq!(flag("--permission-mode").unwrap(), "dontAsk");
    assert_eq!(flag("--output-format").unwrap(), "json");
    assert!(claude.args.iter().any(|a| a == "--strict-mcp-config"));
    let settings: serde_json::Value = serde_json::from_str(&flag("--settings").unwrap()).unwrap();
    assert_eq!(
        settings["permissions"]["allow"],
        json!(["Read(//a/PROJECT.yaml)", "Read(//a/README.md)"])
    );
    assert_eq!(settings["permissions"]["defaultMode"], "dontAsk");
    assert!(
        flag("-p")
            .unwrap()
            .ends_with("/a/PROJECT.yaml\n/a/README.md")
    );
    // Hosts granted: WebFetch is offered and pre-approved for them alone.
    let web = claude_command(&files, &profile, &["docs.example.com:443".to_string()]);
    let web_flag = |name: &str| {
        web.args
            .iter()
            .position(|a| a == name)
            .map(|i| web.args[i + 1].clone())
    };
    assert_eq!(web_flag("--tools").unwrap(), "Read,Glob,Grep,WebFetch");
    let settings: serde_json::Value =
        serde_json::from_str(&web_flag("--settings").unwrap()).unwrap();
    assert_eq!(
        settings["permissions"]["allow"][2],
        "WebFetch(domain:docs.example.com)"
    );
    let custom = build_command(&Reader::Command("./reader".into()), &files, &profile);
    assert_eq!((custom.cmd.as_str(), custom.args.len()), ("./reader", 2));
    assert_eq!(Reader::Command("./reader".into()).name(), "./reader");
    assert!(find_program("sh").is_some() && find_program("no-such-reader-xyz").is_none());
}

#[test]
fn reader_output_is_parsed_or_reported_with_the_raw_text() {
    assert!(parse_output(b"  \n", &Reader::K).unwrap().is_empty());
    assert_eq!(parse_output(b"[1, 2]", &Reader::K).unwrap().len(), 2);
    assert_eq!(
        parse_output(b"[\"ok\", \"bad \xff byte\"]", &Reader::K)
            .unwrap()
            .len(),
        2,
        "invalid UTF-8 spoils one element, not the output"
    );
    // Malformed output is described, never quoted: what is wrong, at which byte of how many.
    let err = parse_output(b"  {\"not\": \"an array SECRET\"}", &Reader::K).unwrap_err();
    assert!(
        err.contains("malformed output") && err.contains("not an array") && !err.contains("SECRET"),
        "{err}"
    );
    let err = parse_output(b"[1, 2,\n oops SECRET]", &Reader::K).unwrap_err();
    assert!(
        err.contains("not valid JSON, at byte 8 of 20 bytes") && !err.contains("SECRET"),
        "{err}"
    );
    let long = format!("[{}", "x".repeat(5000));
    assert!(parse_output(long.as_bytes(), &Reader::K).unwrap_err().len() < 200);
    let envelope = json!({"type": "result", "result": "```json\n[{\"a\": 1}]\n```"}).to_string();
    assert_eq!(
        parse_output(envelope.as_bytes(), &Reader::Claude)
            .unwrap()
            .len(),
        1
    );
    assert!(parse_output(b"{\"type\":\"result\"}", &Reader::Claude).is_err());
    let lying = json!({"type": "result", "result": "Sure! SECRET [1]"}).to_string();
    let err = parse_output(lying.as_bytes(), &Reader::Claude).unwrap_err();
    assert!(
        err.contains("the answer in Claude Code's `result`") && !err.contains("SECRET"),
        "{err}"
    );
}

#[test]
fn the_extract_reader_finds_references_with_exact_provenance() {
    let yaml = "name: demo\nhomepage: https://example.com/demo.\nrepo: git@github.com:acme/demo.git\nowner: Jane <jane@example.org>\ndependencies:\n  - requests==2.31.0\n  - numpy\nother:\n  - not-a-package\nsee docs/guide.md and ./CHANGELOG.md\nRun `npm install left-pad` first.\n";
    let toml = "[package]\nname = \"x\"\n[dependencies]\nserde = \"1.0\"\nregex = { version = \"1\" }\n[features]\ndefault = []\n";
    let json = "{\n  \"dependencies\": {\n    \"react\": \"^18.2.0\"\n  },\n  \"scripts\": {\"x\": \"y\"}\n}\n";
    let found = |text: &str| {
        extract::extract_text("f", text)
            .into_iter()
            .map(|r| (r.kind, r.value))
            .collect::<Vec<_>>()
    };
    use ReferenceKind::*;
    let yaml_refs = found(yaml);
    for expected in [
        (Url, "https://example.com/demo"),
        (Repository, "git@github.com:acme/demo.git"),
        (Email, "jane@example.org"),
        (Package, "requests"),
        (Version, "2.31.0"),
        (Package, "numpy"),
        (Path, "docs/guide.md"),
        (Path, "./CHANGELOG.md"),
        (Package, "left-pad"),
    ] {
        assert!(
            yaml_refs.contains(&(expected.0, expected.1.to_string())),
            "{expected:?} not in {yaml_refs:?}"
        );
    }
    assert!(
        !yaml_refs
            .iter()
            .any(|(_, v)| v == "not-a-package" || v == "name")
    );
    let toml_refs = found(toml);
    assert!(
        toml_refs.contains(&(Package, "serde".into()))
            && toml_refs.contains(&(Package, "regex".into()))
    );
    assert!(!toml_refs.iter().any(|(_, v)| v == "default" || v == "x"));
    assert!(found(json).contains(&(Package, "react".into())));
    assert!(!found(json).iter().any(|(_, v)| v == "x"));
    // Everything the reader reports passes the gate on the same text.
    let mut set = SourceSet::default();
    set.add(
        std::path::Path::new("f"),
        PathBuf::from("/f"),
        yaml.to_string(),
    );
    let output = extract::extract_text("f", yaml)
        .into_iter()
        .map(|r| serde_json::value::to_raw_value(&r).unwrap())
        .collect();
    let (valid, rejected) = set.validate(output);
    assert_eq!((valid.len(), rejected.len()), (yaml_refs.len(), 0));
    let (refs, problems) = extract::extract_files(&[std::path::Path::new("/no/such/file")]);
    assert!(refs.is_empty() && problems[0].contains("/no/such/file"));
}

#[test]
fn no_files_is_success_without_starting_anything() {
    let config = QuarantineConfig {
        command: Some("/no/such/reader".into()),
        ..QuarantineConfig::default()
    };
    let result = run(&[], &config).unwrap();
    assert!(result.success && result.references.is_empty() && result.errors.is_empty());
    assert_eq!((result.files_processed, result.exit_code), (0, Some(0)));
    assert_eq!(DEFAULT_TIMEOUT.as_secs(), 30);
    assert_eq!(DEFAULT_MAX_OUTPUT, 1 << 20);
}

/// The gate's answer (passed and rejected references), or why the output could not be judged.
type Judged = Result<(Vec<TypedReference>, Vec<Rejected>), String>;

/// What the runner concludes from a reader's whole stdout: the gate's answer, or the parse error.
fn judged_whole(set: &SourceSet, output: &[u8]) -> Judged {
    parse_output(output, &Reader::K).map(|elements| set.validate(elements))
}

/// What the runner concludes when the same stdout arrives cut at `cuts`: the streaming gate's answer, or
/// (when it gave up) the whole-output path; and whether the stream answered itself.
fn judged_streaming(set: &SourceSet, output: &[u8], cuts: &[usize]) -> (Judged, bool) {
    let mut gate = StreamingGate::new(set);
    for &cut in cuts {
        gate.feed(&output[..cut]);
    }
    match gate.finish(output) {
        Some(judged) => (Ok(judged), true),
        None => (judged_whole(set, output), false),
    }
}

#[test]
fn the_streaming_gate_agrees_with_the_whole_output_however_it_arrives() {
    let set = sources();
    let url = "https://example.com/demo";
    let good = reference(FILE, 2, "homepage: https://example.com/demo", url).to_string();
    let lying = reference(FILE, 1, url, url).to_string();
    let by_given_name = reference("PROJECT.yaml", 2, url, url).to_string();
    // (output, whether it is a clean JSON array the stream must judge by itself)
    let outputs: Vec<(Vec<u8>, bool)> = [
        (format!("[{good},{lying}, {by_given_name}, {good}]"), true),
        (format!(" \n[ {good} ,\n{lying} ] \n"), true),
        (
            format!("[{good}, 12, \"text\", null, [1, [2]], {{\"kind\": \"url\"}}]"),
            true,
        ),
        ("[]".to_string(), true),
        (format!("[{good}, 123, -4.5e6, true]"), true),
        (
            format!("[{}]", good.replace("demo\"", "d\\u0065mo\"")),
            true,
        ),
        ("  ".to_string(), false),
        (String::new(), false),
        (format!("[{good},]"), false),
        (format!("[, {good}]"), false),
        (format!("[{good} {good}]"), false),
        (format!("[{good}] trailing"), false),
        (format!("[{good}]\u{c}"), false),
        (format!("[{good}"), false),
        (good.clone(), false),
        (format!("[{good}, tru]"), false),
        (format!("[{good}, \"unterminated]"), false),
    ]
    .into_iter()
    .map(|(text, clean)| (text.into_bytes(), clean))
    .chain([(b"[\"ok\", \"bad \xff byte\"]".to_vec(), false)])
    .collect();
    for (output, clean) in &outputs {
        let whole = judged_whole(&set, output);
        let shown = String::from_utf8_lossy(output);
        // No cut, one byte at a time, every single cut, and many pairs of cuts.
        let mut ways: Vec<Vec<usize>> = vec![vec![], (1..=output.len()).collect()];
        ways.extend((0..=output.len()).map(|cut| vec![cut]));
        for a in (0..=output.len()).step_by(3) {
            for b in (a..=output.len()).step_by(5) {
                ways.push(vec![a, b]);
            }
        }
        for cuts in &ways {
            let (streamed, by_stream) = judged_streaming(&set, output, cuts);
            assert_eq!(streamed, whole, "{shown:?} cut at {cuts:?}");
            assert_eq!(by_stream, *clean, "{shown:?} cut at {cuts:?}");
        }
    }
    let output = format!("[{good},{lying}]");
    let (judged, _) = judged_streaming(&set, output.as_bytes(), &[output.len() - 1]);
    let (valid, rejected) = judged.unwrap();
    assert_eq!((valid.len(), rejected.len(), rejected[0].index), (1, 1, 1));
}

#[test]
fn the_extract_reader_streams_the_same_array_it_would_return() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    let b = dir.path().join("b.md");
    std::fs::write(&a, "see https://example.com/a and docs/a.md\n").unwrap();
    std::fs::write(&b, "mail jane@example.org\n").unwrap();
    let missing = dir.path().join("missing.md");
    let paths = [a, missing, b];
    let mut out = Vec::new();
    let problems = extract::write_files(&paths, &mut out).unwrap();
    let (references, expected_problems) = extract::extract_files(&paths);
    assert_eq!(problems, expected_problems);
    assert_eq!(
        serde_json::from_slice::<Vec<TypedReference>>(&out).unwrap(),
        references
    );
    assert_eq!(references.len(), 3);
    let mut empty = Vec::new();
    extract::write_files(&[dir.path().join("missing.md")], &mut empty).unwrap();
    assert_eq!(empty, b"[]\n");
}
