//! `stockade hook claude`: fails closed. Whatever happens (bad input, no policy, a panic), the answer is a
//! deny with exit 2, the only code that blocks a tool in every Claude Code version.

use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use stockade_audit::{AuditLog, AuditRecord, Layer};
use stockade_hook::{
    Event, HookInput, Judgement, Rendered, Verdict, judge, render, render_failure,
};
use stockade_policy::{OnAllow, parse_duration};

use crate::args::HookArgs;
use crate::policy_args;
use crate::{ExitStatus, output};

/// Hook input larger than this is refused (Claude Code's inputs are a few KiB; Write carries file content).
const MAX_INPUT: u64 = 64 << 20;

/// A usage error of the hook command still blocks.
pub(crate) fn usage_failure(message: &str) -> ExitCode {
    emit(&render_failure(&format!(
        "stockade hook: {}",
        message.trim()
    )));
    ExitCode::from(2)
}

pub(crate) fn claude(args: HookArgs, audit: &AuditLog) -> ExitStatus {
    // Claude Code lets the call through when a hook outlives its timeout: past the deadline, whatever is
    // still being judged, the answer is a deny. Whoever answers first (the judgement or the watchdog)
    // answers alone.
    let answered = Arc::new(AtomicBool::new(false));
    match policy_args::flag_value("--deadline", &args.deadline, parse_duration) {
        Ok(deadline) => {
            let flag = answered.clone();
            std::thread::spawn(move || {
                std::thread::sleep(deadline);
                if !flag.swap(true, Ordering::SeqCst) {
                    emit(&render_failure(&format!(
                        "stockade hook did not finish judging this call within its deadline of {} ms \
                         (slow filesystem or a huge command); refused rather than let Claude Code's timeout \
                         allow it",
                        deadline.as_millis()
                    )));
                    exit_now(2);
                }
            });
        }
        Err(e) => {
            answered.store(true, Ordering::SeqCst);
            emit(&render_failure(&format!("stockade hook: {e:#}")));
            return ExitStatus::External(2);
        }
    }
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| answer(&args, audit)));
    let rendered = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => render_failure(&format!("stockade hook failed closed: {e:#}")),
        Err(_) => render_failure("stockade hook panicked; failing closed"),
    };
    if answered.swap(true, Ordering::SeqCst) {
        // The watchdog has answered and is ending the process.
        loop {
            std::thread::park();
        }
    }
    emit(&rendered);
    if rendered.exit_code == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::External(2)
    }
}

/// Ends the process at once with `code`, from the deadline's watchdog while the judging thread may be
/// blocked in a system call.
#[allow(
    clippy::exit,
    reason = "the watchdog must end the process while the main thread is blocked"
)]
fn exit_now(code: i32) -> ! {
    std::process::exit(code)
}

fn emit(r: &Rendered) {
    if !r.stdout.is_empty() {
        output::out(&r.stdout);
    }
    if !r.stderr.is_empty() {
        output::raw_err(&r.stderr);
    }
}

fn answer(args: &HookArgs, audit: &AuditLog) -> anyhow::Result<Rendered> {
    let mut raw = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT)
        .read_to_end(&mut raw)
        .context("cannot read the hook input")?;
    if raw.iter().all(u8::is_ascii_whitespace) {
        bail!("empty hook input on stdin");
    }
    let input: HookInput =
        serde_json::from_slice(&raw).context("the hook input is not valid hook JSON")?;
    // Every variable comes from the installed command (pinned by `install`), never from the input's `cwd`
    // (which follows the agent's own `cd`) nor from a file the agent can write (the worktree's `.git`).
    let vars = policy_args::variables(&args.policy, false)?;
    let project = std::path::PathBuf::from(vars.get("CWD").unwrap_or("/"));
    // The process ends once it has answered: freeing the policy would cost every call ~4% of its work.
    let policy =
        std::mem::ManuallyDrop::new(policy_args::builder(&args.policy, vars.clone()).build()?);
    let judgement = judge(&policy, &input);
    // Sandboxed Bash: the same command, run by `stockade run` with the same policy and pinned variables;
    // every other field of the call (description, timeout, run_in_background, ...) is kept, since Claude
    // Code replaces the input with `updatedInput` rather than merging it.
    let updated = match (&judgement.sandbox_command, &input.tool_input) {
        (Some(command), Some(tool_input)) => {
            let run = policy_args::self_command(&["run"], &args.policy, &vars, &project)?;
            let mut tool_input = tool_input.clone();
            if let Some(fields) = tool_input.as_object_mut() {
                fields.insert(
                    "command".to_string(),
                    serde_json::Value::String(sandboxed_bash(&run, command)),
                );
            }
            Some(tool_input)
        }
        _ => None,
    };
    let event = input.event();
    record(audit, args.policy.agent.as_deref(), event, &judgement);
    if args.explain {
        output::out(&explain_text(event, &judgement));
        return Ok(Rendered {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: if matches!(judgement.verdict, Verdict::Deny { .. }) {
                2
            } else {
                0
            },
        });
    }
    let defer = policy.hook().on_allow == OnAllow::Defer;
    Ok(render(event, &judgement, defer, updated.as_ref()))
}

/// The command Claude Code's shell runs in place of `command`: `run` (a `stockade run` command line)
/// starts bash on it in the shell's current directory, confined (`--norc`: bash would otherwise source
/// `~/.bashrc` when its stdin looks like a remote shell's, which Claude Code's can). Bash reports its
/// final directory on a pipe (passed as descriptor 3, the only one the sandbox lets through besides 0-2)
/// when it exits, and the shell `cd`s there, so a `cd` carries over to the next call as with Claude Code's own Bash tool. Stdout
/// and stderr go where the shell's go, and the exit status (128+N for a signal) is the command's (set by a
/// function's `return`, which, unlike `(exit N)`, costs no fork).
fn sandboxed_bash(run: &str, command: &str) -> String {
    if let Some(words) = plain_simple_command(command) {
        // Nothing here can change the directory, expand, redirect or read the shell's state, so the
        // program runs directly: no second shell and no subshell to capture a directory (~1.5 ms).
        let words: Vec<String> = words.iter().map(|w| policy_args::quote(w)).collect();
        return format!("{run} --cwd \"$PWD\" -- {}", words.join(" "));
    }
    // The pipe moves off descriptor 3 (scripts use `exec 3>file`) to one bash picks above 9, as plain
    // bash leaves 3 free.
    let script = format!(
        "exec {{__stockade_cwd_fd}}>&3 3>&-\ntrap 'pwd -P >&\"$__stockade_cwd_fd\" 2>/dev/null' EXIT\n{command}"
    );
    format!(
        "{{ __stockade_cwd=$({run} --cwd \"$PWD\" --pass-fd 3 -- bash --norc --noprofile -c {} 3>&1 1>&4 4>&-); \
         __stockade_status=$?; [ -n \"$__stockade_cwd\" ] && cd -- \"$__stockade_cwd\" 2>/dev/null; \
         __stockade_exit() {{ return \"$1\"; }}; __stockade_exit \"$__stockade_status\"; }} 4>&1",
        policy_args::quote(&script)
    )
}

/// Bash's builtins and reserved words: a command naming one runs in the shell, not as a program.
const SHELL_WORDS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The words of `command` when bash would run it as exactly those words: one program (not a builtin
/// or reserved word), arguments made only of characters bash gives no meaning (no quoting, expansion,
/// globbing, tilde, comment, redirection, assignment or separator). `None` for anything else.
fn plain_simple_command(command: &str) -> Option<Vec<&str>> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:@%+,=-".contains(c);
    if !command.chars().all(|c| c == ' ' || plain(c)) {
        return None;
    }
    let words: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
    let program = words.first()?;
    if program.contains('=') || SHELL_WORDS.contains(program) {
        return None;
    }
    Some(words)
}

/// Refusals, and every PermissionRequest answered, go to the audit log. A log that cannot be written is
/// reported on stderr; the answer stands.
fn record(audit: &AuditLog, agent: Option<&str>, event: Event, j: &Judgement) {
    let answered = event == Event::PermissionRequest && !matches!(j.verdict, Verdict::Ask { .. });
    if !matches!(j.verdict, Verdict::Deny { .. }) && !answered {
        return;
    }
    let mut r = AuditRecord::new(Layer::Hook, j.verdict.reason())
        .maybe_agent(agent)
        .tool(j.tool.clone());
    if let Some(t) = j.touches.last() {
        r = r
            .path(t.path.as_path().display().to_string())
            .access(t.access.to_string());
    }
    if let Some(d) = &j.denial
        && let (Some(rule), Some(source)) = (&d.rule, &d.source)
    {
        r = r.rule(format!("{rule} ({source})"));
    }
    if event == Event::PermissionRequest {
        r = r.command(format!(
            "PermissionRequest: {}",
            if answered { "answered" } else { "deferred" }
        ));
    }
    if let Err(e) = audit.append(&r) {
        output::message(&e.to_string());
    }
}

fn explain_text(event: Event, j: &Judgement) -> String {
    let verdict = match j.verdict {
        Verdict::Allow { .. } => "ALLOW",
        Verdict::Deny { .. } => "DENY",
        Verdict::Ask { .. } => "ASK",
        _ => "?",
    };
    let mut text = format!(
        "{verdict} {} ({event:?})\n  why: {}\n",
        j.tool,
        j.verdict.reason()
    );
    for t in &j.touches {
        text.push_str(&format!(
            "  {} {} '{}' -> {}: {}\n",
            t.field,
            t.access,
            t.written,
            t.path,
            if t.decision.is_allow() {
                "allowed"
            } else {
                "refused"
            }
        ));
    }
    if let Some(d) = &j.denial {
        text.push_str(&format!("  fix: {}\n", d.fix));
    }
    text
}
