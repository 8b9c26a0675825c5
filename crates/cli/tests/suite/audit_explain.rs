//! `stockade explain`, `stockade audit`, `stockade schema`.

use super::util::*;

#[test]
fn explain_names_the_deciding_rule_and_the_layers() {
    let d = TestDir::new(Who::Root);
    d.mkdir("work/src");
    let out = d.stockade(["explain", "--write", "src/app.ts"]).run();
    out.ok()
        .stdout_has("ALLOW write")
        .stdout_has("fs.write = \"${CWD}\"")
        .stdout_has("kernel (stockade run)")
        .stdout_has("does not exist yet");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let out = d
        .stockade(["explain", "--read", &format!("{home}/.ssh/id_rsa")])
        .run();
    out.code(1)
        .stdout_has("DENY read")
        .stdout_has("fs.deny = \"~/.ssh\"")
        .stdout_has("fix:");
    d.write(
        "agent.toml",
        "[profile.agent]\nfs.read = [\"work\"]\n\nfs.deny = [\"work/private\"]\n",
    );
    let policy = d.path("agent.toml");
    let out = d
        .stockade([
            "--json",
            "explain",
            "--policy",
            policy.to_str().unwrap(),
            "--read",
            "private/x",
        ])
        .run();
    out.code(1);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["allowed"], false);
    assert!(
        v["deciding_rule"]
            .as_str()
            .unwrap()
            .contains("agent.toml:4"),
        "{v}"
    );
}

#[test]
fn refusals_are_audited_and_filtered() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.stockade(["run", "--agent", "a7", "--deny", "/usr/bin/ls", "--", "ls"])
        .run()
        .code(126)
        .stderr_has("fs.deny");
    let out = d.stockade(["--json", "audit", "--since", "1h"]).run();
    out.ok();
    let line = out.stdout.lines().next().unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["layer"], "kernel");
    assert_eq!(v["agent"], "a7");
    assert!(v["reason"].as_str().unwrap().contains("/usr/bin/ls"));
    d.stockade(["audit", "--agent", "a7"])
        .run()
        .ok()
        .stdout_has("a7");
    d.stockade(["--json", "audit", "--agent", "other"])
        .run()
        .ok();
    assert!(
        d.stockade(["--json", "audit", "--agent", "other"])
            .run()
            .stdout
            .is_empty()
    );
    d.stockade(["audit", "--layer", "bogus"])
        .run()
        .code(125)
        .stderr_has("unknown layer");
}

#[test]
fn schema_is_json_for_editors() {
    let d = TestDir::new(Who::Root);
    let out = d.stockade(["schema", "policy"]).run();
    out.ok();
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["title"], "stockade policy");
    d.stockade(["profile", "show"])
        .run()
        .ok()
        .stdout_has("[profile.workspace-write]");
}
