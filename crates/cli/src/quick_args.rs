//! The command lines of `run` and `hook claude`, read without clap when they use only what this module
//! knows. Those two start once per confined command and per tool call, and building clap's model of their
//! thirty-odd flags was 0.25 to 0.3 ms of each start (BENCHMARKS.md, launch).
//!
//! This reader takes long flags it knows (`--flag`, `--flag VALUE`, `--flag=VALUE`), the global ones
//! anywhere before the command, and `run`'s command after `--` or at its first plain word. Wherever it is
//! not sure clap would read the line the same way, it steps aside and clap parses and reports the line
//! as before: help and version, a short or unknown flag, a flag given twice, a value that is empty or
//! starts with `-`, text that is not UTF-8 where clap wants text, a number clap might read differently.
//! The test `clap_reads_every_accepted_line_the_same` checks that on generated command lines.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::args::{DEFAULT_DEADLINE, GlobalArgs, HookArgs, PolicyArgs, RunArgs};

/// `stockade [globals] run [flags] [--] COMMAND...`, or `None` for clap to parse.
pub(crate) fn run(argv: &[OsString]) -> Option<(RunArgs, GlobalArgs)> {
    let mut line = Line::new(argv, &["run"])?;
    let mut args = RunArgs::default();
    while let Some(word) = line.next_word() {
        match word {
            Word::Flag(name, inline) => {
                if !(line.global(name, inline)?
                    || policy_flag(&mut args.policy, name, inline, &mut line)?
                    || run_flag(&mut args, name, inline, &mut line)?)
                {
                    return None;
                }
            }
            Word::EndOfFlags => {
                args.command = line.rest();
                break;
            }
            Word::Plain(first) => {
                args.command = std::iter::once(first.to_os_string())
                    .chain(line.rest())
                    .collect();
                break;
            }
            Word::Other => return None,
        }
    }
    // clap requires the command.
    if args.command.is_empty() {
        return None;
    }
    Some((args, line.globals))
}

/// `stockade [globals] hook [globals] claude [flags]`, or `None` for clap to parse.
pub(crate) fn hook(argv: &[OsString]) -> Option<(HookArgs, GlobalArgs)> {
    let mut line = Line::new(argv, &["hook", "claude"])?;
    let mut policy = PolicyArgs::default();
    let mut explain = false;
    let mut deadline = None;
    while let Some(word) = line.next_word() {
        let Word::Flag(name, inline) = word else {
            // `hook claude` takes no operands.
            return None;
        };
        let known = line.global(name, inline)?
            || policy_flag(&mut policy, name, inline, &mut line)?
            || match name {
                "explain" => switch(&mut explain, inline)?,
                "deadline" => once(&mut deadline, line.text(inline)?)?,
                _ => false,
            };
        if !known {
            return None;
        }
    }
    let args = HookArgs {
        policy,
        explain,
        deadline: deadline.unwrap_or_else(|| DEFAULT_DEADLINE.to_string()),
    };
    Some((args, line.globals))
}

/// One word of a command line, after the subcommand's names.
enum Word<'a> {
    /// `--name` or `--name=value`.
    Flag(&'a str, Option<&'a OsStr>),
    /// `--`: the rest is the command.
    EndOfFlags,
    /// The first word that is not a flag.
    Plain(&'a OsStr),
    /// A short flag, `-`, or a long flag this reader cannot read: clap's.
    Other,
}

/// The words not read yet, and the global flags read so far.
struct Line<'a> {
    words: std::slice::Iter<'a, OsString>,
    globals: GlobalArgs,
}

impl<'a> Line<'a> {
    /// Reads the global flags and the subcommand's `names` (in order, global flags allowed between them);
    /// `None` if anything else comes first.
    fn new(argv: &'a [OsString], names: &[&str]) -> Option<Self> {
        let mut line = Line {
            words: argv.get(1..)?.iter(),
            globals: GlobalArgs {
                json: false,
                audit_log: None,
            },
        };
        let mut names = names.iter();
        let mut expected = names.next();
        while let Some(name) = expected {
            match line.next_word()? {
                Word::Flag(flag, inline) if line.global(flag, inline)? => {}
                Word::Plain(word) if word == OsStr::new(name) => expected = names.next(),
                _ => return None,
            }
        }
        Some(line)
    }

    fn next_word(&mut self) -> Option<Word<'a>> {
        let word = self.words.next()?;
        if word == "--" {
            return Some(Word::EndOfFlags);
        }
        let Some(flag) = word.to_str().and_then(|w| w.strip_prefix("--")) else {
            // A short flag, `-`, a negative number, or a long flag that is not UTF-8.
            if word.as_encoded_bytes().starts_with(b"-") {
                return Some(Word::Other);
            }
            return Some(Word::Plain(word));
        };
        Some(match flag.split_once('=') {
            Some((name, value)) => Word::Flag(name, Some(OsStr::new(value))),
            None => Word::Flag(flag, None),
        })
    }

    /// The flag's value: the part after `=`, or the next word; `None` where clap might read it otherwise
    /// (missing, empty, or starting with `-`).
    fn value(&mut self, inline: Option<&'a OsStr>) -> Option<&'a OsStr> {
        let value = match inline {
            Some(v) => v,
            None => self.words.next()?.as_os_str(),
        };
        let bytes = value.as_encoded_bytes();
        (!bytes.is_empty() && !bytes.starts_with(b"-")).then_some(value)
    }

    /// [`Line::value`] as UTF-8 text.
    fn text(&mut self, inline: Option<&'a OsStr>) -> Option<String> {
        self.value(inline)?.to_str().map(str::to_string)
    }

    fn path(&mut self, inline: Option<&'a OsStr>) -> Option<PathBuf> {
        self.value(inline).map(PathBuf::from)
    }

    /// Every word left, as given.
    fn rest(&mut self) -> Vec<OsString> {
        self.words.by_ref().cloned().collect()
    }

    /// Reads a global flag: `Some(true)` if `name` is one, `Some(false)` if not, `None` to step aside.
    fn global(&mut self, name: &str, inline: Option<&'a OsStr>) -> Option<bool> {
        match name {
            "json" => switch(&mut self.globals.json, inline),
            "audit-log" => {
                let path = self.path(inline)?;
                once(&mut self.globals.audit_log, path)
            }
            _ => Some(false),
        }
    }
}

/// Reads a flag of [`PolicyArgs`]: `Some(true)` if `name` is one, `Some(false)` if not, `None` to step
/// aside.
fn policy_flag<'a>(
    p: &mut PolicyArgs,
    name: &str,
    inline: Option<&'a OsStr>,
    line: &mut Line<'a>,
) -> Option<bool> {
    match name {
        "policy" => once(&mut p.policy, line.path(inline)?),
        "profile" => once(&mut p.profile, line.text(inline)?),
        "agent" => once(&mut p.agent, line.text(inline)?),
        "rw" => push(&mut p.rw, line.text(inline)?),
        "ro" => push(&mut p.ro, line.text(inline)?),
        "read-only" => push(&mut p.read_only, line.text(inline)?),
        "deny" => push(&mut p.deny, line.text(inline)?),
        "project" => once(&mut p.project, line.path(inline)?),
        "repo-root" => once(&mut p.repo_root, line.path(inline)?),
        "worktree" => once(&mut p.worktree, line.path(inline)?),
        "worktree-gitdir" => once(&mut p.worktree_gitdir, line.path(inline)?),
        "git-dir" => once(&mut p.git_dir, line.path(inline)?),
        "git-common-dir" => once(&mut p.git_common_dir, line.path(inline)?),
        "home" => once(&mut p.home, line.path(inline)?),
        "pinned" => switch(&mut p.pinned, inline),
        _ => Some(false),
    }
}

/// Reads a flag of [`RunArgs`] outside its policy flags, as [`policy_flag`] does.
fn run_flag<'a>(
    r: &mut RunArgs,
    name: &str,
    inline: Option<&'a OsStr>,
    line: &mut Line<'a>,
) -> Option<bool> {
    match name {
        "env" => push(&mut r.env, line.text(inline)?),
        "env-file" => push(&mut r.env_file, line.path(inline)?),
        "pass-env" => push(&mut r.pass_env, line.text(inline)?),
        "net" => switch(&mut r.net, inline),
        "net-allow" => push(&mut r.net_allow, line.text(inline)?),
        "net-deny" => push(&mut r.net_deny, line.text(inline)?),
        "persist-caches" => switch(&mut r.persist_caches, inline),
        "cwd" => once(&mut r.cwd, line.path(inline)?),
        "pass-fd" => once(&mut r.pass_fd, number(&line.text(inline)?)?),
        "timeout" => once(&mut r.timeout, line.text(inline)?),
        "memory" => once(&mut r.memory, line.text(inline)?),
        "pids" => once(&mut r.pids, number(&line.text(inline)?)?),
        "max-output" => once(&mut r.max_output, line.text(inline)?),
        "max-file-size" => once(&mut r.max_file_size, line.text(inline)?),
        "best-effort" => switch(&mut r.best_effort, inline),
        "dry-run" => switch(&mut r.dry_run, inline),
        "user" => once(&mut r.user, line.text(inline)?),
        _ => Some(false),
    }
}

/// A flag without a value, given once (clap refuses a second, and `--flag=...`).
fn switch(slot: &mut bool, inline: Option<&OsStr>) -> Option<bool> {
    if *slot || inline.is_some() {
        return None;
    }
    *slot = true;
    Some(true)
}

/// A flag with one value, given once (clap refuses a second).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<bool> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(true)
}

fn push<T>(list: &mut Vec<T>, value: T) -> Option<bool> {
    list.push(value);
    Some(true)
}

/// Plain decimal digits only: a sign, spaces or an overflow are clap's to read and report.
fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{HookOnly, HookTarget, RunOnly, SingleCli};
    use clap::Parser;
    use proptest::prelude::*;
    use std::os::unix::ffi::OsStringExt;

    fn argv(words: &[&str]) -> Vec<OsString> {
        std::iter::once("stockade")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn clap_run(argv: &[OsString]) -> Option<String> {
        match SingleCli::<RunOnly>::try_parse_from(argv) {
            Ok(SingleCli {
                command: RunOnly::Run(args),
                global,
            }) => Some(format!("{args:?} {global:?}")),
            Err(_) => None,
        }
    }

    fn clap_hook(argv: &[OsString]) -> Option<String> {
        match SingleCli::<HookOnly>::try_parse_from(argv) {
            Ok(SingleCli {
                command:
                    HookOnly::Hook {
                        target: HookTarget::Claude(args),
                    },
                global,
            }) => Some(format!("{args:?} {global:?}")),
            Err(_) => None,
        }
    }

    #[test]
    fn the_lines_stockade_writes_and_users_type_are_read_without_clap() {
        for words in [
            &["run", "--", "/bin/true"][..],
            &["run", "git", "status", "--short"],
            &[
                "--json",
                "run",
                "--net-allow",
                "*.github.com",
                "--ro=/data",
                "--",
                "sh",
                "-c",
                "a -- b",
            ],
            &[
                "run",
                "--pinned",
                "--project",
                "/p",
                "--home",
                "/h",
                "--cwd",
                "/p/src",
                "--pass-fd",
                "3",
                "--",
                "bash",
                "-c",
                "x",
            ],
            &[
                "run",
                "--timeout",
                "30s",
                "--memory",
                "2GiB",
                "--pids",
                "64",
                "--dry-run",
                "--",
                "x",
                "--",
                "y",
            ],
        ] {
            let line = argv(words);
            let ours = run(&line).map(|(a, g)| format!("{a:?} {g:?}"));
            assert!(ours.is_some(), "{words:?} went to clap");
            assert_eq!(ours, clap_run(&line), "{words:?}");
        }
        for words in [
            &["hook", "claude"][..],
            &[
                "hook",
                "claude",
                "--pinned",
                "--project",
                "/p",
                "--home",
                "/h",
                "--deadline",
                "8s",
            ],
            &[
                "--audit-log",
                "/a.jsonl",
                "hook",
                "--json",
                "claude",
                "--agent=a1",
                "--explain",
            ],
        ] {
            let line = argv(words);
            let ours = hook(&line).map(|(a, g)| format!("{a:?} {g:?}"));
            assert!(ours.is_some(), "{words:?} went to clap");
            assert_eq!(ours, clap_hook(&line), "{words:?}");
        }
    }

    #[test]
    fn what_clap_must_report_goes_to_clap() {
        for words in [
            &["run", "--help"][..],
            &["run", "-h"],
            &["run", "--version"],
            &["run"],
            &["run", "--"],
            &["run", "--net", "--net", "--", "x"],
            &["run", "--net=yes", "--", "x"],
            &["run", "--cwd", "--", "x"],
            &["run", "--cwd", "", "--", "x"],
            &["run", "--pids", "-1", "--", "x"],
            &["run", "--pids", "+1", "--", "x"],
            &["run", "--pids", "99999999999999999999999", "--", "x"],
            &["run", "--profile", "a", "--profile", "b", "--", "x"],
            &["run", "--no-such-flag", "--", "x"],
            &["run", "-x"],
            &["--rw", "x", "run", "--", "x"],
            &["hook", "claude", "extra"],
            &["hook", "claude", "--"],
            &["hook", "--pinned", "claude"],
        ] {
            assert!(run(&argv(words)).is_none(), "{words:?}");
            assert!(hook(&argv(words)).is_none(), "{words:?}");
        }
    }

    /// The flags of `run` and of `hook claude` (each with the global ones and its policy flags), and
    /// two neither knows.
    const RUN_FLAGS: &[&str] = &[
        "json",
        "audit-log",
        "policy",
        "profile",
        "agent",
        "rw",
        "ro",
        "read-only",
        "deny",
        "project",
        "repo-root",
        "worktree",
        "worktree-gitdir",
        "git-dir",
        "git-common-dir",
        "home",
        "pinned",
        "env",
        "env-file",
        "pass-env",
        "net",
        "net-allow",
        "net-deny",
        "persist-caches",
        "cwd",
        "pass-fd",
        "timeout",
        "memory",
        "pids",
        "max-output",
        "max-file-size",
        "best-effort",
        "dry-run",
        "user",
        "help",
        "nope",
    ];
    const HOOK_FLAGS: &[&str] = &[
        "json",
        "audit-log",
        "policy",
        "profile",
        "agent",
        "rw",
        "ro",
        "read-only",
        "deny",
        "project",
        "repo-root",
        "worktree",
        "worktree-gitdir",
        "git-dir",
        "git-common-dir",
        "home",
        "pinned",
        "explain",
        "deadline",
        "net",
        "help",
        "nope",
    ];
    /// A few flags drawn often, so that lines repeat them.
    const COMMON: &[&str] = &[
        "net", "dry-run", "pinned", "profile", "rw", "cwd", "pids", "json",
    ];
    /// Values: mostly ones both read alike, and the ones clap reads its own way.
    const VALUES: &[&str] = &[
        "x",
        "/p/src",
        "*.github.com",
        "a=b",
        "30s",
        "7",
        "007",
        "x y",
        "é",
        "run",
        "claude",
        "",
        "-",
        "-x",
        "--",
        "--net",
        "+7",
        "-7",
        "4294967296",
    ];
    /// Words that are not flags with values.
    const OTHER: &[&str] = &[
        "--", "-", "-h", "-V", "-x", "run", "hook", "claude", "sh", "-c", "x y",
    ];

    /// One piece of a line: a flag alone, a flag and its value (as two words or with `=`), or another
    /// word, now and then not UTF-8.
    fn piece(flags: &'static [&'static str]) -> impl Strategy<Value = Vec<OsString>> {
        let flag = prop_oneof![
            2 => prop::sample::select(flags),
            1 => prop::sample::select(COMMON),
        ];
        prop_oneof![
            3 => (flag.clone(), prop::sample::select(VALUES))
                .prop_map(|(f, v)| vec![OsString::from(format!("--{f}")), OsString::from(v)]),
            2 => flag.clone().prop_map(|f| vec![OsString::from(format!("--{f}"))]),
            1 => (flag, prop::sample::select(VALUES))
                .prop_map(|(f, v)| vec![OsString::from(format!("--{f}={v}"))]),
            1 => prop::sample::select(OTHER).prop_map(|w| vec![OsString::from(w)]),
            1 => prop_oneof![
                Just(OsString::from_vec(b"--rw=\xff".to_vec())),
                Just(OsString::from_vec(b"\xff".to_vec())),
            ]
            .prop_map(|w| vec![w]),
        ]
    }

    /// A line: now and then `--json` first, the subcommand's names, pieces, and (with `operands`) often
    /// `--` and a command.
    fn line(
        names: &'static [&'static str],
        flags: &'static [&'static str],
        operands: bool,
    ) -> impl Strategy<Value = Vec<OsString>> {
        (
            prop::bool::weighted(0.2),
            prop::collection::vec(piece(flags), 0..6),
            prop::bool::ANY,
            prop::collection::vec(prop::sample::select(VALUES), 0..4),
        )
            .prop_map(move |(json, pieces, dash, command)| {
                let mut line = vec![OsString::from("stockade")];
                if json {
                    line.push(OsString::from("--json"));
                }
                line.extend(names.iter().map(OsString::from));
                line.extend(pieces.into_iter().flatten());
                // `hook claude` takes no operands: one line in ten still gets them.
                if operands || command.len() == 3 {
                    if dash {
                        line.push(OsString::from("--"));
                    }
                    line.extend(command.into_iter().map(OsString::from));
                }
                line
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn clap_reads_every_accepted_line_the_same(
            run_line in line(&["run"], RUN_FLAGS, true),
            hook_line in line(&["hook", "claude"], HOOK_FLAGS, false),
        ) {
            if let Some((a, g)) = run(&run_line) {
                prop_assert_eq!(Some(format!("{a:?} {g:?}")), clap_run(&run_line), "{:?}", run_line);
            }
            if let Some((a, g)) = hook(&hook_line) {
                prop_assert_eq!(Some(format!("{a:?} {g:?}")), clap_hook(&hook_line), "{:?}", hook_line);
            }
        }
    }
}
