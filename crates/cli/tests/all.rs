//! Integration tests: the real `stockade` binary, real Landlock, real namespaces, real escape attempts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    reason = "tests fail loudly by design; clippy's test exemptions miss helper modules"
)]

mod suite;
