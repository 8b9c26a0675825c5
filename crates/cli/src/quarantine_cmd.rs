//! `stockade quarantine`, the hidden `stockade extract` reader, and `stockade profile validate`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stockade_audit::AuditLog;
use stockade_quarantine::{CrossProjectProfile, QuarantineConfig, QuarantineError, Reader};

use crate::ExitStatus;
use crate::args::{QuarantineArgs, ReaderKind};
use crate::output;
use crate::policy_args::flag_value;

/// `stockade quarantine FILES`: the result as JSON on stdout; exit 0 when the run succeeded, 1 when it did
/// not (timeout, exit code, malformed output), 127 when the reader is not installed, 125 for bad input.
pub(crate) fn quarantine(args: QuarantineArgs, audit: &AuditLog) -> anyhow::Result<ExitStatus> {
    let timeout = flag_value("--timeout", &args.timeout, stockade_policy::parse_duration)?;
    let max_output = flag_value(
        "--max-output",
        &args.max_output,
        stockade_policy::parse_size,
    )?;
    let reader = match args.reader {
        ReaderKind::Extract => Reader::Extract {
            program: std::env::current_exe()
                .context("cannot find stockade's own binary for the extract reader")?,
        },
        ReaderKind::K => Reader::K,
        ReaderKind::Claude => Reader::Claude,
    };
    let config = QuarantineConfig {
        timeout,
        profile_path: args.profile_file,
        command: args.command,
        reader,
        max_output,
        audit: Some(audit.clone()),
        home: None,
        pass_env: args.pass_env,
        net_allow: args.net_allow,
    };
    match stockade_quarantine::run(&args.files, &config) {
        Ok(result) => {
            output::json(&result);
            let status = if result.success {
                ExitStatus::Success
            } else {
                ExitStatus::No
            };
            // The process exits next: freeing thousands of references one by one would only delay it.
            std::mem::forget(result);
            Ok(status)
        }
        Err(e @ QuarantineError::ReaderMissing { .. }) => {
            output::message(&e.to_string());
            Ok(ExitStatus::NotFound)
        }
        Err(e) => Err(e.into()),
    }
}

/// `stockade extract FILES`: the built-in reader, writing its array file by file.
pub(crate) fn extract(files: &[PathBuf]) -> anyhow::Result<ExitStatus> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let problems = stockade_quarantine::extract::write_files(files, &mut out)
        .context("cannot write the references to stdout")?;
    for problem in &problems {
        output::message(problem);
    }
    Ok(ExitStatus::Success)
}

/// `stockade profile validate FILE`.
pub(crate) fn validate(file: &Path, json: bool) -> anyhow::Result<ExitStatus> {
    let profile = CrossProjectProfile::load(file)?;
    if json {
        output::json(&profile);
    } else {
        output::out(&format!(
            "{}: valid profile {:?} ({} allowed tools, {} denied tools, {} denied paths)",
            file.display(),
            profile.name,
            profile.allowed_tools.len(),
            profile.denied_tools.len(),
            profile.denied_paths.len()
        ));
    }
    Ok(ExitStatus::Success)
}
