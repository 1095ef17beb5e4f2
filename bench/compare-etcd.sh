#!/usr/bin/env bash
# Replicated writes of perpd against etcd on the same machine, with the same
# load tool (`perpd bench http`), the same concurrency and the same duration.
#
#   etcd:  a 3-member etcd cluster on loopback; POST /v3/kv/put through its
#          JSON gateway (grpc-gateway on the client port), a unique key per
#          request.
#   perpd: a 3-node `perpd devnet --deployment bench`; POST /v1/orders, a
#          one-contract BTC-PERP market order alternating buy and sell, one
#          funded account per worker, a fresh idempotency-key per request.
#
# TARGET=leader (the default) sends every request to the leader of each
# cluster, found through etcd's /v3/maintenance/status and perpd's admin
# status; TARGET=all spreads the workers over the three members, so two
# thirds of the writes are forwarded by a follower (both systems forward).
#
# The clusters run one after the other, so neither pays for the other's
# idle work, each from fresh data. Each gets WARMUP unmeasured, then
# DURATION measured. ROUNDS repeats the pair, alternating which goes first
# (etcd, perpd, perpd, etcd, ...): on a shared machine whose speed drifts by
# tens of percent over a minute, one pair can catch a slow spell on one side
# only, so each round's ratio is printed and the summary takes the median
# round. It prints one line per round and the summary line, writes
# everything to OUT, and stops and deletes everything it started on exit,
# failure or Ctrl-C.
#
# Environment (defaults):
#   CONCURRENCY=64 DURATION=30s WARMUP=5s TARGET=leader ROUNDS=3 (1 to 9)
#   PERPD=<built from this checkout into the temp dir>   perpd binary
#   ETCD=etcd                                            etcd binary (Debian: etcd-server, 3.4)
#   ETCD_PORT_BASE=22379  member i: client BASE+2(i-1), peer BASE+2(i-1)+1
#   PERPD_HTTP_BASE=28080 node i: http BASE+i-1 (raft BASE-1000.., admin BASE+1000..)
#   Both below Linux's ephemeral range (32768-60999 by default): a port in
#   it can be held as the local end of an outgoing connection (the load
#   tool's, a node's own) when a member binds it, and the member then fails
#   to start.
#   OUT=bench-compare.json   KEEP=0 (1: keep the temp dir with data and logs)
#   SETTLE=3                 seconds to wait after a sync before each phase
#   TMPDIR                   where the data directories go (both on the same disk)
set -euo pipefail

CONCURRENCY=${CONCURRENCY:-64}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-5s}
TARGET=${TARGET:-leader}
ETCD=${ETCD:-etcd}
ETCD_PORT_BASE=${ETCD_PORT_BASE:-22379}
PERPD_HTTP_BASE=${PERPD_HTTP_BASE:-28080}
OUT=${OUT:-bench-compare.json}
KEEP=${KEEP:-0}
ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "$TARGET" in leader | all) ;; *)
	echo "compare: TARGET must be leader or all, not $TARGET" >&2
	exit 2
	;;
esac

say() { printf '%s\n' "compare: $*" >&2; }
die() { say "$*"; exit 1; }
case "$ROUNDS" in [1-9]) ;; *) die "ROUNDS must be 1 to 9, not $ROUNDS" ;; esac

command -v curl >/dev/null || die "curl is needed (etcd health checks)"

# etcd: install the Debian package when missing, only as root.
if ! command -v "$ETCD" >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		say "etcd not found; installing the Debian package etcd-server"
		DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server >/dev/null ||
			{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server >/dev/null; } ||
			die "apt-get install etcd-server failed"
	else
		die "etcd not found. Install it first (Debian/Ubuntu: sudo apt-get install etcd-server, which gives etcd 3.4), " \
			"or set ETCD=/path/to/etcd. This script installs packages only when run as root."
	fi
fi
etcd_version=$("$ETCD" --version 2>/dev/null | sed -n 's/^etcd Version: //p')
case "$etcd_version" in
3.4.* | 3.5.*) ;;
*) say "warning: etcd $etcd_version; /v3/kv/put is the gateway path of 3.4 and 3.5" ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perpd-compare.XXXXXX")
pids=() child=""
stop_all() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh" # run
cleanup() {
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	stop_all
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
cores=$(nproc)
say "$cores cores, load average $load_before; $CONCURRENCY clients, warmup $WARMUP, measured $DURATION; temp dir $tmp"

# settle flushes what the previous phase (or anything before this script)
# left dirty in the page cache and waits a moment, so neither system pays
# for the other's writeback: each phase starts from a clean disk.
settle() { sync; sleep "${SETTLE:-3}"; }

# --- etcd ---------------------------------------------------------------
# etcd_round K loads a fresh 3-member etcd; the result goes to etcd-K.json.
etcd_round() {
	local k=$1 i c p st me leader cluster="" urls=""
	settle
	for i in 1 2 3; do
		c=$((ETCD_PORT_BASE + 2 * (i - 1))) p=$((ETCD_PORT_BASE + 2 * (i - 1) + 1))
		cluster+="${cluster:+,}e$i=http://127.0.0.1:$p"
		urls+="${urls:+,}http://127.0.0.1:$c/v3/kv/put"
	done
	for i in 1 2 3; do
		c=$((ETCD_PORT_BASE + 2 * (i - 1))) p=$((ETCD_PORT_BASE + 2 * (i - 1) + 1))
		"$ETCD" --name "e$i" --data-dir "$tmp/etcd$k-$i" \
			--listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
			--listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
			--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "perpd-compare-$$-$k" \
			>"$tmp/etcd$k-$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 1 2 3; do
		c=$((ETCD_PORT_BASE + 2 * (i - 1)))
		for _ in $(seq 1 150); do
			curl -fsS -m 1 "http://127.0.0.1:$c/health" 2>/dev/null | grep -q '"health":"true"' && break
			sleep 0.2
		done
		curl -fsS -m 1 "http://127.0.0.1:$c/health" 2>/dev/null | grep -q '"health":"true"' ||
			{ tail -20 "$tmp/etcd$k-$i.log" >&2; die "etcd member e$i is not healthy after 30 s"; }
	done
	say "round $k: etcd $etcd_version: 3 members healthy"
	if [ "$TARGET" = leader ]; then
		# Every member names the leader's id; the leader is the one whose
		# own id it is.
		urls=""
		for i in 1 2 3; do
			c=$((ETCD_PORT_BASE + 2 * (i - 1)))
			st=$(curl -fsS -m 2 -X POST -d '{}' "http://127.0.0.1:$c/v3/maintenance/status")
			me=$(printf '%s' "$st" | sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p')
			leader=$(printf '%s' "$st" | sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p')
			[ -n "$me" ] && [ "$me" = "$leader" ] && urls="http://127.0.0.1:$c/v3/kv/put"
		done
		[ -n "$urls" ] || die "no etcd member says it leads"
	fi
	say "round $k: etcd load on $urls"
	run "$PERPD" bench http --label etcd --url "$urls" --concurrency "$CONCURRENCY" --warmup "$WARMUP" --duration "$DURATION" \
		--body '{"key":"{{b64:bench/{{run}}/{{worker}}/{{seq}}}}","value":"{{b64:value-{{seq}}}}"}' \
		--out "$tmp/etcd-$k.json" || die "the etcd run failed"
	stop_all
	[ "$KEEP" = 1 ] || rm -rf "$tmp/etcd$k-"[123]
}

# --- perpd --------------------------------------------------------------
# perpd_round K loads a fresh 3-node bench devnet; the result goes to
# perpd-K.json.
perpd_round() {
	local k=$1 i admin leader urls=""
	settle
	"$PERPD" devnet --nodes 3 --deployment bench --dir "$tmp/perpd$k" --http-base "$PERPD_HTTP_BASE" >"$tmp/devnet$k.out" 2>&1 &
	pids+=($!)
	for i in 0 1 2; do urls+="${urls:+,}http://127.0.0.1:$((PERPD_HTTP_BASE + i))/v1/orders"; done
	if [ "$TARGET" = leader ]; then
		# The devnet prints the operator's admin status command once it is
		# up; its answer names the leader's HTTP address.
		for _ in $(seq 1 300); do grep -q '^try: perpd admin status' "$tmp/devnet$k.out" && break; sleep 0.2; done
		admin=$(sed -n 's/^try: perpd admin status --human //p' "$tmp/devnet$k.out")
		[ -n "$admin" ] || { tail -20 "$tmp/devnet$k.out" >&2; die "the perpd devnet did not come up in 60 s"; }
		leader=""
		for _ in $(seq 1 150); do
			# shellcheck disable=SC2086 # the devnet's own flags, split as printed
			leader=$("$PERPD" admin status $admin 2>/dev/null | sed -n '/"leader": {/,/}/s/.*"http": "\([^"]*\)".*/\1/p')
			[ -n "$leader" ] && break
			sleep 0.2
		done
		[ -n "$leader" ] || die "the perpd devnet names no leader after 30 s"
		urls="http://$leader/v1/orders"
	fi
	say "round $k: perpd load on $urls"
	run "$PERPD" bench http --label perpd --url "$urls" --concurrency "$CONCURRENCY" --warmup "$WARMUP" --duration "$DURATION" \
		--perpd-signup --ready-timeout 60s \
		--header 'x-api-key: {{key}}' --header 'idempotency-key: {{uuid}}' \
		--body '{"marketId":"BTC-PERP","side":"{{alt:buy|sell}}","type":"market","contracts":"1","reduceOnly":false,"leverage":"10"}' \
		--out "$tmp/perpd-$k.json" || { tail -20 "$tmp/devnet$k.out" >&2; die "the perpd run failed"; }
	stop_all
	[ "$KEEP" = 1 ] || rm -rf "$tmp/perpd$k"
}

# shellcheck source=bench/compare-lib.sh
. "$here/bench/compare-lib.sh" # field, ratio, median_round

rate_ratios=() p99_ratios=()
for k in $(seq 1 "$ROUNDS"); do
	if [ $((k % 2)) = 1 ]; then
		etcd_round "$k"
		perpd_round "$k"
	else
		perpd_round "$k"
		etcd_round "$k"
	fi
	er=$(field "$tmp/etcd-$k.json" okPerSec) ep=$(field "$tmp/etcd-$k.json" p99Ms)
	pr=$(field "$tmp/perpd-$k.json" okPerSec) pp=$(field "$tmp/perpd-$k.json" p99Ms)
	ec=$(field "$tmp/etcd-$k.json" count) eo=$(field "$tmp/etcd-$k.json" ok)
	pc=$(field "$tmp/perpd-$k.json" count) po=$(field "$tmp/perpd-$k.json" ok)
	rate_ratios+=("$(ratio "$pr" "$er")") p99_ratios+=("$(ratio "$pp" "$ep")")
	printf 'compare: round %s of %s: etcd %s puts/s p99 %s ms (%s of %s ok) | perpd %s orders/s p99 %s ms (%s of %s ok) | perpd/etcd: rate %sx, p99 %sx\n' \
		"$k" "$ROUNDS" "$er" "$ep" "$eo" "$ec" "$pr" "$pp" "$po" "$pc" "${rate_ratios[-1]}" "${p99_ratios[-1]}"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- summary ------------------------------------------------------------
# Every summary figure is the median round's (the median rate ratio).
read -r mid er ep pr pp rate_ratio p99_ratio < <(median_round "$tmp" "$ROUNDS")
list() { local IFS=,; printf '[%s]' "$*"; }
results() {
	local k sep=""
	printf '['
	for k in $(seq 1 "$ROUNDS"); do
		printf '%s%s' "$sep" "$(cat "$tmp/$1-$k.json")"
		sep=,
	done
	printf ']'
}
{
	printf '{\n  "cores": %s,\n  "loadAverageBefore": "%s",\n  "loadAverageAfter": "%s",\n' "$cores" "$load_before" "$load_after"
	printf '  "etcdVersion": "%s",\n  "target": "%s",\n  "concurrency": %s,\n  "warmup": "%s",\n  "duration": "%s",\n  "rounds": %s,\n' \
		"$etcd_version" "$TARGET" "$CONCURRENCY" "$WARMUP" "$DURATION" "$ROUNDS"
	printf '  "ratio": {"okPerSec": %s, "p99": %s, "okPerSecRounds": %s, "p99Rounds": %s},\n' \
		"$rate_ratio" "$p99_ratio" "$(list "${rate_ratios[@]}")" "$(list "${p99_ratios[@]}")"
	printf '  "median": {"round": %s, "etcdOkPerSec": %s, "etcdP99Ms": %s, "perpdOkPerSec": %s, "perpdP99Ms": %s},\n' \
		"$mid" "$er" "$ep" "$pr" "$pp"
	printf '  "etcd": %s,\n  "perpd": %s\n}\n' "$(results etcd)" "$(results perpd)"
} >"$OUT"
where="to the leader"
[ "$TARGET" = all ] && where="spread over the 3 nodes"
printf 'compare: median round %s of %s: etcd %s puts/s p99 %s ms | perpd %s orders/s p99 %s ms | perpd/etcd: rate %sx (rounds %s), p99 %sx (rounds %s) (%s clients %s, %s measured, 3 nodes each, %s cores, load %s -> %s)\n' \
	"$mid" "$ROUNDS" "$er" "$ep" "$pr" "$pp" "$rate_ratio" "${rate_ratios[*]}" "$p99_ratio" "${p99_ratios[*]}" "$CONCURRENCY" "$where" "$DURATION" "$cores" "$load_before" "$load_after"
say "result in $OUT"
