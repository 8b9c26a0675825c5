#!/usr/bin/env bash
# A sandboxed Bash call as Claude Code makes it with the installed hook (issue #14's figure): the hook
# answers with the rewritten command, and the shell runs it (stockade run + bash + `git status`), against
# plain `bash -c 'git status'` in the same linked worktree; plus the pre-filter alone (the hook process on
# the same call).
#   bench/sandboxed-bash.sh [RUNS]  -> bench/results/sandboxed-bash.{md,json}
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100}
cargo build --release --quiet
release=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
stockade=$release/stockade
work=$(mktemp -d "$PWD/target/sandboxed-bash.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
repo=$work/repo
git init -q -b main "$repo"
(cd "$repo" && mkdir src && echo 'fn main() {}' > src/main.rs && git add . \
  && git -c user.name=b -c user.email=b@b commit -qm init \
  && mkdir -p .ittybitty/agents/a1 && git worktree add -q -b agent-a1 .ittybitty/agents/a1/worktree)
wt=$repo/.ittybitty/agents/a1/worktree
(cd "$wt" && "$stockade" install claude --profile worktree --agent a1 --worktree . >/dev/null)
hook=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["hooks"]["PreToolUse"][0]["hooks"][0]["command"])' \
  "$wt/.claude/settings.json")
input=$(python3 -c 'import json,sys;print(json.dumps({"hook_event_name":"PreToolUse","cwd":sys.argv[1],"tool_name":"Bash","tool_input":{"command":"git status","description":"status"}}))' "$wt")
printf '%s' "$input" > "$work/input.json"
printf '%s\n' "$hook" > "$work/hook.sh"
# The whole call: the hook's answer, then the rewritten command run by a shell in the worktree.
cat > "$work/call.sh" <<EOF
rewritten=\$(bash "$work/hook.sh" < "$work/input.json" | python3 -c 'import json,sys;print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])')
cd "$wt" && eval "\$rewritten"
EOF
# The same without python3 in the loop: the rewritten command captured once, run as the shell would.
bash "$work/hook.sh" < "$work/input.json" \
  | python3 -c 'import json,sys;print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])' \
  > "$work/rewritten.sh"
mkdir -p bench/results
hyperfine -N --warmup 5 --runs "$runs" \
  --export-markdown bench/results/sandboxed-bash.md --export-json bench/results/sandboxed-bash.json \
  -n 'plain bash -c git status' "bash -c 'cd $wt && git status >/dev/null'" \
  -n 'hook (pre-filter) + sandboxed git status' \
  "bash -c 'bash $work/hook.sh < $work/input.json >/dev/null && cd $wt && . $work/rewritten.sh >/dev/null'" \
  -n 'hook alone (pre-filter, new process)' "bash -c 'bash $work/hook.sh < $work/input.json >/dev/null'" \
  -n 'baseline: bash -c bash (the two shells above)' "bash -c 'bash -c true'"
