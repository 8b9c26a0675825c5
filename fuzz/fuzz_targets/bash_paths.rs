//! Generated Bash commands (words, quotes, redirections, `cd`, pipes, `$()`, `bash -c`, heredocs) over a
//! pool of paths inside and outside the scope: the hook never allows a command that names an outside path
//! (it judges it, or refuses the command as unknowable), and never panics.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use stockade_hook::{HookInput, Verdict};

#[path = "common.rs"]
mod common;

#[derive(Debug, Arbitrary)]
enum Word {
    Inside(u8),
    Outside(u8),
    Single(Box<Word>),
    Double(Box<Word>),
}

#[derive(Debug, Arbitrary)]
enum Cmd {
    Cat(Vec<Word>),
    Ls(Word),
    Cp(Word, Word),
    Rm(Word),
    Redirect {
        cmd: Box<Cmd>,
        target: Word,
        append: bool,
        input: bool,
    },
    Cd(Word, Box<Cmd>),
    Pipe(Box<Cmd>, Box<Cmd>),
    AndThen(Box<Cmd>, Box<Cmd>),
    Substitution(Word),
    BashC(Box<Cmd>),
    Heredoc(Word),
}

/// Paths inside from `work` and from `work/src` alike.
const INSIDE: &[&str] = &["lib.rs", "new.rs", "notes.txt", "./x/../y.txt", "src"];

/// Paths outside the scope from every directory a command can `cd` to (`work` and `work/src`): absolute
/// ones, climbs deep enough from either, and `.env` names.
fn outside_words(world: &common::World) -> Vec<String> {
    vec![
        "../../secret/key".into(),
        world.secret.join("key").display().to_string(),
        world.work.join("link-out/key").display().to_string(),
        ".env".into(),
        "x/../.env".into(),
        "../../../../../../etc/passwd".into(),
        world.base.display().to_string(),
    ]
}

fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn word(w: &Word, outside: &[String], named_outside: &mut bool, depth: u8) -> String {
    match w {
        Word::Inside(i) => INSIDE[usize::from(*i) % INSIDE.len()].to_string(),
        Word::Outside(i) => {
            *named_outside = true;
            outside[usize::from(*i) % outside.len()].clone()
        }
        // One level of quoting: quotes inside quotes would be literal characters of the name.
        Word::Single(inner) => sq(&word(&unquoted(inner), outside, named_outside, depth + 1)),
        Word::Double(inner) => format!(
            "\"{}\"",
            word(&unquoted(inner), outside, named_outside, depth + 1)
        ),
    }
}

fn unquoted(w: &Word) -> Word {
    match w {
        Word::Inside(i) => Word::Inside(*i),
        Word::Outside(i) => Word::Outside(*i),
        Word::Single(inner) | Word::Double(inner) => unquoted(inner),
    }
}

fn cmd(c: &Cmd, outside: &[String], named: &mut bool, depth: u8) -> String {
    if depth > 6 {
        return "true".into();
    }
    let w = |x: &Word, named: &mut bool| word(x, outside, named, 0);
    match c {
        Cmd::Cat(words) => {
            let args: Vec<String> = words.iter().take(4).map(|x| w(x, named)).collect();
            format!("cat {}", args.join(" "))
        }
        Cmd::Ls(x) => format!("ls {}", w(x, named)),
        Cmd::Cp(a, b) => format!("cp {} {}", w(a, named), w(b, named)),
        Cmd::Rm(x) => format!("rm -f {}", w(x, named)),
        Cmd::Redirect {
            cmd: inner,
            target,
            append,
            input,
        } => {
            let op = if *input {
                "<"
            } else if *append {
                ">>"
            } else {
                ">"
            };
            format!(
                "{} {op} {}",
                cmd(inner, outside, named, depth + 1),
                w(target, named)
            )
        }
        Cmd::Cd(dir, inner) => format!(
            "cd {} && {}",
            w(dir, named),
            cmd(inner, outside, named, depth + 1)
        ),
        Cmd::Pipe(a, b) => format!(
            "{} | {}",
            cmd(a, outside, named, depth + 1),
            cmd(b, outside, named, depth + 1)
        ),
        Cmd::AndThen(a, b) => format!(
            "{}; {}",
            cmd(a, outside, named, depth + 1),
            cmd(b, outside, named, depth + 1)
        ),
        Cmd::Substitution(x) => format!("cat $(echo {})", w(x, named)),
        Cmd::BashC(inner) => format!("bash -c {}", sq(&cmd(inner, outside, named, depth + 1))),
        // The terminator alone on its line: what follows starts a new line.
        Cmd::Heredoc(x) => format!("cat > {} <<'EOF'\nhello\nEOF\n", w(x, named)),
    }
}

fuzz_target!(|c: Cmd| {
    let world = common::world();
    let outside = outside_words(world);
    let mut named_outside = false;
    let command = cmd(&c, &outside, &mut named_outside, 0);
    let input: HookInput = serde_json::from_value(serde_json::json!({
        "cwd": world.work.display().to_string(), "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": command}
    }))
    .unwrap();
    let judgement = stockade_hook::judge(&world.policy, &input);
    if named_outside {
        assert!(
            !matches!(judgement.verdict, Verdict::Allow { .. }),
            "allowed a command naming an outside path: {command:?}\n{:?}",
            judgement.touches
        );
    }
});
