//! `stockade audit`.

use anyhow::bail;
use stockade_audit::{AuditLog, Filter, Layer};

use crate::ExitStatus;
use crate::args::AuditArgs;
use crate::output;

pub(crate) fn audit(args: AuditArgs, json: bool, log: &AuditLog) -> anyhow::Result<ExitStatus> {
    let layer = match args.layer.as_deref() {
        None => None,
        Some(name) => match Layer::from_name(name) {
            Some(layer) => Some(layer),
            None => {
                let names: Vec<_> = Layer::ALL.iter().map(|l| l.name()).collect();
                bail!("unknown layer '{name}'; use one of {}", names.join(", "))
            }
        },
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
        // A refused connection shows its host and port where a path would be.
        let target = match (&r.path, &r.host) {
            (Some(path), _) => path.clone(),
            (None, Some(host)) => r
                .port
                .map_or_else(|| host.clone(), |p| format!("{host}:{p}")),
            (None, None) => "-".to_string(),
        };
        text.push_str(&format!(
            "{:<24} {:<10} {:<10} {:<6} {:<40} {}\n",
            r.time,
            r.layer.name(),
            r.agent.as_deref().unwrap_or("-"),
            r.access.as_deref().unwrap_or("-"),
            target,
            r.reason
        ));
    }
    output::out(&text);
    Ok(ExitStatus::Success)
}
