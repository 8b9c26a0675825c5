#!/usr/bin/env bash
# Workloads that create many files, unconfined and under `stockade run` (and under an older stockade
# given as OLD=<binary>, to compare sandboxes), in one hyperfine run each: untar 10,000 small files (into
# a directory that exists at start, and into one made during the run), and a clean `cargo build` of a
# small crate.
#   bench/many-files.sh [RUNS]        (HYPERFINE=<path> to pick hyperfine)
# Results go to bench/results/many-files-*.md.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
hf=${HYPERFINE:-hyperfine}
. bench/installed.sh
results=$PWD/bench/results
mkdir -p "$results"
# BENCH_DIR (e.g. a tmpfs) keeps the disk's own noise out: on this machine's ext4 an untar right after
# removing the last one's 10,000 files takes 4 to 8 s of kernel time, unconfined or not.
work=$(mktemp -d "${BENCH_DIR:-$PWD/target}/many-files.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 100 directories of 100 files of 100 bytes.
mkdir -p "$work/gen"
for d in $(seq 0 99); do
  mkdir "$work/gen/d$d"
  for f in $(seq 0 99); do printf '%0100d' 0 >"$work/gen/d$d/f$f.txt"; done
done
tar cf "$work/files.tar" -C "$work/gen" .
rm -rf "$work/gen"

# The project: the output directory exists at start, as a build's usually does; the project root itself
# is where the protected names are (.mcp.json, .envrc, ...), so only creations there are mediated.
mkdir -p "$work/project/out"
cd "$work/project"
sandboxes=("$stockade")
names=("stockade run")
if [ -n "${OLD:-}" ]; then sandboxes+=("$OLD"); names+=("older stockade run"); fi

# compare RESULT WARMUP PREPARE RUN_FLAGS COMMAND: COMMAND unconfined and under each sandbox, in one
# hyperfine run, each timed run prepared by PREPARE.
compare() {
  local result=$1 warmup=$2 prepare=$3 flags=$4 command=$5
  local args=(--command-name "unconfined" "$command")
  for i in "${!sandboxes[@]}"; do
    args+=(--command-name "${names[$i]}" "${sandboxes[$i]} run $flags -- $command")
  done
  "$hf" --warmup "$warmup" --runs "$runs" --prepare "$prepare" \
    --export-markdown "$results/$result" "${args[@]}"
}

compare many-files-untar.md 2 'rm -rf out && mkdir out' "--ro $work/files.tar" "tar xf $work/files.tar -C out"
# The same into a directory made during the run (a first build's output): it has no Landlock rule of its
# own, so the mediator makes every name beneath it.
compare many-files-untar-new-dir.md 2 'rm -rf out' "--ro $work/files.tar" \
  "sh -c 'mkdir out && tar xf $work/files.tar -C out'"

# A small crate with no dependencies: 40 modules, a clean debug build.
mkdir -p crate/src
printf '[package]\nname = "small"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n' >crate/Cargo.toml
: >crate/src/lib.rs
for m in $(seq 0 39); do
  printf 'pub fn f%s(x: u64) -> u64 { (0..x).map(|i| i * %s).sum() }\n' "$m" "$m" >"crate/src/m$m.rs"
  printf 'pub mod m%s;\n' "$m" >>crate/src/lib.rs
done
cd crate
mkdir -p target
compare many-files-cargo.md 1 'rm -rf target/debug' "" "cargo build --offline --quiet"
