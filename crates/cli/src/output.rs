//! The one place that writes to stdout and stderr. Results go to stdout; messages to stderr, prefixed
//! `stockade:`. A closed stdout (broken pipe) is not an error.

use std::io::Write;

pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
}

/// Writes `value` as one line of JSON, straight into stdout's buffer: a result can be megabytes, and
/// building it as one string first would cost a copy and the page faults of a second buffer.
pub(crate) fn json(value: &impl serde::Serialize) {
    let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let written = serde_json::to_writer(&mut stdout, value)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        message(&format!("cannot write output: {e}"));
    }
}

pub(crate) fn json_pretty(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => out(&s),
        Err(e) => message(&format!("cannot serialise output: {e}")),
    }
}

/// An error and its causes, each said once: most of stockade's errors already name their cause in their
/// own message, which `{:#}` would repeat.
pub(crate) fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

pub(crate) fn message(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "stockade: {text}");
}

/// Writes text to stderr as is (wire formats that must not be prefixed).
pub(crate) fn raw_err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    #[test]
    fn an_error_names_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let named = stockade_quarantine::QuarantineError::Io {
            path: "/x".into(),
            source: io,
        };
        let error = anyhow::Error::from(named);
        assert_eq!(super::describe(&error), "/x: entity not found");
        let error = Err::<(), _>(std::io::Error::other("disk full"))
            .context("cannot write the log")
            .unwrap_err();
        assert_eq!(super::describe(&error), "cannot write the log: disk full");
    }
}
