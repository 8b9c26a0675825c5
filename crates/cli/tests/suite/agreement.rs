//! One decision across all layers (issue #7): for random policies over a small tree (paths, globs, the
//! `read`, `write`, `read-only`, `deny` and `cache` scope kinds, nested and overlapping) and paths
//! (existing, missing, through relative and absolute symlinks, with `..`), `explain`'s decision, the hook's
//! verdict for a tool call, the file tools' success or refusal, and (for a sample) what a process under the
//! sandbox can do with `open()` must agree. The agent's own tools are held to `decide_for_tools` (a cache
//! is read-only to them), programs to `decide`.
//!
//! Documented differences (README, "Where the layers differ"), and only these, are allowed:
//! - the file tools cannot judge a *read* of a missing path (they report not-found whatever the policy);
//! - the kernel walks the path as written, so a path that passes through a directory the agent may not read
//!   (`a/up/k.rs` where `a` is denied and `a/up` links to an allowed `b/sub`) is refused by the kernel even
//!   though its target is allowed (stricter; the others judge the target);
//! - a directory a `read-only` or `deny` glob matches is bound read-only or masked, so a new entry in it is
//!   refused where the glob leaves the entry writable (stricter; counted and printed, not failed);
//! - a cache's file in such a directory is bound read-only (stricter; a writable bind would be the host's).
//!
//! A write into a cache must never reach the host: every run writes a probe file into each cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use stockade_fs::{ReadOptions, Root, RootOptions};
use stockade_hook::{HookInput, Verdict};
use stockade_policy::{
    Access, CanonicalPath, Level, PolicyBuilder, ResolvedPolicy, ScopeKind, ScopeTarget, Variables,
};

use super::util::*;

/// Targets a random scope may name (relative to the root), and globs.
const TARGETS: &[&str] = &[
    "a",
    "a/c",
    "b",
    "b/sub",
    "a/d/h.txt",
    "a/c/.env",
    "**/.env",
    "**/*.rs",
    "a/**/*.txt",
    "b/*",
    // Issue 15's shapes: globs beside deeper scopes, a rule spelled through a symlink and `..`, names
    // starting with `-`, non-ASCII names, missing targets.
    "*/*",
    "*",
    "-y/src/.cache",
    "link_b/../a/c/f.txt",
    "-y",
    "-y/src/*.rs",
    "secrets",
    "a/c/../d",
];
const KINDS: &[&str] = &["read", "write", "read-only", "deny", "cache"];
/// The targets a `cache` scope may take: existing directories (a cache is a directory, and a missing one
/// would be created at start, changing the tree the next cases share). Elsewhere the scope is dropped.
const CACHE_TARGETS: &[&str] = &["a", "a/c", "b", "b/sub", "-y"];
/// Paths asked about: (relative path, is a directory).
const PATHS: &[(&str, bool)] = &[
    ("a", true),
    ("a/c", true),
    ("a/c/f.txt", false),
    ("a/c/g.rs", false),
    ("a/c/.env", false),
    ("a/d/h.txt", false),
    ("b", true),
    ("b/e.txt", false),
    ("b/.env", false),
    ("b/sub/k.rs", false),
    ("link_b/e.txt", false),
    ("a/up/k.rs", false),
    ("abs_c/f.txt", false),
    ("a/c/../d/h.txt", false),
    ("a/missing.txt", false),
    ("b/sub/new.rs", false),
    ("link_b/new.txt", false),
    ("-y/src", true),
    ("-y/src/ü.rs", false),
    ("-y/src/ab", true),
    ("-y/src/new.rs", false),
    ("secrets", false),
    ("new-top.txt", false),
];

fn tree(root: &Path) {
    for (file, text) in [
        ("a/c/f.txt", "f"),
        ("a/c/g.rs", "g"),
        ("a/c/.env", "env"),
        ("a/d/h.txt", "h"),
        ("b/e.txt", "e"),
        ("b/.env", "env"),
        ("b/sub/k.rs", "k"),
        ("-y/src/ü.rs", "u"),
        ("-y/src/ab/x.txt", "x"),
    ] {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::os::unix::fs::symlink("b", root.join("link_b")).unwrap();
    std::os::unix::fs::symlink("../b/sub", root.join("a/up")).unwrap();
    std::os::unix::fs::symlink(root.join("a/c"), root.join("abs_c")).unwrap();
}

/// A random policy: the root granted read or write, plus up to six scopes on distinct targets.
fn policy_text(root_write: bool, scopes: &[(usize, usize)]) -> String {
    let mut lists: [Vec<String>; 5] = Default::default();
    lists[usize::from(!root_write)].push("\"${CWD}\"".to_string());
    let mut used = Vec::new();
    for &(target, kind) in scopes {
        if used.contains(&target)
            || (KINDS[kind] == "cache" && !CACHE_TARGETS.contains(&TARGETS[target]))
        {
            continue;
        }
        used.push(target);
        let written = TARGETS[target];
        let written = if written.starts_with("**") {
            format!("\"${{CWD}}/{written}\"")
        } else {
            format!("\"{written}\"")
        };
        lists[kind].push(written);
    }
    let mut text = "[profile.p]\nextends = \"system\"\nbase = \"${CWD}\"\n".to_string();
    for (kind, list) in KINDS.iter().zip(&lists) {
        if !list.is_empty() {
            text.push_str(&format!("fs.{kind} = [{}]\n", list.join(", ")));
        }
    }
    text
}

fn builder(root: &Path, home: &Path, text: &str) -> PolicyBuilder {
    let mut vars = Variables::default();
    vars.set_path("CWD", root);
    vars.set_path("HOME", home);
    vars.set_path("TEMP_DIR", "/stockade-tmp/agreement");
    let mut b = PolicyBuilder::new(vars);
    b.policy_text(text.to_string(), root.join("policy.toml"));
    b
}

fn hook_allows(
    policy: &ResolvedPolicy,
    root: &Path,
    rel: &str,
    is_dir: bool,
    access: Access,
) -> bool {
    let path = root.join(rel).display().to_string();
    let (tool, input) = match (access, is_dir) {
        (Access::Read, true) => ("LS", serde_json::json!({ "path": path })),
        (Access::Read, false) => ("Read", serde_json::json!({ "file_path": path })),
        (Access::Write, _) => (
            "Write",
            serde_json::json!({ "file_path": path, "content": "x" }),
        ),
    };
    let input: HookInput = serde_json::from_value(serde_json::json!({
        "cwd": root.display().to_string(), "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": input
    }))
    .unwrap();
    matches!(
        stockade_hook::judge(policy, &input).verdict,
        Verdict::Allow { .. }
    )
}

/// `Some(allowed)` from the file tools, `None` where they cannot judge (read of a missing path).
fn fs_allows(root: &Root, rel: &str, is_dir: bool, access: Access) -> Option<bool> {
    let outcome = match (access, is_dir) {
        (Access::Read, true) => root.list_directory(rel, 100, false).map(|_| ()),
        (Access::Read, false) => root.read_file(rel, ReadOptions::default()).map(|_| ()),
        (Access::Write, true) => return None,
        (Access::Write, false) => {
            let existed = root.path().join(rel).exists();
            let result = match std::fs::read_to_string(root.path().join(rel)) {
                Ok(text) => root.write_file(rel, &text),
                Err(_) => root.write_file(rel, "new"),
            };
            if result.is_ok() && !existed {
                std::fs::remove_file(root.path().join(rel)).unwrap();
            }
            result.map(|_| ())
        }
    };
    match outcome {
        Ok(()) => Some(true),
        Err(e) if e.is_refusal() => Some(false),
        Err(e) if e.code() == "not-found" && access == Access::Read => None,
        Err(e) => panic!("file tools failed for another reason on {rel}: {e}"),
    }
}

#[test]
fn explain_hook_and_file_tools_agree_on_random_policies() {
    let d = TestDir::new(Who::Root);
    let root = d.path("work/tree");
    tree(&root);
    let root = root.canonicalize().unwrap();
    let home = d.path("home");
    let checks = std::sync::atomic::AtomicUsize::new(0);
    let cases: u32 = std::env::var("STOCKADE_AGREEMENT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        any::<bool>(),
        prop::collection::vec((0..TARGETS.len(), 0..KINDS.len()), 0..6),
    );
    runner
        .run(&strategy, |(root_write, scopes)| {
            let text = policy_text(root_write, &scopes);
            let policy = builder(&root, &home, &text).build().unwrap();
            let files = Root::open(
                &root,
                RootOptions {
                    policy: Some(builder(&root, &home, &text)),
                    ..RootOptions::default()
                },
            )
            .unwrap();
            for &(rel, is_dir) in PATHS {
                for access in [Access::Read, Access::Write] {
                    let canonical = CanonicalPath::resolve(&root.join(rel)).unwrap();
                    // The agent's own tools: a cache is readable only to them (they act on the host).
                    let explain = policy.decide_for_tools(&canonical, access).is_allow();
                    let hook = hook_allows(&policy, &root, rel, is_dir, access);
                    prop_assert_eq!(explain, hook, "hook: {} {} under\n{}", access, rel, text);
                    if let Some(fs) = fs_allows(&files, rel, is_dir, access) {
                        prop_assert_eq!(
                            explain,
                            fs,
                            "file tools: {} {} under\n{}",
                            access,
                            rel,
                            text
                        );
                    }
                    checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "agreement: {cases} random policies, {} (path, access) checks across explain, hook and file tools",
        checks.into_inner()
    );
}

/// The kernel's answer for every path of one policy, from one sandboxed shell, and whether each probe (a
/// new file in a cache) could be written.
fn kernel_answers(
    d: &TestDir,
    root: &Path,
    text: &str,
    probes: &[PathBuf],
) -> (Vec<(bool, bool)>, Vec<bool>) {
    let mut script = String::new();
    for &(rel, is_dir) in PATHS {
        let path = root.join(rel).display().to_string();
        let read = if is_dir {
            format!("ls '{path}'")
        } else {
            format!("cat '{path}'")
        };
        let write = if is_dir {
            "false".to_string()
        } else if Path::new(&path).exists() {
            format!("true >> '{path}'")
        } else {
            format!("true > '{path}' && rm -f '{path}'")
        };
        script.push_str(&format!(
            // Subshells: a failed redirection must not end the script (POSIX sh exits on some).
            "( {read} ) >/dev/null 2>&1 && printf 1 || printf 0; ( {write} ) >/dev/null 2>&1 && echo 1 || echo 0\n"
        ));
    }
    for probe in probes {
        script.push_str(&format!(
            "( printf probe > '{}' ) >/dev/null 2>&1 && echo P1 || echo P0\n",
            probe.display()
        ));
    }
    d.write("agreement.toml", text);
    let policy = d.path("agreement.toml").display().to_string();
    let out = d
        .stockade([
            "run",
            "--policy",
            &policy,
            "--project",
            &root.display().to_string(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("HOME", &d.path("home").display().to_string())
        .run();
    assert_eq!(out.code, 0, "policy:\n{text}\n{out:?}");
    let (probed, answers): (Vec<&str>, Vec<&str>) =
        out.stdout.lines().partition(|l| l.starts_with('P'));
    (
        answers
            .iter()
            .map(|l| (l.starts_with('1'), l.ends_with('1')))
            .collect(),
        probed.iter().map(|l| *l == "P1").collect(),
    )
}

#[test]
fn the_kernel_agrees_with_explain_except_where_documented() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let root = d.path("work/tree");
    tree(&root);
    let root: PathBuf = root.canonicalize().unwrap();
    let home = d.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let cases: u32 = std::env::var("STOCKADE_AGREEMENT_KERNEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        any::<bool>(),
        prop::collection::vec((0..TARGETS.len(), 0..KINDS.len()), 0..6),
    );
    let checks = std::sync::atomic::AtomicUsize::new(0);
    let stricter = std::sync::Mutex::new(Vec::new());
    runner
        .run(&strategy, |(root_write, scopes)| {
            // The policy file sits beside the tree; its own path is denied to the agent, nothing else.
            let text = policy_text(root_write, &scopes).replace("base = \"${CWD}\"\n", "");
            let text = text.replace("[profile.p]\n", "[profile.p]\nbase = \"${CWD}\"\n");
            let policy = Arc::new(builder(&root, &home, &text).build().unwrap());
            // Whether a cache scope is what lets programs write `path`.
            let cache_writes = |path: &CanonicalPath| {
                let decision = policy.decide(path, Access::Write);
                decision.is_allow()
                    && decision
                        .rule()
                        .and_then(|r| policy.scope(r))
                        .is_some_and(|s| s.kind == ScopeKind::Cache)
            };
            // A new file in each cache the policy names: the program may write it (into the run's
            // private overlay), and the host never sees it.
            let probes: Vec<PathBuf> = policy
                .scopes()
                .iter()
                .filter_map(|s| match (&s.kind, &s.target) {
                    (ScopeKind::Cache, ScopeTarget::Path(t))
                        if t.canonical.as_path().starts_with(&root) =>
                    {
                        Some(t.canonical.as_path().join(".agreement-probe"))
                    }
                    _ => None,
                })
                .collect();
            let (answers, probed) = kernel_answers(&d, &root, &text, &probes);
            prop_assert_eq!(answers.len(), PATHS.len());
            prop_assert_eq!(probed.len(), probes.len());
            for (probe, written) in probes.iter().zip(probed) {
                // Removed before failing: the tree is shared, and a probe left behind would make every
                // smaller policy proptest tries while shrinking fail too, hiding the one that leaked.
                let leaked = probe.exists();
                if leaked {
                    let _ = std::fs::remove_file(probe);
                }
                prop_assert!(
                    !leaked,
                    "a write into a cache reached the host: {} under\n{}",
                    probe.display(),
                    text
                );
                let canonical = CanonicalPath::resolve(probe).unwrap();
                let by_cache = cache_writes(&canonical);
                // As for any creation: the kernel may be stricter under a directory a glob caps.
                let parent = CanonicalPath::resolve(probe.parent().unwrap()).unwrap();
                let parent_capped = policy.decide(&parent, Access::Write).level() < Level::Write;
                if by_cache && parent_capped && !written {
                    stricter.lock().unwrap().push(format!(
                        "{} under {}",
                        probe.display(),
                        text.replace('\n', " ")
                    ));
                } else if by_cache {
                    prop_assert!(
                        written,
                        "the kernel refused a new file in a cache: {} under\n{}",
                        probe.display(),
                        text
                    );
                }
            }
            for (&(rel, is_dir), (read, write)) in PATHS.iter().zip(answers) {
                let canonical = CanonicalPath::resolve(&root.join(rel)).unwrap();
                let exists = canonical.exists();
                let explain_read = policy.decide(&canonical, Access::Read).is_allow();
                let explain_write = policy.decide(&canonical, Access::Write).is_allow();
                // Directories the kernel walks through on the way, as written.
                let components: Vec<&str> = rel.split('/').collect();
                let through_unreadable = (1..components.len()).any(|n| {
                    let prefix = root.join(components[..n].join("/"));
                    let canonical = CanonicalPath::resolve(&prefix).unwrap();
                    !policy.decide(&canonical, Access::Read).is_allow()
                });
                let agrees = |kernel: bool, explain: bool| {
                    kernel == explain || (!kernel && through_unreadable)
                };
                if exists {
                    prop_assert!(
                        agrees(read, explain_read),
                        "kernel read {} = {} under\n{}",
                        rel,
                        read,
                        text
                    );
                }
                // A file whose write a cache decides, in a directory a glob caps: bound read-only, since
                // a writable bind would be the host's file (stricter; documented).
                let cache_file_capped =
                    !is_dir && exists && !write && explain_write && cache_writes(&canonical);
                if cache_file_capped {
                    stricter
                        .lock()
                        .unwrap()
                        .push(format!("write {rel} under {}", text.replace('\n', " ")));
                } else if !is_dir && exists {
                    prop_assert!(
                        agrees(write, explain_write),
                        "kernel write {} = {} under\n{}",
                        rel,
                        write,
                        text
                    );
                }
                if !is_dir && !exists && write {
                    // Creating: the mediator checks every name the kernel would otherwise create where
                    // a name-based rule applies, so the kernel never creates what explain refuses.
                    prop_assert!(explain_write, "kernel created {} under\n{}", rel, text);
                }
                if !is_dir && !exists && !write && explain_write && !through_unreadable {
                    stricter
                        .lock()
                        .unwrap()
                        .push(format!("{rel} under {}", text.replace('\n', " ")));
                }
                // One (path, access) check for reading what exists, one for writing or creating a file.
                let made = usize::from(exists) + usize::from(!is_dir);
                checks.fetch_add(made, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "agreement with the kernel: {cases} random policies, {} (path, access) checks",
        checks.into_inner()
    );
    // Where the kernel is stricter than explain on a creation (a directory it cannot make writable).
    let stricter = stricter.into_inner().unwrap_or_default();
    eprintln!(
        "creations the kernel refused and explain allows: {}",
        stricter.len()
    );
    for s in stricter.iter().take(5) {
        eprintln!("  {s}");
    }
}
