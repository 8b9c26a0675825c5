//! In-process cost of one tool call through `FsServer::call` (the dispatch the stdio server runs), without
//! the protocol: what `bench/mcp.sh` measures minus JSON-RPC and the pipe.
#![allow(clippy::unwrap_used, missing_docs, reason = "a benchmark")]

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use stockade_fs::{Root, RootOptions};
use stockade_mcp::FsServer;

fn tools(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..13 {
        std::fs::write(
            dir.path().join(format!("file{i}.rs")),
            "fn main() {}\n".repeat(1000),
        )
        .unwrap();
    }
    let server = FsServer::new(Root::open(dir.path(), RootOptions::default()).unwrap());
    let object = |v: serde_json::Value| v.as_object().cloned();
    let list = object(json!({"path": "."}));
    let read = object(json!({"path": "file3.rs"}));
    let sizes = object(json!({"path": ".", "withSizes": true}));
    c.bench_function("list_directory (13 entries)", |b| {
        b.iter(|| server.call("list_directory", list.clone()))
    });
    c.bench_function("list_directory withSizes", |b| {
        b.iter(|| server.call("list_directory", sizes.clone()))
    });
    c.bench_function("read_file (13 KB)", |b| {
        b.iter(|| server.call("read_file", read.clone()))
    });
}

criterion_group!(benches, tools);
criterion_main!(benches);
