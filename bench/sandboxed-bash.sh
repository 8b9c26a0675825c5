#!/usr/bin/env bash
# A Bash call as Claude Code makes it, with and without the installed hook (issue #14's figure), in a
# linked worktree under the built-in `worktree` profile:
#   plain      Claude Code's shell runs the command:               bash -c 'git status'
#   sandboxed  Claude Code's shell runs the installed hook on the call's JSON (sh -c '<hook> || exit 2'),
#              then its shell runs the rewritten command:           bash -c '<rewritten git status>'
# and the two parts of the sandboxed call alone: Claude Code starts exactly these two processes, so their
# sum is the call's cost (the combined row also pays for the `sh` that runs them one after the other). All in one hyperfine run, without a shell of hyperfine's
# (`-N`); the hook reads the call's JSON through `--input` (hyperfine 1.20, installed from crates.io into
# target/bench-tools when the system's lacks it, as bench/hook.sh does).
#   bench/sandboxed-bash.sh [RUNS]  -> bench/results/sandboxed-bash.{md,json}
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
. bench/installed.sh
hyperfine=hyperfine
if ! hyperfine --help 2>/dev/null | grep -q -- '--input'; then
  hyperfine=$PWD/target/bench-tools/bin/hyperfine
  [ -x "$hyperfine" ] || cargo install --quiet --locked hyperfine@1.20.0 --root "$PWD/target/bench-tools"
fi
work=$(mktemp -d "$PWD/target/sandboxed-bash.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
repo=$work/repo
git init -q -b main "$repo"
(cd "$repo" && mkdir src && echo 'fn main() {}' > src/main.rs && git add . \
  && git -c user.name=b -c user.email=b@b commit -qm init \
  && mkdir -p .ittybitty/agents/a1 && git worktree add -q -b agent-a1 .ittybitty/agents/a1/worktree)
wt=$repo/.ittybitty/agents/a1/worktree
(cd "$wt" && "$stockade" install claude --profile worktree --agent a1 --worktree . >/dev/null)
field() { python3 -c "import json,sys;print(json.load(sys.stdin)$1)"; }
hook=$(field '["hooks"]["PreToolUse"][0]["hooks"][0]["command"]' < "$wt/.claude/settings.json")
python3 -c 'import json,sys;print(json.dumps({"hook_event_name":"PreToolUse","cwd":sys.argv[1],"tool_name":"Bash","tool_input":{"command":"git status","description":"status"}}))' \
  "$wt" > "$work/input.json"
rewritten=$(cd "$wt" && sh -c "$hook" < "$work/input.json" | field '["hookSpecificOutput"]["updatedInput"]["command"]')
printf '%s\n' "$hook" > "$work/hook.sh"
printf 'cd %q\n%s\n' "$wt" "$rewritten" > "$work/rewritten.sh"
printf 'cd %q\ngit status\n' "$wt" > "$work/plain.sh"
printf 'sh %q < %q >/dev/null && exec bash %q >/dev/null\n' "$work/hook.sh" "$work/input.json" "$work/rewritten.sh" \
  > "$work/sandboxed.sh"
mkdir -p bench/results
"$hyperfine" -N --warmup 10 --runs "$runs" --output=null --input "$work/input.json" \
  --export-markdown bench/results/sandboxed-bash.md --export-json bench/results/sandboxed-bash.json \
  -n 'plain: bash runs git status' "bash $work/plain.sh" \
  -n 'sandboxed: hook, then bash runs the rewritten git status (one sh more than Claude Code starts)' \
  "sh $work/sandboxed.sh" \
  -n 'part: the hook through sh (the pre-filter, a new process)' "sh $work/hook.sh" \
  -n 'part: stockade hook alone' "${hook% || exit 2}" \
  -n 'part: bash runs the rewritten git status' "bash $work/rewritten.sh"
