#!/usr/bin/env bash
# Launch overhead of `stockade run` against bare exec and the peers installed here, in one hyperfine run.
#   bench/launch.sh [RUNS]
# Results go to bench/results/launch.md (and are copied into BENCHMARKS.md by hand, with the date).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-500}
. bench/installed.sh
# A workspace inside the checkout, like a real project (not under /tmp, whose every entry the sandbox
# would mirror as an inaccessible stub because the workspace's parent directories are part of its root).
work=$(mktemp -d "$PWD/target/launch-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A second workspace that is a git project with the entries the default profile keeps read-only, as most
# projects are: its .git is a guarded directory (bound writable, its entries bound back read-only).
mkdir -p "$work/empty" "$work/project/.claude" "$work/project/.vscode" "$work/project/.idea"
git -C "$work/project" init -q
cd "$work/empty"
cmds=("/bin/true" "$stockade run -- /bin/true" "sh -c 'cd $work/project && exec $stockade run -- /bin/true'")
names=("bare /bin/true" "stockade run, empty workspace" "sh + stockade run, git project with .claude/.vscode/.idea")
# The floor: the namespaces alone, no root built, no policy (issue 15 asks to be within 1.5 ms of it).
cmds+=("unshare -m -p -f -n /bin/true")
names+=("unshare -m -p -f -n")
if command -v bwrap >/dev/null; then
  cmds+=("bwrap --ro-bind / / --dev /dev --bind $work/empty $work/empty --unshare-all --die-with-parent -- /bin/true")
  names+=("bwrap --unshare-all")
fi
if command -v firejail >/dev/null; then
  cmds+=("firejail --quiet --noprofile --net=none /bin/true")
  names+=("firejail --noprofile --net=none")
fi
args=()
for i in "${!cmds[@]}"; do args+=(--command-name "${names[$i]}" "${cmds[$i]}"); done
mkdir -p "$OLDPWD/bench/results"
"${HYPERFINE:-hyperfine}" -N --warmup 30 --runs "$runs" --export-markdown "$OLDPWD/bench/results/launch.md" \
  --export-json "$OLDPWD/bench/results/launch.json" "${args[@]}"
