//! Filesystem confinement: seed 000's filesystem scenarios and the issue's escape list.

use super::util::*;
use crate::both_users;

both_users! {
    /// Seed 000: in-scope access is allowed.
    fn in_scope_access_works(d) {
        d.write("work/existing.txt", "old\n");
        d.sh(&[], "echo hi > note.txt && cat note.txt && mkdir -p sub/deep && echo x > sub/deep/f && rm existing.txt && mv note.txt moved.txt")
            .ok()
            .stdout_has("hi");
        assert_eq!(d.read("work/moved.txt").as_deref(), Some("hi\n"));
        assert!(d.read("work/existing.txt").is_none());
    }
}

both_users! {
    /// Seed 000: out-of-scope access is denied with a permission error (read, write, list).
    fn out_of_scope_is_a_permission_error(d) {
        d.write("outside/secret.txt", "TOPSECRET\n");
        let out = d.sh(&[], &format!("cat {0}/outside/secret.txt; echo x > {0}/outside/new; ls {0}/outside; echo done", d.root.display()));
        out.ok().stdout_lacks("TOPSECRET").stdout_has("done");
        assert_eq!(out.stderr.matches("Permission denied").count(), 3, "{}", out.stderr);
        assert!(d.read("outside/new").is_none());
    }
}

both_users! {
    /// Seed 000: a read-only scope cannot create, modify, truncate, rename, delete, chmod, chown, touch or
    /// set extended attributes.
    fn read_only_scope_prevents_every_modification(d) {
        d.write("work/f.txt", "original\n").mkdir("work/dir");
        let script = r#"
cat f.txt
try create 'echo x > new.txt'
try modify 'echo x >> f.txt'
try truncate ': > f.txt'
try rename 'mv f.txt g.txt'
try delete 'rm f.txt'
try rmdir 'rmdir dir'
try mkdir 'mkdir newdir'
try chmod 'chmod 777 f.txt'
try chown "chown $(id -u):$(id -g) f.txt"
try touch 'touch -d 2001-01-01 f.txt'
try xattr 'python3 -c "import os; os.setxattr(\"f.txt\", \"user.x\", b\"1\")"'
try symlink 'ln -s /etc/passwd link'
try hardlink 'ln f.txt hard'
"#;
        let out = d.sh(&["--profile", "read-only"], &format!("{TRY}{script}"));
        out.ok().stdout_has("original").stdout_lacks("ESCAPED");
        assert_eq!(out.stdout.matches("held").count(), 13, "{}", out.stdout);
        assert_eq!(d.read("work/f.txt").as_deref(), Some("original\n"));
        let meta = std::fs::metadata(d.path("work/f.txt")).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o644);
    }
}

/// Files the user's tools load or run later (issue 15's list), attacked by creating, changing, renaming
/// onto, linking and symlinking them. The same script runs unconfined first, in a copy, and must escape
/// there every time, so a "held" inside is the sandbox's doing.
const FILES_RUN_LATER: &str = r#"
try hook 'echo evil > .git/hooks/pre-commit'
try config 'echo "[core] fsmonitor = evil" >> .git/config'
try config-replace 'echo x > c && mv c .git/config'
try move-git 'mv .git .git-old'
try remove-git 'rm -rf .git'
try hooks-replace 'mv .git/hooks .git/h2'
try commondir 'echo ../../elsewhere > .git/commondir'
try config-worktree 'echo "[core] fsmonitor = evil" > .git/config.worktree'
try info 'echo "* filter=evil" > .git/info/attributes'
try husky 'echo evil > .husky/pre-commit'
try husky-new 'echo evil > .husky/post-checkout'
try claude 'mkdir -p .claude/x && echo {} > .claude/settings.json'
try vscode 'mkdir -p .vscode && echo {} > .vscode/tasks.json'
try mcp 'echo {} > .mcp.json'
try envrc 'echo evil > .envrc'
try rename-onto 'echo {} > m && mv m .mcp.json'
try hardlink 'echo {} > h && ln h .envrc'
try symlink 'ln -s /tmp/evil .mcp.json'
try idea 'mkdir .idea'
try pre-commit 'echo "repos: []" > .pre-commit-config.yaml'
try lefthook 'echo "pre-commit: {}" > lefthook.yml'
echo ok > .git/COMMIT_EDITMSG && echo wrote-git-state
"#;

both_users! {
    /// DESIGN: files something outside will later trust are protected inside the writable tree whether
    /// or not they exist at start; the `mv .git .git-old` trick fails; nothing is made on the host.
    fn files_run_later_are_protected_whether_or_not_they_exist(d) {
        let setup = "git init -q && git config core.hooksPath .husky && mkdir .husky && echo ok > .husky/pre-commit";
        // Unconfined, each attack in a fresh copy (some, like `rm -rf .git`, would spoil the next).
        for (i, attack) in FILES_RUN_LATER.lines().filter(|l| l.starts_with("try ")).enumerate() {
            let control = d.path(&format!("control/{i}"));
            std::fs::create_dir_all(&control).unwrap();
            let st = std::process::Command::new("sh").args(["-c", &format!("{setup} && {TRY}{attack}")])
                .current_dir(&control).env("GIT_CONFIG_GLOBAL", "/dev/null").output().unwrap();
            let unconfined = String::from_utf8_lossy(&st.stdout);
            assert!(unconfined.contains("ESCAPED"), "the control must escape: {attack}\n{unconfined}");
        }

        setup_repo(&d.work(), setup);
        d.chown_all();
        let out = d.stockade(["run", "--json", "--", "sh", "-c", &format!("{TRY}{FILES_RUN_LATER}")]).run();
        out.ok().stdout_lacks("ESCAPED").stdout_has("wrote-git-state");
        assert_eq!(out.stdout.matches("held").count(), 21, "{}", out.stdout);
        for planted in [".git/hooks/pre-commit", ".git/commondir", ".git/config.worktree", ".mcp.json", ".envrc",
                        ".claude", ".vscode", ".idea", ".git-old", ".husky/post-checkout",
                        ".pre-commit-config.yaml", "lefthook.yml"] {
            assert!(!exists(&d.path(&format!("work/{planted}"))), "{planted} exists");
        }
        assert_eq!(d.read("work/.husky/pre-commit").as_deref(), Some("ok\n"));
        // Without --json the first refusals are said on stderr, with the rule and the fix.
        let plain = d.sh(&[], "echo {} > .mcp.json");
        plain.stderr_has("open of '").stderr_has(".mcp.json' refused by the mediator").stderr_has("fs.read-only = \".mcp.json\"");
        // The mediator's refusals reach the run's outcome, naming the call and the path.
        assert!(out.stdout.contains("\"refused_calls\":"), "{}", out.stdout);
        assert!(out.stdout.contains(&format!("{}/.mcp.json", d.work().display())), "{}", out.stdout);
        // ... and the audit log, with the rule that decided each.
        let audit = std::fs::read_to_string(d.path("audit.jsonl")).unwrap_or_default();
        assert!(
            audit.lines().any(|l| l.contains("\"layer\":\"kernel\"") && l.contains(".mcp.json") && l.contains("fs.read-only")),
            "{audit}"
        );
    }
}

both_users! {
    /// In a linked worktree the directory `core.hooksPath` names is read from the repository's
    /// configuration (through the worktree's `.git` file and the git dir's `commondir`) and held, relative
    /// to the worktree's top, like the hooks of a plain repository.
    fn a_linked_worktree_keeps_the_hooks_path_of_its_repository(d) {
        let work = d.work();
        let repo = d.path("repo");
        std::fs::create_dir_all(&repo).unwrap();
        setup_repo(&repo, &format!(
            "git init -q && git config core.hooksPath .husky && mkdir .husky && echo ok > .husky/pre-commit \
             && git add . && git -c user.name=t -c user.email=t@t commit -qm init && git worktree add -q {}",
            work.display()
        ));
        d.chown_all();
        let out = d.sh(&[], "echo evil > .husky/pre-commit; echo evil > .husky/post-checkout; echo end");
        out.ok().stdout_has("end");
        assert_eq!(d.read("work/.husky/pre-commit").as_deref(), Some("ok\n"));
        assert!(!exists(&d.path("work/.husky/post-checkout")));
    }
}

both_users! {
    /// `git init` where the project has no repository is refused: it would write the configuration the
    /// user's next `git` runs. A repository made before the run works, and so does one in a subdirectory.
    fn git_init_of_the_project_is_refused_but_a_subdirectory_is_not(d) {
        let out = d.sh(&[], "git init -q . ; echo status=$?; git init -q sub && echo sub-ok");
        out.ok().stdout_has("sub-ok").stdout_lacks("status=0");
        assert!(!exists(&d.path("work/.git")));
    }
}

both_users! {
    /// Seed 000: `src/**/*.ts` grants exactly the TypeScript files under src/.
    fn glob_scope_grants_exactly_its_matches(d) {
        d.write("work/src/a.ts", "A\n").write("work/src/deep/b.ts", "B\n").write("work/src/c.js", "C\n").write("work/top.ts", "T\n");
        d.write("policy.toml", "[profile.ts]\nextends = \"system\"\nfs.read = [\"${CWD}/src/**/*.ts\"]\n");
        let policy = d.path("policy.toml");
        let out = d.stockade(["run", "--policy", policy.to_str().unwrap(),
            "--", "/bin/sh", "-c", "cat src/a.ts src/deep/b.ts; cat src/c.js; cat top.ts; echo x > src/a.ts; echo end"]).run();
        out.ok().stdout_has("A\nB\n").stdout_lacks("C\n").stdout_lacks("T\n").stdout_has("end");
        assert_eq!(d.read("work/src/a.ts").as_deref(), Some("A\n"));
    }
}

both_users! {
    /// A deny inside a writable tree and inside a read-only tree holds for read, write, rename and delete.
    fn deny_inside_an_allowed_tree_holds(d) {
        d.write("work/secret/key", "K1\n").write("work/app/.env", "K2\n").write("ro/secret/key", "K3\n").write("ro/pub", "P\n");
        let ro = d.path("ro");
        let out = d.sh(
            &["--deny", "secret", "--deny", "**/.env", "--ro", ro.to_str().unwrap(), "--deny", &format!("{}/secret", ro.display())],
            &format!("cat secret/key app/.env {0}/secret/key; cat {0}/pub; rm -rf secret; mv app/.env x; echo y > app/.env; ls secret; echo end", ro.display()),
        );
        out.ok().stdout_lacks("K1").stdout_lacks("K2").stdout_lacks("K3").stdout_has("P\n").stdout_has("end");
        assert_eq!(d.read("work/secret/key").as_deref(), Some("K1\n"));
        assert_eq!(d.read("work/app/.env").as_deref(), Some("K2\n"));
    }
}

both_users! {
    /// Symlinks, hard links, `..`, `/proc/self/root` and `/proc/<pid>/root` never reach a denied path.
    fn links_dotdot_and_proc_root_do_not_escape(d) {
        d.write("outside/secret", "S3CRET\n").write("work/denied/secret", "D3NIED\n");
        std::os::unix::fs::symlink(d.path("outside"), d.path("work/link-out")).unwrap();
        std::os::unix::fs::symlink(d.path("work/denied"), d.path("work/link-denied")).unwrap();
        let outside = d.path("outside");
        let script = format!(
            "cat link-out/secret; cat link-denied/secret; cat ../outside/secret; cat {o}/secret; \
             cat /proc/self/root{o}/secret; cat /proc/1/root{o}/secret; cat /proc/$$/root/{w}/denied/secret; \
             ln denied/secret hard 2>/dev/null && cat hard; ln -s {o}/secret sym && cat sym; \
             for p in /proc/[0-9]*; do cat $p/root{o}/secret 2>/dev/null; done; echo end",
            o = outside.display(),
            w = d.work().display(),
        );
        let out = d.sh(&["--deny", "denied"], &script);
        out.ok().stdout_lacks("S3CRET").stdout_lacks("D3NIED").stdout_has("end");
    }
}

both_users! {
    /// Known secrets are denied by the default profile (and as root, what uid 0 could read without caps).
    fn default_profile_denies_known_secrets(d) {
        let out = d.sh(&[], "cat /etc/shadow; cat /etc/gshadow; cat ~/.ssh/id_rsa; ls ~/.aws; echo end");
        out.ok().stdout_lacks("root:").stdout_has("end");
        assert!(!out.stderr.is_empty());
    }
}

impl TestDir {
    /// Gives the whole tree to the test user (after tools made files as root).
    pub(super) fn chown_all(&self) {
        if let (Who::User, Some((uid, gid, _))) = (self.who, test_user()) {
            let st = std::process::Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}")])
                .arg(&self.root)
                .status()
                .unwrap();
            assert!(st.success());
        }
    }
}

both_users! {
    /// In a linked worktree (or a submodule) `.git` is a file naming the git dir: the default profile's
    /// `.git/hooks/` rule holds it read-only (so it cannot be replaced by a directory of hooks), and the
    /// run starts instead of failing to make a placeholder under a file.
    fn a_git_file_is_held_read_only(d) {
        d.write("work/.git", "gitdir: /nonexistent/.git/worktrees/w\n");
        let out = d.sh(&[], "echo x > .git; rm -f .git; mv .git moved; mkdir -p .git/hooks; echo ok > f && cat f");
        out.ok().stdout_has("ok");
        assert_eq!(
            d.read("work/.git").as_deref(),
            Some("gitdir: /nonexistent/.git/worktrees/w\n")
        );
        assert!(d.read("work/moved").is_none());
    }
}

/// Issue #14: a run gets a private, empty `/tmp` and `/var/tmp` (where its policy grants nothing there):
/// scripts that write `/tmp/x` work, nothing reaches the host's, and it is gone at exit.
#[test]
fn tmp_and_var_tmp_are_private_to_the_run() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::outside_tmp(Who::Root);
    let marker = unique_marker();
    let host_tmp = std::path::PathBuf::from(format!("/tmp/stockade-private-{marker}"));
    std::fs::write(&host_tmp, "HOST\n").unwrap();
    let out = d.sh(
        &[],
        &format!(
            "ls /tmp | grep -c stockade-private-{marker}; echo in > /tmp/x-{marker} && cat /tmp/x-{marker} \
             && echo v > /var/tmp/y-{marker} && cat /var/tmp/y-{marker}"
        ),
    );
    let _ = std::fs::remove_file(&host_tmp);
    out.ok();
    assert_eq!(out.stdout, "0\nin\nv\n", "{out:?}");
    assert!(!std::path::Path::new(&format!("/tmp/x-{marker}")).exists());
    assert!(!std::path::Path::new(&format!("/var/tmp/y-{marker}")).exists());
}

/// A project in `/dev/shm`, which every run gets fresh and empty: the run is refused at start with the
/// reason and what to do, where it used to fail setting up ("working directory: No such file or
/// directory") while `explain` allowed the project.
#[test]
fn a_project_in_a_private_area_is_refused_with_the_reason() {
    if !landlock_ready() || !std::path::Path::new("/dev/shm").is_dir() {
        return;
    }
    let dir = std::path::PathBuf::from(format!("/dev/shm/stockade-project-{}", unique_marker()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(bin())
        .args(["run", "--", "true"])
        .current_dir(&dir)
        .env("HOME", "/root")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("lies in '/dev/shm', which each run gets fresh and empty"),
        "{stderr}"
    );
}

/// A thread rewrites the path between the mediator's look at it and the kernel's: an ordinary name (in a
/// directory where the kernel creates names itself, or in the root, which the mediator makes before
/// letting the open proceed) and `.mcp.json` (in the project root, where only the mediator may create).
/// Landlock holds the root whatever the mediator saw, so `.mcp.json` is never made.
const PATH_SWAP_RACE: &str = r#"
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
ok, evil = sys.argv[1].encode() + b"\0", b".mcp.json\0\0"
stop = []
def flip():
    while not stop:
        ctypes.memmove(buf, ok, len(ok))
        ctypes.memmove(buf, evil, len(evil))
t = threading.Thread(target=flip)
t.start()
made = 0
for i in range(20000):
    fd = libc.open(buf, os.O_CREAT | os.O_WRONLY, 0o644)
    if fd >= 0:
        made += 1
        libc.close(fd)
    if libc.mkdir(buf, 0o755) == 0:
        made += 1
stop.append(1)
t.join()
print("created", made, "mcp", os.path.lexists(".mcp.json"))
"#;

both_users! {
    fn a_path_rewritten_during_the_check_creates_nothing_protected(d) {
        d.mkdir("work/sub");
        let control = d.path("control");
        std::fs::create_dir_all(control.join("sub")).unwrap();
        let out = std::process::Command::new("python3").args(["-c", PATH_SWAP_RACE, "sub/ok.txt"]).current_dir(&control).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("mcp True"), "the control must create it");
        // `sub/ok.txt` takes the kernel's road; `ok.txt`, in the root where names matter, the mediator's
        // (it makes the file, then lets the caller's open proceed).
        for ok in ["sub/ok.txt", "ok.txt"] {
            let out = d.stockade(["run", "--", "python3", "-c", PATH_SWAP_RACE, ok]).run();
            out.ok().stdout_has("mcp False");
            assert!(!exists(&d.path("work/.mcp.json")));
            assert!(exists(&d.path(&format!("work/{ok}"))), "the ordinary creation works: {}", out.stdout);
        }
    }
}

both_users! {
    /// Issue 15: a write glob is exact in both directions. `src/**/*.ts` creates a new matching file at any
    /// depth, edits and renames matches, and refuses a `.js` file, a write to a non-matching file and a
    /// new directory (which it does not match).
    fn write_globs_create_exactly_their_matches(d) {
        d.write("work/src/a/x.ts", "X\n").write("work/src/y.js", "Y\n");
        d.write("policy.toml", "[profile.ts]\nextends = \"system\"\nfs.read = [\"${CWD}\"]\nfs.write = [\"${CWD}/src/**/*.ts\"]\n");
        let policy = d.path("policy.toml");
        let script = format!("{TRY}try new-ts 'echo n > src/new.ts'\ntry deep-ts 'echo n > src/a/new.ts'\ntry edit-ts 'echo e >> src/a/x.ts'\n\
            try rename-ts 'mv src/a/x.ts src/a/w.ts && mv src/a/w.ts src/a/x.ts'\ntry new-js 'echo j > src/new.js'\n\
            try edit-js 'echo e >> src/y.js'\ntry mkdir 'mkdir src/b'\ntry rename-to-js 'mv src/new.ts src/new.js'\n");
        let out = d.stockade(["run", "--policy", policy.to_str().unwrap(), "--", "sh", "-c", &script]).run();
        out.ok();
        for allowed in ["new-ts", "deep-ts", "edit-ts", "rename-ts"] {
            assert!(out.stdout.contains(&format!("ESCAPED {allowed}")), "{allowed} should work:\n{}", out.stdout);
        }
        for refused in ["new-js", "edit-js", "mkdir", "rename-to-js"] {
            assert!(out.stdout.contains(&format!("held {refused}")), "{refused} should be refused:\n{}", out.stdout);
        }
        assert_eq!(d.read("work/src/new.ts").as_deref(), Some("n\n"));
        assert_eq!(d.read("work/src/a/x.ts").as_deref(), Some("X\ne\n"));
        assert_eq!(d.read("work/src/y.js").as_deref(), Some("Y\n"));
        assert!(!exists(&d.path("work/src/new.js")) && !exists(&d.path("work/src/b")));
    }
}

both_users! {
    /// A file the mediator creates (in the project root, where names matter) gets the mode the program's
    /// umask gives it, as one the kernel creates does (in `sub/`), also after the umask changes.
    fn mediated_creations_keep_the_programs_umask(d) {
        d.mkdir("work/sub");
        let out = d.sh(&[], "umask 077; echo > a; echo > sub/a; mkdir da; umask 022; echo > b; echo > sub/b; \
                             stat -c '%n %a' a sub/a da b sub/b");
        out.ok().stdout_has("a 600\nsub/a 600\nda 700\nb 644\nsub/b 644\n");
    }
}

/// Other ways to give a file a protected name: an anonymous `O_TMPFILE` linked in through `/proc/self/fd`
/// (or with `AT_EMPTY_PATH`), a directory renamed onto a protected directory name, and a FIFO.
const OTHER_NAMINGS: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        f()
        print("made", name)
    except OSError as e:
        print("refused", name, e.strerror)
def tmpfile_proc():
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, b"{}")
    # AT_SYMLINK_FOLLOW: the magic link leads to the anonymous file itself.
    if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, b".mcp.json", 0x400) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def tmpfile_empty_path():
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)
    if libc.linkat(fd, b"", -100, b".envrc", 0x1000) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def dir_onto():
    os.mkdir("sub/vs")
    os.rename("sub/vs", ".vscode")
attempt("tmpfile-proc", tmpfile_proc)
attempt("tmpfile-empty-path", tmpfile_empty_path)
attempt("dir-onto", dir_onto)
attempt("fifo", lambda: os.mkfifo(".idea"))
"#;

both_users! {
    fn anonymous_files_and_renamed_directories_get_no_protected_name(d) {
        d.mkdir("work/sub");
        let control = d.path("control");
        std::fs::create_dir_all(control.join("sub")).unwrap();
        let out = std::process::Command::new("python3").args(["-c", OTHER_NAMINGS]).current_dir(&control).output().unwrap();
        let unconfined = String::from_utf8_lossy(&out.stdout);
        // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH: only root's control makes it.
        for name in ["tmpfile-proc", "dir-onto", "fifo"] {
            assert!(unconfined.contains(&format!("made {name}")), "the control must make {name}:\n{unconfined}");
        }
        let out = d.stockade(["run", "--", "python3", "-c", OTHER_NAMINGS]).run();
        out.ok().stdout_lacks("made");
        for planted in [".mcp.json", ".envrc", ".vscode", ".idea"] {
            assert!(!exists(&d.path(&format!("work/{planted}"))), "{planted} exists");
        }
    }
}

both_users! {
    /// A name that exists already answers EEXIST, as the kernel does, not a refusal: `mkdir -p` of an
    /// existing read-only directory succeeds (Claude Code does `mkdir -p $HOME` at start), and making any
    /// existing protected name again says "File exists" and logs nothing.
    fn existing_names_answer_eexist_not_a_refusal(d) {
        d.mkdir("work/.vscode").write("work/.mcp.json", "{}\n");
        let out = d.sh(&["--json"], "mkdir -p .vscode && echo mkdir-p-ok; mkdir .vscode; ln -s x .mcp.json; \
                       python3 -c \"import os; os.open('.mcp.json', os.O_CREAT|os.O_EXCL|os.O_WRONLY)\" 2>&1 | tail -1");
        out.ok().stdout_has("mkdir-p-ok").stdout_has("FileExistsError");
        assert!(out.stderr.contains("mkdir: cannot create directory '.vscode': File exists")
                || out.stderr.contains("mkdir: cannot create directory ‘.vscode’: File exists"), "{}", out.stderr);
        out.stderr_has("'.mcp.json': File exists");
        let outcome: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
        assert_eq!(outcome["refused_calls"], 0, "{outcome}");
    }
}

both_users! {
    /// A name made through a directory descriptor's link (`/proc/self/fd/N/name`, as Claude Code writes
    /// its Bash output) is judged by the real path: created in the project, refused in a read-only tree
    /// and for a protected name.
    fn creations_through_a_descriptor_link_are_judged_by_the_real_path(d) {
        d.write("work/via_fd.py", r#"import os
def make(directory, name):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(os.open(f'/proc/self/fd/{fd}/{name}', os.O_CREAT | os.O_WRONLY, 0o644))
        print('made', name)
    except OSError as e:
        print('refused', name, e.errno)
make('.', 'out.txt')
make('/usr', 'evil')
make('.', '.mcp.json')
"#);
        d.sh(&[], "python3 via_fd.py")
            .ok()
            .stdout_has("made out.txt\nrefused evil 13\nrefused .mcp.json 13\n");
        assert!(exists(&d.work().join("out.txt")));
        assert!(!exists(&d.work().join(".mcp.json")));
    }
}

both_users! {
    /// Names made through a directory descriptor the program keeps using (as `tar` does) are judged by
    /// the directory the descriptor is now, not the one it was: after the same number is made to name
    /// the project root, an ordinary name is made there (the root's names are checked, so the mediator
    /// makes it) and a protected one is refused; after the directory is renamed away and another made by
    /// its name, a name made through the descriptor lands in the one renamed.
    fn a_descriptor_number_used_again_names_its_new_directory(d) {
        d.write("work/out/keep.txt", "keep\n").write("work/other/keep.txt", "keep\n");
        d.write("work/reuse.py", r#"import os
def make(fd, name):
    try:
        os.close(os.open(name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644, dir_fd=fd))
        print('made', name)
    except OSError as e:
        print('refused', name, e.errno)
fd = os.open('out', os.O_RDONLY | os.O_DIRECTORY)
for i in range(3):
    make(fd, f'a{i}')
root = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
os.dup2(root, fd)
make(fd, 'top.txt')
make(fd, '.mcp.json')
other = os.open('other', os.O_RDONLY | os.O_DIRECTORY)
os.dup2(other, fd)
make(fd, 'b0')
make(fd, 'b1')
os.rename('other', 'moved')
os.mkdir('other')
make(fd, 'b2')
"#);
        d.sh(&[], "python3 reuse.py").ok().stdout_has(
            "made a0\nmade a1\nmade a2\nmade top.txt\nrefused .mcp.json 13\nmade b0\nmade b1\nmade b2\n",
        );
        assert!(exists(&d.work().join("out/a2")));
        assert!(exists(&d.work().join("top.txt")));
        assert!(!exists(&d.work().join(".mcp.json")));
        assert!(exists(&d.work().join("moved/b1")));
        // The descriptor still names the directory renamed away, and so does the file made through it.
        assert!(exists(&d.work().join("moved/b2")));
        assert!(!exists(&d.work().join("other/b2")));
    }
}

both_users! {
    /// A descriptor that is not a directory, used as one for creations (which fail with `ENOTDIR`), is
    /// never held by the mediator: closing a FIFO's only writer still ends its reader's input.
    fn a_fifo_used_as_a_directory_still_closes(d) {
        d.write("work/fifo.py", r#"import os, select
os.mkfifo('f')
r = os.open('f', os.O_RDONLY | os.O_NONBLOCK)
w = os.open('f', os.O_WRONLY)
for i in range(3):
    try:
        os.open(f'x{i}', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=w)
    except OSError as e:
        print('refused', e.errno)
os.close(w)
p = select.poll()
p.register(r, select.POLLIN)
print('closed' if p.poll(5000) else 'still open')
"#);
        d.sh(&[], "python3 fifo.py")
            .ok()
            .stdout_has("refused 20\nrefused 20\nrefused 20\nclosed\n");
    }
}

both_users! {
    /// A directory that exists at start, removed and made again during the run (`rm -rf out && mkdir
    /// out`, a clean build), or renamed away with a new one made by its name, is a new directory: names
    /// are made in it (Landlock's rule stayed on the old one, so the mediator makes them), and a file made
    /// by its path lands in the new one, never in the one renamed away.
    fn a_directory_made_again_during_the_run_takes_new_names(d) {
        d.write("work/out/old.txt", "old\n").write("work/dist/keep.txt", "keep\n");
        // A name made in each first: the mediator has seen the directories at their paths since.
        d.sh(&[], "echo a > out/a && echo b > dist/b && \
                   rm -rf out && mkdir out && mkdir out/d && echo new > out/d/f && cat out/d/f && \
                   mv dist dist.old && mkdir dist && echo made > dist/g && ls dist dist.old")
            .ok()
            .stdout_has("new\n")
            .stdout_has("dist:\ng\n")
            .stdout_has("dist.old:\nb\nkeep.txt\n");
        assert_eq!(d.read("work/out/d/f").as_deref(), Some("new\n"));
        assert_eq!(d.read("work/dist/g").as_deref(), Some("made\n"));
        assert!(!exists(&d.work().join("dist.old/g")));
    }
}

both_users! {
    /// A project whose directory's name has glob characters (`p[1]*{a,b}`) is that directory: the
    /// built-in profile's `${CWD}` grants it, its protected names hold, and a sibling the name would
    /// match as a pattern (`p1x`) stays out of reach. It used to be read as a pattern that matched
    /// nothing, and every run there was refused.
    fn a_project_named_like_a_glob_is_granted_as_written(d) {
        d.write("work/p[1]*{a,b}/src/a.txt", "a\n").write("work/p1x/secret.txt", "s\n");
        let project = d.path("work/p[1]*{a,b}");
        let project = project.to_str().unwrap();
        d.stockade(["run", "--project", project, "--cwd", project, "--", "sh", "-c",
                    "cat src/a.txt && echo b > src/b.txt && cat src/b.txt; \
                     echo {} > .mcp.json || echo refused; cat ../p1x/secret.txt || echo hidden"])
            .run()
            .stdout_has("a\nb\nrefused\nhidden\n");
        assert_eq!(d.read("work/p[1]*{a,b}/src/b.txt").as_deref(), Some("b\n"));
        assert!(!exists(&d.path("work/p[1]*{a,b}/.mcp.json")));
    }
}

both_users! {
    /// Issue 35: a glob matching a directory grants that directory entry, not its tree. With `out/*`
    /// writable and `out/**` read-only, `out/d` is readable but `out/d/k.txt` is granted by no rule:
    /// `explain` denies it, and so must the kernel (a read-only bind of `out/d` once exposed it). A file
    /// beneath that a rule does grant stays readable.
    fn a_glob_on_a_directory_exposes_only_what_is_granted_beneath(d) {
        d.write("out/d/k.txt", "SECRET\n").write("out/d/ok.txt", "GRANTED\n").mkdir("work");
        let out_dir = d.path("out");
        d.write(
            "policy.toml",
            &format!(
                "[profile.agent]\nextends = \"workspace-write\"\nfs.write = [\"{o}/*\"]\n\
                 fs.read-only = [\"{o}/**\"]\nfs.read = [\"{o}/d/ok.txt\"]\n",
                o = out_dir.display()
            ),
        );
        let policy = d.path("policy.toml");
        let policy = policy.to_str().unwrap();
        let key = d.path("out/d/k.txt");
        let explained = d.stockade(["explain", "--policy", policy, "--profile", "agent", "--read", key.to_str().unwrap()]).run();
        explained.stdout_has("DENY");
        let out = d
            .stockade(["run", "--policy", policy, "--profile", "agent", "--", "sh", "-c", "cat ../out/d/k.txt; cat ../out/d/ok.txt; ls -d ../out/d && echo listed"])
            .run();
        out.ok().stdout_lacks("SECRET").stdout_has("GRANTED").stdout_has("listed");
    }
}

both_users! {
    /// Issue 35: the kernel refused what `explain` allows in two shapes where a write glob matches a
    /// directory whose tree no path rule makes writable. `write = ["-x/z", "**"]`: creating the missing
    /// `-x/z` (and any new name the glob matches there) was EROFS, `-x` being bound read-only; `write =
    /// ["out/**"]`: `out/d/deep` was a mode-000 stub, so `ls` failed. Such directories are now guarded
    /// (bound writable, their entries bound back at their own levels, new names checked by the mediator).
    fn write_globs_on_directories_give_what_explain_says(d) {
        d.write("work/-x/keep", "K\n").write("work/out/d/deep/f", "F\n").write("work/out/top", "T\n");
        d.write(
            "policy.toml",
            "[profile.p]\nbase = \"${CWD}\"\nextends = \"system\"\nfs.read = [\"${CWD}\"]\n\
             fs.write = [\"-x/z\", \"out/**\"]\n\n[profile.q]\nbase = \"${CWD}\"\nextends = \"system\"\n\
             fs.read = [\"${CWD}\"]\nfs.write = [\"-x/z\", \"**\"]\n",
        );
        let policy = d.path("policy.toml");
        let policy = policy.to_str().unwrap();
        let run = |profile: &str, script: &str| d.stockade(["run", "--policy", policy, "--profile", profile, "--", "sh", "-c", script]).run();
        for profile in ["p", "q"] {
            let explained = d.stockade(["explain", "--policy", policy, "--profile", profile, "--write", "./-x/z"]).run();
            explained.stdout_has("ALLOW");
        }
        run("q", "echo z > ./-x/z && echo new > ./-x/new && echo made").ok().stdout_has("made");
        assert_eq!(d.read("work/-x/z").as_deref(), Some("z\n"));
        run("p", "ls out/d/deep && cat out/d/deep/f && echo n > out/d/deep/new && echo made")
            .ok()
            .stdout_has("f\nF\nmade");
        assert_eq!(d.read("work/out/d/deep/new").as_deref(), Some("n\n"));
        // Beside them, what the policy does not make writable stays so.
        let held = run("p", "echo x > ./-x/other || echo held-other; echo x >> ./-x/keep || echo held-keep");
        held.ok().stdout_has("held-other").stdout_has("held-keep");
        assert_eq!(d.read("work/-x/keep").as_deref(), Some("K\n"));
    }
}

both_users! {
    /// Issue 35: creating through a dangling symlink where names matter (a `deny **/.*` beside
    /// `workspace-write`) makes the link's target, as `explain` allows; it was refused, the mediator
    /// having taken `O_EXCL`'s EEXIST for the link as the file being there. A link to a protected name
    /// still creates nothing.
    fn creating_through_a_dangling_link_makes_its_target(d) {
        d.mkdir("work/generated");
        std::os::unix::fs::symlink("../target-file", d.path("work/generated/via")).unwrap();
        std::os::unix::fs::symlink("../.mcp.json", d.path("work/generated/to-protected")).unwrap();
        d.chown_all();
        d.write("policy.toml", "[profile.p]\nextends = \"workspace-write\"\nfs.deny = [\"**/.*\"]\n");
        let policy = d.path("policy.toml");
        let out = d
            .stockade(["run", "--policy", policy.to_str().unwrap(), "--profile", "p", "--", "sh", "-c",
                "echo x > generated/via && echo made; echo y > generated/to-protected || echo held"])
            .run();
        out.ok().stdout_has("made").stdout_has("held");
        assert_eq!(d.read("work/target-file").as_deref(), Some("x\n"));
        assert!(!exists(&d.path("work/.mcp.json")));
    }
}
