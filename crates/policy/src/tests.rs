//! Unit tests of the scope algebra, table-driven.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use crate::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        Fixture { _tmp: tmp, root }
    }

    fn mkdir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.root.join(rel)).unwrap();
        self
    }

    fn vars(&self) -> Variables {
        let mut v = Variables::default();
        v.set_path("CWD", &self.root)
            .set_path("HOME", self.root.join("home"));
        v
    }

    fn policy(&self, toml: &str) -> ResolvedPolicy {
        PolicyBuilder::new(self.vars())
            .policy_text(toml, self.root.join("policy.toml"))
            .build()
            .unwrap()
    }

    fn level(&self, policy: &ResolvedPolicy, rel: &str) -> Level {
        let p = CanonicalPath::resolve(&self.root.join(rel)).unwrap();
        let r = policy.decide(&p, Access::Read);
        let w = policy.decide(&p, Access::Write);
        match (r.is_allow(), w.is_allow()) {
            (_, true) => Level::Write,
            (true, false) => Level::Read,
            (false, false) => Level::None,
        }
    }
}

macro_rules! levels {
    ($fx:expr, $policy:expr, { $($path:literal => $level:ident),* $(,)? }) => {
        $( assert_eq!($fx.level(&$policy, $path), Level::$level, "path {}", $path); )*
    };
}

#[test]
fn seed_003_worktree_layout() {
    let fx = Fixture::new();
    fx.mkdir("repo/.ittybitty/agents/a1/worktree/src")
        .mkdir("repo/.ittybitty/agents/a10/worktree")
        .mkdir("repo/.ittybitty/logs")
        .mkdir("repo/src");
    let policy = fx.policy(
        r#"
[profile.agent]
fs.write = ["repo/.ittybitty/agents/a1/worktree", "repo/.ittybitty", "repo/.ittybitty/agents/a1"]
fs.deny = ["repo/.ittybitty/agents"]
"#,
    );
    levels!(fx, policy, {
        "repo/.ittybitty/agents/a1/worktree/src/x.rs" => Write,
        "repo/.ittybitty/agents/a1/worktree/new/dir" => Write,
        "repo/.ittybitty/logs/a1.log" => Write,
        "repo/.ittybitty/agents/a10/worktree/x" => None,
        "repo/.ittybitty/agents/a2" => None,
        "repo/.ittybitty/agents" => None,
        "repo/src/main.rs" => None,
        "repo" => None,
        "other" => None,
    });
    // /tmp is simply not granted.
    let tmp = CanonicalPath::resolve(Path::new("/tmp/x")).unwrap();
    assert!(!policy.decide(&tmp, Access::Read).is_allow());
}

#[test]
fn deepest_wins_and_ties_go_to_strictest() {
    let fx = Fixture::new();
    fx.mkdir("a/b/c");
    let p = PolicyBuilder::new(fx.vars())
        .policy_text(
            "[profile.p]\nfs.read = [\"a\"]\nfs.write = [\"a/b\"]\nfs.deny = [\"a/b/c\"]\n",
            fx.root.join("p.toml"),
        )
        .build()
        .unwrap();
    levels!(fx, p, { "a/x" => Read, "a/b/x" => Write, "a/b/c/x" => None, "a/b/c" => None });
    let q = PolicyBuilder::new(fx.vars())
        .policy_text(
            "[profile.p]\nfs.write = [\"a/b\"]\n[profile.q]\nextends = \"p\"\nfs.read-only = [\"a/b\"]\n",
            fx.root.join("q.toml"),
        )
        .profile("q")
        .build()
        .unwrap();
    levels!(fx, q, { "a/b/x" => Read });
}

#[test]
fn globs_raise_and_caps_lower() {
    let fx = Fixture::new();
    fx.mkdir("src/deep/er").mkdir("app");
    let policy = fx.policy(
        r#"
[profile.p]
fs.read = ["src/**/*.ts"]
fs.write = ["app", "src/gen/*.ts"]
fs.read-only = ["app/*.lock"]
fs.deny = ["**/.env", "app/secret"]
"#,
    );
    levels!(fx, policy, {
        "src/a.ts" => Read,
        "src/deep/er/b.ts" => Read,
        "src/a.js" => None,
        "src/deep" => None,
        "src/gen/x.ts" => Write,
        "src/gen/sub/x.ts" => Read,
        "app/main.rs" => Write,
        "app/Cargo.lock" => Read,
        "app/sub/Cargo.lock" => Write,
        "app/.env" => None,
        "app/sub/.env" => None,
        "src/.env" => None,
        "app/secret/x" => None,
    });
}

#[test]
fn explicit_path_deny_blocks_glob_grants() {
    let fx = Fixture::new();
    fx.mkdir("d");
    let policy = fx.policy("[profile.p]\nfs.deny = [\"d\"]\nfs.read = [\"**/*.txt\"]\n");
    levels!(fx, policy, { "d/a.txt" => None, "a.txt" => Read });
}

/// A variable's value is literal wherever it is used: a project in `p[1]*{a,b}?` is that directory, both as
/// a path and inside a glob (relative globs are built on it too), and never matches its siblings (`p1x`).
#[test]
fn glob_characters_in_a_variable_are_literal() {
    let fx = Fixture::new();
    let project = fx.root.join("p[1]*{a,b}?\\");
    for d in ["p[1]*{a,b}?\\/src", "p1x/src", "pa/src"] {
        fx.mkdir(d);
    }
    let mut vars = fx.vars();
    vars.set_path("CWD", &project);
    let policy = PolicyBuilder::new(vars)
        .policy_text(
            "[profile.p]\nbase = \"${CWD}\"\nfs.write = [\"${CWD}\"]\n\
             fs.read-only = [\"src/*.rs\", \"${CWD}/**/*.toml\"]\n",
            fx.root.join("policy.toml"),
        )
        .build()
        .unwrap();
    levels!(fx, policy, {
        "p[1]*{a,b}?\\/src/new.txt" => Write,
        "p[1]*{a,b}?\\/src/main.rs" => Read,
        "p[1]*{a,b}?\\/src/Cargo.toml" => Read,
        "p1x/src/main.rs" => None,
        "pa/src/x" => None,
    });
}

#[test]
fn whole_component_matching() {
    let fx = Fixture::new();
    fx.mkdir("proj").mkdir("proj-evil").mkdir("a1").mkdir("a10");
    let policy = fx.policy("[profile.p]\nfs.write = [\"proj\", \"a1\"]\n");
    levels!(fx, policy, {
        "proj/x" => Write,
        "proj-evil/x" => None,
        "proj " => None,
        "a1/x" => Write,
        "a10/x" => None,
    });
}

#[test]
fn symlinks_are_judged_by_target() {
    let fx = Fixture::new();
    fx.mkdir("work").mkdir("secret");
    std::os::unix::fs::symlink(fx.root.join("secret"), fx.root.join("work/link")).unwrap();
    let policy = fx.policy("[profile.p]\nfs.write = [\"work\"]\n");
    levels!(fx, policy, { "work/link/x" => None, "work/link/../work/x" => Write, "work/../secret" => None });
}

#[test]
fn errors_name_file_line_and_fix() {
    let fx = Fixture::new();
    let build = |text: &str| {
        PolicyBuilder::new(fx.vars())
            .policy_text(text, fx.root.join("bad.toml"))
            .build()
            .unwrap_err()
            .to_string()
    };
    let e = build("[profile.p]\nfs.raed = [\"x\"]\n");
    assert!(e.contains("bad.toml:2") && e.contains("raed"), "{e}");
    let e = build("[profile.p]\nfs.write = [\"src\"]\nfs.deny = [\"src\"]\n");
    assert!(
        e.contains("bad.toml:3") && e.contains("fs.write") && e.contains("fix:"),
        "{e}"
    );
    let e = build("[profile.p]\nfs.read = [\"${NOPE}/x\"]\n");
    assert!(e.contains("unknown variable ${NOPE}"), "{e}");
    let e = build("[profile.default]\nextends = \"q\"\n[profile.q]\nextends = \"default\"\n");
    assert!(e.contains("extends itself"), "{e}");
    let e = build("[profile.p]\nextends = \"nope\"\n");
    assert!(e.contains("no profile named 'nope'"), "{e}");
    let e = build("[profile.p]\ntools.allow = [\"Bash\"]\ntools.deny = [\"Bash\"]\n");
    assert!(e.contains("both allowed and denied"), "{e}");
    let e = build("[profile.p]\nlimits.timeout = \"soon\"\n");
    assert!(e.contains("limits.timeout"), "{e}");
    let e = build("[profile.p]\nnet = \"some\"\n");
    assert!(e.contains("bad.toml:2"), "{e}");
    let e = build("[profile.p]\nfs.read = [\"a/../**\"]\n");
    assert!(e.contains("'..'"), "{e}");
}

#[test]
fn flag_grants_overridden_by_a_deny_are_refused() {
    let fx = Fixture::new();
    fx.mkdir("home/.ssh");
    let e = PolicyBuilder::new(fx.vars())
        .flag_scope(
            ScopeKind::Write,
            fx.root.join("home/.ssh").to_string_lossy(),
            "--rw",
        )
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no effect") && e.contains("~/.ssh"), "{e}");
}

/// Issue 30: the file a gateway reads its key from is denied whatever the profile grants, in the project
/// it makes writable and in the `$HOME` it makes readable, with a relative `env-file` taken from the
/// profile's base (the supervisor reads that same absolute path); a flag cannot lift the deny.
#[test]
fn a_gateways_key_files_are_denied_whatever_the_profile_grants() {
    let fx = Fixture::new();
    fx.mkdir("home/.config").mkdir("project/sub");
    let toml = r#"
[profile.p]
extends = "workspace-write"
base = "${CWD}/project"
fs.write = ["."]
[profile.p.gateway.api]
upstream = "https://api.example.com"
headers.x-api-key = { env = "K", env-file = "sub/keys[1].env" }
headers.authorization = { env = "T", env-file = "~/.config/keys.env", format = "Bearer {}" }
"#;
    let policy = fx.policy(toml);
    levels!(fx, policy, {
        "project/sub/keys[1].env" => None,
        "project/sub/keys1.env" => Write,
        "project/sub/other.env" => Write,
        "home/.config/keys.env" => None,
        "home/.config/other" => Read,
    });
    let files: Vec<_> = policy
        .gateways()
        .first()
        .unwrap()
        .headers
        .iter()
        .map(|h| h.env_file.clone().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            fx.root.join("home/.config/keys.env"),
            fx.root.join("project/sub/keys[1].env"),
        ]
    );
    let key = CanonicalPath::resolve(&fx.root.join("home/.config/keys.env")).unwrap();
    let explained = policy.explain(&key, Access::Read);
    let denial = explained.denial.unwrap();
    assert!(
        denial
            .reason
            .contains("implicit: the key file of gateway 'api' (header 'authorization')"),
        "{}",
        denial.reason
    );
    assert!(denial.fix.contains("nothing in a policy"), "{}", denial.fix);
    let e = PolicyBuilder::new(fx.vars())
        .policy_text(toml, fx.root.join("policy.toml"))
        .flag_scope(
            ScopeKind::Read,
            fx.root.join("home/.config/keys.env").to_string_lossy(),
            "--ro",
        )
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no effect") && e.contains("key file of gateway 'api'"),
        "{e}"
    );
}

#[test]
fn default_profile_protects_secrets_and_trusted_files() {
    let fx = Fixture::new();
    fx.mkdir("home/.ssh").mkdir(".git/hooks");
    let policy = PolicyBuilder::new(fx.vars()).build().unwrap();
    assert_eq!(policy.profile(), "workspace-write");
    levels!(fx, policy, {
        "note.txt" => Write,
        ".git/hooks/pre-commit" => Read,
        ".git/config" => Read,
        ".git/objects/x" => Write,
        ".claude/settings.json" => Read,
        "home/.ssh/id_rsa" => None,
        "home/.cargo/bin" => Read,
    });
    let shadow = CanonicalPath::resolve(Path::new("/etc/shadow")).unwrap();
    assert!(!policy.decide(&shadow, Access::Read).is_allow());
    let usr = CanonicalPath::resolve(Path::new("/usr/bin/env")).unwrap();
    assert_eq!(policy.decide(&usr, Access::Read).level(), Level::Read);
}

#[test]
fn denials_explain_rule_and_fix() {
    let fx = Fixture::new();
    fx.mkdir("home/.ssh");
    let policy = PolicyBuilder::new(fx.vars()).build().unwrap();
    let key = CanonicalPath::resolve(&fx.root.join("home/.ssh/id_rsa")).unwrap();
    let d = policy.decide(&key, Access::Read);
    let denial = policy.denial(&key, Access::Read, d).unwrap();
    assert_eq!(denial.rule.as_deref(), Some("fs.deny = \"~/.ssh\""));
    assert!(matches!(denial.source, Some(RuleSource::Builtin { .. })));
    let outside = CanonicalPath::resolve(Path::new("/srv/elsewhere")).unwrap();
    let d = policy.decide(&outside, Access::Write);
    let denial = policy.denial(&outside, Access::Write, d).unwrap();
    assert!(
        denial.reason.contains("default deny") && denial.fix.contains("--rw"),
        "{denial:?}"
    );
    let e = policy.explain(&key, Access::Read);
    assert!(!e.allowed && e.covering_paths.len() >= 2);

    // The rule's line, wherever in a list it stands.
    fx.mkdir("c");
    let policy = fx.policy("[profile.p]\n\nfs.read = [\"a\",\n  \"b\"]\nfs.deny = [\n\"c\"]\n");
    let c = CanonicalPath::resolve(&fx.root.join("c/x")).unwrap();
    let denial = policy
        .denial(&c, Access::Read, policy.decide(&c, Access::Read))
        .unwrap();
    assert!(
        matches!(denial.source, Some(RuleSource::File { line: 6, .. })),
        "{denial:?}"
    );
}

#[test]
fn tools_deny_wins_and_wildcards_match() {
    assert!(wildcard_match("mcp__*", "mcp__github__create_issue"));
    assert!(wildcard_match("*", ""));
    assert!(wildcard_match("a*b*c", "axxbyyc"));
    assert!(!wildcard_match("a*b*c", "axxbyy"));
    assert!(!wildcard_match("Read", "ReadX"));
    let fx = Fixture::new();
    let policy = PolicyBuilder::new(fx.vars())
        .profile("cross-project")
        .build()
        .unwrap();
    assert_eq!(
        policy.tools().decide("Read"),
        ToolDecision::Allow(Some("Read".into()))
    );
    assert_eq!(
        policy.tools().decide("mcp__x__y"),
        ToolDecision::Deny(Some("mcp__*".into()))
    );
    assert_eq!(policy.tools().decide("Task"), ToolDecision::Deny(None));
}

#[test]
fn schema_names_every_section() {
    let schema = policy_schema().to_string();
    for key in ["read-only", "extends", "on-unknowable", "limits", "pass"] {
        assert!(schema.contains(key), "{key}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// The naive reference: scan every scope, no index.
    fn reference(policy: &ResolvedPolicy, path: &Path, access: Access) -> bool {
        let mut best: Option<(usize, &Scope)> = None;
        for s in policy.scopes() {
            if let ScopeTarget::Path(t) = &s.target
                && path.starts_with(t.canonical.as_path())
            {
                let depth = t.canonical.as_path().components().count();
                let better = match best {
                    None => true,
                    Some((d, b)) => {
                        depth > d || (depth == d && s.kind.strictness() > b.kind.strictness())
                    }
                };
                if better {
                    best = Some((depth, s));
                }
            }
        }
        let kind = best.map(|(_, s)| s.kind);
        let mut level = kind.map(ScopeKind::level).unwrap_or(Level::None);
        let globs = |k: ScopeKind| {
            policy.scopes().iter().any(|s| {
                s.kind == k && matches!(&s.target, ScopeTarget::Glob(g) if g.is_match(path))
            })
        };
        if kind != Some(ScopeKind::Deny) {
            let ceiling = if kind == Some(ScopeKind::ReadOnly) {
                Level::Read
            } else {
                Level::Write
            };
            if globs(ScopeKind::Write) {
                level = level.max(ceiling);
            }
            if globs(ScopeKind::Read) {
                level = level.max(Level::Read);
            }
        }
        if globs(ScopeKind::Deny) {
            level = Level::None;
        }
        if globs(ScopeKind::ReadOnly) {
            level = level.min(Level::Read);
        }
        level.permits(access)
    }

    fn kind() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just("read"), Just("write"), Just("read-only"), Just("deny")]
    }

    fn rel_path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![Just("a"), Just("b"), Just("a1"), Just(".env"), Just("x.ts")],
            1..5,
        )
        .prop_map(|v| v.join("/"))
    }

    fn glob() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("**/.env".to_string()),
            Just("a/*.ts".to_string()),
            Just("**/*.ts".to_string()),
            Just("b/**".to_string())
        ]
    }

    proptest! {
        #[test]
        fn decide_equals_naive_reference(
            rules in prop::collection::vec((kind(), prop_oneof![rel_path(), glob()]), 0..8),
            queries in prop::collection::vec((rel_path(), any::<bool>()), 1..20),
        ) {
            let fx = Fixture::new();
            let mut text = String::from("[profile.p]\n");
            let mut seen = std::collections::HashMap::new();
            for (k, p) in &rules {
                // One profile may not list one path under two kinds (a validation error, tested above).
                if seen.get(p).is_some_and(|prev| prev != k) { continue; }
                seen.insert(p.clone(), *k);
                text.push_str(&format!("fs.{k} = [\"{p}\"]\n"));
            }
            let text = merge_keys(&text);
            let policy = fx.policy(&text);
            for (q, write) in queries {
                let p = CanonicalPath::resolve(&fx.root.join(&q)).unwrap();
                let access = if write { Access::Write } else { Access::Read };
                prop_assert_eq!(policy.decide(&p, access).is_allow(), reference(&policy, p.as_path(), access), "{} {:?}\n{}", q, access, text);
            }
        }

        #[test]
        fn canonical_resolution_is_idempotent(rel in "[a-z./]{0,24}") {
            let fx = Fixture::new();
            fx.mkdir("a/b");
            let once = CanonicalPath::resolve(&fx.root.join(&rel)).unwrap();
            let twice = CanonicalPath::resolve(once.as_path()).unwrap();
            prop_assert_eq!(once.as_path(), twice.as_path());
        }
    }

    /// TOML forbids repeating a key: gather `fs.K = [..]` lines per K.
    fn merge_keys(text: &str) -> String {
        let mut by_kind: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for line in text.lines().skip(1) {
            if let Some((k, v)) = line.split_once(" = [") {
                by_kind.entry(k).or_default().push(v.trim_end_matches(']'));
            }
        }
        let mut out = String::from("[profile.p]\n");
        for (k, vs) in by_kind {
            out.push_str(&format!("{k} = [{}]\n", vs.join(", ")));
        }
        out
    }
}

/// The lists the quarantine and orchestrator runs use are the built-in `system` and `secrets` profiles',
/// written twice (once as constants, once in the TOML whose line numbers `explain` shows): they must not
/// drift apart.
#[test]
fn system_lists_match_the_builtin_system_profile() {
    let file: crate::file::PolicyFile = toml::from_str(crate::BUILTIN_TOML).unwrap();
    let system = &file.profile.get("system").unwrap().fs;
    let secrets = &file.profile.get("secrets").unwrap().fs;
    let read: Vec<&str> = system.read.iter().map(|s| s.get_ref().as_str()).collect();
    for dir in crate::SYSTEM_READ_DIRS {
        assert!(
            read.contains(dir),
            "{dir} is not read by the system profile"
        );
    }
    let absolute_denies: Vec<&str> = secrets
        .deny
        .iter()
        .map(|s| s.get_ref().as_str())
        .filter(|s| s.starts_with('/'))
        .collect();
    assert_eq!(absolute_denies, crate::SYSTEM_SECRETS);
}

/// `runtime`: read for the programs the agent runs (`decide`, the kernel's view), refused to its own file
/// tools (`decide_for_tools`), with a reason that says so; a deeper grant inside wins for both; globs are
/// refused; `explain` names both layers' answers.
#[test]
fn runtime_is_for_programs_not_for_the_agents_file_tools() {
    let fx = Fixture::new();
    fx.mkdir("sys/lib").mkdir("sys/share/mine").mkdir("work");
    let policy = fx.policy(
        "[profile.p]\nfs.runtime = [\"sys\"]\nfs.read = [\"sys/share/mine\"]\nfs.write = [\"work\"]\n",
    );
    let lib = CanonicalPath::resolve(&fx.root.join("sys/lib/x.so")).unwrap();
    assert!(policy.decide(&lib, Access::Read).is_allow());
    assert!(!policy.decide(&lib, Access::Write).is_allow());
    let tools = policy.decide_for_tools(&lib, Access::Read);
    assert!(matches!(
        tools,
        Decision::Deny {
            cause: DenyCause::RuntimeOnly,
            ..
        }
    ));
    let denial = policy.denial(&lib, Access::Read, tools).unwrap();
    assert!(
        denial.reason.contains("runtime") && denial.fix.contains("--ro"),
        "{denial:?}"
    );
    let mine = CanonicalPath::resolve(&fx.root.join("sys/share/mine/f")).unwrap();
    assert!(policy.decide_for_tools(&mine, Access::Read).is_allow());
    let work = CanonicalPath::resolve(&fx.root.join("work/f")).unwrap();
    assert!(policy.decide_for_tools(&work, Access::Write).is_allow());
    let e = policy.explain(&lib, Access::Read);
    assert!(e.allowed, "{e:?}");
    assert!(
        e.enforcement
            .iter()
            .any(|n| n.contains("file tools") && n.contains("refused")),
        "{e:?}"
    );
    let err = PolicyBuilder::new(fx.vars())
        .policy_text(
            "[profile.p]\nfs.runtime = [\"sys/**\"]\n",
            fx.root.join("p.toml"),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("fs.runtime takes paths"), "{err}");
}

mod net {
    use super::*;
    use pretty_assertions::assert_eq;

    fn rules(allow: &[&str], deny: &[&str]) -> NetRules {
        NetRules {
            allow: allow.iter().map(|r| HostRule::parse(r).unwrap()).collect(),
            deny: deny.iter().map(|r| HostRule::parse(r).unwrap()).collect(),
        }
    }

    #[test]
    fn rules_parse_names_subdomains_addresses_and_ports() {
        for (text, shown) in [
            ("GitHub.com.", "github.com"),
            ("*.github.com", "*.github.com"),
            ("registry.npmjs.org:443", "registry.npmjs.org:443"),
            ("10.0.0.7", "10.0.0.7"),
            ("10.0.0.7:8080", "10.0.0.7:8080"),
            ("::1", "::1"),
            ("[::1]:8443", "[::1]:8443"),
            ("*.Example.COM:80", "*.example.com:80"),
        ] {
            assert_eq!(HostRule::parse(text).unwrap().to_string(), shown, "{text}");
        }
        for bad in [
            "",
            "*",
            "a.*.com",
            "exa mple.com",
            "x.com:0",
            "x.com:99999",
            "x.com:http",
            "[::1",
            "[::1]x",
            "[1.2.3.4]",
            "a..b",
            "ü.de",
        ] {
            let err = HostRule::parse(bad).unwrap_err().to_string();
            assert!(err.contains("net rule"), "{bad}: {err}");
        }
    }

    #[test]
    fn deny_wins_and_nothing_unlisted_passes() {
        let r = rules(
            &["github.com", "*.github.com", "npmjs.org:443", "10.0.0.7"],
            &["gist.github.com"],
        );
        let allowed = |h: &str, p: u16| r.decide(h, p).is_allow();
        assert!(allowed("github.com", 443));
        assert!(allowed("GITHUB.COM.", 22));
        assert!(allowed("api.github.com", 443));
        assert!(allowed("a.b.github.com", 443));
        assert!(!allowed("gist.github.com", 443), "deny wins");
        assert!(
            !allowed("evilgithub.com", 443),
            "a suffix is not a subdomain"
        );
        assert!(!allowed("github.com.evil.net", 443));
        assert!(allowed("npmjs.org", 443));
        assert!(!allowed("npmjs.org", 80), "the port is part of the rule");
        assert!(!allowed("example.com", 443));
        assert!(allowed("10.0.0.7", 5432));
        assert!(!allowed("10.0.0.8", 5432));
        let NetDecision::Deny { reason, rule } = r.decide("example.com", 443) else {
            panic!("allowed")
        };
        assert_eq!(rule, None);
        assert!(reason.contains("--net-allow example.com"), "{reason}");
        let apex = rules(&["*.github.com"], &[]);
        assert!(
            !apex.decide("github.com", 443).is_allow(),
            "*.x does not cover x"
        );
    }

    #[test]
    fn special_addresses_pass_only_when_named() {
        let r = rules(
            &["good.test", "named.test", "127.0.0.1:8080"],
            &["203.0.113.9"],
        );
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let check = |host, ip: &str, port| {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            r.decide_address(host, ip, port, special_address(ip))
                .is_allow()
        };
        assert!(!check("good.test", "127.0.0.1", 80), "loopback refused");
        assert!(
            check("named.test", "127.0.0.1", 8080),
            "named with its port"
        );
        assert!(!check("named.test", "127.0.0.1", 8081));
        assert!(
            !check("good.test", "::ffff:127.0.0.1", 80),
            "mapped loopback"
        );
        assert!(check("good.test", "::ffff:127.0.0.1", 8080));
        assert!(!check("good.test", "169.254.169.254", 80), "metadata");
        assert!(!check("good.test", "10.1.2.3", 443));
        assert!(!check("good.test", "172.20.0.1", 443));
        assert!(!check("good.test", "192.168.1.1", 443));
        assert!(
            !check("good.test", "100.100.100.200", 443),
            "shared address space"
        );
        assert!(!check("good.test", "fd00::1", 443));
        assert!(!check("good.test", "fe80::1", 443));
        assert!(!check("good.test", "0.0.0.0", 443));
        assert!(!check("good.test", "203.0.113.9", 443), "a denied address");
        assert!(check("good.test", "203.0.113.10", 443));
        assert!(check("good.test", "2606:4700::1", 443));
        assert_eq!(special_address(lo), Some(SpecialAddress::Loopback));
    }

    #[test]
    fn profiles_extend_allowlists_and_flags_add_to_them() {
        let f = Fixture::new();
        let text = "[profile.base]\nnet.allow = [\"a.test\"]\n\
                    [profile.more]\nextends = \"base\"\nnet.allow = [\"b.test\"]\nnet.deny = [\"x.b.test\"]\n\
                    [profile.closed]\nextends = \"more\"\nnet = \"none\"\n";
        let build = |profile: &str, allow: &[&str]| {
            let mut b = PolicyBuilder::new(f.vars());
            b.policy_text(text, f.root.join("p.toml")).profile(profile);
            for a in allow {
                b.net_allow(*a);
            }
            b.build()
        };
        let more = build("more", &[]).unwrap();
        let rules = more.net().rules().unwrap();
        assert_eq!(rules.allow.len(), 2);
        assert!(rules.decide("a.test", 443).is_allow());
        assert!(!rules.decide("x.b.test", 443).is_allow());
        assert_eq!(build("closed", &[]).unwrap().net(), &NetAccess::None);
        let opened = build("closed", &["c.test"]).unwrap();
        let rules = opened.net().rules().unwrap();
        assert!(rules.decide("c.test", 443).is_allow());
        assert!(
            !rules.decide("a.test", 443).is_allow(),
            "`none` dropped the inherited list"
        );
        let err = PolicyBuilder::new(f.vars())
            .policy_text("[profile.p]\nnet.alow = [\"a\"]\n", f.root.join("p.toml"))
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("alow"), "{err}");
        let err = PolicyBuilder::new(f.vars())
            .policy_text("[profile.p]\nnet = \"some\"\n", f.root.join("p.toml"))
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"none\", \"all\""), "{err}");
        let mut both = PolicyBuilder::new(f.vars());
        both.net(NetMode::All).net_allow("a.test");
        assert!(
            both.build()
                .unwrap_err()
                .to_string()
                .contains("--net-allow")
        );
    }
}

/// `cache`: writable for the programs the agent runs (`decide`; the kernel gives them a private overlay),
/// readable only for its own file tools (`decide_for_tools`, which act on the host's copy), with a reason
/// that says so; a stricter rule at the same depth or deeper wins; globs are refused.
#[test]
fn a_cache_is_written_by_programs_and_only_read_by_the_agents_file_tools() {
    let fx = Fixture::new();
    fx.mkdir("home/.npm/_cacache").mkdir("home/.npm/secret");
    let policy = fx.policy(
        "[profile.p]\nfs.read = [\"home\"]\nfs.cache = [\"home/.npm\"]\nfs.deny = [\"home/.npm/secret\"]\n",
    );
    let entry = CanonicalPath::resolve(&fx.root.join("home/.npm/_cacache/x")).unwrap();
    assert!(policy.decide(&entry, Access::Write).is_allow());
    assert!(policy.decide_for_tools(&entry, Access::Read).is_allow());
    let tools = policy.decide_for_tools(&entry, Access::Write);
    assert!(matches!(
        tools,
        Decision::Deny {
            cause: DenyCause::PrivateCache,
            level: Level::Read,
            ..
        }
    ));
    let denial = policy.denial(&entry, Access::Write, tools).unwrap();
    assert!(
        denial.reason.contains("package cache") && denial.fix.contains("--rw"),
        "{denial:?}"
    );
    let secret = CanonicalPath::resolve(&fx.root.join("home/.npm/secret/t")).unwrap();
    assert!(!policy.decide(&secret, Access::Read).is_allow());
    let e = policy.explain(&entry, Access::Write);
    assert!(
        e.enforcement.iter().any(|n| n.contains("private overlay")),
        "{e:?}"
    );
    // A profile extending one with the cache may take it back with a read at the same depth.
    let taken = PolicyBuilder::new(fx.vars())
        .policy_text(
            "[profile.base]\nfs.cache = [\"home/.npm\"]\n[profile.p]\nextends = \"base\"\nfs.read = [\"home/.npm\"]\n",
            fx.root.join("p.toml"),
        )
        .profile("p")
        .build()
        .unwrap();
    assert!(!taken.decide(&entry, Access::Write).is_allow());
    let err = PolicyBuilder::new(fx.vars())
        .policy_text(
            "[profile.p]\nfs.cache = [\"home/*\"]\n",
            fx.root.join("p.toml"),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("fs.cache takes paths"), "{err}");
}

/// A built-in profile resolved from the trimmed text it is parsed from (`builtin_text_for`: its own
/// sections and those it extends, every other line empty) is the same as from the whole text, given as a
/// file: the same rules, written on the same lines, and the same environment, network and tool rules.
#[test]
fn trimmed_builtin_text_resolves_as_the_whole_text() {
    let fx = Fixture::new();
    let file = fx.root.join("policy.toml");
    // The rules, but the one a policy file adds for itself (it denies itself to the agent).
    let lines = |policy: &ResolvedPolicy| -> Vec<(ScopeKind, String, String, usize)> {
        policy
            .scopes()
            .iter()
            .filter(|s| Path::new(&s.written) != file)
            .map(|s| match &s.source {
                RuleSource::Builtin { profile, line } | RuleSource::File { profile, line, .. } => {
                    (s.kind, s.written.clone(), profile.clone(), *line)
                }
                other @ (RuleSource::Flag { .. } | RuleSource::Implicit { .. }) => {
                    (s.kind, s.written.clone(), format!("{other:?}"), 0)
                }
            })
            .collect()
    };
    fx.mkdir(".ittybitty/agents/a1").mkdir(".git/worktrees/a1");
    let mut vars = fx.vars();
    vars.set_path("REPO_ROOT", &fx.root)
        .set_path("WORKTREE", fx.root.join(".ittybitty/agents/a1"))
        .set_path("WORKTREE_GITDIR", fx.root.join(".git/worktrees/a1"))
        .set("AGENT_ID", "a1");
    for profile in crate::BUILTIN_PROFILES {
        let trimmed = PolicyBuilder::new(vars.clone()).profile(*profile).build();
        let whole = PolicyBuilder::new(vars.clone())
            .policy_text(crate::BUILTIN_TOML, &file)
            .profile(*profile)
            .build();
        let (trimmed, whole) = match (trimmed, whole) {
            (Ok(t), Ok(w)) => (t, w),
            (t, w) => panic!("{profile}: {t:?} against {w:?}"),
        };
        assert_eq!(lines(&trimmed), lines(&whole), "{profile}");
        assert_eq!(
            format!(
                "{:?}",
                (
                    trimmed.env(),
                    trimmed.net(),
                    trimmed.tools(),
                    trimmed.limits()
                )
            ),
            format!(
                "{:?}",
                (whole.env(), whole.net(), whole.tools(), whole.limits())
            ),
            "{profile}"
        );
        assert!(
            crate::builtin::builtin_text_for(profile)
                .is_some_and(|t| t.lines().count() == crate::BUILTIN_TOML.lines().count()
                    && t.len() < crate::BUILTIN_TOML.len()),
            "{profile}"
        );
    }
    assert!(crate::builtin::builtin_text_for("no-such-profile").is_none());
}

/// A user profile extending its own name extends the built-in of that name, which is parsed trimmed to
/// its chain like any other: every built-in rule comes with its line in the whole built-in text.
#[test]
fn a_profile_extending_its_own_name_gets_the_builtin_of_that_name() {
    let fx = Fixture::new();
    let builtin_rules = |policy: &ResolvedPolicy| -> Vec<(ScopeKind, String, String, usize)> {
        policy
            .scopes()
            .iter()
            .filter_map(|s| match &s.source {
                RuleSource::Builtin { profile, line } => {
                    Some((s.kind, s.written.clone(), profile.clone(), *line))
                }
                RuleSource::File { .. } | RuleSource::Flag { .. } | RuleSource::Implicit { .. } => {
                    None
                }
            })
            .collect()
    };
    let builtin = PolicyBuilder::new(fx.vars())
        .profile("workspace-write")
        .build()
        .unwrap();
    let extended = fx.policy(
        "[profile.workspace-write]\nextends = \"workspace-write\"\nfs.read = [\"notes\"]\n",
    );
    assert!(!builtin_rules(&builtin).is_empty());
    assert_eq!(builtin_rules(&extended), builtin_rules(&builtin));
    assert!(
        extended
            .scopes()
            .iter()
            .any(|s| s.written == "notes" && matches!(s.source, RuleSource::File { .. })),
        "the file's own rule is there too"
    );
}
