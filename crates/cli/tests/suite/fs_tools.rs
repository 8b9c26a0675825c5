//! `stockade fs ...` and `stockade mcp` through the real binary: every tool, the seed's context mode, the
//! refusals with their exit codes and audit records, and a real MCP client (rmcp) over stdio.

use std::os::unix::fs::symlink;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::util::*;

/// `work/` as a small repository, with a secret next to it and a link out.
fn repo() -> TestDir {
    let d = TestDir::new(Who::Root);
    d.write("work/src/lib.rs", "fn main() {}\nfn helper() {}\n")
        .write("work/src/app.ts", "export const main = 1;\n")
        .write("work/.env", "TOKEN=abc\n")
        .write("work/notes.md", "one\ntwo\nthree\nfour\n")
        .write("secret.txt", "outside secret\n")
        .write("work-evil/f.txt", "outside secret\n");
    symlink(d.path("secret.txt"), d.path("work/link-out")).unwrap();
    d
}

fn root_flag(d: &TestDir) -> String {
    d.work().display().to_string()
}

#[test]
fn fs_cli_reads_lists_finds_and_greps_inside_the_root() {
    let d = repo();
    let root = root_flag(&d);
    d.stockade(["fs", "read", "--root", &root, "notes.md", "--lines", "2:3"])
        .run()
        .ok()
        .stdout_has("two\nthree\n")
        .stdout_lacks("four");
    d.stockade([
        "fs", "grep", "--root", &root, "fn main", "--glob", "**/*.rs",
    ])
    .run()
    .ok()
    .stdout_has("src/lib.rs:1:fn main() {}")
    .stdout_lacks("app.ts");
    d.stockade(["fs", "grep", "--root", &root, "no such text"])
        .run()
        .code(1);
    d.stockade(["fs", "find", "--root", &root, "*.ts"])
        .run()
        .ok()
        .stdout_has("src/app.ts");
    d.stockade(["fs", "list", "--root", &root])
        .run()
        .ok()
        .stdout_has("src/")
        .stdout_has("link-out@");
    d.stockade(["fs", "tree", "--root", &root])
        .run()
        .ok()
        .stdout_has("lib.rs");
    let info = d
        .stockade(["--json", "fs", "info", "--root", &root, "src/lib.rs"])
        .run();
    let info: Value = serde_json::from_str(info.ok().stdout.trim()).unwrap();
    assert_eq!(info["kind"], "file");
    assert_eq!(info["writable"], false);
}

#[test]
fn fs_cli_refuses_escapes_with_exit_1_and_audits_them() {
    let d = repo();
    let root = root_flag(&d);
    let outside_abs = d.path("secret.txt").display().to_string();
    let sibling = d.path("work-evil/f.txt").display().to_string();
    for (path, reason) in [
        ("../secret.txt", "climbs out"),
        (outside_abs.as_str(), "outside the root"),
        (sibling.as_str(), "outside the root"),
        ("link-out", "symbolic link"),
    ] {
        let out = d.stockade(["fs", "read", "--root", &root, path]).run();
        out.code(1).stdout_lacks("outside secret");
        assert!(out.stderr.contains(reason), "{path}: {}", out.stderr);
    }
    let out = d
        .stockade(["fs", "read", "--root", &root, "--deny", "**/.env", ".env"])
        .run();
    out.code(1).stdout_lacks("TOKEN");
    assert!(out.stderr.contains("**/.env"), "{}", out.stderr);
    d.stockade([
        "fs", "grep", "--root", &root, "--deny", "**/.env", "--hidden", "TOKEN",
    ])
    .run()
    .code(1);
    let audit = d.read("audit.jsonl").unwrap();
    assert_eq!(audit.lines().count(), 5, "{audit}");
    assert!(audit.contains(r#""layer":"fs""#) && audit.contains(r#""tool":"read_file""#));
}

#[test]
fn fs_cli_writes_only_with_write_access() {
    let d = repo();
    let root = root_flag(&d);
    let out = d
        .stockade(["fs", "write", "--root", &root, "new.txt"])
        .run_with_stdin("hello\n");
    out.code(1);
    assert!(out.stderr.contains("not writable"), "{}", out.stderr);
    assert_eq!(d.read("work/new.txt"), None);
    d.stockade(["fs", "write", "--root", &root, "--write", "new.txt"])
        .run_with_stdin("hello\n")
        .ok();
    assert_eq!(d.read("work/new.txt").as_deref(), Some("hello\n"));
    d.stockade([
        "fs", "edit", "--root", &root, "--write", "new.txt", "--old", "hello", "--new", "bye",
    ])
    .run()
    .ok();
    d.stockade(["fs", "mkdir", "--root", &root, "--write", "a/b"])
        .run()
        .ok();
    d.stockade([
        "fs",
        "mv",
        "--root",
        &root,
        "--write",
        "new.txt",
        "a/b/moved.txt",
    ])
    .run()
    .ok();
    assert_eq!(d.read("work/a/b/moved.txt").as_deref(), Some("bye\n"));
    d.stockade(["fs", "write", "--root", &root, "--write", "link-out"])
        .run_with_stdin("pwned")
        .code(1);
    assert_eq!(d.read("secret.txt").as_deref(), Some("outside secret\n"));
}

#[test]
fn fs_cli_context_mode_builds_the_root_and_refuses_absolute_paths() {
    let d = TestDir::new(Who::Root);
    d.write(
        "repos/web/react/src/App.tsx",
        "export default function App() {}\n",
    );
    let repos = d.path("repos").display().to_string();
    let ctx = [
        "--repos-path",
        repos.as_str(),
        "--group",
        "web",
        "--technology",
        "react",
    ];
    let mut read = vec!["fs", "read"];
    read.extend(ctx);
    d.stockade([read.clone(), vec!["src/App.tsx"]].concat())
        .run()
        .ok()
        .stdout_has("App");
    let abs = d.path("repos/web/react/src/App.tsx").display().to_string();
    let out = d
        .stockade([read.clone(), vec![abs.as_str()]].concat())
        .run();
    out.code(1);
    assert!(out.stderr.contains("is absolute"), "{}", out.stderr);
    let out = d
        .stockade([read, vec!["../../../etc/passwd"]].concat())
        .run();
    out.code(1);
    assert!(out.stderr.contains("climbs out"), "{}", out.stderr);
    let out = d
        .stockade([
            "fs",
            "list",
            "--repos-path",
            &repos,
            "--group",
            "..",
            "--technology",
            "x",
        ])
        .run();
    out.code(125);
    assert!(out.stderr.contains("invalid group"), "{}", out.stderr);
    let schema = d.stockade(["schema", "fs-context"]).run();
    let schema: Value = serde_json::from_str(&schema.ok().stdout).unwrap();
    assert_eq!(
        schema["required"],
        json!(["workingDirectory", "group", "technology"])
    );
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_string()).with_arguments(arguments)
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Starts `stockade mcp ARGS` and talks to it with rmcp's client over stdio.
async fn client(d: &TestDir, args: &[&str]) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.arg("--audit-log")
        .arg(d.path("audit.jsonl"))
        .arg("mcp")
        .args(args);
    cmd.current_dir(d.work());
    let transport = TokioChildProcess::new(cmd).unwrap();
    ().serve(transport).await.unwrap()
}

#[test]
fn mcp_server_speaks_the_protocol_to_a_real_client() {
    let d = repo();
    let root = root_flag(&d);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = client(&d, &["--root", &root, "--deny", "**/.env"]).await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "stockade");
        let tools: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(
            tools,
            [
                "list_directory",
                "read_file",
                "read_multiple_files",
                "find_files",
                "grep",
                "file_info",
                "directory_tree"
            ]
        );
        let read = client
            .call_tool(call(
                "read_file",
                json!({"path": "notes.md", "startLine": 2, "endLine": 2}),
            ))
            .await
            .unwrap();
        assert_eq!(read.is_error, Some(false));
        assert_eq!(text_of(&read), "two\n");
        assert_eq!(read.structured_content.as_ref().unwrap()["endLine"], 2);
        let absolute = d.path("work/src/lib.rs").display().to_string();
        let read = client
            .call_tool(call("read_file", json!({"path": absolute})))
            .await
            .unwrap();
        assert!(text_of(&read).contains("fn main"));
        for (path, code) in [
            ("../secret.txt", "climbs-out"),
            ("link-out", "symlink-escape"),
            (".env", "denied"),
        ] {
            let refused = client
                .call_tool(call("read_file", json!({"path": path})))
                .await
                .unwrap();
            assert_eq!(refused.is_error, Some(true), "{path}");
            assert_eq!(
                refused.structured_content.as_ref().unwrap()["error"],
                code,
                "{path}"
            );
            assert!(!text_of(&refused).contains("outside secret"));
        }
        let grep = client
            .call_tool(call(
                "grep",
                json!({"pattern": "main|TOKEN", "includeHidden": true}),
            ))
            .await
            .unwrap();
        let matches = &grep.structured_content.as_ref().unwrap()["matches"];
        assert_eq!(matches.as_array().unwrap().len(), 2, "{matches}");
        let found = client
            .call_tool(call("find_files", json!({"patterns": ["*.ts"]})))
            .await
            .unwrap();
        assert!(text_of(&found).contains("src/app.ts"));
        let listing = client
            .call_tool(call("list_directory", json!({})))
            .await
            .unwrap();
        assert!(text_of(&listing).contains("notes.md") && !text_of(&listing).contains(".env"));
        let tree = client
            .call_tool(call("directory_tree", json!({"maxDepth": 2})))
            .await
            .unwrap();
        assert!(text_of(&tree).contains("lib.rs"));
        let info = client
            .call_tool(call("file_info", json!({"path": "src"})))
            .await
            .unwrap();
        assert!(text_of(&info).contains("directory"));
        let many = client
            .call_tool(call(
                "read_multiple_files",
                json!({"paths": ["notes.md", "../secret.txt"]}),
            ))
            .await
            .unwrap();
        assert!(text_of(&many).contains("one") && text_of(&many).contains("climbs out"));
        let write = client
            .call_tool(call("write_file", json!({"path": "x.txt", "content": "x"})))
            .await
            .unwrap();
        assert_eq!(write.is_error, Some(true));
        assert!(text_of(&write).contains("not offered"));
        let bad = client
            .call_tool(call("read_file", json!({"nope": 1})))
            .await
            .unwrap();
        assert!(text_of(&bad).contains("invalid arguments"));
        let unknown = client.call_tool(call("rm_rf", json!({}))).await.unwrap();
        assert!(text_of(&unknown).contains("no tool"));
        client.cancel().await.unwrap();
    });
    let audit = d.read("audit.jsonl").unwrap();
    assert!(audit.lines().count() >= 4, "{audit}");
}

#[test]
fn mcp_server_offers_write_tools_only_where_writable() {
    let d = repo();
    let root = root_flag(&d);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = client(&d, &["--root", &root, "--write", "--read-only", "src"]).await;
        let tools = client.list_all_tools().await.unwrap();
        let write = tools.iter().find(|t| t.name == "write_file").unwrap();
        assert!(
            write
                .input_schema
                .get("properties")
                .unwrap()
                .get("content")
                .is_some()
        );
        let created = client
            .call_tool(call(
                "write_file",
                json!({"path": "new.txt", "content": "hi"}),
            ))
            .await
            .unwrap();
        assert_eq!(created.is_error, Some(false), "{}", text_of(&created));
        let edit = client
            .call_tool(call(
                "edit_file",
                json!({"path": "new.txt", "edits": [{"oldText": "hi", "newText": "ho"}]}),
            ))
            .await
            .unwrap();
        assert_eq!(edit.is_error, Some(false), "{}", text_of(&edit));
        let mkdir = client
            .call_tool(call("create_directory", json!({"path": "d/e"})))
            .await
            .unwrap();
        assert_eq!(mkdir.is_error, Some(false));
        let moved = client
            .call_tool(call(
                "move_file",
                json!({"source": "new.txt", "destination": "d/e/new.txt"}),
            ))
            .await
            .unwrap();
        assert_eq!(moved.is_error, Some(false));
        let refused = client
            .call_tool(call(
                "write_file",
                json!({"path": "src/lib.rs", "content": "pwned"}),
            ))
            .await
            .unwrap();
        assert_eq!(refused.is_error, Some(true));
        let through = client
            .call_tool(call(
                "write_file",
                json!({"path": "link-out", "content": "pwned"}),
            ))
            .await
            .unwrap();
        assert_eq!(through.is_error, Some(true));
        client.cancel().await.unwrap();
    });
    assert_eq!(d.read("work/d/e/new.txt").as_deref(), Some("ho"));
    assert_eq!(
        d.read("work/src/lib.rs").as_deref(),
        Some("fn main() {}\nfn helper() {}\n")
    );
    assert_eq!(d.read("secret.txt").as_deref(), Some("outside secret\n"));
}

/// `fs.runtime` paths are for the programs the agent runs: the file tools refuse them, say why, and
/// leave them out of find and grep.
#[test]
fn file_tools_refuse_runtime_paths() {
    let d = repo();
    let root = root_flag(&d);
    d.write(
        "p.toml",
        "[profile.p]\nbase = \"${CWD}\"\nfs.read = [\".\"]\nfs.runtime = [\"src\"]\n",
    );
    let policy = d.path("p.toml");
    let policy = policy.to_str().unwrap();
    d.stockade([
        "fs",
        "read",
        "--root",
        &root,
        "--policy",
        policy,
        "src/lib.rs",
    ])
    .run()
    .code(1)
    .stderr_has("runtime");
    d.stockade(["fs", "grep", "--root", &root, "--policy", policy, "fn main"])
        .run()
        .stdout_lacks("src/lib.rs");
    d.stockade([
        "fs", "read", "--root", &root, "--policy", policy, "notes.md",
    ])
    .run()
    .ok();
}
