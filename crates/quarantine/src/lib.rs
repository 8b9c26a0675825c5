//! Dual-context quarantine (seed 001): a confined reader reads untrusted cross-project content, and only
//! typed references whose provenance checks out flow back to the privileged agent.
//!
//! - [`CrossProjectProfile`]: the reader's tool profile, built in or from strict JSON.
//! - [`run`]: the runner: the reader runs inside `stockade-sandbox` with read access to
//!   exactly the input files; timeouts, exit codes, signals, malformed and oversized output are reported.
//! - [`SourceSet::validate`]: the provenance gate: a reference passes only if its quote is
//!   verbatim on its line of an input file and contains its value.
//! - [`build_command`]: pluggable readers: `k cross-project` (the seed's default), stockade's own
//!   deterministic [`extract`] reader, Claude Code, or any program.

mod error;
pub mod extract;
mod gate;
mod profile;
mod runner;
mod stream;

pub use error::QuarantineError;
pub use gate::{
    MAX_QUOTE_BYTES, MAX_SOURCE_BYTES, MAX_VALUE_BYTES, ReferenceKind, Rejected, Source, SourceSet,
    TypedReference, reference_schema,
};
pub use profile::{CrossProjectProfile, profile_schema};
pub use runner::{
    CommandLine, DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT, QuarantineConfig, QuarantineResult, Reader,
    build_command, claude_command, find_program, parse_output, run,
};
pub use stream::StreamingGate;

#[cfg(test)]
mod tests;
