//! Ordinary work still runs inside the default profile: git, gcc, cargo, python with subprocesses, node,
//! npm test and tar: issue 15's list of work that must survive the mediator.

use super::util::*;
use crate::both_users;

both_users! {
    /// Issue 15's ordinary git work, in a repository made before the run: everything it writes in `.git`
    /// is on the built-in list, and nothing else there is writable.
    fn git_commit_branch_and_stash(d) {
        let setup = "git init -q -b main && git config user.name a && git config user.email a@b && \
                     echo one > f && git add f && git commit -qm first";
        setup_repo(&d.work(), setup);
        d.chown_all();
        d.sh(&[], "echo two >> f && git commit -qam second && git checkout -qb feature && echo three >> f && \
                   git stash -q && git stash pop -q && git commit -q -m third f && git log --oneline | wc -l && \
                   git branch --list | wc -l")
            .ok()
            .stdout_has("3\n2\n");
    }
}

both_users! {
    /// History work writes more of `.git`: a cherry-pick and a revert, a merge and a rebase that conflict
    /// and are aborted, a bisection, `git gc`. All of it works; the configuration stays read-only.
    fn git_history_operations(d) {
        let setup = "git init -q -b main && git config user.name a && git config user.email a@b && \
                     echo 1 > f && git add f && git commit -qm one && git checkout -qb side && \
                     echo 2 > f && git commit -qam two && echo 3 > g && git add g && git commit -qm three && \
                     git checkout -q main && echo x > f && git commit -qam mainx";
        setup_repo(&d.work(), setup);
        d.chown_all();
        d.sh(&[], "git cherry-pick side >/dev/null && echo picked; \
                   git merge side >/dev/null 2>&1 || git merge --abort && echo merge-aborted; \
                   git rebase side >/dev/null 2>&1 || git rebase --abort && echo rebase-aborted; \
                   git revert --no-edit HEAD >/dev/null && echo reverted; \
                   git bisect start >/dev/null && git bisect bad HEAD >/dev/null && \
                   git bisect good HEAD~2 >/dev/null && git bisect reset >/dev/null 2>&1 && echo bisected; \
                   git gc -q && echo collected; git config core.x y 2>/dev/null || echo config-held")
            .ok()
            .stdout_has("picked\nmerge-aborted\nrebase-aborted\nreverted\nbisected\ncollected\nconfig-held\n");
    }
}

both_users! {
    /// The same in a linked worktree (`git worktree add`), whose git state lives in its own git dir
    /// (`<repo>/.git/worktrees/<name>`) and in the repository's `.git`: both are read at start, git's
    /// own state in them is writable, and what decides what git runs (the repository's configuration and
    /// hooks, the worktree's `.git` file and `commondir`) is not. Outside the worktree nothing of the
    /// repository is reachable.
    fn git_in_a_linked_worktree(d) {
        d.mkdir("repo");
        let setup = "git init -q -b main && git config user.name a && git config user.email a@b && \
                     echo one > f && git add f && git commit -qm first && git worktree add -q ../work -b wt";
        setup_repo(&d.path("repo"), setup);
        d.chown_all();
        d.sh(&[], "echo two >> f && git commit -qam second && git checkout -qb feature && echo three >> f && \
                   git stash -q && git stash pop -q && git commit -q -m third f && git log --oneline | wc -l; \
                   echo x >> ../repo/.git/config || echo held-config; \
                   echo 'gitdir: /tmp/elsewhere' > .git || echo held-dotgit; \
                   echo x > ../repo/.git/worktrees/work/commondir || echo held-commondir; \
                   echo x > ../repo/.git/hooks/post-checkout || echo held-hooks; \
                   cat ../repo/f || echo held-repo")
            .ok()
            .stdout_has("3\nheld-config\nheld-dotgit\nheld-commondir\nheld-hooks\nheld-repo\n");
        assert!(!exists(&d.path("repo/.git/hooks/post-checkout")));
    }
}

both_users! {
    /// A submodule's checkout, whose `.git` file names the superproject's `.git/modules/<name>`: git's
    /// state there is writable, its configuration is not.
    fn git_in_a_submodule_checkout(d) {
        d.mkdir("lib");
        let lib = d.path("lib");
        let setup = format!(
            "git -C lib init -q -b main && git -C lib -c user.name=a -c user.email=a@b commit -q --allow-empty -m lib && \
             rmdir work && git init -q -b main && git -c protocol.file.allow=always submodule -q add {} work && \
             git -C work config user.name a && git -C work config user.email a@b",
            lib.display()
        );
        setup_repo(&d.path(""), &setup);
        d.chown_all();
        d.sh(&[], "echo x > g && git add g && git commit -qm second && git log --oneline | wc -l; \
                   echo x >> ../.git/modules/work/config || echo held-config")
            .ok()
            .stdout_has("2\nheld-config\n");
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

both_users! {
    /// `npm test` of a package whose test script writes a report and a cache directory in the project,
    /// as test runners do; every name is created through the filter.
    fn npm_test_writes_its_reports(d) {
        if std::process::Command::new("npm").arg("--version").output().is_err() {
            eprintln!("SKIPPED: npm is not installed");
            return;
        }
        d.write("work/package.json", "{\"name\":\"t\",\"version\":\"1.0.0\",\"scripts\":{\"test\":\"node test.js\"}}\n")
            .write("work/test.js", "const fs = require('fs');\nfs.mkdirSync('.cache/t', {recursive: true});\n\
                    fs.writeFileSync('.cache/t/run.json', '{}');\nfs.writeFileSync('report.xml', '<ok/>');\n\
                    console.log('tests passed');\n");
        d.chown_all();
        d.sh(&[], "npm test --silent && cat report.xml .cache/t/run.json")
            .ok()
            .stdout_has("tests passed")
            .stdout_has("<ok/>{}");
    }
}

both_users! {
    /// `tar x` of 10,000 files, into a directory made during the run and into one that existed: every
    /// file arrives, with tar's modes, and the project outside the archive is untouched.
    fn tar_extracts_ten_thousand_files(d) {
        let tree = d.path("tree");
        for dir in 0..100 {
            let sub = tree.join(format!("pkg/d{dir}"));
            std::fs::create_dir_all(&sub).unwrap();
            for file in 0..100 {
                std::fs::write(sub.join(format!("f{file}.txt")), format!("{dir}/{file}\n")).unwrap();
            }
        }
        let made = std::process::Command::new("tar")
            .args(["-cf", "../files.tar", "pkg"])
            .current_dir(&tree)
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::create_dir_all(d.work().join("existing")).unwrap();
        d.chown_all();
        let archive = d.path("files.tar");
        let archive = archive.to_str().unwrap();
        d.sh(&["--ro", archive], &format!(
            "mkdir fresh && tar -xf {archive} -C fresh && tar -xf {archive} -C existing && \
             find fresh existing -type f | wc -l && cat existing/pkg/d99/f99.txt"))
            .ok()
            .stdout_has("20000\n99/99\n");
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
