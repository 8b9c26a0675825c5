//! Random trees of names, `.`, `..` and symlinks (absolute and relative, pointing anywhere), then random
//! opens through the file tools: every success is beneath the root, and nothing outside changes.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use stockade_fs::{ReadOptions, Root, RootOptions};

#[derive(Debug, Arbitrary)]
enum Op {
    Mkdir(u8, u8),
    Link {
        at: u8,
        name: u8,
        target: u8,
        absolute: bool,
    },
    Read(u8, u8),
    List(u8),
    Write(u8, u8),
    Grep(u8),
}

const NAMES: &[&str] = &["a", "b", "..", ".", "c", "..foo", "x.txt", "link"];
const TARGETS: &[&str] = &[
    "..",
    "../..",
    "../../outside",
    "a",
    "/",
    "/etc",
    "b/../..",
    ".",
];

fn join(parts: &[&str]) -> String {
    parts.join("/")
}

/// Beneath the root, by whole components (`..foo` is a name inside it, not a climb).
fn beneath(shown: &str) -> bool {
    let path = std::path::Path::new(shown);
    !path.is_absolute() && path.components().next() != Some(std::path::Component::ParentDir)
}

fuzz_target!(|ops: Vec<Op>| {
    let base = std::env::temp_dir().join(format!("stockade-fs-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root_dir = base.join("root");
    std::fs::create_dir_all(&root_dir).unwrap();
    std::fs::write(base.join("outside"), "SECRET").unwrap();
    std::fs::write(root_dir.join("x.txt"), "inside").unwrap();
    let Ok(root) = Root::open(
        &root_dir,
        RootOptions {
            write: true,
            ..RootOptions::default()
        },
    ) else {
        return;
    };
    let name = |i: u8| NAMES[usize::from(i) % NAMES.len()];
    for op in ops.iter().take(32) {
        match op {
            Op::Mkdir(a, b) => {
                let _ = root.create_directory(&join(&[name(*a), name(*b)]));
            }
            Op::Link {
                at,
                name: n,
                target,
                absolute,
            } => {
                // Made directly on disk (as another process could): the tools must cope. Only inside
                // the root: the harness itself must not write outside.
                if [name(*at), name(*n)]
                    .iter()
                    .any(|x| *x == ".." || *x == ".")
                {
                    continue;
                }
                let dir = root_dir.join(name(*at));
                let target = TARGETS[usize::from(*target) % TARGETS.len()];
                let target = if *absolute {
                    base.join(target.trim_start_matches('/'))
                } else {
                    target.into()
                };
                let _ = std::os::unix::fs::symlink(target, dir.join(name(*n)));
            }
            Op::Read(a, b) => {
                if let Ok(content) =
                    root.read_file(&join(&[name(*a), name(*b)]), ReadOptions::default())
                {
                    assert!(beneath(&content.path), "{content:?}");
                    assert_ne!(content.content, "SECRET");
                }
            }
            Op::List(a) => {
                if let Ok(listing) = root.list_directory(name(*a), 100, false) {
                    assert!(beneath(&listing.path), "{listing:?}");
                    assert!(
                        listing
                            .entries
                            .iter()
                            .all(|e| e.name != "root" && e.name != "outside")
                    );
                }
            }
            Op::Write(a, b) => {
                if let Ok(outcome) = root.write_file(&join(&[name(*a), name(*b)]), "written") {
                    assert!(beneath(&outcome.path), "{outcome:?}");
                }
            }
            Op::Grep(a) => {
                let mut options = stockade_fs::GrepOptions {
                    pattern: "SECRET".into(),
                    ..Default::default()
                };
                options.limits.path = name(*a).to_string();
                if let Ok(found) = root.grep(&options) {
                    assert!(found.matches.is_empty(), "{found:?}");
                }
            }
        }
    }
    assert_eq!(
        std::fs::read_to_string(base.join("outside")).unwrap(),
        "SECRET"
    );
    let entries: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        entries.len() == 2,
        "something was created outside the root: {entries:?}"
    );
});
