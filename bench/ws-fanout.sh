#!/usr/bin/env bash
# WebSocket fan-out of a 3-node perpd: `perpd bench ws` against a fresh
# `perpd devnet --deployment bench`. CLIENTS sockets spread over the three
# nodes, every one subscribed to prices (FEEDS) and stats (MARKETS); the
# first ACCOUNT_CLIENTS also authenticated with one of TRADERS keys and
# subscribed to its account, while the traders place a one-contract market
# order every ORDER_EVERY each. It reports the event frames/s received
# across the clients and how late they arrive (receive time minus the
# frame's log time), per channel, writes the result to OUT, and stops and
# deletes the devnet on exit, failure or Ctrl-C.
#
# Before it, on the same devnet, a baseline: one client per node, market
# data only, no orders, for BASELINE_DURATION (0 skips it). The latency the
# main run adds over the baseline is what the clients and their load cost;
# the baseline itself is the path every frame takes (raft commit, apply,
# one socket write). Both go into OUT as {"baseline": ..., "run": ...}.
#
# Environment (defaults):
#   CLIENTS=1000 ACCOUNT_CLIENTS=250 TRADERS=8 ORDER_EVERY=200ms BASELINE_DURATION=20s
#   FEEDS=BTCUSD MARKETS=BTC-PERP DURATION=30s WARMUP=5s
#   PERPD=<built from this checkout into the temp dir>
#   PERPD_HTTP_BASE=28180 (raft BASE-1000.., admin BASE+1000..; below Linux's
#   ephemeral range, where an outgoing connection could hold a node's port)
#   OUT=bench-ws.json KEEP=0 (1: keep the temp dir with data and logs)
set -euo pipefail

CLIENTS=${CLIENTS:-1000}
ACCOUNT_CLIENTS=${ACCOUNT_CLIENTS:-250}
TRADERS=${TRADERS:-8}
ORDER_EVERY=${ORDER_EVERY:-200ms}
BASELINE_DURATION=${BASELINE_DURATION:-20s}
FEEDS=${FEEDS:-BTCUSD}
MARKETS=${MARKETS:-BTC-PERP}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-5s}
PERPD_HTTP_BASE=${PERPD_HTTP_BASE:-28180}
OUT=${OUT:-bench-ws.json}
KEEP=${KEEP:-0}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '%s\n' "ws-fanout: $*" >&2; }
die() { say "$*"; exit 1; }

# One descriptor per client here, one per client on the node serving it
# (the nodes inherit this limit), plus files, raft and HTTP connections.
want=$((CLIENTS + 1024))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want" ]; then
	ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge "$want" ] ||
		die "open files limit $(ulimit -n) (hard $(ulimit -Hn)) is below $want for $CLIENTS sockets; raise it (ulimit -n, /etc/security/limits.conf) or lower CLIENTS"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perpd-ws.XXXXXX")
devnet="" child=""
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh" # run
cleanup() {
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	if [ -n "$devnet" ]; then
		kill "$devnet" 2>/dev/null || true
		wait "$devnet" 2>/dev/null || true
	fi
	if [ "$KEEP" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${PERPD:-}" ]; then
	say "building perpd"
	(cd "$here" && go build -o "$tmp/perpd" .)
	PERPD=$tmp/perpd
fi
[ -x "$PERPD" ] || die "PERPD=$PERPD is not an executable"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "$(nproc) cores, load average $load_before, open files limit $(ulimit -n); temp dir $tmp"

"$PERPD" devnet --nodes 3 --deployment bench --dir "$tmp/perpd" --http-base "$PERPD_HTTP_BASE" >"$tmp/devnet.out" 2>&1 &
devnet=$!
nodes="127.0.0.1:$PERPD_HTTP_BASE,127.0.0.1:$((PERPD_HTTP_BASE + 1)),127.0.0.1:$((PERPD_HTTP_BASE + 2))"
if [ "$BASELINE_DURATION" != 0 ] && [ "$BASELINE_DURATION" != 0s ]; then
	say "baseline: 3 clients, market data only, no orders"
	run "$PERPD" bench ws --nodes "$nodes" --clients 3 --account-clients 0 --traders 0 --order-every 0 \
		--prices "$FEEDS" --stats "$MARKETS" --warmup "$WARMUP" --duration "$BASELINE_DURATION" \
		--ready-timeout 60s --out "$tmp/baseline.json" || { tail -20 "$tmp/devnet.out" >&2; die "the baseline failed"; }
fi
say "run: $CLIENTS clients ($ACCOUNT_CLIENTS on account), $TRADERS traders, an order every $ORDER_EVERY each"
run "$PERPD" bench ws --nodes "$nodes" --clients "$CLIENTS" --account-clients "$ACCOUNT_CLIENTS" --traders "$TRADERS" \
	--prices "$FEEDS" --stats "$MARKETS" --order-every "$ORDER_EVERY" --warmup "$WARMUP" --duration "$DURATION" \
	--ready-timeout 60s --out "$tmp/run.json" || { tail -20 "$tmp/devnet.out" >&2; die "the run failed"; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# A figure of the "all" series (every event frame), from its JSON block.
all() { sed -n '/^    "all": {/,/}/p' "$1" | sed -n "s/^ *\"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p"; }
rate=$(all "$tmp/run.json" perSec) p50=$(all "$tmp/run.json" p50Ms) p99=$(all "$tmp/run.json" p99Ms)
line="ws-fanout: $CLIENTS clients: $rate event frames/s, latency p50 $p50 ms p99 $p99 ms"
baseline=null
if [ -f "$tmp/baseline.json" ]; then
	b50=$(all "$tmp/baseline.json" p50Ms) b99=$(all "$tmp/baseline.json" p99Ms)
	added=$(awk -v a="$p50" -v b="$b50" -v c="$p99" -v d="$b99" 'BEGIN { printf "p50 +%.2f ms, p99 +%.2f ms", a - b, c - d }')
	line+=" | baseline (3 clients, no orders) p50 $b50 ms p99 $b99 ms | added: $added"
	baseline=$(cat "$tmp/baseline.json")
fi
printf '{\n  "cores": %s,\n  "loadAverageBefore": "%s",\n  "loadAverageAfter": "%s",\n  "baseline": %s,\n  "run": %s\n}\n' \
	"$(nproc)" "$load_before" "$load_after" "$baseline" "$(cat "$tmp/run.json")" >"$OUT"
printf '%s (load %s -> %s)\n' "$line" "$load_before" "$load_after"
say "result in $OUT"
