#![allow(
    clippy::print_stderr,
    clippy::indexing_slicing,
    reason = "a benchmark binary, not agent-facing"
)]
//! `decide` throughput: 1,000 rules (paths and globs, all four kinds) over 100,000 paths.
//!
//! Run: `cargo bench -p stockade-policy --bench decide`. The figure recorded in BENCHMARKS.md is
//! decisions per second on one core (criterion's throughput line).

use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stockade_policy::{Access, CanonicalPath, PolicyBuilder, Variables};

const KINDS: [&str; 4] = ["read", "write", "read-only", "deny"];
const EXTS: [&str; 5] = ["ts", "rs", "py", "json", "md"];

fn policy_text() -> String {
    let mut by_kind: [Vec<String>; 4] = Default::default();
    for i in 0..900 {
        // Nested trees: project p, module m, sub s.
        let path = format!("/bench/p{}/m{}/s{}", i % 30, (i / 30) % 10, i / 300);
        by_kind[i % 4].push(format!("\"{path}\""));
    }
    for i in 0..100 {
        let glob = match i % 4 {
            0 => format!("/bench/p{}/**/*.{}", i % 30, EXTS[i % 5]),
            1 => format!("/bench/p{}/m*/gen{}/*", i % 30, i),
            2 => format!("**/.secret{i}"),
            _ => format!("/bench/**/cache{i}/**"),
        };
        by_kind[i % 4].push(format!("\"{glob}\""));
    }
    let mut text = String::from("[profile.bench]\nbase = \"/bench\"\n");
    for (kind, list) in KINDS.iter().zip(by_kind.iter()) {
        text.push_str(&format!("fs.{kind} = [{}]\n", list.join(", ")));
    }
    text
}

fn paths() -> Vec<CanonicalPath> {
    (0..100_000u64)
        .map(|i| {
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut next = |n: u64| {
                x ^= x >> 29;
                x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                x % n
            };
            let path = format!(
                "/bench/p{}/m{}/s{}/dir{}/file{}.{}",
                next(35),
                next(12),
                next(4),
                next(50),
                next(1000),
                EXTS[next(5) as usize]
            );
            CanonicalPath::assume_canonical(PathBuf::from(path))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut vars = Variables::default();
    vars.set("CWD", "/").set("HOME", "/nonexistent");
    let policy = match PolicyBuilder::new(vars)
        .policy_text(policy_text(), "/bench/policy.toml")
        .build()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench policy failed to build: {e}");
            return;
        }
    };
    let paths = paths();
    let mut group = c.benchmark_group("decide");
    group.throughput(Throughput::Elements(paths.len() as u64));
    group.sample_size(20);
    group.bench_function("1000 rules x 100000 paths", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for (i, p) in paths.iter().enumerate() {
                let access = if i % 3 == 0 {
                    Access::Write
                } else {
                    Access::Read
                };
                allowed += usize::from(policy.decide(p, access).is_allow());
            }
            allowed
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
