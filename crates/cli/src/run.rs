//! `stockade run`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use stockade_audit::{AuditLog, AuditRecord, Layer};
use stockade_policy::{LimitsOverride, NetMode, parse_duration, parse_size};
use stockade_sandbox::{Namespaces, SandboxBuilder, SandboxError, StopReason};

use crate::ExitStatus;
use crate::args::RunArgs;
use crate::output;
use crate::policy_args;

pub(crate) fn run(args: RunArgs, json: bool, audit: &AuditLog) -> anyhow::Result<ExitStatus> {
    // Made on another core while the policy resolves.
    let namespaces = (!args.dry_run).then(|| Namespaces::prepare(!args.net));
    let temp = stockade_sandbox::new_temp_dir_path();
    let mut vars = policy_args::variables(&args.policy, true)?;
    vars.set_path("TEMP_DIR", &temp);
    let mut builder = policy_args::builder(&args.policy, vars);
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env '{kv}' is not K=V"))?;
        builder.env_set(k, v);
    }
    for file in &args.env_file {
        for (k, v) in read_env_file(file)? {
            builder.env_set(k, v);
        }
    }
    for k in &args.pass_env {
        builder.env_pass(k);
    }
    if args.net {
        builder.net(NetMode::All);
    }
    for rule in &args.net_allow {
        builder.net_allow(rule);
    }
    for rule in &args.net_deny {
        builder.net_deny(rule);
    }
    let size = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<u64>> {
        v.as_deref()
            .map(|s| policy_args::flag_value(flag, s, parse_size))
            .transpose()
    };
    builder.limits(LimitsOverride {
        timeout: args
            .timeout
            .as_deref()
            .map(|t| policy_args::flag_value("--timeout", t, parse_duration))
            .transpose()?,
        memory: size("--memory", &args.memory)?,
        pids: args.pids,
        output: size("--max-output", &args.max_output)?,
        file_size: size("--max-file-size", &args.max_file_size)?,
    });
    let policy = Arc::new(builder.build()?);

    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow!("no command given"))?;
    let command_line = args
        .command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut sandbox = SandboxBuilder::new(policy.clone(), program, rest)
        .temp_dir(&temp)
        .best_effort(args.best_effort);
    if let Some(ns) = namespaces {
        sandbox = sandbox.namespaces(ns);
    }
    if let Some(u) = &args.user {
        sandbox = sandbox.user(u);
    }
    if let Some(dir) = &args.cwd {
        sandbox = sandbox.cwd(dir);
    }
    if let Some(fd) = args.pass_fd {
        sandbox = sandbox.pass_pipe(fd);
    }
    if args.persist_caches {
        let owner = args
            .policy
            .agent
            .clone()
            .unwrap_or_else(|| policy.profile().to_string());
        if owner.is_empty() || owner.contains('/') || owner == "." || owner == ".." {
            bail!(
                "--persist-caches keeps caches per agent, and '{owner}' cannot name a directory; pass --agent with a plain name"
            );
        }
        let store = stockade_audit::state_dir(|k| std::env::var(k).ok())
            .join("caches")
            .join(owner);
        sandbox = sandbox.cache_store(store);
    }
    let refuse = |e: SandboxError| -> anyhow::Result<ExitStatus> {
        if matches!(
            e,
            SandboxError::NotExecutable { .. } | SandboxError::CwdNotVisible { .. }
        ) {
            let record = AuditRecord::new(Layer::Kernel, e.to_string())
                .maybe_agent(args.policy.agent.as_deref())
                .tool("run")
                .command(command_line.clone());
            if let Err(err) = audit.append(&record) {
                output::message(&err.to_string());
            }
        }
        output::message(&e.to_string());
        Ok(match e.exit_code() {
            127 => ExitStatus::NotFound,
            126 => ExitStatus::CannotExecute,
            _ => ExitStatus::Usage,
        })
    };
    let sandbox = match sandbox.build() {
        Ok(s) => s,
        Err(e) => return refuse(e),
    };
    if args.dry_run {
        print_plan(&sandbox, &policy, json);
        return Ok(ExitStatus::Success);
    }
    for w in sandbox.warnings() {
        output::message(&format!("warning: {w}"));
    }
    let proxy_config = stockade_net::proxy_config_for(&policy)?;
    let running = match sandbox.spawn() {
        Ok(r) => r,
        Err(e) => return refuse(e),
    };
    let (running, proxy) = stockade_net::serve_sandbox(running, proxy_config)
        .context("cannot start the network proxy")?;
    let outcome = match running.wait() {
        Ok(o) => o,
        Err(e) => return refuse(e),
    };
    let net = proxy.map(stockade_net::Proxy::finish);
    if let Some(net) = &net {
        record_net_refusals(net, &args, &command_line, json, audit);
    }
    // The mediator's refusals, each with the rule that decided it, as the hook and the file tools log theirs.
    let mediator_records = outcome.refusals.iter().map(|r| {
        // A refusal no rule decided (what the mediator follows for the program) says so itself.
        let (why, rule) = match r.reason.explanation() {
            Some(why) => (
                why.to_string(),
                Some(
                    "built-in: what the mediator follows for the program (SECURITY.md, deputies)"
                        .to_string(),
                ),
            ),
            None => {
                let canonical = stockade_policy::CanonicalPath::assume_canonical(r.path.clone());
                let explained = policy.explain(&canonical, r.access);
                let why = explained.denial.as_ref().map_or_else(
                    || "not allowed".to_string(),
                    |d| format!("{} ({})", d.reason, d.fix),
                );
                (why, explained.deciding_rule)
            }
        };
        let mut record = AuditRecord::new(
            Layer::Kernel,
            format!(
                "{} of '{}' refused by the mediator: {why}",
                r.call,
                r.path.display(),
            ),
        )
        .maybe_agent(args.policy.agent.as_deref())
        .tool(r.call)
        .path(r.path.to_string_lossy())
        .access(r.access.to_string())
        .command(command_line.clone());
        if let Some(rule) = rule {
            record = record.rule(rule);
        }
        record
    });
    log_refusals(
        mediator_records,
        outcome.refused_calls,
        "calls",
        Layer::Kernel,
        "",
        json,
        audit,
    );
    match &outcome.stopped {
        Some(StopReason::Timeout { limit_ms }) => output::message(&format!(
            "timed out after {}; the whole process tree was killed",
            human_ms(*limit_ms)
        )),
        Some(StopReason::Cancelled { signal }) => output::message(&format!(
            "cancelled by signal {signal}; the whole process tree was killed"
        )),
        Some(StopReason::OutputLimit { stream, limit }) => output::message(&format!(
            "{stream} exceeded the output limit of {limit} bytes; the run was stopped (raise --max-output or limits.output)"
        )),
        Some(_) | None => {}
    }
    if json {
        let mut value = serde_json::to_value(&outcome)?;
        if let (Some(net), Some(object)) = (&net, value.as_object_mut()) {
            object.insert("net".into(), serde_json::to_value(net)?);
        }
        output::json(&value);
    }
    Ok(match outcome.status {
        124 if outcome.timed_out => ExitStatus::Timeout,
        s => ExitStatus::External(u8::try_from(s).unwrap_or(125)),
    })
}

/// The proxy's refusals into the audit log (layer `net`), the first few on stderr as the mediator's are.
fn record_net_refusals(
    net: &stockade_net::NetReport,
    args: &RunArgs,
    command_line: &str,
    json: bool,
    audit: &AuditLog,
) {
    let records = net.refusals.iter().map(|r| {
        let mut record = AuditRecord::new(Layer::Net, r.reason.clone())
            .maybe_agent(args.policy.agent.as_deref())
            .tool(r.protocol.name())
            .host(r.host.clone())
            .port(r.port)
            .command(command_line);
        if let Some(rule) = &r.rule {
            record = record.rule(rule.clone());
        }
        record
    });
    log_refusals(
        records,
        net.refused_connections,
        "connections",
        Layer::Net,
        "network: ",
        json,
        audit,
    );
}

/// Refusals seen outside the program (the mediator's, the proxy's) go to the audit log, and the first few
/// to stderr (not under --json, whose outcome lists them): the program saw only an errno or a 403, and
/// whoever reads its output (an agent, through the hook's sandboxed Bash) learns why. `total` counts those
/// not kept too.
fn log_refusals(
    records: impl Iterator<Item = AuditRecord>,
    total: u64,
    noun: &str,
    layer: Layer,
    prefix: &str,
    json: bool,
    audit: &AuditLog,
) {
    const SHOWN: usize = 3;
    let mut kept = 0;
    for (i, record) in records.enumerate() {
        kept += 1;
        if !json && i < SHOWN {
            output::message(&format!("{prefix}{}", record.reason));
        }
        if let Err(err) = audit.append(&record) {
            output::message(&err.to_string());
        }
    }
    if !json && total > SHOWN as u64 {
        output::message(&format!(
            "refused {total} {noun} in all; `stockade audit --layer {}` lists them (the first {kept})",
            layer.name()
        ));
    }
}

/// `--dry-run`: what the sandbox would contain. Variable values are not printed (they may be secrets).
fn print_plan(
    sandbox: &stockade_sandbox::Sandbox,
    policy: &stockade_policy::ResolvedPolicy,
    json: bool,
) {
    let env: Vec<String> = sandbox
        .env()
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    if json {
        output::json(&serde_json::json!({
            "profile": policy.profile(),
            "temp_dir": sandbox.temp_dir(),
            "plan": sandbox.plan(),
            "env": env,
            "net": policy.net(),
            "gateways": policy.gateways(),
            "limits": policy.limits(),
            "warnings": sandbox.warnings(),
        }));
        return;
    }
    let mut text = format!(
        "profile {}; private temp {}\n",
        policy.profile(),
        sandbox.temp_dir().display()
    );
    for m in &sandbox.plan().mounts {
        let what = match &m.op {
            stockade_sandbox::MountOp::Bind { write: true, .. } => "bind read-write".to_string(),
            stockade_sandbox::MountOp::Bind { write: false, .. } => "bind read-only".to_string(),
            stockade_sandbox::MountOp::MaskDir | stockade_sandbox::MountOp::MaskFile => {
                "mask (deny)".to_string()
            }
            stockade_sandbox::MountOp::Overlay => "private overlay (cache)".to_string(),
            stockade_sandbox::MountOp::PrivateTmpfs { .. } => "private tmpfs".to_string(),
            stockade_sandbox::MountOp::Proc => "fresh /proc".to_string(),
            stockade_sandbox::MountOp::Dev => "minimal /dev".to_string(),
            stockade_sandbox::MountOp::Stub { .. } => "stub (mode 000)".to_string(),
            stockade_sandbox::MountOp::Symlink { target } => {
                format!("symlink -> {}", target.display())
            }
            stockade_sandbox::MountOp::Snapshot { bytes } => format!("snapshot ({bytes} B)"),
        };
        text.push_str(&format!("  {:<18} {}\n", what, m.path.display()));
    }
    for p in &sandbox.plan().guarded_dirs {
        text.push_str(&format!(
            "  guarded dir        {} (new names checked by the mediator)\n",
            p.display()
        ));
    }
    text.push_str(&format!(
        "  landlock rules     {}\n",
        sandbox.plan().landlock.len()
    ));
    text.push_str(&format!("  environment        {}\n", env.join(" ")));
    text.push_str(&format!("  network            {}\n", policy.net()));
    for g in policy.gateways() {
        let adds: Vec<String> = g
            .headers
            .iter()
            .map(|h| format!("{} from ${}", h.name, h.env))
            .collect();
        text.push_str(&format!(
            "  gateway {:<10} {} -> https://{}:{}{} (adds {})\n",
            g.name,
            g.local_url(stockade_sandbox::PROXY_PORT),
            g.host,
            g.port,
            g.base_path,
            adds.join(", ")
        ));
    }
    output::out(&text);
}

fn human_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

fn read_env_file(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    stockade_policy::read_env_file(path)
        .with_context(|| format!("cannot read --env-file '{}'", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_parse() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.env");
        std::fs::write(&f, "# c\nA=1\nexport B=\"two words\"\n\nC='x=y'\n").unwrap();
        assert_eq!(
            read_env_file(&f).unwrap(),
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x=y".into())
            ]
        );
        std::fs::write(&f, "oops\n").unwrap();
        assert!(format!("{:#}", read_env_file(&f).unwrap_err()).contains("a.env:1"));
    }
}
