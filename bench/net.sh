#!/usr/bin/env bash
# The network proxy against direct access and against Claude Code's sandbox runtime (srt), on one local
# nginx (issue #16):
#   bench/net.sh [SETUP_RUNS] [DOWNLOAD_RUNS]
# Connection setup: inside one sandbox, SETUP_RUNS curls of a 16-byte file, each reporting
# time_starttransfer (connect, the proxy's CONNECT or SOCKS exchange, request, first byte); the median.
# Throughput: inside one sandbox, DOWNLOAD_RUNS curls of a 100 MB file from tmpfs, each reporting
# speed_download; the median. Launch costs are outside both figures. srt (npm @anthropic-ai/sandbox-runtime,
# bubblewrap and socat) is measured the same way when `srt` is on PATH or $SRT names it.
# Needs nginx (Debian: nginx-light). Results go to bench/results/net.txt (copied into BENCHMARKS.md by
# hand, with the date).
set -euo pipefail
cd "$(dirname "$0")/.."
setup_runs=${1:-300}
download_runs=${2:-15}
. bench/installed.sh
srt=${SRT:-$(command -v srt || true)}

data=$(mktemp -d /dev/shm/stockade-net-bench.XXXXXX)
work=$(mktemp -d "$PWD/target/net-work.XXXXXX")
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  rm -rf "$data" "$work"
}
trap cleanup EXIT
chmod 755 "$data"
head -c 100000000 /dev/urandom >"$data/big"
printf 'sixteen bytes!!\n' >"$data/small"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
user root;
worker_processes 2;
error_log $work/nginx/error.log;
pid $work/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 0;
  client_body_temp_path $work/nginx;
  proxy_temp_path $work/nginx;
  fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx;
  scgi_temp_path $work/nginx;
  server { listen 127.0.0.1:$port; root $data; }
}
EOF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.05; done

# One loop of curls inside whatever runs it; prints the median of the curl -w figure.
loop() { # RUNS FILE FORMAT CURL_FLAGS...
  local runs=$1 file=$2 format=$3
  shift 3
  printf 'for i in $(seq %s); do curl -s -o /dev/null -w "%s\\n" %s http://127.0.0.1:%s/%s; done | sort -g | awk "{a[NR]=\\$1} END {print a[int((NR+1)/2)]}"' \
    "$runs" "$format" "$*" "$port" "$file"
}
proxy=http://127.0.0.1:3128
rows=(
  "direct, no sandboxing|sh -c"
  "stockade run --net (host network)|$stockade run --net -- sh -c"
  "stockade proxy, absolute-form HTTP|$stockade run --net-allow 127.0.0.1:$port -- sh -c|-x $proxy --noproxy \"\""
  "stockade proxy, CONNECT tunnel|$stockade run --net-allow 127.0.0.1:$port -- sh -c|-p -x $proxy --noproxy \"\""
  "stockade proxy, SOCKS5|$stockade run --net-allow 127.0.0.1:$port -- sh -c|--socks5-hostname 127.0.0.1:3128 --noproxy \"\""
)
if [ -n "$srt" ]; then
  printf '{"network":{"allowedDomains":["127.0.0.1:%s"],"deniedDomains":[]},"filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]}}\n' \
    "$port" >"$work/srt.json"
  srt_version=$("$srt" --version 2>/dev/null || echo '?')
  # Both set NO_PROXY to loopback, which `--noproxy ""` overrides; srt's proxies come from the
  # HTTP(S)_PROXY it sets inside.
  rows+=("srt $srt_version proxy, HTTP|$srt -s $work/srt.json -c|--noproxy \"\"")
  rows+=("srt $srt_version proxy, CONNECT tunnel|$srt -s $work/srt.json -c|-p --noproxy \"\"")
fi

mkdir -p bench/results
out=bench/results/net.txt
{
  echo "# bench/net.sh $setup_runs $download_runs, $(date -u '+%Y-%m-%d %H:%M UTC'), nginx $(nginx -v 2>&1 | sed 's/.*\///'), curl $(curl --version | head -1 | cut -d' ' -f2)"
  printf '%-44s %22s %22s\n' "how" "setup median [ms]" "download median [MB/s]"
  cd "$work"
  for row in "${rows[@]}"; do
    IFS='|' read -r name runner flags <<<"$row"
    read -r -a runner_words <<<"$runner"
    setup=$("${runner_words[@]}" "$(loop "$setup_runs" small '%{time_starttransfer}' "$flags")")
    speed=$("${runner_words[@]}" "$(loop "$download_runs" big '%{speed_download}' "$flags")")
    printf '%-44s %22.3f %22.0f\n' "$name" "$(echo "$setup * 1000" | bc -l)" "$(echo "$speed / 1000000" | bc -l)"
  done
  # curl's own ceiling is near 2 GB/s here; a raw socket read into a 1 MiB buffer shows the proxy's.
  echo "# without curl (bench/net_download.py, median of 9 downloads):"
  "$stockade" run --net --ro "$OLDPWD/bench" -- python3 "$OLDPWD/bench/net_download.py" "$port" direct
  "$stockade" run --net-allow "127.0.0.1:$port" --ro "$OLDPWD/bench" -- \
    python3 "$OLDPWD/bench/net_download.py" "$port" connect socks http
} | tee "$OLDPWD/$out"
