#!/usr/bin/env bash
# Overhead of `stockade quarantine` over running the same reader bare: 100 input files whose references
# come to about 1 MiB of JSON, the built-in extract reader both times; and the same for 1 file.
#   bench/quarantine.sh [RUNS] [ROUNDS]
# Each round is one hyperfine run of all four commands (RUNS each, default 50); ROUNDS (default 5) rounds,
# and the summary is the median over rounds of each round's median overhead: one round on this shared VM
# varies by a third, and the machine's speed drifts between minutes, so only figures from the same round
# are subtracted. Results go to bench/results/quarantine.{md,json} (last round) and quarantine.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
rounds=${2:-5}
. bench/installed.sh
dir=$PWD/target/quarantine-bench
rm -rf "$dir" && mkdir -p "$dir"
for f in $(seq 1 100); do
  for l in $(seq 1 52); do
    echo "  link-$l: https://example.com/project-$f/page-$l"
  done > "$dir/PROJECT-$f.yaml"
done
files=$(echo "$dir"/*.yaml)
bytes=$("$stockade" extract $files | wc -c)
mkdir -p bench/results
{
  echo "# $(date -u +%FT%TZ) runs=$runs rounds=$rounds: 100 files, references $bytes bytes of JSON"
  for round in $(seq "$rounds"); do
    hyperfine -N --warmup 5 --runs "$runs" --style none --export-markdown bench/results/quarantine.md \
      --export-json bench/results/quarantine.json \
      --command-name "reader bare (stockade extract, 100 files)" "$stockade extract $files" \
      --command-name "stockade quarantine (sandbox + provenance gate)" \
      "$stockade --audit-log /dev/null quarantine --max-output 8MiB $files" \
      --command-name "reader bare (stockade extract, 1 file)" "$stockade extract $dir/PROJECT-1.yaml" \
      --command-name "stockade quarantine, 1 file" "$stockade --audit-log /dev/null quarantine $dir/PROJECT-1.yaml" \
      >/dev/null
    python3 -c 'import json, sys; print(json.dumps([r["median"] * 1000 for r in json.load(open(sys.argv[1]))["results"]]))' \
      bench/results/quarantine.json
  done
} > bench/results/quarantine.txt
python3 - bench/results/quarantine.txt <<'PY' | tee -a bench/results/quarantine.txt
import json, statistics, sys
rounds = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("[")]
print("| medians, ms (median of %d rounds) | reader bare | stockade quarantine | overhead | overhead per round |" % len(rounds))
print("|:---|---:|---:|---:|:---|")
for name, (bare, confined) in (("100 files, ~1 MiB of references", (0, 1)), ("1 file", (2, 3))):
    over = [r[confined] - r[bare] for r in rounds]
    per = ", ".join("%.1f" % o for o in over)
    b = statistics.median(r[bare] for r in rounds)
    c = statistics.median(r[confined] for r in rounds)
    print(f"| {name} | {b:.2f} | {c:.2f} | +{statistics.median(over):.2f} | {per} |")
PY
