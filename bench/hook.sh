#!/usr/bin/env bash
# Per-call wall time of `stockade hook claude` against the seed's bash + jq hook (hook-check-path.sh), on a
# Read and on a 200-character Bash command, in one hyperfine run.
#   bench/hook.sh [RUNS]      -> bench/results/hook.md
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-300}
cargo build --release --quiet
stockade=$PWD/target/release/stockade
script=$PWD/bench/hook-check-path.sh
work=$(mktemp -d "$PWD/target/hook-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
repo=$work/repo
wt=$repo/.ittybitty/agents/a1/worktree
mkdir -p "$wt/src" "$repo/.ittybitty/logs"
echo 'fn main() {}' > "$wt/src/main.rs"
cat > "$work/policy.toml" <<TOML
[profile.a1]
base = "$repo"
fs.write = [".ittybitty/agents/\${AGENT_ID}/worktree", ".ittybitty", ".ittybitty/agents/\${AGENT_ID}"]
fs.deny = [".ittybitty/agents"]
TOML
jq -n --arg cwd "$wt" '{hook_event_name:"PreToolUse",cwd:$cwd,tool_name:"Read",tool_input:{file_path:"src/main.rs"}}' > "$work/read.json"
command='cd src && grep -rn "fn main" ./main.rs ../src/main.rs > ../out.txt 2>&1 && cat ../out.txt | sort | uniq -c | head -n 20 && ls -la ../src ./ && wc -l ./main.rs ../../../../logs/a1.log && echo "done with the search over src"'
jq -n --arg cwd "$wt" --arg c "$command" '{hook_event_name:"PreToolUse",cwd:$cwd,tool_name:"Bash",tool_input:{command:$c}}' > "$work/bash.json"
echo "Bash command: ${#command} characters"
mkdir -p bench/results
cd "$wt"
# The seed's script does not follow `cd`, so it blocks this command (exit 2); `|| true` keeps the run going,
# and the cost measured is the same.
hyperfine --warmup 20 --runs "$runs" --export-markdown "$OLDPWD/bench/results/hook.md" \
  --export-json "$OLDPWD/bench/results/hook.json" \
  --command-name "stockade hook claude, Read" "$stockade hook claude --agent a1 --policy $work/policy.toml < $work/read.json" \
  --command-name "stockade hook claude, Bash (${#command} chars)" "$stockade hook claude --agent a1 --policy $work/policy.toml < $work/bash.json" \
  --command-name "bash + jq hook-check-path, Read" "ROOT_REPO=$repo $script a1 < $work/read.json" \
  --command-name "bash + jq hook-check-path, Bash (${#command} chars)" "ROOT_REPO=$repo $script a1 < $work/bash.json || true"
jq -r '.results[] | "median \(.median * 1000 | . * 100 | round / 100) ms  \(.command)"' "$OLDPWD/bench/results/hook.json"
