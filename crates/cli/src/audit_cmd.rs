//! `stockade audit`.

use anyhow::bail;
use stockade_audit::{AuditLog, Filter, Layer};

use crate::ExitStatus;
use crate::args::AuditArgs;
use crate::output;

pub(crate) fn audit(args: AuditArgs, json: bool, log: &AuditLog) -> anyhow::Result<ExitStatus> {
    let layer = match args.layer.as_deref() {
        None => None,
        Some("kernel") => Some(Layer::Kernel),
        Some("hook") => Some(Layer::Hook),
        Some("fs") => Some(Layer::Fs),
        Some("quarantine") => Some(Layer::Quarantine),
        Some("workspace") => Some(Layer::Workspace),
        Some(other) => {
            bail!("unknown layer '{other}'; use kernel, hook, fs, quarantine or workspace")
        }
    };
    let since = match &args.since {
        Some(s) => Some(Filter::parse_since(s, std::time::SystemTime::now())?),
        None => None,
    };
    let records = log.read(&Filter {
        since,
        agent: args.agent,
        layer,
        limit: Some(args.limit),
    })?;
    if json {
        for r in &records {
            output::json(r);
        }
        return Ok(ExitStatus::Success);
    }
    if records.is_empty() {
        output::message(&format!("no refusals recorded in {}", log.path().display()));
        return Ok(ExitStatus::Success);
    }
    let mut text = format!(
        "{:<24} {:<10} {:<10} {:<6} {:<40} REASON\n",
        "TIME", "LAYER", "AGENT", "ACCESS", "PATH"
    );
    for r in &records {
        text.push_str(&format!(
            "{:<24} {:<10} {:<10} {:<6} {:<40} {}\n",
            r.time,
            r.layer.name(),
            r.agent.as_deref().unwrap_or("-"),
            r.access.as_deref().unwrap_or("-"),
            r.path.as_deref().unwrap_or("-"),
            r.reason
        ));
    }
    output::out(&text);
    Ok(ExitStatus::Success)
}
