//! Every tool through [`FsServer::call`], the dispatch the MCP transport uses, with its error results.

use std::sync::Mutex;

use serde_json::{Value, json};
use stockade_fs::{Root, RootOptions};

use super::*;

fn server(write: bool) -> (tempfile::TempDir, FsServer) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn main() {}\nfn other() {}\n").unwrap();
    std::fs::write(root.join("README.md"), "a\nb\nc\n").unwrap();
    let options = RootOptions {
        write,
        ..RootOptions::default()
    };
    let server = FsServer::new(Root::open(root, options).unwrap());
    (dir, server)
}

fn call(server: &FsServer, name: &str, arguments: Value) -> (bool, Value, String) {
    let Value::Object(arguments) = arguments else {
        panic!("not an object")
    };
    let result = server.call(name, Some(arguments));
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    (
        result.is_error == Some(true),
        result.structured_content.unwrap_or_default(),
        text,
    )
}

#[test]
fn read_tools_answer_with_text_and_structure() {
    let (_dir, server) = server(false);
    let names: Vec<_> = server.tools().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names.len(), 7);
    assert!(
        server
            .tools()
            .iter()
            .all(|t| t.input_schema.get("type") == Some(&json!("object")))
    );
    let (error, value, text) = call(
        &server,
        "read_file",
        json!({"path": "README.md", "startLine": 2}),
    );
    assert!(!error);
    assert_eq!((text.as_str(), &value["startLine"]), ("b\nc\n", &json!(2)));
    let (_, value, _) = call(&server, "list_directory", json!({}));
    assert_eq!(value["entries"].as_array().unwrap().len(), 2);
    let (_, value, _) = call(
        &server,
        "find_files",
        json!({"patterns": ["*.rs"], "kind": "file"}),
    );
    assert_eq!(value["matches"][0]["path"], "src/lib.rs");
    let (_, value, _) = call(
        &server,
        "grep",
        json!({"pattern": "FN", "caseInsensitive": true, "contextLines": 1, "globs": ["*.rs"]}),
    );
    assert_eq!(value["matches"].as_array().unwrap().len(), 2);
    let (_, value, _) = call(&server, "file_info", json!({"path": "src/lib.rs"}));
    assert_eq!(value["kind"], "file");
    let (_, value, _) = call(&server, "directory_tree", json!({"maxDepth": 50}));
    assert_eq!(
        value["root"]["children"][1]["children"][0]["name"],
        "lib.rs"
    );
    let (_, value, text) = call(
        &server,
        "read_multiple_files",
        json!({"paths": ["README.md", "/etc/passwd"]}),
    );
    assert_eq!(value["files"][1]["error"], "outside-root");
    assert!(text.contains("README.md:\na\n"));
}

#[test]
fn refusals_are_tool_errors_and_reach_the_hook() {
    let (_dir, server) = server(false);
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&seen);
    let server = server.on_refusal(std::sync::Arc::new(move |tool, error| {
        sink.lock()
            .unwrap()
            .push(format!("{tool}:{}", error.code()));
    }));
    let (error, value, text) = call(&server, "read_file", json!({"path": "../../etc/passwd"}));
    assert!(error);
    assert_eq!(value["error"], "climbs-out");
    assert!(text.contains("climbs out"));
    let (error, value, _) = call(&server, "write_file", json!({"path": "x", "content": ""}));
    assert!(error && value["message"].as_str().unwrap().contains("not offered"));
    let (error, _, text) = call(&server, "grep", json!({"pattern": "("}));
    assert!(error && text.contains("invalid pattern"));
    let (error, _, text) = call(&server, "read_file", json!({}));
    assert!(error && text.contains("missing field `path`"));
    let (_, _, _) = call(&server, "read_multiple_files", json!({"paths": ["../x"]}));
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["read_file:climbs-out", "read_multiple_files:climbs-out"]
    );
    assert!(format!("{server:?}").contains("FsServer"));
    assert!(
        server
            .get_info()
            .instructions
            .unwrap()
            .contains("absolute paths are accepted")
    );
}

#[test]
fn write_tools_are_listed_and_work_when_writable() {
    let (dir, server) = server(true);
    assert_eq!(server.tools().len(), 11);
    assert!(
        !call(
            &server,
            "write_file",
            json!({"path": "n.txt", "content": "1 2"})
        )
        .0
    );
    assert!(
        !call(
            &server,
            "edit_file",
            json!({"path": "n.txt", "edits": [{"oldText": "1", "newText": "one"}]})
        )
        .0
    );
    assert!(!call(&server, "create_directory", json!({"path": "d"})).0);
    let (error, value, _) = call(
        &server,
        "move_file",
        json!({"source": "n.txt", "destination": "d/n.txt"}),
    );
    assert!(!error, "{value}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("d/n.txt")).unwrap(),
        "one 2"
    );
    let (error, value, _) = call(
        &server,
        "edit_file",
        json!({"path": "d/n.txt", "edits": [{"oldText": "zzz", "newText": ""}]}),
    );
    assert!(error);
    assert_eq!(value["error"], "edit-failed");
    assert_eq!(server.root().path(), dir.path().canonicalize().unwrap());
}
