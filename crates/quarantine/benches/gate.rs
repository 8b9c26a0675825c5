//! The provenance gate's throughput: references checked per second against 100 loaded files.
#![allow(clippy::unwrap_used, missing_docs, reason = "a benchmark")]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use stockade_quarantine::{SourceSet, StreamingGate};

fn gate(c: &mut Criterion) {
    let mut set = SourceSet::default();
    for f in 0..100 {
        let text: String = (0..200)
            .map(|l| format!("  dependency-{l}: https://example.com/{f}/{l} # see docs/{l}.md\n"))
            .collect();
        set.add(
            Path::new(&format!("f{f}.yaml")),
            PathBuf::from(format!("/p/f{f}.yaml")),
            text,
        );
    }
    let output: Vec<_> = (0..10_000)
        .map(|i| {
            let (f, l) = (i % 100, i % 200);
            let value = format!("https://example.com/{f}/{l}");
            serde_json::value::to_raw_value(&json!({"kind": "url", "value": value,
                   "source": {"file": format!("/p/f{f}.yaml"), "line": l + 1,
                              "quote": format!("dependency-{l}: {value}")}}))
            .unwrap()
        })
        .collect();
    let mut group = c.benchmark_group("provenance gate");
    group.throughput(Throughput::Elements(output.len() as u64));
    group.bench_function("10,000 references, 100 files", |b| {
        b.iter_batched(
            || output.clone(),
            |output| {
                let (valid, rejected) = set.validate(output);
                assert_eq!((valid.len(), rejected.len()), (10_000, 0));
            },
            BatchSize::LargeInput,
        )
    });
    // The same references as a reader writes them, arriving through a pipe 64 KiB at a time.
    let stdout = format!(
        "[{}]",
        output
            .iter()
            .map(|raw| raw.get())
            .collect::<Vec<_>>()
            .join(",")
    )
    .into_bytes();
    group.bench_function("10,000 references streamed in 64 KiB pieces", |b| {
        b.iter(|| {
            let mut gate = StreamingGate::new(&set);
            let mut arrived = Vec::new();
            for piece in stdout.chunks(64 * 1024) {
                arrived.extend_from_slice(piece);
                gate.feed(&arrived);
            }
            let (valid, rejected) = gate.finish(&arrived).unwrap();
            assert_eq!((valid.len(), rejected.len()), (10_000, 0));
        })
    });
    group.finish();
}

criterion_group!(benches, gate);
criterion_main!(benches);
