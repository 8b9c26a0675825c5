//! Searching tools: `find_files` (globs) and `grep` (regex or fixed string), over the descriptor walk.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use rustix::fs::{FileType, Mode, OFlags};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::FsError;
use crate::read::EntryKind;
use crate::root::Root;
use crate::walk::{Control, WalkEnd, WalkEntry, WalkOptions, walk};

/// Default cap on results of `find_files` and `grep`.
pub const DEFAULT_MAX_RESULTS: usize = 1000;
/// Default time cap of one walk.
pub const DEFAULT_WALK_TIMEOUT: Duration = Duration::from_secs(30);

/// What a walk covers; shared by [`FindOptions`] and [`GrepOptions`].
#[derive(Debug, Clone)]
pub struct WalkLimits {
    /// Directory to start from, relative to the root (`.`).
    pub path: String,
    /// Levels below the start (1: its entries only); `None`: no limit.
    pub max_depth: Option<usize>,
    /// Stop after this many results.
    pub max_results: usize,
    /// Include names starting with `.` (`.git` is never entered).
    pub hidden: bool,
    /// Honour `.gitignore` and `.ignore`.
    pub gitignore: bool,
    /// Give up after this long (the results so far are returned, marked truncated).
    pub timeout: Duration,
    /// Worker threads (0: one per core, at most 8).
    pub threads: usize,
}

impl Default for WalkLimits {
    fn default() -> Self {
        WalkLimits {
            path: ".".to_string(),
            max_depth: None,
            max_results: DEFAULT_MAX_RESULTS,
            hidden: false,
            gitignore: true,
            timeout: DEFAULT_WALK_TIMEOUT,
            threads: 0,
        }
    }
}

/// Options of [`Root::find_files`].
#[derive(Debug, Clone, Default)]
pub struct FindOptions {
    /// Globs matched against paths relative to the root (`src/**/*.rs`); one without `/` matches the name at
    /// any depth (`*.rs`). Empty: everything.
    pub patterns: Vec<String>,
    /// Only this kind of entry; `None`: any.
    pub kind: Option<EntryKind>,
    /// Where and how far.
    pub limits: WalkLimits,
}

/// A found path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    /// Relative to the root.
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
}

/// The answer of [`Root::find_files`], sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindResult {
    /// What matched.
    pub matches: Vec<Found>,
    /// Whether the result or time cap cut the search short.
    pub truncated: bool,
}

/// Options of [`Root::grep`].
#[derive(Debug, Clone, Default)]
pub struct GrepOptions {
    /// The regular expression (Rust regex syntax), or the literal text with `fixed_string`.
    pub pattern: String,
    /// Treat `pattern` as literal text.
    pub fixed_string: bool,
    /// Match case-insensitively.
    pub case_insensitive: bool,
    /// Case-insensitive unless the pattern has an uppercase letter.
    pub smart_case: bool,
    /// Lines of context before and after each match.
    pub context: usize,
    /// Only files whose path matches one of these globs (as in [`FindOptions::patterns`]).
    pub globs: Vec<String>,
    /// Skip files larger than this (bytes); `None`: no limit.
    pub max_file_size: Option<u64>,
    /// Where and how far; `max_results` caps matching lines.
    pub limits: WalkLimits,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepMatch {
    /// Relative to the root.
    pub path: String,
    /// 1-based.
    pub line_number: u64,
    /// The line, without its terminator.
    pub line: String,
    /// Context lines before, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    /// Context lines after.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// The answer of [`Root::grep`], sorted by path and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepResult {
    /// What matched.
    pub matches: Vec<GrepMatch>,
    /// Files searched.
    pub files_searched: usize,
    /// Whether the result or time cap cut the search short.
    pub truncated: bool,
}

/// Compiled path globs; matching is on paths relative to the root.
struct PathGlobs {
    set: Option<GlobSet>,
}

impl PathGlobs {
    fn new(root: &Root, patterns: &[String]) -> Result<PathGlobs, FsError> {
        if patterns.is_empty() {
            return Ok(PathGlobs { set: None });
        }
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.trim();
            let relative = root.relative_glob(pattern)?;
            let relative = if relative.contains('/') {
                relative
            } else {
                format!("**/{relative}")
            };
            let glob = GlobBuilder::new(&relative)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| FsError::InvalidArgument {
                    what: "glob",
                    reason: format!("{pattern:?}: {e}"),
                })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| FsError::InvalidArgument {
            what: "glob",
            reason: e.to_string(),
        })?;
        Ok(PathGlobs { set: Some(set) })
    }

    fn is_match(&self, relative: &Path) -> bool {
        self.set.as_ref().is_none_or(|set| set.is_match(relative))
    }
}

impl Root {
    /// Checks a glob from the model the way paths are checked: no NUL, no `..` climbing out, absolute only
    /// inside the root (and not at all in relative-only mode). Returns it relative to the root.
    pub(crate) fn relative_glob(&self, pattern: &str) -> Result<String, FsError> {
        let relative = self.relative(pattern)?;
        if relative
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            // Globs are matched against walked paths, which never hold `..`: refuse rather than never match.
            return Err(FsError::InvalidArgument {
                what: "glob",
                reason: format!("{pattern:?} holds `..`; write the pattern relative to the root"),
            });
        }
        let text = relative.to_string_lossy().into_owned();
        Ok(text.strip_prefix("./").unwrap_or(&text).to_string())
    }

    fn walk_start(
        &self,
        limits: &WalkLimits,
    ) -> Result<(crate::root::Opened, WalkOptions), FsError> {
        let opened = self.open_to_read(&limits.path, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let threads = if limits.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get().min(8))
                .unwrap_or(2)
        } else {
            limits.threads
        };
        let options = WalkOptions {
            max_depth: limits.max_depth,
            hidden: limits.hidden,
            gitignore: limits.gitignore,
            deadline: Instant::now() + limits.timeout,
            threads,
        };
        Ok((opened, options))
    }

    fn relative_of<'a>(&self, real: &'a Path) -> &'a Path {
        real.strip_prefix(self.path()).unwrap_or(real)
    }

    /// Finds paths matching globs beneath a directory. Links are listed, never followed; denied and
    /// ignored paths are left out.
    pub fn find_files(&self, options: &FindOptions) -> Result<FindResult, FsError> {
        let globs = PathGlobs::new(self, &options.patterns)?;
        let (start, walk_options) = self.walk_start(&options.limits)?;
        let found = Mutex::new(Vec::new());
        let count = AtomicUsize::new(0);
        let max = options.limits.max_results;
        let end = walk(self, start.fd, start.real, &walk_options, || {
            |entry: &WalkEntry<'_>| {
                let kind = EntryKind::of(entry.file_type);
                if options.kind.is_some_and(|k| k != kind) {
                    return Control::Continue;
                }
                if !globs.is_match(self.relative_of(&entry.real)) {
                    return Control::Continue;
                }
                if count.fetch_add(1, Ordering::Relaxed) >= max {
                    return Control::Quit;
                }
                found
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Found {
                        path: self.display(&entry.real),
                        kind,
                    });
                Control::Continue
            }
        });
        let mut matches = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        matches.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(FindResult {
            matches,
            truncated: truncated(end),
        })
    }

    /// Searches file contents beneath a directory (or one file). Binary files are skipped, as ripgrep does.
    pub fn grep(&self, options: &GrepOptions) -> Result<GrepResult, FsError> {
        let matcher = build_matcher(options)?;
        let globs = PathGlobs::new(self, &options.globs)?;
        let searcher = || {
            SearcherBuilder::new()
                .line_number(true)
                .before_context(options.context)
                .after_context(options.context)
                .binary_detection(BinaryDetection::quit(0))
                .build()
        };
        let max = options.limits.max_results;
        let count = AtomicUsize::new(0);
        let files = AtomicUsize::new(0);
        let all = Mutex::new(Vec::new());

        // One file named directly: search it, whatever the globs say.
        let opened = self.open_to_read(&options.limits.path, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let st =
            rustix::fs::fstat(&opened.fd).map_err(|e| self.io(&options.limits.path, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            crate::read::regular_size(&options.limits.path, &opened.fd, "searched")?;
            let mut sink = Collect::new(self.display(&opened.real), max, &count);
            let _ = searcher().search_file(&matcher, &File::from(opened.fd), &mut sink);
            return Ok(GrepResult {
                truncated: sink.full,
                matches: sink.matches,
                files_searched: 1,
            });
        }
        drop(opened);

        let (start, walk_options) = self.walk_start(&options.limits)?;
        let end = walk(self, start.fd, start.real, &walk_options, || {
            let mut searcher = searcher();
            let matcher = matcher.clone();
            let all = &all;
            let count = &count;
            let files = &files;
            let globs = &globs;
            move |entry: &WalkEntry<'_>| {
                if entry.file_type != FileType::RegularFile
                    || !globs.is_match(self.relative_of(&entry.real))
                {
                    return Control::Continue;
                }
                let Some(file) = open_entry(entry, options.max_file_size) else {
                    return Control::Continue;
                };
                files.fetch_add(1, Ordering::Relaxed);
                let mut sink = Collect::new(self.display(&entry.real), max, count);
                // An unreadable file is skipped, as rg does; a full sink ends the search.
                let _ = searcher.search_file(&matcher, &file, &mut sink);
                let full = sink.full;
                if !sink.matches.is_empty() {
                    all.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(sink.matches);
                }
                if full {
                    Control::Quit
                } else {
                    Control::Continue
                }
            }
        });
        let mut matches = all.into_inner().unwrap_or_else(PoisonError::into_inner);
        matches.sort_by(|a, b| a.path.cmp(&b.path).then(a.line_number.cmp(&b.line_number)));
        Ok(GrepResult {
            matches,
            files_searched: files.load(Ordering::Relaxed),
            truncated: truncated(end),
        })
    }
}

fn truncated(end: WalkEnd) -> bool {
    end.quit || end.timed_out
}

fn build_matcher(options: &GrepOptions) -> Result<RegexMatcher, FsError> {
    if options.pattern.is_empty() {
        return Err(FsError::InvalidArgument {
            what: "pattern",
            reason: "it is empty".to_string(),
        });
    }
    RegexMatcherBuilder::new()
        .case_insensitive(options.case_insensitive)
        .case_smart(options.smart_case)
        .fixed_strings(options.fixed_string)
        .line_terminator(Some(b'\n'))
        .build(&options.pattern)
        .map_err(|e| FsError::InvalidArgument {
            what: "pattern",
            reason: e.to_string(),
        })
}

/// Opens a walked regular file without following links and without blocking; `None` to skip it.
fn open_entry(entry: &WalkEntry<'_>, max_size: Option<u64>) -> Option<File> {
    let fd = rustix::fs::openat(
        entry.dir,
        entry.name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    // Swapped for a FIFO or device since the listing: skip it.
    let size = crate::read::regular_size("", &fd, "searched").ok()?;
    if max_size.is_some_and(|max| size > max) {
        return None;
    }
    Some(File::from(fd))
}

/// Collects matches of one file, with context, up to the shared cap.
struct Collect<'a> {
    path: String,
    matches: Vec<GrepMatch>,
    pending_before: Vec<String>,
    max: usize,
    count: &'a AtomicUsize,
    full: bool,
}

impl<'a> Collect<'a> {
    fn new(path: String, max: usize, count: &'a AtomicUsize) -> Self {
        Collect {
            path,
            matches: Vec::new(),
            pending_before: Vec::new(),
            max,
            count,
            full: false,
        }
    }
}

fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.full = true;
            return Ok(false);
        }
        self.matches.push(GrepMatch {
            path: self.path.clone(),
            line_number: found.line_number().unwrap_or(0),
            line: line_text(found.bytes()),
            before: std::mem::take(&mut self.pending_before),
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        let text = line_text(context.bytes());
        match context.kind() {
            SinkContextKind::Before => self.pending_before.push(text),
            SinkContextKind::After => {
                if let Some(last) = self.matches.last_mut() {
                    last.after.push(text);
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}
