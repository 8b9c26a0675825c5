//! Environment isolation: seed 000's environment scenarios.

#[allow(unused_imports, reason = "both_users! bodies import util themselves")]
use super::util::*;
use crate::both_users;

both_users! {
    /// Seed 000: only defined variables; nothing from the parent; custom variables set (flags, env file).
    fn only_defined_variables_reach_the_agent(d) {
        d.write("agent.env", "# secrets stay out of argv\nAPI_KEY=from-file\n");
        let env_file = d.path("agent.env");
        let out = d
            .stockade(["run", "--env", "GREETING=hello", "--env-file", env_file.to_str().unwrap(), "--pass-env", "PASSED", "--", "env"])
            .env("PARENT_SECRET", "leak-me")
            .env("PASSED", "yes")
            .run();
        out.ok()
            .stdout_has("GREETING=hello\n")
            .stdout_has("API_KEY=from-file\n")
            .stdout_has("PASSED=yes\n")
            .stdout_has("TEMP_DIR=/stockade-tmp/run-")
            .stdout_has("TMPDIR=/stockade-tmp/run-")
            .stdout_lacks("PARENT_SECRET")
            .stdout_lacks("leak-me");
        for line in out.stdout.lines() {
            let name = line.split('=').next().unwrap();
            assert!(
                ["PATH", "HOME", "LANG", "GREETING", "API_KEY", "PASSED", "TEMP_DIR", "TMPDIR", "PWD", "SHLVL", "_"].contains(&name),
                "unexpected variable {line}"
            );
        }
    }
}

both_users! {
    /// Seed 000: the parent's environment is not reachable through `/proc/<pid>/environ` of any process
    /// the agent can see, nor through the supervisor's argv.
    fn parent_environment_is_not_reachable_through_proc(d) {
        let out = d
            .stockade(["run", "--", "sh", "-c", "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat $f 2>/dev/null; echo; done; ls /proc | grep -c '^[0-9]'"])
            .env("PARENT_SECRET", "leak-me")
            .run();
        out.ok().stdout_lacks("leak-me");
        // Only the sandbox's own processes are visible: its init, sh, ls, grep (and at most a subshell).
        let visible: usize = out.stdout.lines().last().unwrap().trim().parse().unwrap();
        assert!(visible <= 5, "{visible} processes visible:\n{}", out.stdout);
    }
}
