//! Typed references and the provenance gate (the seed's `validateProvenance`).
//!
//! The gate is what makes the flow one-way. A reference passes only if it is *literally in the source*: its
//! file is one of the input files, its line exists, its quote appears verbatim on that line, and its value
//! appears verbatim in its quote; sizes and characters are within limits. Nothing the reader invents, and no
//! instruction it was fed, reaches the privileged agent unless those exact bytes were in an input file, and
//! then only as a typed value with its place.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::QuarantineError;

/// Longest `value` accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 2048;
/// Longest `quote` accepted, in bytes.
pub const MAX_QUOTE_BYTES: usize = 4096;
/// Largest input file the gate loads.
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;

/// What a reference names. A closed set: anything else is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReferenceKind {
    /// An `http`, `https` or `ftp` URL.
    Url,
    /// An e-mail address.
    Email,
    /// A file or directory path.
    Path,
    /// A package name (npm, crates.io, PyPI, ...).
    Package,
    /// A source repository (`github.com/owner/repo`, a git URL).
    Repository,
    /// A version or version requirement.
    Version,
}

/// Where a reference was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// The input file, as given to the reader (or absolute, or canonical).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// Text copied verbatim from that line, containing the value.
    pub quote: String,
}

/// One reference the reader reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypedReference {
    /// What it is.
    pub kind: ReferenceKind,
    /// The value itself.
    pub value: String,
    /// Where it is.
    pub source: Source,
}

/// A [`TypedReference`] as it stands in a reader's output, its strings borrowed where they hold no
/// escapes. Exactly as strict: the same fields, the same kinds, nothing unknown; and its refusals read as
/// [`TypedReference`]'s do ("expected struct TypedReference").
#[derive(Debug, Deserialize)]
#[serde(
    expecting = "struct TypedReference",
    rename_all = "camelCase",
    deny_unknown_fields
)]
pub(crate) struct BorrowedReference<'a> {
    kind: ReferenceKind,
    #[serde(borrow)]
    value: Cow<'a, str>,
    #[serde(borrow)]
    source: BorrowedSource<'a>,
}

/// [`Source`], borrowed.
#[derive(Debug, Deserialize)]
#[serde(
    expecting = "struct Source",
    rename_all = "camelCase",
    deny_unknown_fields
)]
struct BorrowedSource<'a> {
    #[serde(borrow)]
    file: Cow<'a, str>,
    line: usize,
    #[serde(borrow)]
    quote: Cow<'a, str>,
}

/// A reference the gate refused, and why: described, never quoted. The reader's text is exactly what
/// must not reach the privileged side, so a rejection carries only its position, the kind it claimed,
/// the input file it named (when it is one of the inputs), the line number, and a reason written here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    /// 0-based position in the reader's output.
    pub index: usize,
    /// The kind it claimed, when it had the shape of a reference.
    pub kind: Option<ReferenceKind>,
    /// The input file it named, canonical, when it named one of the inputs.
    pub file: Option<String>,
    /// The line number it named, when it had the shape of a reference.
    pub line: Option<usize>,
    /// Why it was refused.
    pub reason: String,
}

/// The input files, loaded once and indexed by line, under every name a reader may use for them.
#[derive(Debug, Default)]
pub struct SourceSet {
    files: Vec<SourceFile>,
    by_name: HashMap<String, usize>,
}

#[derive(Debug)]
struct SourceFile {
    canonical: PathBuf,
    /// `canonical` as references name it.
    canonical_text: String,
    text: Arc<str>,
    /// Byte offset where each line starts.
    line_starts: Vec<usize>,
}

impl SourceFile {
    fn line(&self, number: usize) -> Option<&str> {
        let start = *self.line_starts.get(number.checked_sub(1)?)?;
        let end = self
            .line_starts
            .get(number)
            .map_or(self.text.len(), |next| next.saturating_sub(1));
        let line = self.text.get(start..end)?;
        Some(line.strip_suffix('\r').unwrap_or(line))
    }
}

impl SourceSet {
    /// Loads `paths` (each canonicalised); a file that is not valid UTF-8 is read lossily.
    pub fn load(paths: &[PathBuf]) -> Result<SourceSet, QuarantineError> {
        let mut set = SourceSet::default();
        for path in paths {
            let canonical = std::fs::canonicalize(path).map_err(|source| QuarantineError::Io {
                path: path.clone(),
                source,
            })?;
            set.read(path, canonical)?;
        }
        Ok(set)
    }

    /// Reads the file at `canonical` (already canonical) and adds it under both names. Returns the bytes
    /// exactly as read, for the reader to be shown the same (a file that is not valid UTF-8 is judged by
    /// its lossy text).
    pub(crate) fn read(
        &mut self,
        given: &Path,
        canonical: PathBuf,
    ) -> Result<Arc<[u8]>, QuarantineError> {
        let io = |source| QuarantineError::Io {
            path: given.to_path_buf(),
            source,
        };
        // Non-blocking: a FIFO given as an input must be refused, not waited on.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&canonical)
            .map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return Err(QuarantineError::Input {
                path: given.to_path_buf(),
                reason: "is not a regular file".to_string(),
            });
        }
        let size = metadata.len();
        check_source_size(given, size)?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // The file may grow after the size was read; the limit holds anyway.
        file.take(MAX_SOURCE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        check_source_size(given, bytes.len() as u64)?;
        // Valid UTF-8 (nearly every source) is one buffer shared by the gate and the reader's copy.
        let (text, bytes): (Arc<str>, Arc<[u8]>) = match String::from_utf8(bytes) {
            Ok(text) => {
                let text = Arc::<str>::from(text);
                (text.clone(), text.into())
            }
            Err(e) => (
                String::from_utf8_lossy(e.as_bytes()).into(),
                e.into_bytes().into(),
            ),
        };
        self.insert(given, canonical, text);
        Ok(bytes)
    }

    /// Adds one file's text under its given and canonical names (tests, in-memory sources).
    pub fn add(&mut self, given: &Path, canonical: PathBuf, text: String) {
        self.insert(given, canonical, text.into());
    }

    fn insert(&mut self, given: &Path, canonical: PathBuf, text: Arc<str>) {
        let mut line_starts = vec![0];
        line_starts.extend(
            memchr::memchr_iter(b'\n', text.as_bytes())
                .map(|i| i + 1)
                .filter(|&start| start < text.len()),
        );
        let index = self.files.len();
        for name in [
            given.to_string_lossy().into_owned(),
            std::path::absolute(given)
                .unwrap_or_else(|_| given.to_path_buf())
                .to_string_lossy()
                .into_owned(),
            canonical.to_string_lossy().into_owned(),
        ] {
            self.by_name.entry(name).or_insert(index);
        }
        self.files.push(SourceFile {
            canonical_text: canonical.to_string_lossy().into_owned(),
            canonical,
            text,
            line_starts,
        });
    }

    /// How many files are loaded.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Checks one reference; the reason says exactly which rule failed.
    pub fn check(&self, reference: &TypedReference) -> Result<(), String> {
        let source = &reference.source;
        self.check_parts(
            &reference.value,
            &source.file,
            source.line,
            &source.quote,
            None,
        )
        .map(|_| ())
    }

    /// The rules of [`SourceSet::check`] over a reference's parts. `hint`: the file the previous reference
    /// named (readers list a file's references together), tried before the name lookup.
    fn check_parts(
        &self,
        value: &str,
        file_name: &str,
        line_number: usize,
        quote: &str,
        hint: Option<usize>,
    ) -> Result<usize, String> {
        if value.is_empty() {
            return Err("value is empty".to_string());
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!(
                "value is {} bytes, over {MAX_VALUE_BYTES}",
                value.len()
            ));
        }
        if quote.len() > MAX_QUOTE_BYTES {
            return Err(format!(
                "quote is {} bytes, over {MAX_QUOTE_BYTES}",
                quote.len()
            ));
        }
        if let Some(c) = [value, quote]
            .into_iter()
            .filter(|text| !is_printable_ascii(text))
            .flat_map(|text| text.chars())
            .find(|&c| forbidden(c))
        {
            return Err(format!(
                "contains the character U+{:04X} (control, bidirectional or invisible characters are refused)",
                u32::from(c)
            ));
        }
        let hinted = hint.filter(|&i| {
            self.files
                .get(i)
                .is_some_and(|f| f.canonical_text == file_name)
        });
        let Some(index) = hinted.or_else(|| self.by_name.get(file_name).copied()) else {
            return Err("its source file is not one of the input files".to_string());
        };
        let file = &self.files[index];
        let Some(line) = file.line(line_number) else {
            return Err(format!(
                "line {line_number} does not exist in {} ({} lines)",
                file.canonical.display(),
                file.line_starts.len()
            ));
        };
        if !contains(line, quote) {
            return Err(format!(
                "quote does not appear verbatim on line {line_number} of {}",
                file.canonical.display()
            ));
        }
        if !contains(quote, value) {
            return Err("value does not appear in its quote".to_string());
        }
        Ok(index)
    }

    /// The gate for a reference parsed straight from the reader's output: what [`SourceSet::gate`]
    /// answers for the same element, with strings allocated only for a reference that passes. Also
    /// returns the file's index, as the next call's hint.
    pub(crate) fn gate_borrowed(
        &self,
        index: usize,
        reference: BorrowedReference<'_>,
        hint: Option<usize>,
    ) -> (Result<TypedReference, Rejected>, Option<usize>) {
        let source = &reference.source;
        match self.check_parts(
            &reference.value,
            &source.file,
            source.line,
            &source.quote,
            hint,
        ) {
            Ok(file) => {
                let BorrowedReference {
                    kind,
                    value,
                    source,
                } = reference;
                let accepted = TypedReference {
                    kind,
                    value: value.into_owned(),
                    source: Source {
                        file: self.files[file].canonical_text.clone(),
                        line: source.line,
                        quote: source.quote.into_owned(),
                    },
                };
                (Ok(accepted), Some(file))
            }
            Err(reason) => (
                Err(Rejected {
                    index,
                    kind: Some(reference.kind),
                    file: self
                        .by_name
                        .get(source.file.as_ref())
                        .map(|&i| self.files[i].canonical_text.clone()),
                    line: Some(source.line),
                    reason,
                }),
                hint,
            ),
        }
    }

    /// The gate over a reader's output, one raw JSON element per reference: each must be a well-formed
    /// [`TypedReference`] that [`SourceSet::check`] accepts. Returns the valid ones (with `source.file` made
    /// canonical) and the rejected ones with their reasons, in output order. Elements stay raw text until
    /// here, so a megabyte of output is parsed once, straight into references.
    pub fn validate(
        &self,
        output: Vec<Box<serde_json::value::RawValue>>,
    ) -> (Vec<TypedReference>, Vec<Rejected>) {
        let mut valid = Vec::new();
        let mut rejected = Vec::new();
        for (index, raw) in output.iter().enumerate() {
            match self.gate(index, raw) {
                Ok(reference) => valid.push(reference),
                Err(refused) => rejected.push(refused),
            }
        }
        (valid, rejected)
    }

    /// The gate for element `index` of a reader's output: the reference with `source.file` made canonical,
    /// or why it was refused.
    pub(crate) fn gate(
        &self,
        index: usize,
        raw: &serde_json::value::RawValue,
    ) -> Result<TypedReference, Rejected> {
        match serde_json::from_str::<BorrowedReference>(raw.get()) {
            Ok(reference) => self.gate_borrowed(index, reference, None).0,
            Err(e) => Err(Rejected {
                index,
                kind: None,
                file: None,
                line: None,
                reason: not_a_reference(&e, raw.get()),
            }),
        }
    }
}

/// Why an element is not a [`TypedReference`], in words of this program: serde's own messages quote the
/// element (`invalid type: string "..."`, ``unknown variant `...` ``), and the element is the reader's
/// text. So the element is looked at again, as a JSON value, and its shape described.
pub(crate) fn not_a_reference(e: &serde_json::Error, raw: &str) -> String {
    let why = match serde_json::from_str::<serde_json::Value>(raw) {
        Err(e) => format!(
            "not valid JSON, at byte {} of its {} bytes",
            byte_offset(raw, e.line(), e.column()),
            raw.len()
        ),
        Ok(value) => match shape_problem(&value) {
            Some(problem) => format!("{problem} (an element of {} bytes)", raw.len()),
            None => format!(
                "a field has the wrong type, at byte {} of its {} bytes",
                byte_offset(raw, e.line(), e.column()),
                raw.len()
            ),
        },
    };
    format!("not a TypedReference: {why}")
}

/// What is wrong with an element's shape, naming only this program's field names and JSON's types.
fn shape_problem(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    fn type_name(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
    fn fields(object: &serde_json::Map<String, Value>, names: &[&str], of: &str) -> Option<String> {
        if object.keys().any(|k| !names.contains(&k.as_str())) {
            return Some(format!(
                "unknown field in {of} (only {} are allowed)",
                names.join(", ")
            ));
        }
        names
            .iter()
            .find(|n| !object.contains_key(**n))
            .map(|n| format!("missing field `{n}` in {of}"))
    }
    let Some(reference) = value.as_object() else {
        return Some(format!(
            "expected struct TypedReference, found {}",
            type_name(value)
        ));
    };
    if let Some(problem) = fields(reference, &["kind", "value", "source"], "the reference") {
        return Some(problem);
    }
    if serde_json::from_value::<ReferenceKind>(reference["kind"].clone()).is_err() {
        return Some(
            "unknown variant: kind is not one of url, email, path, package, repository, version"
                .to_string(),
        );
    }
    if !reference["value"].is_string() {
        return Some(format!(
            "value is {}, not a string",
            type_name(&reference["value"])
        ));
    }
    let Some(source) = reference["source"].as_object() else {
        return Some(format!(
            "expected struct Source, found {}",
            type_name(&reference["source"])
        ));
    };
    if let Some(problem) = fields(source, &["file", "line", "quote"], "source") {
        return Some(problem);
    }
    if !source["file"].is_string() || !source["quote"].is_string() {
        return Some("source.file and source.quote must be strings".to_string());
    }
    if !source["line"].is_u64() {
        return Some(format!(
            "source.line is {}, not a line number",
            type_name(&source["line"])
        ));
    }
    None
}

/// The byte offset of serde_json's 1-based line and column (a column counts bytes) in `text`.
pub(crate) fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// Refuses a source over [`MAX_SOURCE_BYTES`], naming it.
pub(crate) fn check_source_size(path: &Path, size: u64) -> Result<(), QuarantineError> {
    if size > MAX_SOURCE_BYTES {
        return Err(QuarantineError::Input {
            path: path.to_path_buf(),
            reason: format!("{size} bytes is over the gate's limit of {MAX_SOURCE_BYTES}"),
        });
    }
    Ok(())
}

/// Whether `text` is only printable ASCII, so no character in it can be [`forbidden`] (the common case, and
/// one the compiler checks a vector at a time).
fn is_printable_ascii(text: &str) -> bool {
    text.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// Whether `needle` occurs in `haystack`, byte for byte.
fn contains(haystack: &str, needle: &str) -> bool {
    haystack.len() >= needle.len()
        && (haystack == needle
            || memchr::memmem::find(haystack.as_bytes(), needle.as_bytes()).is_some())
}

/// Characters a reference may not carry: controls (tab aside in quotes is allowed by callers' text, but
/// never needed in a single line), bidirectional overrides and invisible formatting.
pub(crate) fn forbidden(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The JSON Schema of a reference (`stockade schema typed-reference`).
pub fn reference_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(TypedReference)).unwrap_or_default()
}
