#!/usr/bin/env bash
# The seed's `ib hook-check-path AGENT_ID` (seed 003), in bash + jq: the baseline `stockade hook claude` is
# compared with in bench/hook.sh. ROOT_REPO names the main repository. Exit 2 blocks.
set -uf
agent=${1:?usage: hook-check-path.sh AGENT_ID}
root=${ROOT_REPO:?set ROOT_REPO}
worktree="$root/.ittybitty/agents/$agent/worktree"
input=$(cat)
tool=$(jq -r '.tool_name // ""' <<<"$input")
cwd=$(jq -r '.cwd // ""' <<<"$input")

allowed() {
  local p=$1
  [[ $p == /* ]] || p="$cwd/$p"
  p=$(realpath -m -- "$p")
  case "$p/" in
    "$worktree"/*) return 0 ;;
    "$root/.ittybitty/agents/$agent"/*) return 0 ;;
    "$root/.ittybitty/agents"/*) return 1 ;;
    "$root/.ittybitty"/*) return 0 ;;
  esac
  return 1
}

block() {
  echo "blocked: $1 is outside agent $agent's worktree" >&2
  exit 2
}

case $tool in
  Read | Write | Edit | MultiEdit)
    file=$(jq -r '.tool_input.file_path // ""' <<<"$input")
    allowed "$file" || block "$file"
    ;;
  Bash)
    command=$(jq -r '.tool_input.command // ""' <<<"$input")
    for word in $command; do
      case $word in */* | .*) allowed "$word" || block "$word" ;; esac
    done
    ;;
esac
exit 0
