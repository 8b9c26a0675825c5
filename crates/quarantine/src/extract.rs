//! `extract`: the deterministic reader shipped with stockade. It needs no model: it pulls URLs, e-mail
//! addresses, repositories, paths, package names and versions out of YAML, JSON, TOML, Markdown (and any
//! text), line by line, each with its exact place. It runs confined like any other reader
//! (`stockade quarantine` starts `stockade extract FILES` inside the sandbox), and its output goes through
//! the same provenance gate.

use std::io::{self, Write};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::gate::{MAX_QUOTE_BYTES, ReferenceKind, Source, TypedReference};

macro_rules! pattern {
    ($name:ident, $re:expr) => {
        static $name: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new($re).ok());
    };
}

pattern!(
    URL,
    r#"(?:https?|ftp|git\+https?|git\+ssh)://[^\s"'<>`()\[\]{}|\\^]+"#
);
pattern!(
    GIT_SSH,
    r"git@[A-Za-z0-9.-]+:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"
);
pattern!(
    EMAIL,
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
);
pattern!(
    PATH,
    r"(?:\.{1,2}/|/|~/)?(?:[A-Za-z0-9_.@-]+/)+[A-Za-z0-9_.@-]+"
);
pattern!(
    INSTALL,
    r"\b(?:npm (?:install|i|add)|yarn add|pnpm add|cargo (?:add|install)|pip3? install|uv (?:add|pip install)|go get|gem install)\s+((?:-{1,2}[A-Za-z-]+\s+)*)([@A-Za-z0-9_./-]+)"
);
pattern!(
    KEY_VALUE,
    r#"^\s*"?([@A-Za-z0-9_./-]+)"?\s*[:=]\s*"?([^",#{}\[\]]*)"?"#
);
pattern!(
    LIST_ITEM,
    r#"^\s*-\s+"?([@A-Za-z0-9_./-]+?)(?:\s*(?:==|>=|<=|~=|\^|@|:)\s*"?([^"\s,#]+))?"?\s*$"#
);

/// What section a line is in, for package lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Other,
    /// `[dependencies]` and friends (TOML).
    TomlDeps,
    /// `"dependencies": {` (JSON), until the closing brace.
    JsonDeps,
    /// `dependencies:` (YAML), while indented deeper.
    YamlDeps(usize),
}

fn is_dependency_key(key: &str) -> bool {
    let key = key.trim_matches(|c| c == '"' || c == '\'');
    matches!(
        key,
        "dependencies"
            | "devDependencies"
            | "peerDependencies"
            | "optionalDependencies"
            | "dev-dependencies"
            | "build-dependencies"
            | "requires"
            | "install_requires"
            | "packages"
    )
}

/// Extracts the references of one file; `shown` is the name put in `source.file`.
pub fn extract_text(shown: &str, text: &str) -> Vec<TypedReference> {
    let mut out = Vec::new();
    let mut section = Section::Other;
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let mut push = |kind: ReferenceKind, value: &str| {
            let value = value.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"']);
            if value.is_empty()
                || out.iter().any(|r: &TypedReference| {
                    r.source.line == line_number && r.kind == kind && r.value == value
                })
            {
                return;
            }
            if let Some(quote) = quote_for(line, value) {
                out.push(TypedReference {
                    kind,
                    value: value.to_string(),
                    source: Source {
                        file: shown.to_string(),
                        line: line_number,
                        quote,
                    },
                });
            }
        };
        let mut taken: Vec<(usize, usize)> = Vec::new();
        if let Some(re) = URL.as_ref() {
            for m in re.find_iter(line) {
                let value = m.as_str();
                let is_repo = value.starts_with("git+")
                    || value.ends_with(".git")
                    || [
                        "github.com/",
                        "gitlab.com/",
                        "bitbucket.org/",
                        "codeberg.org/",
                    ]
                    .iter()
                    .any(|host| {
                        value.contains(host)
                            && value.split('/').filter(|s| !s.is_empty()).count() == 4
                    });
                push(
                    if is_repo {
                        ReferenceKind::Repository
                    } else {
                        ReferenceKind::Url
                    },
                    value,
                );
                taken.push((m.start(), m.end()));
            }
        }
        if let Some(re) = GIT_SSH.as_ref() {
            for m in re.find_iter(line) {
                push(ReferenceKind::Repository, m.as_str());
                taken.push((m.start(), m.end()));
            }
        }
        let free = |start: usize, end: usize, taken: &[(usize, usize)]| {
            taken.iter().all(|&(s, e)| end <= s || start >= e)
        };
        if let Some(re) = EMAIL.as_ref() {
            for m in re.find_iter(line) {
                if free(m.start(), m.end(), &taken) {
                    push(ReferenceKind::Email, m.as_str());
                    taken.push((m.start(), m.end()));
                }
            }
        }
        if let Some(re) = INSTALL.as_ref() {
            for caps in re.captures_iter(line) {
                if let Some(name) = caps.get(2) {
                    push(ReferenceKind::Package, name.as_str());
                }
            }
        }
        if let Some(re) = PATH.as_ref() {
            for m in re.find_iter(line) {
                let value = m.as_str();
                let looks_like_path = value.chars().any(|c| c.is_ascii_alphabetic())
                    && !value.starts_with('@')
                    && (value.contains('.')
                        || value.starts_with('/')
                        || value.starts_with("./")
                        || value.starts_with("~/")
                        || value.ends_with('/'));
                if looks_like_path && free(m.start(), m.end(), &taken) {
                    push(ReferenceKind::Path, value);
                }
            }
        }
        section = packages(line, section, &mut push);
    }
    out
}

/// Tracks dependency sections and reports the package names (and versions) listed in them.
fn packages(line: &str, section: Section, push: &mut impl FnMut(ReferenceKind, &str)) -> Section {
    let trimmed = line.trim();
    let indent = line.len() - line.trim_start().len();
    // Section headers.
    if trimmed.starts_with('[') && trimmed.ends_with(']') {
        let name = trimmed.trim_matches(['[', ']']);
        let last = name.rsplit('.').next().unwrap_or(name);
        return if is_dependency_key(last) {
            Section::TomlDeps
        } else {
            Section::Other
        };
    }
    if let Some(key) = trimmed
        .strip_suffix('{')
        .map(str::trim)
        .and_then(|k| k.strip_suffix(':'))
        && is_dependency_key(key)
    {
        return Section::JsonDeps;
    }
    if let Some(key) = trimmed.strip_suffix(':')
        && !trimmed.starts_with('-')
    {
        if is_dependency_key(key) {
            return Section::YamlDeps(indent);
        }
        if let Section::YamlDeps(base) = section
            && indent <= base
        {
            return Section::Other;
        }
    }
    match section {
        Section::Other => Section::Other,
        Section::JsonDeps if trimmed.starts_with('}') => Section::Other,
        Section::YamlDeps(base) if !trimmed.is_empty() && indent <= base => {
            packages(line, Section::Other, push)
        }
        Section::TomlDeps | Section::JsonDeps | Section::YamlDeps(_) => {
            let captures = LIST_ITEM
                .as_ref()
                .and_then(|re| re.captures(line))
                .or_else(|| KEY_VALUE.as_ref().and_then(|re| re.captures(line)));
            if let Some(caps) = captures
                && !trimmed.starts_with('#')
            {
                if let Some(name) = caps.get(1) {
                    push(ReferenceKind::Package, name.as_str());
                }
                if let Some(version) = caps.get(2).map(|v| v.as_str().trim())
                    && version.chars().any(|c| c.is_ascii_digit())
                    && !version.contains(' ')
                {
                    push(ReferenceKind::Version, version);
                }
            }
            section
        }
    }
}

/// The quote for a value: the trimmed line, or a window around the value when the line is too long.
fn quote_for(line: &str, value: &str) -> Option<String> {
    let trimmed = line.trim();
    if trimmed.len() <= MAX_QUOTE_BYTES {
        return Some(trimmed.to_string());
    }
    let at = line.find(value)?;
    let room = MAX_QUOTE_BYTES.saturating_sub(value.len()) / 2;
    let mut start = at.saturating_sub(room);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + value.len() + room).min(line.len());
    while !line.is_char_boundary(end) {
        end += 1;
    }
    line.get(start..end).map(str::to_string)
}

/// Extracts from files read from disk; `source.file` is each path as given. Unreadable files are skipped
/// with a message for stderr (a confined reader reports what it could not read and goes on).
pub fn extract_files(paths: &[impl AsRef<Path>]) -> (Vec<TypedReference>, Vec<String>) {
    let mut references = Vec::new();
    let problems = each_file(paths, |refs| {
        references.extend(refs);
        Ok(())
    })
    .unwrap_or_default();
    (references, problems)
}

/// [`extract_files`] written to `out` as one JSON array, file by file, so that whoever reads it (the
/// quarantine's streaming gate) starts on the first file's references while later files are still being
/// read. Returns the unreadable files' messages; fails only when `out` does.
pub fn write_files(paths: &[impl AsRef<Path>], out: &mut impl Write) -> io::Result<Vec<String>> {
    let mut first = true;
    out.write_all(b"[")?;
    let problems = each_file(paths, |refs| {
        for reference in refs {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            serde_json::to_writer(&mut *out, &reference)?;
        }
        Ok(())
    })?;
    out.write_all(b"]\n")?;
    out.flush()?;
    Ok(problems)
}

/// Reads each file and hands its references to `take`; collects a message for each unreadable file.
fn each_file(
    paths: &[impl AsRef<Path>],
    mut take: impl FnMut(Vec<TypedReference>) -> io::Result<()>,
) -> io::Result<Vec<String>> {
    let mut problems = Vec::new();
    for path in paths {
        let path = path.as_ref();
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                take(extract_text(&path.to_string_lossy(), &text))?;
            }
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    Ok(problems)
}
