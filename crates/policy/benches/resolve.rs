#![allow(
    clippy::print_stderr,
    clippy::unwrap_used,
    reason = "a benchmark binary, not agent-facing"
)]
//! Resolving the built-in default profile (`workspace-write`), as every `stockade run` and every hook call
//! does before anything else: parse the built-in profiles it reaches, expand the variables, and resolve
//! each of its paths against the host (one `lstat` per component not seen before).
//!
//! Run: `cargo bench -p stockade-policy --bench resolve`. The project is a git repository with the
//! editor and hook-manager files the profile protects; `HOME` has the usual dotfiles and caches.

use criterion::{Criterion, criterion_group, criterion_main};
use stockade_policy::{PolicyBuilder, Variables};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let home = dir.path().join("home");
    for d in [".git/hooks", ".git/refs", ".claude", ".vscode", "src"] {
        std::fs::create_dir_all(project.join(d)).unwrap();
    }
    std::fs::write(project.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(project.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    for d in [
        ".ssh",
        ".config/gh",
        ".cargo/registry",
        ".npm",
        ".cache/pip",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    for f in [".bashrc", ".profile", ".gitconfig"] {
        std::fs::write(home.join(f), "").unwrap();
    }
    let mut vars = Variables::default();
    vars.set_path("CWD", &project).set_path("HOME", &home);
    let builder = PolicyBuilder::new(vars);
    if let Err(e) = builder.build() {
        eprintln!("the default profile failed to resolve: {e}");
        return;
    }
    c.bench_function("resolve the default profile", |b| {
        b.iter(|| builder.build().map(drop))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
