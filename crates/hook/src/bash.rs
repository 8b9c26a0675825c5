//! Which paths a Bash command touches, read from brush-parser's syntax tree (never from regexes).
//!
//! Every word that may name a path is judged: arguments (as writes for commands that change files),
//! redirection targets, `cd` targets (later relative words resolve against them), the program itself when
//! it is a path, `source` files, both sides of `ln`, and the strings given to `sh -c`/`bash -c`, parsed
//! in turn. What cannot be known without running the command is reported as unknowable: command and
//! process substitution, variables other than `$HOME` and `$PWD`, `eval`, `cd -`, arithmetic with
//! substitutions, here-documents that expand.

use std::path::{Path, PathBuf};

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Pipeline, SimpleCommand, Word,
};
use brush_parser::word::{Parameter, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};
use stockade_policy::Access;

/// Nested `sh -c` levels followed before the command counts as unknowable.
const MAX_DEPTH: u8 = 4;

/// Commands that never open their operands as files: their words are text, not paths (their
/// redirections are still judged). `test` and `[` only look at metadata, which no layer restricts.
const TEXT_ONLY: &[&str] = &[
    "echo", "printf", "true", "false", ":", "yes", "seq", "sleep", "expr", "basename", "dirname",
    "kill", "test", "[", "id", "whoami", "hostname", "date", "uname", "pwd", "type", "hash",
    "alias", "unalias", "set", "unset", "shift", "exit", "return", "wait", "jobs", "trap", "shopt",
    "umask",
];

/// Commands whose path arguments are all changed.
const WRITERS: &[&str] = &[
    "rm", "rmdir", "mv", "touch", "mkdir", "chmod", "chown", "chgrp", "truncate", "tee", "shred",
    "unlink", "mkfifo", "mknod", "patch",
];
/// Commands whose last argument is changed and the others read.
const LAST_WRITTEN: &[&str] = &["cp", "ln", "install", "rsync", "scp"];
/// Interpreters whose `-c`/`-e` one-liners are scanned for the paths they name.
const INTERPRETERS: &[&str] = &[
    "python", "python3", "python2", "node", "perl", "ruby", "php", "deno", "bun",
];
/// Shells whose `-c` string is parsed as Bash.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh"];

/// A path a command names.
pub(crate) type PathRequest = (String, String, Access);

/// What the analysis found.
pub(crate) enum BashAnalysis {
    /// Every path the command names (absolute when the call had an absolute cwd), and the directories
    /// it reads or changes recursively (everything beneath them must be allowed too).
    Paths {
        /// Each path, as a request.
        paths: Vec<PathRequest>,
        /// Directories the command recurses into.
        recursive: Vec<PathRequest>,
    },
    /// Something decides at run time what is touched.
    Unknowable(String),
}

struct Walker<'a> {
    home: &'a str,
    allowed: &'a [String],
    out: Vec<PathRequest>,
    /// `cd` commands walked so far.
    cds: u32,
    /// Set once a `cd` may or may not have run (in an `&&`/`||` continuation, or the body of an if, while,
    /// until, for or case, seen from after it; or before an `||`): later relative paths resolve against
    /// a directory that is not known here.
    cwd_unknown: bool,
    /// Recursive reads and writes, judged after the walk against what the policy refuses beneath them.
    recursive: Vec<PathRequest>,
    /// A `cd` moved the shell and no command has run there yet: the next one (other than another `cd`)
    /// reads the directory it runs in (`ls`, `find`, `grep -r x` with no operand), so it is judged then.
    /// `cd denied && cd -` alone reads nothing.
    cwd_unjudged: bool,
    /// Symlinks the command creates (`ln -s TARGET LINK`), as (link, target): a later word that goes
    /// through the link is judged where the link will lead, since it does not exist yet.
    links: Vec<(PathBuf, PathBuf)>,
}

struct Unknowable(String);

type Step = Result<(), Unknowable>;

/// Analyses `command`, resolving relative words against `cwd` (and against `cd` targets after them).
pub(crate) fn analyze(
    command: &str,
    cwd: Option<&str>,
    home: &str,
    allowed: &[String],
) -> BashAnalysis {
    let mut w = Walker {
        home,
        allowed,
        out: Vec::new(),
        cds: 0,
        cwd_unknown: false,
        recursive: Vec::new(),
        cwd_unjudged: false,
        links: Vec::new(),
    };
    let base = cwd.map(PathBuf::from);
    match w.program(command, base, 0) {
        Ok(_) => BashAnalysis::Paths {
            paths: w.out,
            recursive: w.recursive,
        },
        Err(Unknowable(why)) => BashAnalysis::Unknowable(why),
    }
}

fn unknowable<T>(why: impl Into<String>) -> Result<T, Unknowable> {
    Err(Unknowable(why.into()))
}

impl Walker<'_> {
    fn program(
        &mut self,
        text: &str,
        mut base: Option<PathBuf>,
        depth: u8,
    ) -> Result<Option<PathBuf>, Unknowable> {
        if depth > MAX_DEPTH {
            return unknowable(format!("more than {MAX_DEPTH} nested shells"));
        }
        let options = ParserOptions::default();
        let mut parser = Parser::new(std::io::BufReader::new(text.as_bytes()), &options);
        let program = match parser.parse_program() {
            Ok(p) => p,
            Err(e) => return unknowable(format!("the command does not parse as Bash ({e})")),
        };
        for complete in &program.complete_commands {
            self.list(complete, &mut base, depth)?;
        }
        Ok(base)
    }

    fn list(&mut self, list: &CompoundList, base: &mut Option<PathBuf>, depth: u8) -> Step {
        for item in &list.0 {
            let and_or = &item.0;
            let start = self.cds;
            self.pipeline(&and_or.first, base, depth)?;
            let after_first = self.cds;
            for next in &and_or.additional {
                let p = match next {
                    brush_parser::ast::AndOr::And(p) => p,
                    brush_parser::ast::AndOr::Or(p) => {
                        // `cd x || cmd`: cmd runs when something failed, perhaps the cd.
                        if self.cds > start {
                            self.cwd_unknown = true;
                        }
                        p
                    }
                };
                self.pipeline(p, base, depth)?;
            }
            // A cd in a continuation ran or not: what follows the list cannot tell.
            if self.cds > after_first {
                self.cwd_unknown = true;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &Pipeline, base: &mut Option<PathBuf>, depth: u8) -> Step {
        for cmd in &p.seq {
            self.command(cmd, base, depth)?;
        }
        Ok(())
    }

    fn command(&mut self, cmd: &Command, base: &mut Option<PathBuf>, depth: u8) -> Step {
        match cmd {
            Command::Simple(s) => self.simple(s, base, depth),
            Command::Compound(c, redirects) => {
                if let Some(r) = redirects {
                    for io in &r.0 {
                        self.redirect(io, base)?;
                    }
                }
                self.compound(c, base, depth)
            }
            Command::Function(f) => self.compound(&f.body.0, &mut base.clone(), depth),
            Command::ExtendedTest(t, _) => self.test_expr(&t.expr, base),
        }
    }

    fn compound(&mut self, c: &CompoundCommand, base: &mut Option<PathBuf>, depth: u8) -> Step {
        // Brace groups and subshells run whole; the other compounds run their bodies conditionally, so a
        // cd in them leaves the directory after them unknown.
        let conditional = !matches!(
            c,
            CompoundCommand::BraceGroup(_) | CompoundCommand::Subshell(_)
        );
        let start = self.cds;
        let step = self.compound_inner(c, base, depth);
        if conditional && self.cds > start {
            self.cwd_unknown = true;
        }
        step
    }

    fn compound_inner(
        &mut self,
        c: &CompoundCommand,
        base: &mut Option<PathBuf>,
        depth: u8,
    ) -> Step {
        match c {
            CompoundCommand::BraceGroup(g) => self.list(&g.list, base, depth),
            // A subshell's `cd` does not outlive it.
            CompoundCommand::Subshell(s) => self.list(&s.list, &mut base.clone(), depth),
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, base, depth)?;
                self.list(&i.then, base, depth)?;
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, base, depth)?;
                    }
                    self.list(&e.body, base, depth)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0, base, depth)?;
                self.list(&w.1.list, base, depth)
            }
            CompoundCommand::ForClause(f) => {
                for v in f.values.iter().flatten() {
                    for value in self.expand_all(v, base)? {
                        self.judge_word("for", &value, Access::Read, base)?;
                    }
                }
                // The loop variable is not one of the known variables: uses of it are unknowable.
                self.list(&f.body.list, base, depth)
            }
            CompoundCommand::CaseClause(c) => {
                self.expand(&c.value, base)?;
                for item in &c.cases {
                    if let Some(cmd) = &item.cmd {
                        self.list(cmd, base, depth)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::Arithmetic(a) => no_substitution(&a.expr.value),
            CompoundCommand::ArithmeticForClause(a) => {
                for e in [&a.initializer, &a.condition, &a.updater]
                    .into_iter()
                    .flatten()
                {
                    no_substitution(&e.value)?;
                }
                self.list(&a.body.list, base, depth)
            }
            CompoundCommand::Coprocess(c) => self.command(&c.body, base, depth),
        }
    }

    fn test_expr(&mut self, e: &ExtendedTestExpr, base: &Option<PathBuf>) -> Step {
        match e {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, base)?;
                self.test_expr(b, base)
            }
            ExtendedTestExpr::Not(a) | ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a, base)
            }
            ExtendedTestExpr::UnaryTest(_, w) => {
                let v = self.expand(w, base)?;
                self.judge_word("[[", &v, Access::Read, base)
            }
            ExtendedTestExpr::BinaryTest(_, l, r) => {
                let l = self.expand(l, base)?;
                let r = self.expand(r, base)?;
                self.judge_word("[[", &l, Access::Read, base)?;
                self.judge_word("[[", &r, Access::Read, base)
            }
        }
    }

    fn redirect(&mut self, io: &IoRedirect, base: &Option<PathBuf>) -> Step {
        match io {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(w) | IoFileRedirectTarget::Duplicate(w) => {
                    let v = self.expand(w, base)?;
                    if v.chars().all(|c| c.is_ascii_digit() || c == '-')
                        && matches!(target, IoFileRedirectTarget::Duplicate(_))
                    {
                        return Ok(()); // `>&2`, `<&-`: descriptors, not files
                    }
                    let access = match kind {
                        IoFileRedirectKind::Read | IoFileRedirectKind::DuplicateInput => {
                            Access::Read
                        }
                        IoFileRedirectKind::Write
                        | IoFileRedirectKind::Append
                        | IoFileRedirectKind::ReadAndWrite
                        | IoFileRedirectKind::Clobber
                        | IoFileRedirectKind::DuplicateOutput => Access::Write,
                    };
                    self.push("redirection", &v, access, base)
                }
                IoFileRedirectTarget::Fd(_) => Ok(()),
                IoFileRedirectTarget::ProcessSubstitution(..) => unknowable(
                    "process substitution runs a command whose effects cannot be judged here",
                ),
            },
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    no_substitution(&doc.doc.value)?;
                }
                Ok(())
            }
            IoRedirect::HereString(_, w) => self.expand(w, base).map(drop),
            IoRedirect::OutputAndError(w, _) => {
                let v = self.expand(w, base)?;
                self.push("redirection", &v, Access::Write, base)
            }
        }
    }

    fn simple(&mut self, s: &SimpleCommand, base: &mut Option<PathBuf>, depth: u8) -> Step {
        let mut words: Vec<String> = Vec::new();
        for item in s
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .chain(s.suffix.iter().flat_map(|p| p.0.iter()))
        {
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(io) => self.redirect(io, base)?,
                CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    check_assignment(&w.value)?;
                    let raw = w.value.split_once('=').map_or(w.value.as_str(), |(_, v)| v);
                    let v = self.expand(
                        &Word {
                            value: raw.to_string(),
                            loc: None,
                        },
                        base,
                    )?;
                    self.judge_word("assignment", &v, Access::Read, base)?;
                }
                CommandPrefixOrSuffixItem::Word(w) => words.extend(self.expand_all(w, base)?),
                CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    return unknowable(
                        "process substitution runs a command whose effects cannot be judged here",
                    );
                }
            }
        }
        let Some(name_word) = &s.word_or_name else {
            return Ok(());
        };
        let name = self.expand(name_word, base)?;
        // Prefix words (none in practice) come before the name in the tree; arguments are the suffix words.
        let args = words;
        self.run(&name, &args, base, depth)
    }

    fn run(&mut self, name: &str, args: &[String], base: &mut Option<PathBuf>, depth: u8) -> Step {
        if name.contains('/') {
            self.push("program", name, Access::Read, base)?;
        }
        let program = name.rsplit('/').next().unwrap_or(name);
        if !matches!(program, "cd" | "pushd" | "popd") && self.cwd_unjudged {
            self.cwd_unjudged = false;
            self.push("cd", ".", Access::Read, base)?;
        }
        if self.allowed.iter().any(|a| a == program) {
            return Ok(()); // commands.allow: the command passes whole (its redirections were judged)
        }
        if TEXT_ONLY.contains(&program) {
            return Ok(());
        }
        match program {
            "eval" => return unknowable("eval runs a string built at run time"),
            "make" | "gmake" | "ninja" | "just" | "cmake" => {
                return unknowable(format!(
                    "{program} runs recipes from a file whose commands cannot be judged here"
                ));
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for a in args {
                    check_assignment(a)?;
                }
                return Ok(());
            }
            "env" => {
                // env [-i] [-u NAME] [-C DIR | --chdir=DIR] [NAME=VALUE]... [COMMAND [ARG]...]
                let mut inner_base = base.clone();
                let mut i = 0;
                while let Some(a) = args.get(i) {
                    if let Some(dir) = option_value(args, &mut i, "-C", "--chdir") {
                        self.push("env -C", &dir, Access::Read, &inner_base)?;
                        inner_base = Some(resolve(&inner_base, &dir));
                    } else if a == "-S" || a.starts_with("--split-string") || a.starts_with("-S") {
                        return unknowable("env -S splits a string into a command at run time");
                    } else if a == "-u" || a == "--unset" {
                        i += 1;
                    } else if a.contains('=') && !a.starts_with('-') {
                        check_assignment(a)?;
                    } else if !a.starts_with('-') {
                        let rest = args.get(i + 1..).unwrap_or(&[]);
                        return self.run(a, rest, &mut inner_base, depth);
                    }
                    i += 1;
                }
                return Ok(());
            }
            "exec" | "command" | "nohup" | "time" | "nice" | "sudo" | "xargs" | "timeout"
            | "stdbuf" => {
                let rest: Vec<String> = args
                    .iter()
                    .skip_while(|a| a.starts_with('-'))
                    .cloned()
                    .collect();
                if program == "xargs" {
                    return unknowable("xargs builds arguments from its input at run time");
                }
                return match rest.split_first() {
                    Some((next, more)) => self.run(next, more, base, depth),
                    None => Ok(()),
                };
            }
            "cd" | "pushd" => {
                let target = args
                    .iter()
                    .find(|a| !a.starts_with('-') || a.as_str() == "-");
                match target.map(String::as_str) {
                    Some("-") => {
                        return unknowable("`cd -` goes back to a directory not known here");
                    }
                    Some(t) => {
                        let t = expand_tilde(t, self.home);
                        let next = resolve(base, &t);
                        // A `cd` that fails leaves the shell where it was (after `;`, `||`, or in a
                        // script), so later relative paths would resolve against the old directory.
                        if !std::fs::metadata(&next).is_ok_and(|m| m.is_dir()) {
                            return unknowable(format!(
                                "`cd {t}` names no existing directory; if it fails, later relative paths resolve elsewhere (create it in a separate command first)"
                            ));
                        }
                        *base = Some(next);
                    }
                    None => *base = Some(PathBuf::from(self.home)),
                }
                self.cds += 1;
                self.cwd_unjudged = true;
                return Ok(());
            }
            "popd" => return unknowable("popd goes back to a directory not known here"),
            "source" | "." => {
                if let Some(f) = args.first() {
                    self.push("source", f, Access::Read, base)?;
                }
                return unknowable(
                    "a sourced file runs commands whose effects cannot be judged here",
                );
            }
            _ => {}
        }
        if SHELLS.contains(&program) {
            if let Some(i) = args
                .iter()
                .position(|a| has_short_flag(std::slice::from_ref(a), "c"))
            {
                // `bash -c -- 'script'`: the script is the first word after the options.
                let script = args
                    .get(i + 1..)
                    .unwrap_or(&[])
                    .iter()
                    .find(|a| a.as_str() != "--");
                if let Some(script) = script {
                    self.program(script, base.clone(), depth + 1)?;
                    return Ok(());
                }
            }
            return unknowable(format!(
                "{program} runs a script from a file or its input, whose commands cannot be judged here"
            ));
        }
        if INTERPRETERS.contains(&program) {
            let mut code_next = false;
            let mut one_liner = false;
            for a in args {
                if code_next {
                    for token in code_paths(a) {
                        self.push("one-liner", &token, Access::Read, base)?;
                    }
                    code_next = false;
                    one_liner = true;
                    continue;
                }
                if a == "-c" || a == "-e" || a == "-E" || a == "--eval" || a == "-p" {
                    code_next = true;
                } else if !a.starts_with('-') && !one_liner {
                    return unknowable(format!(
                        "{program} runs a script file whose effects cannot be judged here"
                    ));
                }
            }
            if !one_liner && !args.iter().any(|a| a == "--version" || a == "-V") {
                return unknowable(format!(
                    "{program} reads its program from its input, which cannot be judged here"
                ));
            }
            return Ok(());
        }
        if program == "git"
            && args
                .iter()
                .any(|a| a == "-c" || a.starts_with("--config-env") || a.starts_with("-c"))
        {
            return unknowable(
                "git -c sets configuration that can run programs (diff.external, core.fsmonitor, ...)",
            );
        }
        if program == "tar"
            && (has_short_flag(args, "TP")
                || has_long_flag(args, &["--files-from", "--absolute-names"]))
        {
            return unknowable(
                "tar reads member names from a list or keeps absolute names, which cannot be judged here",
            );
        }
        if program == "curl"
            && args
                .iter()
                .any(|a| a.to_ascii_lowercase().contains("file:"))
        {
            return unknowable("curl file:// reads local files named at run time");
        }
        if matches!(program, "sed" | "awk" | "gawk" | "mawk")
            && args.iter().any(|a| script_writes(program, a))
        {
            return unknowable(format!("{program}'s script writes files it names itself"));
        }
        let options = program_options(program);
        let recursive = is_recursive(program, args);
        let mut operands: Vec<String> = Vec::new();
        let mut i = 0;
        let mut after_dashdash = false;
        let mut pattern_pending = options.pattern_first;
        while let Some(a) = args.get(i) {
            if after_dashdash || !a.starts_with('-') || a == "-" {
                if pattern_pending {
                    pattern_pending = false; // grep PATTERN, sed SCRIPT, awk PROGRAM: not a path
                } else {
                    operands.push(a.clone());
                }
                i += 1;
                continue;
            }
            if a == "--" {
                after_dashdash = true;
                i += 1;
                continue;
            }
            let mut matched = false;
            for (short, long, access) in options.path_options {
                let at = i;
                if let Some(value) = option_value(args, &mut i, short, long) {
                    if *short == "-C" && program != "tar" {
                        // git -C DIR, make -C DIR: the rest runs there.
                        self.push("option", &value, Access::Read, base)?;
                        let dir = resolve(base, &value);
                        *base = Some(dir);
                    } else if *short == "-C" {
                        let target = resolve(base, &value).to_string_lossy().into_owned();
                        self.recursive.push(("tar -C".to_string(), target, *access));
                    } else {
                        self.push("option", &value, *access, base)?;
                    }
                    matched = true;
                    break;
                }
                i = at;
            }
            if matched {
                i += 1;
                continue;
            }
            if options.pattern_first
                && (a == "-e" || a == "-f" || a.starts_with("--regexp") || a.starts_with("-e"))
            {
                pattern_pending = false; // the pattern came as an option
                if a == "-e" {
                    i += 1;
                }
            } else if let Some((_, value)) = a.split_once('=')
                && value.contains('/')
            {
                self.push("option", value, Access::Read, base)?;
            }
            i += 1;
        }
        if program == "ln" && (has_short_flag(args, "s") || has_long_flag(args, &["--symbolic"])) {
            self.note_symlinks(&operands, base);
        }
        let writes_all = WRITERS.contains(&program)
            || (program == "sed"
                && args
                    .iter()
                    .any(|a| a.starts_with("-i") || a == "--in-place"));
        let last = operands.len().saturating_sub(1);
        let recursion_default = operands.is_empty() && recursive;
        if recursion_default {
            operands.push(".".to_string());
        }
        for (i, a) in operands.iter().enumerate() {
            if a.as_str() == "-" {
                continue;
            }
            let access = if writes_all
                || (LAST_WRITTEN.contains(&program) && i == last && operands.len() > 1)
            {
                Access::Write
            } else {
                Access::Read
            };
            if program == "dd" {
                // dd's operands are if=/of=.
                if let Some(f) = a.strip_prefix("if=") {
                    self.push("dd if", f, Access::Read, base)?;
                } else if let Some(f) = a.strip_prefix("of=") {
                    self.push("dd of", f, Access::Write, base)?;
                }
                continue;
            }
            // rm, unlink, readlink, mv's sources, and ls -l, stat, cp -P without -L: the operation is on
            // the entry itself. A destination (mv, cp) is followed: into a directory (or a symlink to
            // one) it lands inside.
            let destination = i == last && operands.len() > 1;
            let on_link = options.on_link || acts_on_links(program, args);
            let field = if on_link && !(matches!(program, "mv" | "cp") && destination) {
                ENTRY_FIELD
            } else {
                "argument"
            };
            let first = self.out.len();
            self.push(field, a, access, base)?;
            if recursive {
                // Every path the operand became is recursed into: a glob's matches (not the directory
                // they were found in, pushed first), or, with none, that directory.
                let pushed = self.out.get(first..).unwrap_or(&[]);
                let pushed = match pushed {
                    [_start, matches @ ..] if !matches.is_empty() => matches.to_vec(),
                    all => all.to_vec(),
                };
                self.recursive.extend(
                    pushed
                        .into_iter()
                        .map(|(_, path, _)| ("recursive".to_string(), path, access)),
                );
            }
        }
        Ok(())
    }

    /// A word whose meaning is a value, not necessarily a path (for-lists, test operands, assignments):
    /// judged only when it looks like one.
    fn judge_word(
        &mut self,
        field: &str,
        value: &str,
        access: Access,
        base: &Option<PathBuf>,
    ) -> Step {
        if value.contains('/') || value.starts_with('.') {
            self.push(field, value, access, base)?;
        }
        Ok(())
    }

    /// A path a command names, resolved against the command's directory; a glob is expanded against the
    /// filesystem as bash would, and every match judged (with the directory it starts from). `field`
    /// [`ENTRY_FIELD`] asks for the entry itself to be judged (`rm link`), not where a symlink there points.
    fn push(&mut self, field: &str, value: &str, access: Access, base: &Option<PathBuf>) -> Step {
        if value.is_empty() {
            return Ok(());
        }
        let value = expand_tilde(value, self.home);
        if self.cwd_unknown && !value.starts_with('/') {
            return unknowable(format!(
                "'{value}' is relative, and a `cd` before it may or may not have run"
            ));
        }
        if value.contains(['*', '?', '[']) {
            let literal = literal_prefix(&value);
            let start = match base {
                Some(_) => resolve(base, &literal),
                None => PathBuf::from(&literal),
            };
            self.out.push((
                field.to_string(),
                start.to_string_lossy().into_owned(),
                access,
            ));
            if base.is_some() || value.starts_with('/') {
                for m in glob_matches(&resolve(base, &value))? {
                    self.out
                        .push((field.to_string(), m.to_string_lossy().into_owned(), access));
                }
            }
            return Ok(());
        }
        let path = match base {
            Some(_) => resolve(base, &value),
            None => PathBuf::from(value),
        };
        // Through a link this command made: judged where it leads, as well as where it is.
        let through: Vec<PathBuf> = self
            .links
            .iter()
            .filter_map(|(link, target)| {
                lexical(&path)
                    .strip_prefix(link)
                    .ok()
                    .map(|rest| target.join(rest))
            })
            .collect();
        self.out.push((
            field.to_string(),
            path.to_string_lossy().into_owned(),
            access,
        ));
        for p in through {
            self.out
                .push((field.to_string(), p.to_string_lossy().into_owned(), access));
        }
        Ok(())
    }

    /// Records the symlinks `ln -s` makes from its operands: `ln -s T L` (L a new name, or an existing
    /// directory to make `L/basename(T)` in), and `ln -s T1 T2 DIR`.
    fn note_symlinks(&mut self, operands: &[String], base: &Option<PathBuf>) {
        let Some((last, targets)) = operands.split_last() else {
            return;
        };
        let place = lexical(&resolve(base, &expand_tilde(last, self.home)));
        let into_dir = targets.len() > 1 || place.is_dir();
        for t in targets {
            let t = expand_tilde(t, self.home);
            let name = Path::new(&t)
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_default();
            let link = if into_dir {
                place.join(name)
            } else {
                place.clone()
            };
            // A relative target is relative to the link's own directory.
            let target = match link.parent() {
                Some(dir) if !t.starts_with('/') => lexical(&dir.join(&t)),
                _ => lexical(Path::new(&t)),
            };
            self.links.push((link, target));
        }
    }

    /// The word's value after quote removal, or unknowable when it depends on the run.
    fn expand(&self, word: &Word, base: &Option<PathBuf>) -> Result<String, Unknowable> {
        if brace_alternatives(&word.value).is_some() {
            return unknowable(format!(
                "'{}' uses brace expansion where bash takes one word",
                word.value
            ));
        }
        self.expand_one(word, base)
    }

    /// A word that bash may make several of by brace expansion (a command's arguments, a for list): each
    /// alternative, expanded.
    fn expand_all(&self, word: &Word, base: &Option<PathBuf>) -> Result<Vec<String>, Unknowable> {
        let Some(alternatives) = brace_alternatives(&word.value) else {
            return Ok(vec![self.expand_one(word, base)?]);
        };
        let Some(alternatives) = alternatives else {
            return unknowable(format!(
                "'{}' expands to more than {MAX_BRACE_WORDS} words",
                word.value
            ));
        };
        alternatives
            .into_iter()
            .map(|value| self.expand_one(&Word { value, loc: None }, base))
            .collect()
    }

    fn expand_one(&self, word: &Word, base: &Option<PathBuf>) -> Result<String, Unknowable> {
        let options = ParserOptions::default();
        let pieces = match brush_parser::word::parse(&word.value, &options) {
            Ok(p) => p,
            Err(e) => return unknowable(format!("cannot read the word '{}' ({e})", word.value)),
        };
        let mut out = String::new();
        self.pieces(&pieces, base, &mut out, &word.value)?;
        Ok(out)
    }

    fn pieces(
        &self,
        pieces: &[WordPieceWithSource],
        base: &Option<PathBuf>,
        out: &mut String,
        raw: &str,
    ) -> Step {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(t) | WordPiece::SingleQuotedText(t) => out.push_str(t),
                WordPiece::AnsiCQuotedText(t) => match ansi_c_decode(t) {
                    Some(decoded) => out.push_str(&decoded),
                    None => {
                        return unknowable(format!(
                            "'{raw}' has a $'...' escape that is not judged here (a NUL byte, or one not in bash's list)"
                        ));
                    }
                },
                WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, base, out, raw)?;
                }
                WordPiece::TildeExpansion(TildeExpr::Home) => out.push_str(self.home),
                WordPiece::TildeExpansion(TildeExpr::WorkingDir) => {
                    out.push_str(
                        &base
                            .as_ref()
                            .map(|b| b.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    );
                }
                WordPiece::TildeExpansion(_) => {
                    return unknowable(format!(
                        "'{raw}' names another user's home or the directory stack"
                    ));
                }
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(n),
                    indirect: false,
                }) => match n.as_str() {
                    "HOME" => out.push_str(self.home),
                    "PWD" => match base {
                        Some(b) => out.push_str(&b.to_string_lossy()),
                        None => return unknowable("$PWD without a known working directory"),
                    },
                    _ => {
                        return unknowable(format!(
                            "'{raw}' uses ${n}, whose value is only known when the command runs"
                        ));
                    }
                },
                WordPiece::ParameterExpansion(_) => {
                    return unknowable(format!(
                        "'{raw}' uses a parameter expansion whose value is only known when the command runs"
                    ));
                }
                WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
                    return unknowable(format!(
                        "'{raw}' uses command substitution, which runs a command whose effects cannot be judged here"
                    ));
                }
                WordPiece::ArithmeticExpression(e) => no_substitution(&e.value)?,
            }
        }
        Ok(())
    }
}

/// `path` with `.` dropped and `..` taken back lexically (for comparing names, not for judging).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c @ (std::path::Component::Prefix(_)
            | std::path::Component::RootDir
            | std::path::Component::Normal(_)) => out.push(c),
        }
    }
    out
}

/// The field of a request judged on the entry itself, not where a symlink there points.
pub(crate) const ENTRY_FIELD: &str = "entry";

/// Variables whose value later words depend on (`~`, `$PWD`, `cd` lookups): assigning one makes what
/// follows unknowable.
const SHELL_STATE: &[&str] = &["HOME", "PWD", "OLDPWD", "CDPATH", "BASH_ENV", "ENV"];

fn check_assignment(word: &str) -> Step {
    let name = word.split_once('=').map_or(word, |(n, _)| n);
    let name = name.trim_end_matches('+');
    if SHELL_STATE.contains(&name) {
        return unknowable(format!(
            "it assigns {name}, which changes what later paths (or the shells it starts) mean"
        ));
    }
    Ok(())
}

/// A raw leading `~` means the home directory (callers other than Claude Code may not expand it).
pub(crate) fn expand_tilde(value: &str, home: &str) -> String {
    match value.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{home}{rest}"),
        _ => value.to_string(),
    }
}

/// Words one brace expansion may make before the command counts as unknowable.
const MAX_BRACE_WORDS: usize = 1024;

/// Bash's brace expansion of a raw word, quote-aware (it runs before every other expansion, on the word
/// as written, so each alternative keeps its quotes): `None` when the word has none; `Some(None)` when it
/// makes more than [`MAX_BRACE_WORDS`] words.
fn brace_alternatives(raw: &str) -> Option<Option<Vec<String>>> {
    let (open, close, parts) = first_brace(raw)?;
    let prefix = raw.get(..open).unwrap_or("");
    let suffix = raw.get(close + 1..).unwrap_or("");
    let mut out = Vec::new();
    for part in parts {
        let word = format!("{prefix}{part}{suffix}");
        // The rest of the word may hold more braces: expand each alternative in turn.
        match brace_alternatives(&word) {
            None => out.push(word),
            Some(None) => return Some(None),
            Some(Some(more)) => out.extend(more),
        }
        if out.len() > MAX_BRACE_WORDS {
            return Some(None);
        }
    }
    Some(Some(out))
}

/// The first unquoted `{...}` of `raw` that bash expands: its byte offsets and alternatives (a comma
/// list at its own level, or a `{1..5}` / `{a..e}` sequence).
fn first_brace(raw: &str) -> Option<(usize, usize, Vec<String>)> {
    let bytes = raw.as_bytes();
    let mut i = 0;
    let (mut single, mut double) = (false, false);
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            // `${...}` is a parameter, not a brace expansion.
            b'{' if !single && !double && (i == 0 || bytes.get(i - 1) != Some(&b'$')) => {
                if let Some((close, parts)) = brace_body(raw, i) {
                    return Some((i, close, parts));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// From the `{` at `open`: the offset of its matching `}` and the alternatives, if it expands.
fn brace_body(raw: &str, open: usize) -> Option<(usize, Vec<String>)> {
    let bytes = raw.as_bytes();
    let mut depth = 0usize;
    let (mut single, mut double) = (false, false);
    let mut commas = Vec::new();
    let mut i = open;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'{' if !single && !double => depth += 1,
            b',' if !single && !double && depth == 1 => commas.push(i),
            b'}' if !single && !double => {
                depth -= 1;
                if depth == 0 {
                    let inner = raw.get(open + 1..i)?;
                    if !commas.is_empty() {
                        let mut parts = Vec::new();
                        let mut start = open + 1;
                        for c in commas.iter().copied().chain(std::iter::once(i)) {
                            parts.push(raw.get(start..c)?.to_string());
                            start = c + 1;
                        }
                        return Some((i, parts));
                    }
                    return sequence(inner).map(|parts| (i, parts));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `1..5`, `5..1`, `1..10..2`, `a..e`: the words of a brace sequence (at most [`MAX_BRACE_WORDS`] + 1).
fn sequence(inner: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = inner.split("..").collect();
    let (from, to, step) = match parts.as_slice() {
        [a, b] => (*a, *b, 1i64),
        [a, b, c] => (*a, *b, c.parse::<i64>().ok()?.checked_abs()?.max(1)),
        _ => return None,
    };
    if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let mut out = Vec::new();
        let mut n = a;
        loop {
            out.push(n.to_string());
            if n == b || out.len() > MAX_BRACE_WORDS {
                break;
            }
            n = if a <= b {
                n.checked_add(step)?
            } else {
                n.checked_sub(step)?
            };
            if (a <= b && n > b) || (a > b && n < b) {
                break;
            }
        }
        return Some(out);
    }
    let (mut a, mut b) = (from.chars(), to.chars());
    match (a.next(), a.next(), b.next(), b.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (lo, hi) = (x.min(y) as u8, x.max(y) as u8);
            let mut out: Vec<String> = (lo..=hi).map(|c| char::from(c).to_string()).collect();
            if x > y {
                out.reverse();
            }
            Some(out)
        }
        _ => None,
    }
}

/// The text of a `$'...'` word as bash decodes it, or `None` for what is not judged here (a NUL byte,
/// `\c` control characters, an escape bash does not define).
fn ansi_c_decode(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let simple = match e {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 2),
            _ => return None,
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max + usize::from(radix == 8) {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        let value = u32::from_str_radix(&digits, radix).ok()?;
        // A NUL ends bash's word there; and a byte above 0x7f from \x or octal is not UTF-8 text.
        if value == 0 || (matches!(e, 'x' | '0'..='7') && value > 0x7f) {
            return None;
        }
        out.push(char::from_u32(value)?);
    }
    Some(out)
}

/// At most this many entries are read while expanding one glob; past it the command is unknowable.
const MAX_GLOB_ENTRIES: usize = 10_000;

/// What bash's pathname expansion gives `pattern` (absolute): each component with `*`, `?` or `[` is
/// matched against the names in the directories reached so far (a leading `.` only by a pattern that
/// starts with one; `**` is `*`, as without `globstar`).
fn glob_matches(pattern: &Path) -> Result<Vec<PathBuf>, Unknowable> {
    let mut current = vec![PathBuf::from("/")];
    let mut read = 0usize;
    for component in pattern.components().skip(1) {
        let name = component.as_os_str().to_string_lossy();
        if !name.contains(['*', '?', '[']) {
            for c in &mut current {
                c.push(component);
            }
            continue;
        }
        let Ok(glob) = globset::GlobBuilder::new(&name)
            .literal_separator(true)
            .build()
        else {
            return unknowable(format!("cannot read the glob '{name}'"));
        };
        let matcher = glob.compile_matcher();
        let mut next = Vec::new();
        for dir in &current {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                read += 1;
                if read > MAX_GLOB_ENTRIES {
                    return unknowable(format!(
                        "'{}' matches too many names to judge before it runs",
                        pattern.display()
                    ));
                }
                let file_name = e.file_name();
                let text = file_name.to_string_lossy();
                if text.starts_with('.') && !name.starts_with('.') {
                    continue;
                }
                if matcher.is_match(text.as_ref()) {
                    next.push(dir.join(&file_name));
                }
            }
        }
        current = next;
    }
    Ok(current)
}

/// Whether a sed or awk script argument writes files itself (`w file`, `print > file`, a pipe, `system`).
fn script_writes(program: &str, arg: &str) -> bool {
    match program {
        "sed" => {
            arg.contains('w') && (arg.contains("w ") || arg.contains("w/") || arg.contains("W "))
        }
        "awk" | "gawk" | "mawk" => arg.contains('>') || arg.contains('|') || arg.contains("system"),
        _ => false,
    }
}

/// How one program's arguments name paths.
struct ProgramOptions {
    /// Options whose value is a path: (short, long, access). `-C` changes the directory.
    path_options: &'static [(&'static str, &'static str, Access)],
    /// The first operand is a pattern or a script, not a path (grep, sed, awk), unless given by option.
    pattern_first: bool,
    /// The operands are entries operated on themselves (rm, unlink, mv), not followed through symlinks.
    on_link: bool,
}

fn program_options(program: &str) -> ProgramOptions {
    use Access::{Read, Write};
    let (path_options, pattern_first, on_link): (
        &'static [(&'static str, &'static str, Access)],
        bool,
        bool,
    ) = match program {
        "sort" => (&[("-o", "--output", Write)], false, false),
        "cp" | "ln" | "install" => (&[("-t", "--target-directory", Write)], false, false),
        "mv" => (&[("-t", "--target-directory", Write)], false, true),
        "rm" | "unlink" | "readlink" => (&[], false, true),
        "grep" | "egrep" | "fgrep" | "rg" | "ag" => (&[("-f", "--file", Read)], true, false),
        "sed" => (&[("-f", "--file", Read)], true, false),
        "awk" | "gawk" | "mawk" => (&[("-f", "--file", Read)], true, false),
        "tar" => (
            &[("-f", "--file", Write), ("-C", "--directory", Write)],
            false,
            false,
        ),
        "git" => (&[("-C", "", Read)], false, false),
        "gcc" | "cc" | "g++" | "c++" | "clang" | "clang++" | "ld" | "as" => {
            (&[("-o", "", Write)], false, false)
        }
        "curl" => (
            &[
                ("-o", "--output", Write),
                ("-K", "--config", Read),
                ("-T", "--upload-file", Read),
            ],
            false,
            false,
        ),
        "wget" => (
            &[
                ("-O", "--output-document", Write),
                ("-i", "--input-file", Read),
            ],
            false,
            false,
        ),
        "patch" => (
            &[("-i", "--input", Read), ("-o", "--output", Write)],
            false,
            false,
        ),
        _ => (&[], false, false),
    };
    ProgramOptions {
        path_options,
        pattern_first,
        on_link,
    }
}

/// Whether a cluster of single-letter flags (`-xzf`) among `args` holds one of `letters`.
fn has_short_flag(args: &[String], letters: &str) -> bool {
    args.iter().any(|a| {
        a.starts_with('-') && !a.starts_with("--") && a.chars().skip(1).any(|c| letters.contains(c))
    })
}

/// Whether a long option among `args` starts with one of `names` (`--recursive`, `--file=x`).
fn has_long_flag(args: &[String], names: &[&str]) -> bool {
    args.iter().any(|a| names.iter().any(|n| a.starts_with(n)))
}

/// Whether these flags make the program look at a symlink operand itself rather than where it leads:
/// `ls -l`/`-d` (without `-L`/`-H`), `stat` (without `-L`), `cp -P`/`-d`/`-a`/`-R` (without `-L`).
fn acts_on_links(program: &str, args: &[String]) -> bool {
    let short = |letters: &str| has_short_flag(args, letters);
    let dereference = has_long_flag(args, &["--dereference"]);
    match program {
        "ls" => short("ld") && !short("LH") && !dereference,
        "stat" => !short("L") && !dereference,
        "cp" => {
            (short("PdaRr") || has_long_flag(args, &["--no-dereference", "--archive"]))
                && !short("L")
                && !dereference
        }
        _ => false,
    }
}

/// Whether the program reads or changes its directory operands recursively.
fn is_recursive(program: &str, args: &[String]) -> bool {
    let short = |letters: &str| has_short_flag(args, letters);
    let long = |names: &[&str]| has_long_flag(args, names);
    match program {
        "rg" | "ag" | "find" | "du" | "tree" | "tar" => true,
        "grep" | "egrep" | "fgrep" => {
            short("rR") || long(&["--recursive", "--dereference-recursive"])
        }
        "rm" => short("rR") || long(&["--recursive"]),
        "cp" | "scp" => short("rRa") || long(&["--recursive", "--archive"]),
        "rsync" => short("ra") || long(&["--recursive", "--archive"]),
        "chmod" | "chown" | "chgrp" | "setfacl" | "ls" => short("R") || long(&["--recursive"]),
        "zip" => short("r") || long(&["--recurse-paths"]),
        _ => false,
    }
}

/// The value of option `short`/`long` at `args[*i]` (`-o FILE`, `-oFILE`, `-xzf FILE` in a cluster of
/// flags, `--output=FILE`, `--output FILE`), advancing `*i` past a separate value.
fn option_value(args: &[String], i: &mut usize, short: &str, long: &str) -> Option<String> {
    let a = args.get(*i)?;
    if !long.is_empty() {
        if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        if a == long {
            *i += 1;
            return args.get(*i).cloned();
        }
    }
    if short.is_empty() {
        return None;
    }
    if a == short {
        *i += 1;
        return args.get(*i).cloned();
    }
    let letter = short.chars().nth(1)?;
    let flags = a.strip_prefix('-').filter(|f| !f.starts_with('-'))?;
    // A cluster of single-letter flags ends with the option: the rest of the word, or the next one.
    let pos = flags.find(letter)?;
    if !flags.get(..pos)?.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let rest = flags.get(pos + 1..)?;
    if rest.is_empty() {
        *i += 1;
        return args.get(*i).cloned();
    }
    Some(rest.to_string())
}

fn no_substitution(text: &str) -> Step {
    if text.contains("$(") || text.contains('`') || text.contains("<(") || text.contains(">(") {
        return unknowable(
            "a substitution inside arithmetic or a here-document runs a command whose effects cannot be judged here",
        );
    }
    Ok(())
}

/// Relative to the current directory of the command (after `cd`).
fn resolve(base: &Option<PathBuf>, path: &str) -> PathBuf {
    match base {
        Some(b) if !Path::new(path).is_absolute() => b.join(path),
        _ => PathBuf::from(path),
    }
}

/// The part of a word before its first glob character, cut back to a whole component.
fn literal_prefix(value: &str) -> String {
    match value.find(['*', '?', '[']) {
        None => value.to_string(),
        Some(i) => {
            let head = value.get(..i).unwrap_or("");
            match head.rfind('/') {
                Some(0) => "/".to_string(),
                Some(j) => head.get(..j).unwrap_or("").to_string(),
                None => ".".to_string(),
            }
        }
    }
}

/// Path-like tokens in an interpreter one-liner: absolute, home-relative or climbing ones.
fn code_paths(code: &str) -> Vec<String> {
    code.split(|c: char| c.is_whitespace() || "'\"`(),;[]{}=+<>|&".contains(c))
        .filter(|t| t.starts_with('/') || t.starts_with("~/") || t.starts_with("../"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(literal_prefix("/etc/*.conf"), "/etc");
        assert_eq!(literal_prefix("*.rs"), ".");
        assert_eq!(literal_prefix("/*"), "/");
        assert_eq!(literal_prefix("src/a.rs"), "src/a.rs");
        assert_eq!(
            code_paths("open('/etc/shadow').read(); x = '../up'"),
            vec!["/etc/shadow", "../up"]
        );
    }

    #[test]
    fn braces_expand_as_bash_does() {
        let words = |raw: &str| brace_alternatives(raw).map(|w| w.unwrap_or_default());
        assert_eq!(words("a"), None);
        assert_eq!(words("${HOME}/x"), None);
        assert_eq!(words("'{a,b}'"), None);
        assert_eq!(words("{a}"), None);
        assert_eq!(words("x{a,b}y"), Some(vec!["xay".into(), "xby".into()]));
        assert_eq!(
            words("{../../..,.}/s"),
            Some(vec!["../../../s".into(), "./s".into()])
        );
        assert_eq!(words("{a,'b c'}"), Some(vec!["a".into(), "'b c'".into()]));
        assert_eq!(
            words("{a,{b,c}}{1..2}"),
            Some(vec![
                "a1".into(),
                "a2".into(),
                "b1".into(),
                "b2".into(),
                "c1".into(),
                "c2".into()
            ])
        );
        assert_eq!(
            words("{c..a}"),
            Some(vec!["c".into(), "b".into(), "a".into()])
        );
        assert_eq!(
            words("{1..9..4}"),
            Some(vec!["1".into(), "5".into(), "9".into()])
        );
        assert_eq!(brace_alternatives("{1..100000}"), Some(None));
    }

    #[test]
    fn ansi_c_quotes_decode_as_bash_does() {
        assert_eq!(ansi_c_decode(r"\x2e\x2e/a").as_deref(), Some("../a"));
        assert_eq!(ansi_c_decode(r"\056\56").as_deref(), Some(".."));
        assert_eq!(ansi_c_decode(r"a\tb\'").as_deref(), Some("a\tb'"));
        assert_eq!(ansi_c_decode(r"\u002e").as_deref(), Some("."));
        assert_eq!(ansi_c_decode(r"\x00"), None);
        assert_eq!(ansi_c_decode(r"\q"), None);
    }

    /// A recursive command over a glob recurses into every match, not only the last one judged.
    #[test]
    fn every_glob_match_of_a_recursive_operand_is_recursed_into() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["d1", "d2", "e"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let cwd = dir.path().to_str().unwrap();
        let BashAnalysis::Paths { recursive, .. } = analyze("grep -r x d*", Some(cwd), "/h", &[])
        else {
            panic!("unknowable");
        };
        let mut dirs: Vec<String> = recursive.into_iter().map(|(_, p, _)| p).collect();
        dirs.sort();
        assert_eq!(dirs, vec![format!("{cwd}/d1"), format!("{cwd}/d2")]);
    }
}
