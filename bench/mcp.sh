#!/usr/bin/env bash
# MCP read_file and list_directory round trips per second: `stockade mcp` against the reference server
# @modelcontextprotocol/server-filesystem (npm), on the same directory, through real stdio, driven by the
# same small Rust client (crates/mcp/examples/mcp_rtt.rs) so the client's own cost is small and equal.
#   bench/mcp.sh [CALLS] [ROUNDS]
# Runs with 1 request in flight (an agent's pattern) and with 8, ROUNDS times (default 3) alternating the two
# servers, and summarises the median of the rounds: one round on this shared VM varies by a third. The reference server is installed into
# target/mcp-reference with npm when it is missing. Results go to bench/results/mcp.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-10000}
rounds=${2:-3}
. bench/installed.sh
cargo build --release --quiet -p stockade-mcp --example mcp_rtt
client=$release/examples/mcp_rtt
ref=$PWD/target/mcp-reference
if [ ! -f "$ref/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
  mkdir -p "$ref" && (cd "$ref" && npm install --silent @modelcontextprotocol/server-filesystem >/dev/null)
fi
refjs=$ref/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
refversion=$(node -p "require('$ref/node_modules/@modelcontextprotocol/server-filesystem/package.json').version")
dir=$(mktemp -d "$PWD/target/mcp-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# 11 source files of 2-25 KB: what an agent reads.
cp crates/fs/src/*.rs "$dir"/ && cp crates/mcp/src/lib.rs "$dir"/mcp_lib.rs && cp crates/mcp/src/tests.rs "$dir"/mcp_tests.rs
mkdir -p bench/results
{
  echo "# $(date -u +%FT%TZ) calls=$calls rounds=$rounds, $(ls "$dir" | wc -l) files in the listed directory"
  for round in $(seq "$rounds"); do
    for window in 1 8; do
      echo "## round $round window $window: stockade mcp"
      "$client" "$calls" "$window" "$dir" -- "$stockade" --audit-log /dev/null mcp --root "$dir" | sed 's/^{/{"server":"stockade",/'
      echo "## round $round window $window: @modelcontextprotocol/server-filesystem $refversion"
      "$client" "$calls" "$window" "$dir" -- node "$refjs" "$dir" | sed 's/^{/{"server":"reference",/'
    done
  done
} > bench/results/mcp.txt
# Median calls per second over the rounds, per tool and window, and the ratio.
python3 - bench/results/mcp.txt <<'PY' | tee -a bench/results/mcp.txt
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("{") and "calls_per_second" in line:
        r = json.loads(line)
        runs.setdefault((r["tool"], r["window"], r["server"]), []).append(r["calls_per_second"])
print("| calls per second (median of %d rounds) | stockade mcp | reference | ratio | ratio per round |" % len(next(iter(runs.values()))))
print("|:---|---:|---:|---:|:---|")
for (tool, window, server), ours in sorted(runs.items()):
    if server != "stockade":
        continue
    ref = runs[(tool, window, "reference")]
    m, rm = statistics.median(ours), statistics.median(ref)
    per = ", ".join("%.1f" % (a / b) for a, b in zip(ours, ref))
    print(f"| `{tool}`, window {window} | {m:,.0f} | {rm:,.0f} | {m / rm:.1f}x | {per} |")
PY
