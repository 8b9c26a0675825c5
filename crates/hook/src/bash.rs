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
    /// Every path the command names (absolute when the call had an absolute cwd).
    Paths(Vec<PathRequest>),
    /// Something decides at run time what is touched.
    Unknowable(String),
}

struct Walker<'a> {
    home: &'a str,
    allowed: &'a [String],
    out: Vec<PathRequest>,
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
    };
    let base = cwd.map(PathBuf::from);
    match w.program(command, base, 0) {
        Ok(_) => BashAnalysis::Paths(w.out),
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
            self.pipeline(&and_or.first, base, depth)?;
            for next in &and_or.additional {
                let p = match next {
                    brush_parser::ast::AndOr::And(p) | brush_parser::ast::AndOr::Or(p) => p,
                };
                self.pipeline(p, base, depth)?;
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
                    let value = self.expand(v, base)?;
                    self.judge_word("for", &value, Access::Read, base);
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
                self.judge_word("[[", &v, Access::Read, base);
                Ok(())
            }
            ExtendedTestExpr::BinaryTest(_, l, r) => {
                let l = self.expand(l, base)?;
                let r = self.expand(r, base)?;
                self.judge_word("[[", &l, Access::Read, base);
                self.judge_word("[[", &r, Access::Read, base);
                Ok(())
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
                    self.push("redirection", &v, access, base);
                    Ok(())
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
                self.push("redirection", &v, Access::Write, base);
                Ok(())
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
                    let raw = w.value.split_once('=').map_or(w.value.as_str(), |(_, v)| v);
                    let v = self.expand(
                        &Word {
                            value: raw.to_string(),
                            loc: None,
                        },
                        base,
                    )?;
                    self.judge_word("assignment", &v, Access::Read, base);
                }
                CommandPrefixOrSuffixItem::Word(w) => words.push(self.expand(w, base)?),
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
            self.push("program", name, Access::Read, base);
        }
        let program = name.rsplit('/').next().unwrap_or(name);
        if self.allowed.iter().any(|a| a == program) {
            return Ok(()); // commands.allow: the command passes whole (its redirections were judged)
        }
        match program {
            "eval" => return unknowable("eval runs a string built at run time"),
            "exec" | "command" | "nohup" | "time" | "nice" | "env" | "sudo" | "xargs"
            | "timeout" | "stdbuf" => {
                let rest: Vec<String> = args
                    .iter()
                    .skip_while(|a| a.starts_with('-') || a.contains('=') && program == "env")
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
                        self.push("cd", t, Access::Read, base);
                        let next = resolve(base, t);
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
                return Ok(());
            }
            "source" | "." => {
                if let Some(f) = args.first() {
                    self.push("source", f, Access::Read, base);
                }
                return Ok(());
            }
            _ => {}
        }
        if SHELLS.contains(&program) {
            if let Some(i) = args.iter().position(|a| {
                a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.contains('c'))
            }) && let Some(script) = args.get(i + 1)
            {
                self.program(script, base.clone(), depth + 1)?;
                return Ok(());
            }
            for f in args.iter().filter(|a| !a.starts_with('-')) {
                self.push("script", f, Access::Read, base);
            }
            return Ok(());
        }
        if INTERPRETERS.contains(&program) {
            let mut code_next = false;
            for a in args {
                if code_next {
                    for token in code_paths(a) {
                        self.push("one-liner", &token, Access::Read, base);
                    }
                    code_next = false;
                    continue;
                }
                if a == "-c" || a == "-e" || a == "-E" || a == "--eval" || a == "-p" {
                    code_next = true;
                } else if !a.starts_with('-') {
                    self.push("script", a, Access::Read, base);
                }
            }
            return Ok(());
        }
        let operands: Vec<&String> = {
            let mut after_dashdash = false;
            let mut v = Vec::new();
            for a in args {
                if after_dashdash {
                    v.push(a);
                } else if a == "--" {
                    after_dashdash = true;
                } else if let Some((_, value)) = a.split_once('=').filter(|_| a.starts_with('-')) {
                    if value.contains('/') {
                        self.push("option", value, Access::Read, base);
                    }
                } else if !a.starts_with('-') || a == "-" {
                    v.push(a);
                }
            }
            v
        };
        let writes_all = WRITERS.contains(&program)
            || (program == "sed"
                && args
                    .iter()
                    .any(|a| a.starts_with("-i") || a == "--in-place"));
        let last = operands.len().saturating_sub(1);
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
                    self.push("dd if", f, Access::Read, base);
                } else if let Some(f) = a.strip_prefix("of=") {
                    self.push("dd of", f, Access::Write, base);
                }
                continue;
            }
            self.push("argument", a, access, base);
        }
        Ok(())
    }

    /// A word whose meaning is a value, not necessarily a path (for-lists, test operands, assignments):
    /// judged only when it looks like one.
    fn judge_word(&mut self, field: &str, value: &str, access: Access, base: &Option<PathBuf>) {
        if value.contains('/') || value.starts_with('.') {
            self.push(field, value, access, base);
        }
    }

    fn push(&mut self, field: &str, value: &str, access: Access, base: &Option<PathBuf>) {
        if value.is_empty() {
            return;
        }
        let literal = literal_prefix(value);
        let path = match base {
            Some(_) => resolve(base, &literal).to_string_lossy().into_owned(),
            None => literal,
        };
        self.out.push((field.to_string(), path, access));
    }

    /// The word's value after quote removal, or unknowable when it depends on the run.
    fn expand(&self, word: &Word, base: &Option<PathBuf>) -> Result<String, Unknowable> {
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
                WordPiece::Text(t)
                | WordPiece::SingleQuotedText(t)
                | WordPiece::AnsiCQuotedText(t) => out.push_str(t),
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
}
