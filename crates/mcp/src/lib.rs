//! An MCP server (JSON-RPC over stdio, via the official `rmcp` SDK) exposing stockade's confined file tools.
//!
//! Every call goes through one [`stockade_fs::Root`], so the server can do nothing the root's policy does
//! not allow. The write tools (`write_file`, `edit_file`, `create_directory`, `move_file`) are listed only
//! when something beneath the root is writable. Failures are tool errors (`isError: true`) with a message
//! that says why and a structured `{error, message, path, rule, fix}`; the server itself never fails a call.
//! Results are text content plus structured content; for `read_file` the text is the file and the
//! structured content its metadata (path, line range, size, truncated), so the text is not sent twice.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use stockade_fs::{
    Edit, EntryKind, FindOptions, FsError, GrepOptions, ReadOptions, Root, WalkLimits,
};

/// Largest `maxResults` a client may ask for.
pub const MAX_RESULTS_CAP: usize = 10_000;
/// Largest `maxBytes` a client may ask for.
pub const MAX_BYTES_CAP: u64 = 10 * 1024 * 1024;
/// Deepest `directory_tree` a client may ask for.
pub const MAX_TREE_DEPTH: usize = 10;

/// Called with the tool name and the error for every refusal (to write the audit log).
pub type RefusalHook = Arc<dyn Fn(&str, &FsError) + Send + Sync>;

/// The file tools over one root.
#[derive(Clone)]
pub struct FsServer {
    root: Arc<Root>,
    on_refusal: Option<RefusalHook>,
    walk_timeout: Duration,
}

impl std::fmt::Debug for FsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsServer")
            .field("root", &self.root.path())
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PathArgs {
    /// Path relative to the root (absolute paths are accepted only inside it, unless the server is relative-only).
    #[serde(default = "dot")]
    path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadArgs {
    /// Path of the file, relative to the root.
    path: String,
    /// First line to return (1-based).
    start_line: Option<usize>,
    /// Last line to return (inclusive).
    end_line: Option<usize>,
    /// Cap on the bytes returned (default 256 KiB).
    max_bytes: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadManyArgs {
    /// Paths of the files, relative to the root.
    paths: Vec<String>,
    /// Cap on the bytes returned per file (default 256 KiB).
    max_bytes: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FindArgs {
    /// Globs matched against paths relative to the root (`src/**/*.ts`); one without `/` matches names at any depth (`*.ts`). Empty: everything.
    #[serde(default)]
    patterns: Vec<String>,
    /// Directory to search from (default: the root).
    #[serde(default = "dot")]
    path: String,
    /// Only `file`, `directory` or `symlink`.
    kind: Option<EntryKind>,
    /// Levels below `path` (1: its entries only).
    max_depth: Option<usize>,
    /// Cap on results (default 1000).
    max_results: Option<usize>,
    /// Include names starting with `.`.
    #[serde(default)]
    include_hidden: bool,
    /// Honour .gitignore (default true).
    respect_gitignore: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GrepArgs {
    /// Regular expression (Rust syntax), or literal text with fixedString.
    pattern: String,
    /// Directory or file to search (default: the root).
    #[serde(default = "dot")]
    path: String,
    /// Only files matching these globs (`*.rs`, `src/**/*.ts`).
    #[serde(default)]
    globs: Vec<String>,
    /// Treat the pattern as literal text.
    #[serde(default)]
    fixed_string: bool,
    /// Ignore case.
    #[serde(default)]
    case_insensitive: bool,
    /// Ignore case unless the pattern has an uppercase letter.
    #[serde(default)]
    smart_case: bool,
    /// Lines of context before and after each match.
    #[serde(default)]
    context_lines: usize,
    /// Cap on matching lines (default 1000).
    max_results: Option<usize>,
    /// Levels below `path`.
    max_depth: Option<usize>,
    /// Include names starting with `.`.
    #[serde(default)]
    include_hidden: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TreeArgs {
    /// Directory to show (default: the root).
    #[serde(default = "dot")]
    path: String,
    /// Levels to show (default 3, at most 10).
    max_depth: Option<usize>,
    /// Cap on entries (default 10000).
    max_entries: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WriteArgs {
    /// Path of the file, relative to the root; its directory must exist.
    path: String,
    /// The whole new content.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EditArgs {
    /// Path of the file, relative to the root.
    path: String,
    /// Replacements, applied in order; each oldText must occur exactly once.
    edits: Vec<Edit>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MoveArgs {
    /// What to move, relative to the root.
    source: String,
    /// Where to, relative to the root; must not exist.
    destination: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListArgs {
    /// Directory, relative to the root (default: the root).
    #[serde(default = "dot")]
    path: String,
    /// Also give each file's size (one stat per entry).
    #[serde(default)]
    with_sizes: bool,
}

fn dot() -> String {
    ".".to_string()
}

fn schema_of<T: JsonSchema>() -> Arc<JsonObject> {
    let mut value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    Arc::new(match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    })
}

fn tool<T: JsonSchema>(name: &'static str, description: &'static str, read_only: bool) -> Tool {
    let mut tool = Tool::new(name, description, schema_of::<T>());
    tool.annotations = Some(
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(!read_only && name != "create_directory"),
    );
    tool
}

fn args<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, FsError> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| FsError::InvalidArgument {
        what: "arguments",
        reason: e.to_string(),
    })
}

/// A read's structured content: everything but the text, which is the text content already (sending it
/// twice would double every response).
fn metadata(content: &stockade_fs::FileContent) -> Value {
    json!({
        "path": content.path,
        "startLine": content.start_line,
        "endLine": content.end_line,
        "size": content.size,
        "truncated": content.truncated,
    })
}

fn cap(value: Option<usize>, default: usize, max: usize) -> usize {
    value.unwrap_or(default).min(max)
}

/// The byte cap of a read: the client's `maxBytes`, else the default, never over [`MAX_BYTES_CAP`].
fn read_cap(max_bytes: Option<u64>) -> u64 {
    max_bytes
        .unwrap_or(stockade_fs::DEFAULT_MAX_READ_BYTES)
        .min(MAX_BYTES_CAP)
}

impl FsServer {
    /// Serves the tools of `root`.
    pub fn new(root: Root) -> FsServer {
        FsServer {
            root: Arc::new(root),
            on_refusal: None,
            walk_timeout: stockade_fs::DEFAULT_WALK_TIMEOUT,
        }
    }

    /// Calls `hook` for every refusal (path outside, symlink escape, policy denial).
    pub fn on_refusal(mut self, hook: RefusalHook) -> FsServer {
        self.on_refusal = Some(hook);
        self
    }

    /// The root served.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The tools offered: the read tools always, the write tools only where something is writable.
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool::<ListArgs>(
                "list_directory",
                "List a directory's entries: one per line, directories ending in `/`, links in `@` (sizes with withSizes). Entries the policy denies are left out.",
                true,
            ),
            tool::<ReadArgs>(
                "read_file",
                "Read a text file, whole or a line range (startLine/endLine), capped at maxBytes.",
                true,
            ),
            tool::<ReadManyArgs>(
                "read_multiple_files",
                "Read several text files at once; each succeeds or fails on its own.",
                true,
            ),
            tool::<FindArgs>(
                "find_files",
                "Find paths matching globs, .gitignore aware, with depth and result caps. Links are listed, never followed.",
                true,
            ),
            tool::<GrepArgs>(
                "grep",
                "Search file contents for a regex or fixed string, with case options, context lines and result caps.",
                true,
            ),
            tool::<PathArgs>(
                "file_info",
                "Metadata of a path: kind, size, permission bits, modification time, whether it is writable.",
                true,
            ),
            tool::<TreeArgs>(
                "directory_tree",
                "The tree beneath a directory as nested JSON, depth-capped.",
                true,
            ),
        ];
        if self.root.is_writable() {
            tools.extend([
                tool::<WriteArgs>(
                    "write_file",
                    "Create a file or replace its content (where the policy grants write).",
                    false,
                ),
                tool::<EditArgs>(
                    "edit_file",
                    "Replace text in a file: each oldText must occur exactly once; all edits apply or none.",
                    false,
                ),
                tool::<PathArgs>(
                    "create_directory",
                    "Create a directory and its missing parents.",
                    false,
                ),
                tool::<MoveArgs>(
                    "move_file",
                    "Move or rename a file or directory; the destination must not exist.",
                    false,
                ),
            ]);
        }
        tools
    }

    /// Runs one tool call to completion (blocking). Never fails: errors are tool errors.
    pub fn call(&self, name: &str, arguments: Option<JsonObject>) -> CallToolResult {
        match self.dispatch(name, arguments) {
            Ok((text, structured)) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(structured);
                result
            }
            Err(error) => {
                self.report_refusal(name, &error);
                self.error_result(&error)
            }
        }
    }

    /// Hands a refusal (not an ordinary failure) to the refusal hook, for the audit log.
    fn report_refusal(&self, tool: &str, error: &FsError) {
        if error.is_refusal()
            && let Some(hook) = &self.on_refusal
        {
            hook(tool, error);
        }
    }

    fn error_result(&self, error: &FsError) -> CallToolResult {
        let denial = error.denial();
        let structured = json!({
            "error": error.code(),
            "message": error.to_string(),
            "path": error.path(),
            "rule": denial.and_then(|d| d.rule.clone()),
            "fix": denial.map(|d| d.fix.clone()),
        });
        let mut result = CallToolResult::error(vec![ContentBlock::text(error.to_string())]);
        result.structured_content = Some(structured);
        result
    }

    fn limits(
        &self,
        path: String,
        max_depth: Option<usize>,
        max_results: Option<usize>,
    ) -> WalkLimits {
        WalkLimits {
            path,
            max_depth,
            max_results: cap(
                max_results,
                stockade_fs::DEFAULT_MAX_RESULTS,
                MAX_RESULTS_CAP,
            ),
            timeout: self.walk_timeout,
            ..WalkLimits::default()
        }
    }

    fn dispatch(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<(String, Value), FsError> {
        let root = &self.root;
        let json = |value: &dyn erased::Ser| -> Result<(String, Value), FsError> {
            let value = value.to_value();
            Ok((value.to_string(), value))
        };
        match name {
            "list_directory" => {
                let a: ListArgs = args(arguments)?;
                let listing =
                    root.list_directory(&a.path, stockade_fs::DEFAULT_MAX_ENTRIES, a.with_sizes)?;
                let mut text = String::new();
                for entry in &listing.entries {
                    text.push_str(&entry.name);
                    text.push_str(entry.kind.suffix());
                    if let Some(size) = entry.size {
                        text.push_str(&format!(" ({size} bytes)"));
                    }
                    text.push('\n');
                }
                if listing.hidden > 0 {
                    text.push_str(&format!(
                        "({} entries hidden by the policy)\n",
                        listing.hidden
                    ));
                }
                Ok((text, serde_json::to_value(&listing).unwrap_or_default()))
            }
            "read_file" => {
                let a: ReadArgs = args(arguments)?;
                let options = ReadOptions {
                    start_line: a.start_line,
                    end_line: a.end_line,
                    max_bytes: read_cap(a.max_bytes),
                };
                let content = root.read_file(&a.path, options)?;
                let structured = metadata(&content);
                Ok((content.content, structured))
            }
            "read_multiple_files" => {
                let a: ReadManyArgs = args(arguments)?;
                let options = ReadOptions {
                    max_bytes: read_cap(a.max_bytes),
                    ..ReadOptions::default()
                };
                let mut text = String::new();
                let mut files = Vec::new();
                for (path, result) in a
                    .paths
                    .iter()
                    .zip(root.read_multiple_files(&a.paths, options))
                {
                    match result {
                        Ok(content) => {
                            text.push_str(&format!("{}:\n{}\n", content.path, content.content));
                            files.push(metadata(&content));
                        }
                        Err(error) => {
                            self.report_refusal(name, &error);
                            text.push_str(&format!("{path}: error: {error}\n"));
                            files.push(json!({"path": path, "error": error.code(), "message": error.to_string()}));
                        }
                    }
                }
                Ok((text, json!({ "files": files })))
            }
            "find_files" => {
                let a: FindArgs = args(arguments)?;
                let mut limits = self.limits(a.path, a.max_depth, a.max_results);
                limits.hidden = a.include_hidden;
                limits.gitignore = a.respect_gitignore.unwrap_or(true);
                let found = root.find_files(&FindOptions {
                    patterns: a.patterns,
                    kind: a.kind,
                    limits,
                })?;
                json(&found)
            }
            "grep" => {
                let a: GrepArgs = args(arguments)?;
                let mut limits = self.limits(a.path, a.max_depth, a.max_results);
                limits.hidden = a.include_hidden;
                let found = root.grep(&GrepOptions {
                    pattern: a.pattern,
                    fixed_string: a.fixed_string,
                    case_insensitive: a.case_insensitive,
                    smart_case: a.smart_case,
                    context: a.context_lines.min(20),
                    globs: a.globs,
                    max_file_size: None,
                    limits,
                })?;
                json(&found)
            }
            "file_info" => {
                let a: PathArgs = args(arguments)?;
                json(&root.file_info(&a.path)?)
            }
            "directory_tree" => {
                let a: TreeArgs = args(arguments)?;
                let tree = root.directory_tree(
                    &a.path,
                    cap(a.max_depth, 3, MAX_TREE_DEPTH),
                    cap(
                        a.max_entries,
                        stockade_fs::DEFAULT_MAX_ENTRIES,
                        stockade_fs::DEFAULT_MAX_ENTRIES,
                    ),
                )?;
                json(&tree)
            }
            "write_file" | "edit_file" | "create_directory" | "move_file"
                if !root.is_writable() =>
            {
                Err(FsError::InvalidArgument {
                    what: "tool",
                    reason: format!(
                        "{name} is not offered: nothing under {} is writable (start the server with --write or a policy that grants write)",
                        root.path().display()
                    ),
                })
            }
            "write_file" => {
                let a: WriteArgs = args(arguments)?;
                json(&root.write_file(&a.path, &a.content)?)
            }
            "edit_file" => {
                let a: EditArgs = args(arguments)?;
                json(&root.edit_file(&a.path, &a.edits)?)
            }
            "create_directory" => {
                let a: PathArgs = args(arguments)?;
                json(&root.create_directory(&a.path)?)
            }
            "move_file" => {
                let a: MoveArgs = args(arguments)?;
                json(&root.move_file(&a.source, &a.destination)?)
            }
            other => Err(FsError::InvalidArgument {
                what: "tool",
                reason: format!("there is no tool {other:?}; tools/list names the ones offered"),
            }),
        }
    }

    /// Serves MCP over this process's stdin and stdout until the client closes them.
    pub fn serve_stdio(self) -> std::io::Result<()> {
        // One thread: a request is read, answered and written without waking another thread, which is
        // most of a small call's cost. Calls are bounded by the walk and size caps, so one at a time is fine.
        let mut builder = tokio::runtime::Builder::new_current_thread();
        // With a core to spare, look for the next request for a moment before sleeping in the kernel:
        // a client's follow-up call then lands without a wake-up (tens of microseconds on a VM). On one
        // core the spin would only delay the client, so it is off there.
        if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
            builder.on_thread_park(|| wait_for_input(IDLE_SPIN));
        }
        let runtime = builder.enable_all().build()?;
        runtime.block_on(async move {
            let running = self
                .serve(rmcp::transport::io::stdio_pipes())
                .await
                .map_err(|e| std::io::Error::other(format!("MCP initialization failed: {e}")))?;
            running
                .waiting()
                .await
                .map_err(|e| std::io::Error::other(format!("MCP server stopped: {e}")))?;
            Ok(())
        })
    }
}

/// How long an idle server keeps looking for the next request before it sleeps: about one client
/// turnaround. An agent's calls are seconds apart, so the cost is this much CPU per call at most.
const IDLE_SPIN: std::time::Duration = std::time::Duration::from_micros(60);

/// Returns when stdin has input (or hung up), or after `budget`, whichever is first. The runtime then
/// finds the input ready without having slept.
fn wait_for_input(budget: std::time::Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let stdin = std::io::stdin();
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let start = std::time::Instant::now();
    loop {
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        // Any answer, ready or error, ends the wait; the runtime's own poll will see the same.
        if !matches!(poll(&mut fds, Some(&now)), Ok(0)) || start.elapsed() >= budget {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Serialization through a trait object, so `dispatch` has one `json` helper for every result type.
mod erased {
    pub(crate) trait Ser {
        fn to_value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_value(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or_default()
        }
    }
}

impl ServerHandler for FsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stockade", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "File tools confined to {}. Paths are relative to it{}.",
                self.root.path().display(),
                match self.root.path_mode() {
                    stockade_fs::PathMode::InsideRoot => "; absolute paths are accepted inside it",
                    stockade_fs::PathMode::RelativeOnly => "; absolute paths are refused",
                }
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        // Run in place on the server's one thread (see `serve_stdio`).
        let result = self.call(&request.name, request.arguments);
        Ok(CallToolResponse::Complete(result))
    }
}

#[cfg(test)]
mod tests;
