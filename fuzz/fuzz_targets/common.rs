// Shared by the targets: a fixed tree and a policy over it, built once per process.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use stockade_policy::{PolicyBuilder, ResolvedPolicy, Variables};

/// `<tmp>/stockade-fuzz-<pid>/{work/{src/lib.rs, .env, link-out -> ../secret}, secret/key}`.
pub struct World {
    pub base: PathBuf,
    pub work: PathBuf,
    pub secret: PathBuf,
    pub policy: ResolvedPolicy,
}

pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("stockade-fuzz-{}", std::process::id()));
        let work = base.join("work");
        let secret = base.join("secret");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(work.join("src/lib.rs"), "fn main() {}\n").unwrap();
        std::fs::write(work.join(".env"), "TOKEN=1\n").unwrap();
        std::fs::write(secret.join("key"), "SECRET\n").unwrap();
        let _ = std::os::unix::fs::symlink("../secret", work.join("link-out"));
        let base = base.canonicalize().unwrap();
        let work = base.join("work");
        let secret = base.join("secret");
        let policy = policy_for(
            &work,
            &base,
            // Judge-only: the targets check what the parser itself refuses (sandboxed Bash, the default,
            // lets the kernel decide what the parser cannot).
            "[profile.p]\nfs.write = [\"${CWD}\"]\nfs.deny = [\"**/.env\"]\nhook.bash = \"judge\"\n",
        );
        World {
            base,
            work,
            secret,
            policy,
        }
    })
}

pub fn policy_for(cwd: &Path, home: &Path, text: &str) -> ResolvedPolicy {
    let mut vars = Variables::default();
    vars.set_path("CWD", cwd);
    vars.set_path("HOME", home);
    let mut b = PolicyBuilder::new(vars);
    b.policy_text(text.to_string(), cwd.join("policy.toml"));
    b.build().unwrap()
}

/// The oracle: nothing outside `work` (but `/dev` and `/proc`, which the policy grants implicitly), and no
/// `.env` anywhere, may be allowed.
pub fn outside(world: &World, path: &Path) -> bool {
    (!path.starts_with(&world.work) && !path.starts_with("/dev") && !path.starts_with("/proc"))
        || path.file_name().is_some_and(|n| n == ".env")
}
