#!/usr/bin/env bash
# `stockade fs grep` against ripgrep on the same tree, same pattern, in one hyperfine run.
#   bench/fs-grep.sh [RUNS] [TREE]
# TREE defaults to a copy of this machine's cargo registry sources (hundreds of real crates, tens of
# thousands of files); without one, a generated tree of 50,000 files is used.
# Results go to bench/results/fs-grep.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
tree=${2:-}
. bench/installed.sh
command -v rg >/dev/null || { echo "rg is not installed (apt-get install ripgrep)" >&2; exit 1; }
if [ -z "$tree" ]; then
  tree=$PWD/target/bench-tree
  if [ ! -d "$tree" ]; then
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ 2>/dev/null | head -1 || true)
    if [ -n "$src" ]; then
      mkdir -p "$tree" && cp -r "$src"/. "$tree"/
    else
      python3 - "$tree" <<'PY'
import os, random, sys
root = sys.argv[1]; random.seed(7)
words = "fn let mut impl struct enum match return self Some None Ok Err".split()
for i in range(50000):
    d = os.path.join(root, f"d{i % 97}", f"e{i % 13}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.rs"), "w") as f:
        for _ in range(40):
            f.write(" ".join(random.choice(words) for _ in range(8)) + "\n")
PY
    fi
  fi
fi
echo "tree: $tree ($(find "$tree" -type f | wc -l) files, $(du -sh "$tree" | cut -f1))"
big=100000000
args=()
for pattern in 'unsafe impl' 'fn [a-z_]+_test\(' 'zzqxj_never_there'; do
  args+=(--command-name "rg '$pattern'" "rg -n --no-heading '$pattern' $tree")
  args+=(--command-name "stockade fs grep '$pattern'" "$stockade fs grep --root $tree --max-results $big '$pattern'")
done
mkdir -p bench/results
# -i: grep exits 1 when nothing matches, as rg does.
hyperfine -i --warmup 3 --runs "$runs" --output=pipe --export-markdown bench/results/fs-grep.md \
  --export-json bench/results/fs-grep.json "${args[@]}"
