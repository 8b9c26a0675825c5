//! Ordinary work still runs inside the default profile: git, gcc, cargo, python with subprocesses, node.

use super::util::*;
use crate::both_users;

both_users! {
    /// Issue 15's ordinary git work, in a repository made before the run: everything it writes in `.git`
    /// is on the built-in list, and nothing else there is writable.
    fn git_commit_branch_and_stash(d) {
        let setup = "git init -q -b main && git config user.name a && git config user.email a@b && \
                     echo one > f && git add f && git commit -qm first";
        let st = std::process::Command::new("sh").args(["-c", setup]).current_dir(d.work())
            .env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "safe.directory").env("GIT_CONFIG_VALUE_0", "*").status().unwrap();
        assert!(st.success());
        d.chown_all();
        d.sh(&[], "echo two >> f && git commit -qam second && git checkout -qb feature && echo three >> f && \
                   git stash -q && git stash pop -q && git commit -q -m third f && git log --oneline | wc -l && \
                   git branch --list | wc -l")
            .ok()
            .stdout_has("3\n2\n");
    }
}

both_users! {
    fn gcc_compile_and_run(d) {
        d.write("work/hello.c", "#include <stdio.h>\nint main(void){puts(\"compiled\");return 0;}\n");
        d.sh(&[], "gcc -o hello hello.c && ./hello").ok().stdout_has("compiled");
    }
}

both_users! {
    fn python_with_subprocesses(d) {
        d.sh(&[], "python3 -c \"import subprocess, tempfile; f = tempfile.NamedTemporaryFile(); print(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())\"")
            .ok()
            .stdout_has("sub");
    }
}

both_users! {
    fn node_with_child_process(d) {
        if std::process::Command::new("node").arg("--version").output().is_err() {
            eprintln!("SKIPPED: node is not installed");
            return;
        }
        d.sh(&[], "node -e \"console.log(require('child_process').execSync('echo from-node').toString().trim())\" && npm --version")
            .ok()
            .stdout_has("from-node");
    }
}

#[test]
fn cargo_build_offline() {
    if !landlock_ready() || !is_root() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.write(
        "work/Cargo.toml",
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write(
        "work/src/main.rs",
        "fn main() { println!(\"built by cargo\"); }\n",
    );
    d.sh(&[], "cargo run --offline -q")
        .ok()
        .stdout_has("built by cargo");
}
