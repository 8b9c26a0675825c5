//! `stockade explain`.

use anyhow::bail;
use stockade_policy::{AbsPath, Access, CanonicalPath};

use crate::ExitStatus;
use crate::args::ExplainArgs;
use crate::output;
use crate::policy_args;

pub(crate) fn explain(args: ExplainArgs, json: bool) -> anyhow::Result<ExitStatus> {
    let (path, access) = match (&args.read_path, &args.write_path) {
        (Some(p), None) => (p.clone(), Access::Read),
        (None, Some(p)) => (p.clone(), Access::Write),
        _ => bail!("say which access to explain: --read PATH or --write PATH"),
    };
    let mut vars = policy_args::variables(&args.policy, true)?;
    vars.set_path("TEMP_DIR", stockade_sandbox::new_temp_dir_path());
    let policy = policy_args::builder(&args.policy, vars.clone()).build()?;
    let cwd = vars.get("CWD").unwrap_or("/").to_string();
    let abs = AbsPath::new(&path, std::path::Path::new(&cwd))?;
    let canonical = CanonicalPath::resolve(abs.as_path())?;
    let e = policy.explain(&canonical, access);
    if json {
        output::json(&e);
    } else {
        let mut text = format!(
            "{} {} '{}' under profile '{}'\n",
            if e.allowed { "ALLOW" } else { "DENY" },
            access,
            e.path.display(),
            e.profile
        );
        if !e.exists {
            text.push_str(&format!(
                "  (does not exist yet; judged by '{}')\n",
                e.judged_at.display()
            ));
        }
        match &e.deciding_rule {
            Some(r) => text.push_str(&format!("  deciding rule: {r}\n")),
            None => text.push_str("  deciding rule: none (default deny)\n"),
        }
        if let Some(d) = &e.denial {
            text.push_str(&format!("  why: {}\n  fix: {}\n", d.reason, d.fix));
        }
        if !e.covering_paths.is_empty() {
            text.push_str("  path scopes covering it (deepest decides):\n");
            for r in &e.covering_paths {
                text.push_str(&format!("    {}\n", r.rule));
            }
        }
        if !e.matching_globs.is_empty() {
            text.push_str("  globs matching it:\n");
            for r in &e.matching_globs {
                text.push_str(&format!("    {}\n", r.rule));
            }
        }
        text.push_str("  enforced:\n");
        for n in &e.enforcement {
            text.push_str(&format!("    {n}\n"));
        }
        output::out(&text);
    }
    Ok(if e.allowed {
        ExitStatus::Success
    } else {
        ExitStatus::No
    })
}
