//! Each test tries a way out or a way to a denied file, and checks that it fails with the right reason
//! while the ordinary case next to it works.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pretty_assertions::assert_eq;
use stockade_policy::{PolicyBuilder, Variables};

use crate::*;

struct Fixture {
    _dir: tempfile::TempDir,
    /// `<tmp>/x`: holds `repo` and the siblings that share its prefix.
    base: PathBuf,
    repo: PathBuf,
    outside: PathBuf,
}

const SECRET: &str = "outside secret";

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap().join("x");
    let repo = base.join("repo");
    fs::create_dir_all(repo.join("src/nested")).unwrap();
    fs::write(
        repo.join("src/lib.rs"),
        "fn main() {}\nfn helper() {}\n// TODO later\n",
    )
    .unwrap();
    fs::write(repo.join("src/nested/deep.rs"), "fn deep() { main() }\n").unwrap();
    fs::write(
        repo.join("README.md"),
        "line 1\nline 2\nline 3\nline 4\nline 5\n",
    )
    .unwrap();
    fs::write(repo.join("..foo"), "dots in a name\n").unwrap();
    fs::write(repo.join(".env"), "TOKEN=abc\n").unwrap();
    let outside = base.join("outside.txt");
    fs::write(&outside, SECRET).unwrap();
    for sibling in ["repo-evil", "repo ", "repo'"] {
        fs::create_dir_all(base.join(sibling)).unwrap();
        fs::write(base.join(sibling).join("f.txt"), SECRET).unwrap();
    }
    Fixture {
        _dir: dir,
        base,
        repo,
        outside,
    }
}

fn open(f: &Fixture, write: bool) -> Root {
    Root::open(
        &f.repo,
        RootOptions {
            write,
            ..RootOptions::default()
        },
    )
    .unwrap()
}

fn with_policy(f: &Fixture, toml: &str, write: bool) -> Root {
    let mut vars = Variables::default();
    vars.set_path("CWD", &f.repo);
    vars.set_path("HOME", &f.base);
    let mut builder = PolicyBuilder::new(vars);
    builder.policy_text(toml, f.base.join("policy.toml"));
    Root::open(
        &f.repo,
        RootOptions {
            write,
            policy: Some(builder),
            ..RootOptions::default()
        },
    )
    .unwrap()
}

fn read(root: &Root, path: &str) -> Result<String, FsError> {
    root.read_file(path, ReadOptions::default())
        .map(|c| c.content)
}

fn code(result: Result<impl std::fmt::Debug, FsError>) -> &'static str {
    result.unwrap_err().code()
}

#[test]
fn relative_paths_resolve_against_the_root() {
    let f = fixture();
    let root = open(&f, false);
    assert_eq!(
        read(&root, "src/lib.rs").unwrap().lines().next(),
        Some("fn main() {}")
    );
    assert_eq!(read(&root, "./src/../src/lib.rs").unwrap().len(), 42);
    assert_eq!(read(&root, "..foo").unwrap(), "dots in a name\n");
    let info = root.file_info("src").unwrap();
    assert_eq!(
        (info.kind, info.path.as_str(), info.writable),
        (EntryKind::Directory, "src", false)
    );
}

#[test]
fn dot_dot_climbing_out_is_refused_with_a_reason() {
    let f = fixture();
    let root = open(&f, false);
    for path in [
        "../outside.txt",
        "src/../../outside.txt",
        "..",
        "../../../../etc/passwd",
    ] {
        let err = read(&root, path).unwrap_err();
        assert_eq!(err.code(), "climbs-out", "{path}");
        assert!(err.to_string().contains("climbs out of the root"), "{err}");
    }
}

#[test]
fn absolute_paths_inside_are_taken_and_outside_refused() {
    let f = fixture();
    let root = open(&f, false);
    let inside = f.repo.join("src/lib.rs");
    assert!(read(&root, inside.to_str().unwrap()).is_ok());
    assert_eq!(
        code(read(&root, f.outside.to_str().unwrap())),
        "outside-root"
    );
    assert_eq!(code(read(&root, "/etc/passwd")), "outside-root");
    for sibling in ["repo-evil", "repo ", "repo'"] {
        let path = f.base.join(sibling).join("f.txt");
        let err = read(&root, path.to_str().unwrap()).unwrap_err();
        assert_eq!(err.code(), "outside-root", "{sibling:?}");
    }
}

#[test]
fn relative_only_mode_refuses_every_absolute_path() {
    let f = fixture();
    let root = Root::open(
        &f.repo,
        RootOptions {
            path_mode: PathMode::RelativeOnly,
            ..RootOptions::default()
        },
    )
    .unwrap();
    let inside = f.repo.join("src/lib.rs");
    let err = read(&root, inside.to_str().unwrap()).unwrap_err();
    assert_eq!(err.code(), "absolute-path");
    assert!(err.to_string().contains("drop the leading"), "{err}");
    assert!(read(&root, "src/lib.rs").is_ok());
}

#[test]
fn nul_bytes_are_refused() {
    let f = fixture();
    let root = open(&f, true);
    assert_eq!(code(read(&root, "src/lib.rs\0.txt")), "nul-byte");
    assert_eq!(code(root.write_file("a\0b", "x")), "nul-byte");
}

#[test]
fn symlinks_leading_out_are_refused_and_inside_ones_followed() {
    let f = fixture();
    let root = open(&f, false);
    symlink(&f.outside, f.repo.join("abs-file")).unwrap();
    symlink("../outside.txt", f.repo.join("rel-file")).unwrap();
    symlink(&f.base, f.repo.join("abs-dir")).unwrap();
    symlink("../repo-evil", f.repo.join("rel-dir")).unwrap();
    symlink("rel-file", f.repo.join("chained")).unwrap();
    symlink("src/../abs-dir", f.repo.join("chained-dir")).unwrap();
    for path in [
        "abs-file",
        "rel-file",
        "abs-dir/outside.txt",
        "rel-dir/f.txt",
        "chained",
        "chained-dir/outside.txt",
    ] {
        let err = read(&root, path).unwrap_err();
        assert_eq!(err.code(), "symlink-escape", "{path}: {err}");
        assert!(!err.to_string().contains(SECRET));
    }
    // Links that stay inside work, relative or absolute, and report where they lead.
    symlink("src/lib.rs", f.repo.join("inside-rel")).unwrap();
    symlink(f.repo.join("src"), f.repo.join("inside-abs")).unwrap();
    let content = root
        .read_file("inside-rel", ReadOptions::default())
        .unwrap();
    assert_eq!(content.path, "src/lib.rs");
    let content = root
        .read_file("inside-abs/lib.rs", ReadOptions::default())
        .unwrap();
    assert_eq!(content.path, "src/lib.rs");
}

#[test]
fn writes_through_links_leading_out_leave_the_outside_unchanged() {
    let f = fixture();
    let root = open(&f, true);
    symlink(&f.outside, f.repo.join("abs-file")).unwrap();
    symlink("../outside.txt", f.repo.join("rel-file")).unwrap();
    symlink(&f.base, f.repo.join("abs-dir")).unwrap();
    symlink("../new-outside.txt", f.repo.join("dangling-out")).unwrap();
    for path in [
        "abs-file",
        "rel-file",
        "abs-dir/outside.txt",
        "abs-dir/new.txt",
        "dangling-out",
    ] {
        let err = root.write_file(path, "pwned").unwrap_err();
        assert!(err.is_refusal(), "{path}: {err}");
    }
    assert_eq!(
        code(root.edit_file("rel-file", &[edit(SECRET, "pwned")])),
        "symlink-escape"
    );
    assert_eq!(
        code(root.create_directory("abs-dir/newdir")),
        "symlink-escape"
    );
    assert_eq!(
        code(root.move_file("src/lib.rs", "abs-dir/stolen.rs")),
        "symlink-escape"
    );
    assert_eq!(fs::read_to_string(&f.outside).unwrap(), SECRET);
    assert!(!f.base.join("new-outside.txt").exists());
    assert!(!f.base.join("new.txt").exists());
    assert!(!f.base.join("newdir").exists());
    assert!(!f.base.join("stolen.rs").exists());
}

/// Issue 35: a write through a dangling link inside makes the file it names, judged by that file's path,
/// as `explain`, the hook and the kernel do; a chain of links is followed; one to a denied name is refused.
#[test]
fn writes_through_dangling_links_inside_make_their_target() {
    let f = fixture();
    let root = with_policy(
        &f,
        "[profile.p]\nfs.write = [\"${CWD}\"]\nfs.deny = [\"**/.env\"]\n",
        true,
    );
    symlink("../made.txt", f.repo.join("src/via")).unwrap();
    symlink("src/via", f.repo.join("chain")).unwrap();
    symlink("nested/.env", f.repo.join("src/to-denied")).unwrap();
    let made = root.write_file("src/via", "one").unwrap();
    assert_eq!(
        (made.path.as_str(), made.action.as_str()),
        ("made.txt", "created")
    );
    assert_eq!(fs::read_to_string(f.repo.join("made.txt")).unwrap(), "one");
    fs::remove_file(f.repo.join("made.txt")).unwrap();
    root.write_file("chain", "two").unwrap();
    assert_eq!(fs::read_to_string(f.repo.join("made.txt")).unwrap(), "two");
    let err = root.write_file("src/to-denied", "pwned").unwrap_err();
    assert!(err.is_refusal(), "{err}");
    assert!(!f.repo.join("src/nested/.env").exists());
}

fn edit(old: &str, new: &str) -> Edit {
    Edit {
        old_text: old.to_string(),
        new_text: new.to_string(),
    }
}

#[test]
fn fifos_sockets_and_devices_are_refused_not_hung_on() {
    let f = fixture();
    let root = open(&f, true);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.repo.join("fifo").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_bits_truncate(0o644),
        0,
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(f.repo.join("sock")).unwrap();
    symlink("/dev/zero", f.repo.join("zero")).unwrap();
    let err = read(&root, "fifo").unwrap_err();
    assert_eq!(err.code(), "not-a-file");
    assert!(err.to_string().contains("FIFO"), "{err}");
    let err = read(&root, "sock").unwrap_err();
    assert_eq!(err.code(), "not-a-file", "{err}");
    assert_eq!(code(read(&root, "zero")), "symlink-escape");
    assert_eq!(code(root.write_file("fifo", "x")), "not-a-file");
    // A grep over the tree skips them rather than blocking on the FIFO.
    let result = root.grep(&grep("fn")).unwrap();
    assert!(result.matches.iter().all(|m| m.path.ends_with(".rs")));
}

#[test]
fn huge_files_are_capped_and_binary_files_refused() {
    let f = fixture();
    let root = open(&f, false);
    fs::write(f.repo.join("big.txt"), "0123456789\n".repeat(100_000)).unwrap();
    fs::write(f.repo.join("one-line.txt"), "x".repeat(1_000_000)).unwrap();
    fs::write(f.repo.join("image.bin"), [0u8, 1, 2, 3, 0, 9]).unwrap();
    let options = ReadOptions {
        max_bytes: 1000,
        ..ReadOptions::default()
    };
    let big = root.read_file("big.txt", options).unwrap();
    assert!(big.truncated);
    assert_eq!(
        (big.content.len(), big.end_line, big.size),
        (990, 90, 1_100_000)
    );
    let long = root.read_file("one-line.txt", options).unwrap();
    assert!(long.truncated && long.content.len() == 1000);
    assert_eq!(code(read(&root, "image.bin")), "binary");
}

#[test]
fn line_ranges_return_exactly_those_lines() {
    let f = fixture();
    let root = open(&f, false);
    let range = ReadOptions {
        start_line: Some(2),
        end_line: Some(4),
        ..ReadOptions::default()
    };
    let content = root.read_file("README.md", range).unwrap();
    assert_eq!(content.content, "line 2\nline 3\nline 4\n");
    assert_eq!(
        (content.start_line, content.end_line, content.truncated),
        (2, 4, false)
    );
    let tail = ReadOptions {
        start_line: Some(5),
        ..ReadOptions::default()
    };
    assert_eq!(
        root.read_file("README.md", tail).unwrap().content,
        "line 5\n"
    );
    let backwards = ReadOptions {
        start_line: Some(4),
        end_line: Some(2),
        ..ReadOptions::default()
    };
    assert_eq!(
        code(root.read_file("README.md", backwards)),
        "invalid-argument"
    );
    let many = root.read_multiple_files(
        &["README.md".to_string(), "../outside.txt".to_string()],
        ReadOptions::default(),
    );
    assert!(many[0].is_ok() && many[1].is_err());
}

#[test]
fn deny_globs_hold_for_every_tool() {
    let f = fixture();
    fs::write(f.repo.join("src/.env"), "fn secret_token() {}\n").unwrap();
    let root = with_policy(&f, "[profile.p]\nfs.deny = [\"**/.env\"]\n", true);
    for path in [".env", "src/.env"] {
        let err = read(&root, path).unwrap_err();
        assert_eq!(err.code(), "denied", "{path}");
        assert!(err.to_string().contains("**/.env"), "{err}");
        assert_eq!(code(root.file_info(path)), "denied");
        assert_eq!(code(root.write_file(path, "x")), "denied");
        assert_eq!(code(root.move_file(path, "stolen")), "denied");
    }
    assert_eq!(code(root.write_file("new/.env", "x")), "not-found");
    assert_eq!(code(root.write_file(".env.d/../.env", "x")), "not-found");
    let listing = root
        .list_directory(".", DEFAULT_MAX_ENTRIES, false)
        .unwrap();
    assert!(listing.entries.iter().all(|e| e.name != ".env"));
    assert_eq!(listing.hidden, 1);
    let found = root
        .find_files(&FindOptions {
            patterns: vec!["**/.env".to_string()],
            limits: WalkLimits {
                hidden: true,
                ..WalkLimits::default()
            },
            ..FindOptions::default()
        })
        .unwrap();
    assert_eq!(found.matches, vec![]);
    let mut options = grep("secret_token|TOKEN");
    options.limits.hidden = true;
    assert_eq!(root.grep(&options).unwrap().matches, vec![]);
    let mut direct = grep("TOKEN");
    direct.limits.path = ".env".to_string();
    assert_eq!(code(root.grep(&direct)), "denied");
    assert_eq!(
        fs::read_to_string(f.repo.join(".env")).unwrap(),
        "TOKEN=abc\n"
    );
}

#[test]
fn writes_need_write_access() {
    let f = fixture();
    let reader = open(&f, false);
    assert!(!reader.is_writable());
    let err = reader.write_file("new.txt", "x").unwrap_err();
    assert_eq!(err.code(), "denied");
    assert!(err.to_string().contains("fix"), "{err}");
    assert_eq!(code(reader.create_directory("d")), "denied");
    assert!(!f.repo.join("new.txt").exists());
    // A policy that grants write makes the root writable without --write; read-only caps still hold.
    let root = with_policy(
        &f,
        "[profile.p]\nfs.write = [\"${CWD}\"]\nfs.read-only = [\"${CWD}/src/nested\"]\n",
        false,
    );
    assert!(root.is_writable());
    assert_eq!(root.write_file("new.txt", "x").unwrap().action, "created");
    assert_eq!(code(root.write_file("src/nested/deep.rs", "x")), "denied");
    assert_eq!(code(root.write_file("src/nested/new.rs", "x")), "denied");
    assert_eq!(
        fs::read_to_string(f.repo.join("src/nested/deep.rs")).unwrap(),
        "fn deep() { main() }\n"
    );
}

#[test]
fn write_edit_create_and_move_work_inside() {
    let f = fixture();
    let root = open(&f, true);
    assert_eq!(
        root.write_file("notes.txt", "one\ntwo\n").unwrap().action,
        "created"
    );
    assert_eq!(
        root.write_file("notes.txt", "one\ntwo\nthree\n")
            .unwrap()
            .action,
        "replaced"
    );
    let edited = root
        .edit_file("notes.txt", &[edit("two", "2"), edit("three", "3")])
        .unwrap();
    assert_eq!(edited.bytes, 8);
    assert_eq!(
        fs::read_to_string(f.repo.join("notes.txt")).unwrap(),
        "one\n2\n3\n"
    );
    // A failing edit writes nothing.
    let err = root
        .edit_file("notes.txt", &[edit("one", "1"), edit("missing", "x")])
        .unwrap_err();
    assert_eq!(
        (err.code(), err.to_string().contains("edit 2")),
        ("edit-failed", true)
    );
    fs::write(f.repo.join("dup.txt"), "a a").unwrap();
    assert!(
        root.edit_file("dup.txt", &[edit("a", "b")])
            .unwrap_err()
            .to_string()
            .contains("2 times")
    );
    assert_eq!(
        fs::read_to_string(f.repo.join("notes.txt")).unwrap(),
        "one\n2\n3\n"
    );
    assert_eq!(root.create_directory("a/b/c").unwrap().action, "created");
    assert_eq!(root.create_directory("a/b").unwrap().action, "exists");
    assert!(f.repo.join("a/b/c").is_dir());
    assert_eq!(
        root.move_file("notes.txt", "a/b/c/notes.txt").unwrap().path,
        "a/b/c/notes.txt"
    );
    assert_eq!(
        code(root.move_file("README.md", "a/b/c/notes.txt")),
        "exists"
    );
    assert_eq!(code(root.write_file("missing-dir/x.txt", "x")), "not-found");
    assert_eq!(code(root.write_file("src", "x")), "not-a-file");
}

#[test]
fn moving_a_directory_may_not_lift_a_rule_off_its_contents() {
    let f = fixture();
    fs::create_dir_all(f.repo.join("keys")).unwrap();
    fs::write(f.repo.join("keys/id.pem"), "KEY").unwrap();
    fs::create_dir_all(f.repo.join("cfg/private")).unwrap();
    let root = with_policy(
        &f,
        "[profile.p]\nfs.write = [\"${CWD}\"]\nfs.deny = [\"${CWD}/keys/*.pem\", \"${CWD}/cfg/private\"]\n",
        false,
    );
    let err = root.move_file("keys", "public").unwrap_err();
    assert!(err.to_string().contains("keys/id.pem"), "{err}");
    let err = root.move_file("cfg", "open").unwrap_err();
    assert!(err.to_string().contains("cfg/private"), "{err}");
    assert!(f.repo.join("keys/id.pem").exists() && f.repo.join("cfg/private").exists());
    assert_eq!(root.move_file("src", "source").unwrap().action, "moved");
}

fn grep(pattern: &str) -> GrepOptions {
    GrepOptions {
        pattern: pattern.to_string(),
        ..GrepOptions::default()
    }
}

#[test]
fn find_matches_globs_depth_gitignore_and_caps() {
    let f = fixture();
    let root = open(&f, false);
    fs::write(f.repo.join(".gitignore"), "ignored/\n*.log\n").unwrap();
    fs::create_dir_all(f.repo.join("ignored")).unwrap();
    fs::write(f.repo.join("ignored/x.rs"), "").unwrap();
    fs::write(f.repo.join("src/debug.log"), "").unwrap();
    fs::create_dir_all(f.repo.join(".git")).unwrap();
    fs::write(f.repo.join(".git/x.rs"), "").unwrap();
    symlink(&f.base, f.repo.join("out")).unwrap();
    let find = |patterns: &[&str], limits: WalkLimits| {
        let options = FindOptions {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            kind: None,
            limits,
        };
        let result = root.find_files(&options).unwrap();
        (
            result
                .matches
                .into_iter()
                .map(|m| m.path)
                .collect::<Vec<_>>(),
            result.truncated,
        )
    };
    assert_eq!(
        find(&["*.rs"], WalkLimits::default()),
        (
            vec!["src/lib.rs".to_string(), "src/nested/deep.rs".to_string()],
            false
        )
    );
    assert_eq!(
        find(&["src/*.rs"], WalkLimits::default()).0,
        vec!["src/lib.rs"]
    );
    let shallow = WalkLimits {
        max_depth: Some(2),
        ..WalkLimits::default()
    };
    assert_eq!(find(&["**/*.rs"], shallow).0, vec!["src/lib.rs"]);
    let all = WalkLimits {
        gitignore: false,
        hidden: true,
        ..WalkLimits::default()
    };
    let (paths, _) = find(&["*.rs", "*.log"], all);
    assert_eq!(
        paths,
        vec![
            "ignored/x.rs",
            "src/debug.log",
            "src/lib.rs",
            "src/nested/deep.rs"
        ]
    );
    let capped = WalkLimits {
        max_results: 1,
        ..WalkLimits::default()
    };
    let (paths, truncated) = find(&["*.rs"], capped);
    assert_eq!((paths.len(), truncated), (1, true));
    // The link out is listed as a link, never entered.
    let (paths, _) = find(&["out", "out/**"], WalkLimits::default());
    assert_eq!(paths, vec!["out"]);
    assert_eq!(
        code(root.find_files(&FindOptions {
            patterns: vec!["../*".to_string()],
            ..FindOptions::default()
        })),
        "climbs-out"
    );
    assert_eq!(
        code(root.find_files(&FindOptions {
            patterns: vec!["/etc/*".to_string()],
            ..FindOptions::default()
        })),
        "outside-root"
    );
    let mut start_out = FindOptions::default();
    start_out.limits.path = "out".to_string();
    assert_eq!(code(root.find_files(&start_out)), "symlink-escape");
}

#[test]
fn grep_finds_lines_with_context_and_respects_its_options() {
    let f = fixture();
    let root = open(&f, false);
    fs::write(f.repo.join("blob.bin"), b"fn main\0binary").unwrap();
    symlink(&f.base, f.repo.join("out")).unwrap();
    fs::write(f.base.join("leak.rs"), "fn main() { outside }").unwrap();
    let result = root.grep(&grep(r"fn \w+\(")).unwrap();
    let lines: Vec<_> = result
        .matches
        .iter()
        .map(|m| (m.path.as_str(), m.line_number))
        .collect();
    assert_eq!(
        lines,
        vec![
            ("src/lib.rs", 1),
            ("src/lib.rs", 2),
            ("src/nested/deep.rs", 1)
        ]
    );
    assert!(!result.truncated);
    let mut fixed = grep("main()");
    fixed.fixed_string = true;
    assert_eq!(root.grep(&fixed).unwrap().matches.len(), 2);
    let mut case = grep("TODO");
    assert_eq!(root.grep(&case).unwrap().matches.len(), 1);
    case.pattern = "todo".to_string();
    assert_eq!(root.grep(&case).unwrap().matches.len(), 0);
    case.case_insensitive = true;
    assert_eq!(root.grep(&case).unwrap().matches.len(), 1);
    let mut context = grep("helper");
    context.context = 1;
    let found = root.grep(&context).unwrap();
    assert_eq!(found.matches[0].before, vec!["fn main() {}"]);
    assert_eq!(found.matches[0].after, vec!["// TODO later"]);
    let mut globbed = grep("fn");
    globbed.globs = vec!["**/nested/*.rs".to_string()];
    assert_eq!(root.grep(&globbed).unwrap().matches.len(), 1);
    let mut capped = grep("fn");
    capped.limits.max_results = 2;
    let result = root.grep(&capped).unwrap();
    assert!(result.truncated && result.matches.len() == 2);
    let mut one_file = grep("line");
    one_file.limits.path = "README.md".to_string();
    assert_eq!(root.grep(&one_file).unwrap().matches.len(), 5);
    assert_eq!(code(root.grep(&grep("fn ("))), "invalid-argument");
    assert_eq!(code(root.grep(&grep(""))), "invalid-argument");
}

#[test]
fn listing_and_tree_show_entries_with_caps() {
    let f = fixture();
    let root = open(&f, false);
    let listing = root.list_directory("src", 100, true).unwrap();
    let names: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind))
        .collect();
    assert_eq!(
        names,
        vec![
            ("lib.rs", EntryKind::File),
            ("nested", EntryKind::Directory)
        ]
    );
    assert_eq!(listing.entries[0].size, Some(42));
    assert!(root.list_directory(".", 2, false).unwrap().truncated);
    assert_eq!(
        code(root.list_directory("README.md", 10, false)),
        "not-a-directory"
    );
    let tree = root.directory_tree(".", 1, 1000).unwrap();
    let src = tree
        .root
        .children
        .as_ref()
        .unwrap()
        .iter()
        .find(|n| n.name == "src")
        .unwrap();
    assert_eq!(src.children, None);
    let tree = root.directory_tree("src", 5, 1000).unwrap();
    let nested = &tree.root.children.as_ref().unwrap()[1];
    assert_eq!(nested.children.as_ref().unwrap()[0].name, "deep.rs");
    assert!(root.directory_tree(".", 10, 2).unwrap().truncated);
}

#[test]
fn the_seed_context_computes_and_validates_the_working_directory() {
    let f = fixture();
    fs::create_dir_all(f.base.join("repos/web/react/src")).unwrap();
    fs::write(f.base.join("repos/web/react/src/App.tsx"), "export {}\n").unwrap();
    let context = FsContext::new(&f.base.join("repos"), "web", "react", Some("dev")).unwrap();
    assert_eq!(context.working_directory, f.base.join("repos/web/react"));
    let root = context.open(RootOptions::default()).unwrap();
    assert_eq!(read(&root, "src/App.tsx").unwrap(), "export {}\n");
    assert_eq!(code(read(&root, "../../../x/outside.txt")), "climbs-out");
    assert_eq!(code(read(&root, "/etc/passwd")), "absolute-path");
    for (group, technology) in [("..", "react"), ("web", "a/b"), ("", "react"), ("web", ".")] {
        let err = FsContext::new(&f.base, group, technology, None).unwrap_err();
        assert_eq!(err.code(), "invalid-context", "{group:?}/{technology:?}");
    }
    assert!(FsContext::new(&f.base, "web", "react", Some("../prod")).is_err());
    let json = serde_json::json!({"workingDirectory": "/r/web/react", "group": "web", "technology": "vue"});
    let tampered: FsContext = serde_json::from_value(json).unwrap();
    assert_eq!(tampered.validate().unwrap_err().code(), "invalid-context");
    let schema = context_schema();
    assert_eq!(
        schema["required"],
        serde_json::json!(["workingDirectory", "group", "technology"])
    );
}

#[test]
fn a_directory_swapped_for_a_link_mid_loop_never_leaks_or_changes_the_outside() {
    let f = fixture();
    let root = Arc::new(open(&f, true));
    let swap_dir = f.repo.join("swap");
    let parked = f.repo.join("parked");
    fs::create_dir_all(&swap_dir).unwrap();
    fs::write(swap_dir.join("outside.txt"), "inside").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let swapper = {
        let done = Arc::clone(&done);
        let (swap_dir, parked, base) = (swap_dir.clone(), parked.clone(), f.base.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !done.load(Ordering::Relaxed) {
                // Directory -> symlink to the outside -> directory, as fast as possible.
                let _ = fs::rename(&swap_dir, &parked);
                let _ = symlink(&base, &swap_dir);
                let _ = fs::remove_file(&swap_dir);
                let _ = fs::rename(&parked, &swap_dir);
                flips += 1;
            }
            flips
        })
    };
    let mut reads_ok = 0;
    for i in 0..5_000 {
        if let Ok(content) = read(&root, "swap/outside.txt") {
            assert_ne!(content, SECRET, "read leaked the outside file");
            reads_ok += 1;
        }
        let _ = root.write_file("swap/outside.txt", &format!("inside {i}"));
        let _ = root.edit_file("swap/outside.txt", &[edit("inside", "in")]);
        if let Ok(found) = root.grep(&grep("outside secret")) {
            assert_eq!(found.matches, vec![]);
        }
    }
    done.store(true, Ordering::Relaxed);
    let flips = swapper.join().unwrap();
    assert!(flips > 100, "the swapper barely ran ({flips})");
    assert!(
        reads_ok > 0,
        "no read succeeded: the test did not exercise the inside case"
    );
    assert_eq!(fs::read_to_string(&f.outside).unwrap(), SECRET);
}

#[test]
fn many_threads_share_one_root() {
    let f = fixture();
    let root = Arc::new(open(&f, true));
    let handles: Vec<_> = (0..16)
        .map(|t| {
            let root = Arc::clone(&root);
            std::thread::spawn(move || {
                for i in 0..100 {
                    assert!(read(&root, "src/lib.rs").is_ok());
                    assert_eq!(
                        read(&root, "../outside.txt").unwrap_err().code(),
                        "climbs-out"
                    );
                    assert_eq!(root.grep(&grep("deep")).unwrap().matches.len(), 1);
                    root.write_file(&format!("t{t}-{i}.txt"), "x").unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(fs::read_dir(&f.repo).unwrap().count(), 4 + 16 * 100);
    let _ = Path::new("");
}
