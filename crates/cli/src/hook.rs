//! `stockade hook claude`: fails closed. Whatever happens (bad input, no policy, a panic), the answer is a
//! deny with exit 2, the only code that blocks a tool in every Claude Code version.

use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;

use anyhow::{Context, bail};
use stockade_audit::{AuditLog, AuditRecord, Layer};
use stockade_hook::{
    Event, HookInput, Judgement, Rendered, Verdict, judge, render, render_failure,
};
use stockade_policy::OnAllow;

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
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| answer(&args, audit)));
    let rendered = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => render_failure(&format!("stockade hook failed closed: {e:#}")),
        Err(_) => render_failure("stockade hook panicked; failing closed"),
    };
    emit(&rendered);
    if rendered.exit_code == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::External(2)
    }
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
    // ${CWD} is where Claude Code started the hook (the project), never the input's `cwd`, which follows
    // the agent's own `cd` and would widen its scope.
    let vars = policy_args::variables(&args.policy)?;
    let project = std::path::PathBuf::from(vars.get("CWD").unwrap_or("/"));
    let policy = policy_args::builder(&args.policy, vars).build()?;
    let judgement = judge(&policy, &input);
    // hook.bash = "sandbox": the same command, run by `stockade run` with the same policy and project.
    let updated = match &judgement.sandbox_command {
        Some(command) => {
            let run = policy_args::self_command(&["run"], &args.policy, &project)?;
            Some(format!("{run} -- bash -c {}", policy_args::quote(command)))
        }
        None => None,
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
    Ok(render(event, &judgement, defer, updated.as_deref()))
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
