//! Arbitrary bytes as hook input: never a panic, and never an allow for a path outside the scope (the
//! secret directory, `.env`), checked against an oracle that resolves every string argument itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_hook::{HookInput, Verdict};
use stockade_policy::CanonicalPath;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let world = common::world();
    let Ok(input) = serde_json::from_slice::<HookInput>(data) else {
        return; // the binary answers exit 2 for unparsable input (tested in the suite)
    };
    let judgement = stockade_hook::judge(&world.policy, &input);
    if !matches!(judgement.verdict, Verdict::Allow { .. }) {
        return;
    }
    // Every touch the hook judged must be allowed...
    for touch in &judgement.touches {
        assert!(
            touch.decision.is_allow(),
            "allowed with a denied touch: {touch:?}"
        );
    }
    // ...and every path-like string argument of a file tool must lead inside the scope.
    let tool = input.tool_name.as_deref().unwrap_or("");
    if !["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "LS"].contains(&tool) {
        return;
    }
    let cwd = input.cwd.as_deref().unwrap_or("/");
    if let Some(args) = input.tool_input.as_ref().and_then(|v| v.as_object()) {
        for key in ["file_path", "notebook_path", "path"] {
            if let Some(p) = args.get(key).and_then(|v| v.as_str()) {
                let full = std::path::Path::new(cwd).join(p);
                if let Ok(resolved) = CanonicalPath::resolve(&full) {
                    assert!(
                        !common::outside(world, resolved.as_path()),
                        "allowed {tool} {key}={p:?} (cwd {cwd:?}) which leads to {}",
                        resolved.as_path().display()
                    );
                }
            }
        }
    }
});
