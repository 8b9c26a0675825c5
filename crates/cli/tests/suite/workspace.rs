//! Seed 002 through the real binary: each acceptance criterion, with a real sandboxed process trying.

use serde_json::Value;

use super::util::*;

/// Settings with three shared areas (`docs`; `fin`, domain finance; `hr`) and workspaces under `ws/`.
fn setup(d: &TestDir) -> String {
    for (area, file) in [("docs", "DOCS"), ("fin", "FIN"), ("hr", "HR")] {
        d.write(&format!("shared/{area}/file.txt"), &format!("{file}\n"));
    }
    let settings = d.path("settings.yaml").display().to_string();
    d.stockade([
        "config",
        "init",
        "--settings",
        &settings,
        &d.path("ws").display().to_string(),
    ])
    .run()
    .ok();
    let text = d.read("settings.yaml").unwrap().replace(
        "shared_workspaces: {}",
        &format!(
            "shared_workspaces:\n    docs: {}\n    fin: {{ path: {}, domain: finance }}\n    hr: {{ path: {}, domain: people }}",
            d.path("shared/docs").display(),
            d.path("shared/fin").display(),
            d.path("shared/hr").display()
        ),
    );
    d.write("settings.yaml", &text);
    settings
}

fn orch(d: &TestDir, settings: &str, args: &[&str]) -> Out {
    let mut all = vec!["orchestrator", "--settings", settings];
    all.extend_from_slice(args);
    d.stockade(all).run()
}

/// A script that tries every area and prints what it could do.
fn probe(d: &TestDir) -> String {
    format!(
        "pwd; for a in docs fin hr; do cat {root}/$a/file.txt 2>/dev/null || echo \"$a:NO-READ\"; \
         (echo x > {root}/$a/new.txt) 2>/dev/null && echo \"$a:WROTE\" || echo \"$a:NO-WRITE\"; done; \
         echo private > private.txt && echo PRIVATE-OK",
        root = d.path("shared").display()
    )
}

#[test]
fn add_bootstraps_a_private_workspace_with_zero_grants() {
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"])
        .ok()
        .stdout_has("no shared areas granted");
    assert!(d.path("ws/research/orchestrator.yaml").is_file());
    assert!(d.path("ws/research/work/runs").is_dir());
    let show = d
        .stockade([
            "--json",
            "orchestrator",
            "show",
            "research",
            "--settings",
            &settings,
        ])
        .run();
    let show: Value = serde_json::from_str(show.ok().stdout.trim()).unwrap();
    assert_eq!(
        show["private_workspace"],
        d.path("ws/research").display().to_string()
    );
    assert_eq!(show["shared_access"], serde_json::json!([]));
    orch(&d, &settings, &["add", "research"]).code(125);
    orch(&d, &settings, &["add", "../escape"]).code(125);
    d.stockade(["config", "validate", "--settings", &settings])
        .run()
        .ok()
        .stdout_has("valid");
}

#[test]
fn no_grants_sees_only_the_private_workspace_which_is_the_cwd() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"]).ok();
    let out = orch(
        &d,
        &settings,
        &["exec", "research", "--", "sh", "-c", &probe(&d)],
    );
    out.ok()
        .stdout_has(&format!("{}\n", d.path("ws/research").display()))
        .stdout_has("docs:NO-READ")
        .stdout_has("fin:NO-READ")
        .stdout_has("hr:NO-READ")
        .stdout_has("PRIVATE-OK")
        .stdout_lacks("WROTE");
    assert_eq!(
        d.read("ws/research/private.txt").as_deref(),
        Some("private\n")
    );
}

#[test]
fn grants_see_private_plus_exactly_the_allowlisted_areas() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"]).ok();
    orch(&d, &settings, &["grant", "research", "docs"]).ok();
    orch(&d, &settings, &["grant", "research", "fin", "--read-only"]).ok();
    orch(&d, &settings, &["grant", "research", "nope"]).code(125);
    let out = orch(
        &d,
        &settings,
        &["exec", "research", "--", "sh", "-c", &probe(&d)],
    );
    out.ok()
        .stdout_has("DOCS")
        .stdout_has("docs:WROTE")
        .stdout_has("FIN")
        .stdout_has("fin:NO-WRITE")
        .stdout_has("hr:NO-READ")
        .stdout_has("hr:NO-WRITE");
    // Revoking takes it away again.
    orch(&d, &settings, &["revoke", "research", "docs"]).ok();
    orch(
        &d,
        &settings,
        &["exec", "research", "--", "sh", "-c", &probe(&d)],
    )
    .ok()
    .stdout_has("docs:NO-READ");
    orch(&d, &settings, &["revoke", "research", "docs"]).code(125);
}

#[test]
fn misconfigured_settings_fail_validation_with_every_problem_and_nothing_starts() {
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"]).ok();
    std::os::unix::fs::symlink(d.path("shared/docs"), d.path("docs-link")).unwrap();
    let text = d.read("settings.yaml").unwrap().replace(
        "shared_workspaces:",
        &format!(
            "shared_workspaces:\n    relative: shared/docs\n    missing: {}\n    linked: {}",
            d.path("shared/nowhere").display(),
            d.path("docs-link").display()
        ),
    );
    d.write("settings.yaml", &text);
    let out = d
        .stockade(["config", "validate", "--settings", &settings])
        .run();
    out.code(1)
        .stdout_has("settings.shared_workspaces.relative: shared/docs is not absolute")
        .stdout_has("settings.shared_workspaces.missing:")
        .stdout_has("does not resolve")
        .stdout_has("settings.shared_workspaces.linked:")
        .stdout_has("is not canonical");
    let out = orch(
        &d,
        &settings,
        &["exec", "research", "--", "sh", "-c", "echo STARTED"],
    );
    out.code(1).stdout_lacks("STARTED");
    assert!(out.stderr.contains("nothing was started"), "{}", out.stderr);
    let audit = d.read("audit.jsonl").unwrap();
    assert!(
        audit.contains(r#""layer":"workspace""#) && audit.contains(r#""orchestrator":"research""#),
        "{audit}"
    );
}

#[test]
fn workflow_steps_use_their_workspace_mode_and_ungranted_areas_never_start() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"]).ok();
    orch(&d, &settings, &["grant", "research", "docs"]).ok();
    d.write(
        "ws/research/orchestrator.yaml",
        &format!(
            "workflows:\n  nightly:\n    steps:\n      - id: gather\n        run: [sh, -c, 'pwd > where.txt; cat {docs}/file.txt']\n        workspace_mode: run_workspace\n        shared: [docs]\n      - id: home\n        run: [sh, -c, pwd]\n",
            docs = d.path("shared/docs").display()
        ),
    );
    let out = d
        .stockade([
            "workflow",
            "run",
            "research",
            "nightly",
            "--run-id",
            "r1",
            "--settings",
            &settings,
        ])
        .run();
    out.ok()
        .stdout_has("DOCS")
        .stdout_has(&format!("{}\n", d.path("ws/research").display()));
    assert_eq!(
        d.read("ws/research/work/runs/r1/where.txt").unwrap().trim(),
        d.path("ws/research/work/runs/r1").display().to_string()
    );
    // A step naming an ungranted area: validation fails first, and nothing starts.
    d.write(
        "ws/research/orchestrator.yaml",
        "workflows:\n  greedy:\n    steps:\n      - id: payroll\n        run: [sh, -c, 'echo STARTED']\n        shared: [hr]\n",
    );
    let out = d
        .stockade([
            "workflow",
            "run",
            "research",
            "greedy",
            "--run-id",
            "r2",
            "--settings",
            &settings,
        ])
        .run();
    out.code(1).stdout_lacks("STARTED");
    assert!(
        out.stderr.contains("\"hr\" is not granted"),
        "{}",
        out.stderr
    );
    let audit = d.read("audit.jsonl").unwrap();
    assert!(audit.contains(r#""run":"r2""#), "{audit}");
    // agent_workspace is not a mode.
    d.write(
        "ws/research/orchestrator.yaml",
        "workflows:\n  bad:\n    steps:\n      - id: s\n        run: [sh, -c, 'echo STARTED']\n        workspace_mode: agent_workspace\n",
    );
    d.stockade(["config", "validate", "--settings", &settings])
        .run()
        .code(1)
        .stdout_has(
            "workflows.bad.steps[0].workspace_mode: \"agent_workspace\" is not a workspace mode",
        );
    d.stockade([
        "workflow",
        "run",
        "research",
        "bad",
        "--settings",
        &settings,
    ])
    .run()
    .code(1)
    .stdout_lacks("STARTED");
}

#[test]
fn channel_profiles_keep_domains_apart_and_grants_are_per_orchestrator_only() {
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "finbot"]).ok();
    orch(&d, &settings, &["grant", "finbot", "fin"]).ok();
    d.write(
        "ws/finbot/orchestrator.yaml",
        "workflows:\n  nightly:\n    steps: []\n",
    );
    let text = d.read("settings.yaml").unwrap()
        + "channel_profiles:\n  finance-desk: { orchestrator: finbot, workflow: nightly, domain: finance }\n";
    d.write("settings.yaml", &text);
    d.stockade(["config", "validate", "--settings", &settings])
        .run()
        .ok();
    // A grant outside the domain makes the profile invalid.
    orch(&d, &settings, &["grant", "finbot", "hr"]).ok();
    d.stockade(["config", "validate", "--settings", &settings])
        .run()
        .code(1)
        .stdout_has("channel_profiles.finance-desk")
        .stdout_has("\"hr\" (domain \"people\")");
    orch(&d, &settings, &["revoke", "finbot", "hr"]).ok();
    let text = d.read("settings.yaml").unwrap().replace(
        "  finbot:\n",
        "  finbot:\n    agents:\n      a1:\n        shared_access: [hr]\n",
    );
    d.write("settings.yaml", &text);
    d.stockade(["config", "validate", "--settings", &settings])
        .run()
        .code(1)
        .stdout_has("orchestrators.finbot.agents: shared access is granted per orchestrator, never per agent");
}

#[test]
fn overrides_and_concurrent_grants_lose_nothing() {
    let d = TestDir::new(Who::Root);
    let settings = setup(&d);
    orch(&d, &settings, &["add", "research"]).ok();
    let custom = d.path("elsewhere/research").display().to_string();
    orch(&d, &settings, &["set-workspace", "research", &custom]).ok();
    orch(&d, &settings, &["show", "research"])
        .ok()
        .stdout_has(&custom);
    orch(
        &d,
        &settings,
        &["set-workspace", "research", "relative/path"],
    )
    .code(125);
    orch(&d, &settings, &["unset-workspace", "research"]).ok();
    orch(&d, &settings, &["show", "research"])
        .ok()
        .stdout_has(&d.path("ws/research").display().to_string());
    // Eight orchestrators granted at once, from eight processes: every grant lands.
    for i in 0..8 {
        orch(&d, &settings, &["add", &format!("o{i}")]).ok();
    }
    let children: Vec<_> = (0..8)
        .flat_map(|i| ["docs", "fin"].map(move |area| (i, area)))
        .map(|(i, area)| {
            let mut cmd = std::process::Command::new(bin());
            cmd.args([
                "orchestrator",
                "grant",
                &format!("o{i}"),
                area,
                "--settings",
                &settings,
            ]);
            cmd.stderr(std::process::Stdio::null());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for i in 0..8 {
        let show = d
            .stockade([
                "--json",
                "orchestrator",
                "show",
                &format!("o{i}"),
                "--settings",
                &settings,
            ])
            .run();
        let show: Value = serde_json::from_str(show.ok().stdout.trim()).unwrap();
        assert_eq!(
            show["shared_access"].as_array().unwrap().len(),
            2,
            "o{i}: {show}"
        );
    }
    let list = orch(&d, &settings, &["list"]);
    assert_eq!(list.ok().stdout.lines().count(), 9);
    // The environment variable names the settings too.
    d.stockade(["orchestrator", "list"])
        .env("STOCKADE_SETTINGS", &settings)
        .run()
        .ok()
        .stdout_has("o7");
}
