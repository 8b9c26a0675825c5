//! The audit log: every refusal, from every layer, as one JSON object per line.
//!
//! ```
//! use stockade_audit::{AuditLog, AuditRecord, Layer, Filter};
//! let dir = tempfile::tempdir()?;
//! let log = AuditLog::at(dir.path().join("audit.jsonl"));
//! log.append(&AuditRecord::new(Layer::Hook, "read access to '/etc/shadow' is denied").agent("a1").path("/etc/shadow"))?;
//! let records = log.read(&Filter::default())?;
//! assert_eq!(records[0].agent.as_deref(), Some("a1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Wire format
//!
//! One JSON object per line with `time` (RFC 3339, UTC), `layer` (`kernel`, `hook`, `fs`, `quarantine`,
//! `workspace`), `reason`, and where they apply `agent`, `tool`, `path`, `access`, `rule` (`file:line` or
//! built-in profile), `orchestrator`, `run`, `command`. Absent fields are omitted. Readers must ignore
//! unknown fields.
//!
//! # Concurrency
//!
//! Each record is written with one `write` on a file opened with `O_APPEND`, under an exclusive advisory
//! lock, so lines from concurrent writers (many agents, many hooks) never interleave.

use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The audit part's one error type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The log could not be opened, locked or written.
    #[error(
        "cannot write the audit log '{path}': {source} (set STOCKADE_AUDIT_LOG or --audit-log to a writable file)"
    )]
    Write {
        /// The log.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The log could not be read.
    #[error("cannot read the audit log '{path}': {source}")]
    Read {
        /// The log.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A `--since` value is neither a duration nor a timestamp.
    #[error("'{0}' is neither a duration (30m, 1h, 2d) nor a timestamp (2026-11-22T10:00:00Z)")]
    BadSince(String),
}

/// The layer that refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Layer {
    /// The OS sandbox (`stockade run`).
    Kernel,
    /// The Claude Code hook.
    Hook,
    /// The confined file tools.
    Fs,
    /// The quarantine runner.
    Quarantine,
    /// Orchestrator workspaces.
    Workspace,
    /// The network proxy of a sandbox (`net.allow`).
    Net,
}

impl Layer {
    /// The name used in the log.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Kernel => "kernel",
            Layer::Hook => "hook",
            Layer::Fs => "fs",
            Layer::Quarantine => "quarantine",
            Layer::Workspace => "workspace",
            Layer::Net => "net",
        }
    }

    /// Every layer, in the order `stockade audit --layer` lists them.
    pub const ALL: [Layer; 6] = [
        Layer::Kernel,
        Layer::Hook,
        Layer::Fs,
        Layer::Quarantine,
        Layer::Workspace,
        Layer::Net,
    ];

    /// The layer of this [`Layer::name`].
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// RFC 3339, UTC, millisecond precision.
    pub time: String,
    /// The refusing layer.
    pub layer: Layer,
    /// The agent id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The tool (hook, fs) or program (kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The path refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `read` or `write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// The deciding rule and where it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why, in one sentence.
    pub reason: String,
    /// The orchestrator (workspace layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestrator: Option<String>,
    /// The run id (workspace layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The command line concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The host a connection was for (net layer), as the program named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its port (net layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

macro_rules! setter {
    ($name:ident) => {
        #[doc = concat!("Sets `", stringify!($name), "`.")]
        pub fn $name(mut self, value: impl Into<String>) -> Self {
            self.$name = Some(value.into());
            self
        }
    };
}

impl AuditRecord {
    /// A record stamped now.
    pub fn new(layer: Layer, reason: impl Into<String>) -> Self {
        AuditRecord {
            time: rfc3339(SystemTime::now()),
            layer,
            agent: None,
            tool: None,
            path: None,
            access: None,
            rule: None,
            reason: reason.into(),
            orchestrator: None,
            run: None,
            command: None,
            host: None,
            port: None,
        }
    }

    setter!(agent);
    setter!(tool);
    setter!(path);
    setter!(access);
    setter!(rule);
    setter!(orchestrator);
    setter!(run);
    setter!(command);
    setter!(host);

    /// Sets `port`.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Sets `agent` when there is one.
    pub fn maybe_agent(mut self, agent: Option<&str>) -> Self {
        self.agent = agent.map(str::to_string);
        self
    }

    /// Seconds since the epoch, from `time` (0 if unparsable).
    pub fn epoch_seconds(&self) -> i64 {
        parse_rfc3339(&self.time).unwrap_or(0)
    }
}

/// Which records to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only records at or after this epoch second.
    pub since: Option<i64>,
    /// Only this agent.
    pub agent: Option<String>,
    /// Only this layer.
    pub layer: Option<Layer>,
    /// At most this many (the newest).
    pub limit: Option<usize>,
}

impl Filter {
    /// Parses `--since`: a duration back from now (`30m`, `1h`, `2d`, `45s`) or an RFC 3339 timestamp.
    pub fn parse_since(text: &str, now: SystemTime) -> Result<i64, AuditError> {
        if let Some(t) = parse_rfc3339(text) {
            return Ok(t);
        }
        let now = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let (num, unit) = text.split_at(
            text.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(text.len()),
        );
        let n: i64 = num
            .parse()
            .map_err(|_| AuditError::BadSince(text.to_string()))?;
        let secs = match unit {
            "s" | "" => n,
            "m" => n * 60,
            "h" => n * 3600,
            "d" => n * 86400,
            _ => return Err(AuditError::BadSince(text.to_string())),
        };
        Ok(now - secs)
    }
}

/// An audit log file.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

/// stockade's own state directory: `$XDG_STATE_HOME/stockade`, else `~/.local/state/stockade` (the
/// audit log, the persisted caches). Every built-in profile denies `~/.local/state/stockade`.
pub fn state_dir(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    env("XDG_STATE_HOME")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join("stockade")
}

impl AuditLog {
    /// The log at a given path.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        AuditLog { path: path.into() }
    }

    /// The default location: `$STOCKADE_AUDIT_LOG`, else `$XDG_STATE_HOME/stockade/audit.jsonl`, else
    /// `~/.local/state/stockade/audit.jsonl`. The caller passes the environment lookup (so tests never
    /// mutate the process environment).
    pub fn default_path(env: impl Fn(&str) -> Option<String>) -> PathBuf {
        if let Some(p) = env("STOCKADE_AUDIT_LOG").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        state_dir(env).join("audit.jsonl")
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one line.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let err = |source| AuditError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let mut line = serde_json::to_vec(record).map_err(|e| err(std::io::Error::other(e)))?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(err)?;
        file.lock().map_err(err)?;
        let written = file.write_all(&line);
        let _ = file.unlock();
        written.map_err(err)
    }

    /// Reads matching records, newest first. A missing log is empty; malformed lines are skipped.
    pub fn read(&self, filter: &Filter) -> Result<Vec<AuditRecord>, AuditError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(AuditError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut out = Vec::new();
        for line in std::io::BufReader::new(file).lines() {
            let line = line.map_err(|source| AuditError::Read {
                path: self.path.clone(),
                source,
            })?;
            let Ok(record) = serde_json::from_str::<AuditRecord>(&line) else {
                continue;
            };
            if filter.since.is_some_and(|s| record.epoch_seconds() < s)
                || filter
                    .agent
                    .as_ref()
                    .is_some_and(|a| record.agent.as_ref() != Some(a))
                || filter.layer.is_some_and(|l| record.layer != l)
            {
                continue;
            }
            out.push(record);
        }
        out.sort_by(|a, b| b.time.cmp(&a.time));
        if let Some(limit) = filter.limit {
            out.truncate(limit);
        }
        Ok(out)
    }
}

/// Formats a time as `2026-11-22T10:00:00.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Parses the subset of RFC 3339 that [`rfc3339`] writes (fraction and `Z` optional).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b.get(4) != Some(&b'-') || b.get(10).is_none_or(|c| *c != b'T' && *c != b' ')
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se)
}

// Howard Hinnant's civil-date algorithms.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let s = rfc3339(t);
        assert_eq!(parse_rfc3339(&s), Some(1_795_000_000));
        assert_eq!(parse_rfc3339("2026-11-22T00:00:00Z"), Some(1_795_305_600));
        assert_eq!(parse_rfc3339("nope"), None);
    }

    #[test]
    fn since_accepts_durations_and_timestamps() {
        let now = UNIX_EPOCH + Duration::from_secs(10_000);
        assert_eq!(Filter::parse_since("1h", now).unwrap(), 10_000 - 3600);
        assert_eq!(Filter::parse_since("30m", now).unwrap(), 10_000 - 1800);
        assert!(Filter::parse_since("soon", now).is_err());
        assert_eq!(
            Filter::parse_since("1970-01-01T00:00:10Z", now).unwrap(),
            10
        );
    }

    #[test]
    fn concurrent_writers_never_interleave_and_reads_filter_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::at(dir.path().join("sub/audit.jsonl"));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let r = AuditRecord::new(Layer::Fs, "x".repeat(3000))
                            .agent(format!("a{t}"))
                            .path(format!("/p/{i}"));
                        log.append(&r).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(text.lines().count(), 1600);
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<AuditRecord>(l).is_ok())
        );
        let only = log
            .read(&Filter {
                agent: Some("a3".into()),
                limit: Some(5),
                ..Filter::default()
            })
            .unwrap();
        assert_eq!(only.len(), 5);
        assert!(only.windows(2).all(|w| w[0].time >= w[1].time));
        assert!(
            log.read(&Filter {
                layer: Some(Layer::Hook),
                ..Filter::default()
            })
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn default_path_follows_xdg() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(
            AuditLog::default_path(env),
            PathBuf::from("/home/u/.local/state/stockade/audit.jsonl")
        );
        let env = |k: &str| (k == "STOCKADE_AUDIT_LOG").then(|| "/x/log".to_string());
        assert_eq!(AuditLog::default_path(env), PathBuf::from("/x/log"));
    }
}
