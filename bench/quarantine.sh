#!/usr/bin/env bash
# Overhead of `stockade quarantine` over running the same reader bare: 100 input files whose references
# come to about 1 MiB of JSON, the built-in extract reader both times.
#   bench/quarantine.sh [RUNS]
# Results go to bench/results/quarantine.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
cargo build --release --quiet
# .cargo/config.toml builds for the host tuple explicitly, so the artifacts are under target/<host>/.
release=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
stockade=$release/stockade
dir=$PWD/target/quarantine-bench
rm -rf "$dir" && mkdir -p "$dir"
for f in $(seq 1 100); do
  for l in $(seq 1 60); do
    echo "  link-$l: https://example.com/project-$f/page-$l"
  done > "$dir/PROJECT-$f.yaml"
done
bytes=$("$stockade" extract "$dir"/*.yaml | wc -c)
echo "references: $bytes bytes of JSON from 100 files"
mkdir -p bench/results
hyperfine -N --warmup 5 --runs "$runs" --export-markdown bench/results/quarantine.md \
  --export-json bench/results/quarantine.json \
  --command-name "reader bare (stockade extract, 100 files)" "$stockade extract $(echo "$dir"/*.yaml)" \
  --command-name "stockade quarantine (sandbox + provenance gate)" \
  "$stockade --audit-log /dev/null quarantine --max-output 8MiB $(echo "$dir"/*.yaml)" \
  --command-name "reader bare (stockade extract, 1 file)" "$stockade extract $dir/PROJECT-1.yaml" \
  --command-name "stockade quarantine, 1 file" "$stockade --audit-log /dev/null quarantine $dir/PROJECT-1.yaml"
