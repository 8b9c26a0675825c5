//! Ordinary work still runs inside the default profile: git, gcc, cargo, python with subprocesses, node.

use super::util::*;
use crate::both_users;

both_users! {
    fn git_init_and_commit(d) {
        d.sh(&[], "git init -q . && git -c user.name=a -c user.email=a@b add -A && echo hi > f && git add f && \
                  git -c user.name=a -c user.email=a@b commit -qm first && git log --oneline | wc -l")
            .ok()
            .stdout_has("1");
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
