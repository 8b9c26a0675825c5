//! Package caches (issue 16): `fs.cache` directories are private overlays inside a run. Programs read the
//! host's copy and write their own, which vanishes with the run or is kept per agent (`--persist-caches`);
//! the host's cache never changes. Plus real `npm install` and `pip install` from the registries this
//! machine reaches, through the proxy, into a cache the host never sees written.

use super::util::*;
use crate::both_users;

/// `stockade run` with HOME set to the test's own `home/` (so the built-in profile's caches are the
/// test's) and the state directory inside the test.
fn run_home(d: &TestDir, flags: &[&str], script: &str) -> Out {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    d.stockade(args)
        .env("HOME", d.path("home").to_str().unwrap())
        .env("XDG_STATE_HOME", d.path("state").to_str().unwrap())
        .run()
}

/// The names directly in a directory, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

both_users! {
    /// The built-in profile's `~/.npm` inside a run: the host's file is read, changed, removed and new
    /// entries made beside it, all inside; the host's directory is exactly as before, and the next run
    /// starts from the host's copy again. A cache missing at start is made, empty, with its missing
    /// parents in the home (`~/.cache` of a fresh account, which pip would make on first use), and stays
    /// empty on the host.
    fn caches_are_private_overlays(d) {
        d.write("home/.npm/host.txt", "host\n").mkdir("home/.cargo").mkdir("state");
        let script = "cat ~/.npm/host.txt && echo changed > ~/.npm/host.txt && cat ~/.npm/host.txt && \
                      mkdir -p ~/.npm/_cacache/tmp && echo new > ~/.npm/_cacache/tmp/x && rm ~/.npm/host.txt && \
                      echo crate > ~/.cargo/registry/c && mkdir -p ~/.cache/pip/http && \
                      echo wheel > ~/.cache/pip/http/w && ls -A ~/.npm ~/.cargo/registry ~/.cache/pip/http";
        let out = run_home(&d, &[], script);
        out.ok()
            .stdout_has("host\nchanged\n")
            .stdout_has("_cacache\n")
            .stdout_has("registry:\nc\n")
            .stdout_has("http:\nw\n")
            .stderr_has("created empty cache directories")
            .stderr_has("/.cache/pip' (and its parent '");
        assert!(!out.stdout.contains("host.txt"), "{}", out.stdout);
        assert_eq!(d.read("home/.npm/host.txt").as_deref(), Some("host\n"));
        assert_eq!(names(&d.path("home/.npm")), ["host.txt"]);
        assert!(names(&d.path("home/.cargo/registry")).is_empty());
        assert!(names(&d.path("home/.cache/pip")).is_empty());
        let mode = std::fs::metadata(d.path("home/.cache")).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o700);
        // The host's home outside the caches is as read-only as before.
        run_home(&d, &[], "echo x > ~/.npmrc")
            .code(2)
            .stderr_has("readable but not writable");
        run_home(&d, &[], "ls -A ~/.npm ~/.cargo/registry")
            .ok()
            .stdout_has("npm:\nhost.txt\n")
            .stdout_lacks("_cacache")
            .stdout_lacks("\nc\n");
    }
}

both_users! {
    /// `--persist-caches` keeps one agent's writes for its next run (in the state directory, never in
    /// the host's cache); another agent starts from the host's copy; two runs of one agent never share
    /// a store at once.
    fn persisted_caches_are_kept_per_agent(d) {
        d.write("home/.npm/host.txt", "host\n").mkdir("state");
        run_home(&d, &["--persist-caches", "--agent", "a1"], "echo kept > ~/.npm/mine && rm ~/.npm/host.txt")
            .ok();
        run_home(&d, &["--persist-caches", "--agent", "a1"], "ls -A ~/.npm && cat ~/.npm/mine")
            .ok()
            .stdout_has("mine\nkept\n")
            .stdout_lacks("host.txt");
        run_home(&d, &["--persist-caches", "--agent", "a2"], "ls -A ~/.npm")
            .ok()
            .stdout_has("host.txt\n")
            .stdout_lacks("mine");
        run_home(&d, &["--agent", "a1"], "ls -A ~/.npm")
            .ok()
            .stdout_has("host.txt\n")
            .stdout_lacks("mine");
        assert_eq!(names(&d.path("home/.npm")), ["host.txt"]);
        assert!(d.path("state/stockade/caches/a1").is_dir());

        let marker = unique_marker();
        let mut first = d.stockade(["run", "--persist-caches", "--agent", "a1", "--", "sleep", &marker]);
        first.cmd
            .env("HOME", d.path("home"))
            .env("XDG_STATE_HOME", d.path("state"));
        let _first = KillOnDrop(first.cmd.spawn().unwrap());
        assert!(wait_sleeping(&marker, true, 20), "the first run did not start");
        run_home(&d, &["--persist-caches", "--agent", "a1"], "true")
            .code(125)
            .stderr_has("in use by another run");
    }
}

#[test]
fn explain_names_the_overlay_and_the_file_tools_answer() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.mkdir("home/.npm");
    let npm = d.path("home/.npm/x");
    let out = d
        .stockade(["explain", "--write", npm.to_str().unwrap()])
        .env("HOME", d.path("home").to_str().unwrap())
        .run();
    out.ok()
        .stdout_has("fs.cache")
        .stdout_has("private overlay")
        .stdout_has("read only (they act on the host's cache)");
}

both_users! {
    /// A cache whose directory a glob cap makes read-only itself (`fs.read-only = ["*"]`), in a project a
    /// write glob guards (`**/*.rs` under a readable root): the cache keeps its overlay, so a new file in
    /// it stays the run's. Found by the agreement suite: the guard bound the host's directory writable in
    /// place of the overlay, and the mediator, asked about a name the cache makes writable, let the
    /// program create it in the host's cache. Fails without the fix, as the suite did.
    fn a_cache_capped_by_a_glob_keeps_its_overlay(d) {
        d.write("proj/a/c/g.rs", "g\n").write("proj/b/e.txt", "e\n").mkdir("home");
        let policy = "[profile.p]\nbase = \"${CWD}\"\nextends = \"system\"\nfs.read = [\"${CWD}\"]\n\
                      fs.write = [\"${CWD}/**/*.rs\"]\nfs.read-only = [\"*\"]\nfs.cache = [\"a\"]\n";
        d.write("p.toml", policy);
        let (p, proj) = (d.path("p.toml"), d.path("proj"));
        let out = d
            .stockade([
                "run",
                "--policy",
                p.to_str().unwrap(),
                "--project",
                proj.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "cd a && printf probe > new && cat new && mkdir d && echo x > d/y && cat d/y",
            ])
            .env("HOME", d.path("home").to_str().unwrap())
            .run();
        out.ok().stdout_has("probe").stdout_has("x");
        assert_eq!(names(&d.path("proj/a")), ["c"]);
    }
}

/// Whether `url` answers from this machine (outside any sandbox); a loud skip when not, a failure under
/// `STOCKADE_REQUIRE_NETWORK=1` (CI, which reaches the package registries).
fn registry_reachable(url: &str) -> bool {
    let ok = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "20", "-f", url])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("STOCKADE_REQUIRE_NETWORK").as_deref() == Ok("1") {
            panic!("{url} is unreachable but STOCKADE_REQUIRE_NETWORK=1");
        }
        eprintln!("SKIPPED: {url} is unreachable");
    }
    ok
}

both_users! {
    /// Real `npm install` from the npm registry, reached only through the proxy (`--net-allow` its one
    /// host): the package lands in the project, npm's cache fills the private overlay, and the host's
    /// `~/.npm` stays empty.
    fn npm_install_through_the_proxy(d) {
        if std::process::Command::new("npm").arg("--version").output().is_err()
            || !registry_reachable("https://registry.npmjs.org/is-number")
        {
            return;
        }
        d.write("work/package.json", "{\"name\":\"t\",\"version\":\"1.0.0\"}\n").mkdir("home").mkdir("state");
        run_home(
            &d,
            &["--net-allow", "registry.npmjs.org"],
            "npm install --no-audit --no-fund is-number@7.0.0 && ls ~/.npm",
        )
        .ok()
        .stdout_has("_cacache");
        assert!(d.path("work/node_modules/is-number/package.json").is_file());
        assert!(names(&d.path("home/.npm")).is_empty(), "{:?}", names(&d.path("home/.npm")));
        // Without the allowlist entry the registry is out of reach.
        d.write("work/package.json", "{\"name\":\"t\",\"version\":\"1.0.0\"}\n");
        let refused = run_home(
            &d,
            &["--net-allow", "example.invalid"],
            "npm install --no-audit --no-fund --fetch-retries=0 is-odd@3.0.1",
        );
        assert_ne!(refused.code, 0, "{refused:?}");
        assert!(!d.path("work/node_modules/is-odd").exists());
    }
}

both_users! {
    /// Real `pip install` from PyPI through the proxy (its index and its file host allowed): the package
    /// lands in the project, and `~/.cache/pip` (made at start with `~/.cache`, as on a fresh account) is
    /// writable inside and empty on the host. (Whether pip caches at all depends on the index's answers; the registry
    /// this machine reaches sends nothing pip keeps.)
    fn pip_install_through_the_proxy(d) {
        if !registry_reachable("https://pypi.org/simple/idna/") {
            return;
        }
        d.mkdir("home").mkdir("state");
        run_home(
            &d,
            &["--net-allow", "pypi.org", "--net-allow", "files.pythonhosted.org"],
            "/usr/bin/python3 -m pip install --disable-pip-version-check --no-warn-script-location \
             --index-url https://pypi.org/simple --target deps idna==3.7 && touch ~/.cache/pip/probe",
        )
        .ok()
        .stdout_has("Successfully installed idna-3.7");
        assert!(d.path("work/deps/idna/__init__.py").is_file());
        assert!(names(&d.path("home/.cache/pip")).is_empty());
    }
}

both_users! {
    /// A glob cap that matches a cache's directory, or one inside it, once bound the cache's files back
    /// from the host, writable: `read-only = ["b/*"]` beside `cache = ["b/sub"]` let a program append to
    /// the host's `b/sub/k.rs` (found by the agreement suite). The cache stays a private overlay now: the
    /// program changes and creates files in its own copy, the host's are as before. Under a `deny` glob
    /// the cache's directory is masked and its files are bound back read-only (stricter than the policy:
    /// a writable bind would be the host's file), and the run still starts.
    fn a_glob_cap_beside_a_cache_never_opens_the_hosts_files(d) {
        d.write("work/b/sub/k.rs", "k\n").write("work/a/c/f.txt", "f\n");
        d.write("ro.toml", "[profile.p]\nbase = \"${CWD}\"\nextends = \"system\"\nfs.write = [\"${CWD}\"]\n\
                            fs.read-only = [\"b/*\"]\nfs.cache = [\"b/sub\"]\n");
        let policy = d.path("ro.toml");
        let out = d.stockade(["run", "--policy", policy.to_str().unwrap(), "--", "sh", "-c",
            "echo changed >> b/sub/k.rs && echo new > b/sub/new.rs && cat b/sub/k.rs b/sub/new.rs"]).run();
        out.ok().stdout_has("k\nchanged\nnew\n");
        assert_eq!(d.read("work/b/sub/k.rs").as_deref(), Some("k\n"));
        assert_eq!(names(&d.path("work/b/sub")), ["k.rs"]);

        d.write("deny.toml", "[profile.p]\nbase = \"${CWD}\"\nextends = \"system\"\nfs.write = [\"${CWD}\"]\n\
                              fs.deny = [\"*/*\"]\nfs.cache = [\"a/c\"]\n");
        let policy = d.path("deny.toml");
        let out = d.stockade(["run", "--policy", policy.to_str().unwrap(), "--", "sh", "-c",
            "cat a/c/f.txt; echo changed >> a/c/f.txt || echo refused"]).run();
        out.ok().stdout_has("f\nrefused\n");
        assert_eq!(d.read("work/a/c/f.txt").as_deref(), Some("f\n"));
    }
}

both_users! {
    /// A cache whose directory and parent are missing at start in a tree programs may write is made
    /// (with its parent) before the run: otherwise a program would make it itself, on the host, and
    /// write through it, where `explain` promises a private overlay. In a tree they may only read, it is
    /// not made (its tool is not installed there), and nothing appears on the host.
    fn a_missing_cache_is_made_where_programs_could_make_it(d) {
        d.mkdir("work").mkdir("shelf");
        let shelf = d.path("shelf");
        d.write("p.toml", &format!("[profile.p]\nbase = \"${{CWD}}\"\nextends = \"system\"\n\
                                    fs.write = [\"${{CWD}}\"]\nfs.read = [\"{}\"]\n\
                                    fs.cache = [\"gen/cache\", \"{}/tool/cache\"]\n",
                                   shelf.display(), shelf.display()));
        let policy = d.path("p.toml");
        let out = d.stockade(["run", "--policy", policy.to_str().unwrap(), "--", "sh", "-c",
            "echo built > gen/cache/out && cat gen/cache/out"]).run();
        out.ok().stdout_has("built\n").stderr_has("gen/cache' (and its parent '");
        assert!(d.path("work/gen/cache").is_dir());
        assert!(names(&d.path("work/gen/cache")).is_empty());
        assert!(names(&shelf).is_empty());
    }
}
