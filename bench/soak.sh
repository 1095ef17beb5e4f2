#!/usr/bin/env bash
# An operator's soak test: a fresh 3-node `perpd devnet --deployment bench`
# under the mixed trader load of `perpd bench` for DURATION, run as
# consecutive SEGMENT-long `perpd bench` runs (each signs up and funds new
# traders, so signups, faucet grants and idempotency keys keep coming),
# while every SAMPLE seconds each node's RSS, Go heap, goroutines, open fds,
# raft.db size, snapshot directory size, newest snapshot (the encoded
# State) and applied index go to OUT_DIR/samples.csv.
#
# At the end it checks, and exits nonzero unless all hold:
#   1. replicas: the three nodes agree on the state hash at one index
#      (`perpd admin replicas`, after the followers caught up);
#   2. invariants: every node's /healthz is ok, it is not halted, and its
#      ledger's conservation check holds (`perpd admin ledger`);
#   3. bounded growth over the second half of the load, per node and
#      series (the rule is in soak-verdict.awk next to this script):
#      flat series (goroutines, fds, raft.db): max of the last quarter
#      <= max of the second quarter x (1 + SLACK_PCT%) + a fixed slack;
#      series that hold the State (RSS, live heap, snapshot dir) get the
#      same rule plus their bytes per byte of State times the State's own
#      growth: they may grow with the State, not faster;
#   4. the State: snapshots at the middle and the end, decoded by
#      fsm/state_sizes_test.go (needs go): every collection within its
#      numeric bound from docs/decisions.md, and every other one growing
#      no faster than the accounts (bench signs up new ones every segment,
#      and accounts are never deleted: the signup cap bounds them).
#   5. errors: no refusal code (`perpd bench` counts answers by the
#      body's code, http_<status> without one, transport without an
#      answer) outside EXPECTED_ERRORS in any segment. The bench tier's
#      budgets are 1000x, and the traders only cancel their own resting
#      orders, so under this load any refusal is a finding.
#
# `bench/soak.sh verdict OUT_DIR` re-runs check 3 on a saved samples.csv.
#
# Environment (defaults):
#   DURATION=20m SEGMENT=2m SAMPLE=30 (seconds) SOAK_TRADERS=12
#   SOAK_MIX=market=40,limit=30,cancel=15,read=15
#   SOAK_HTTP_BASE=26080  node i: http BASE+i-1, raft BASE-1000.., admin BASE+1000..
#                         (below the ephemeral range, as bench/compare-etcd.sh)
#   OUT_DIR=soak-out      samples.csv, bench-N.json, devnet.out, verdict.txt,
#                         heap-nodeI-{mid,end}[-2,-3].pb.gz (+ .top.txt): heap profiles
#   KEEP=0                1: keep the devnet's data directories in OUT_DIR/devnet
#   SLACK_PCT=15
#   EXPECTED_ERRORS=rate_limited  comma list of `perpd bench` codes that are not findings
#   PERPD=<built from this checkout into OUT_DIR>
set -euo pipefail

# All of it is one function, read whole before it starts: bash reads a
# script as it runs, so a checkout or an edit during a 20-minute run would
# otherwise change the commands under it.
main() {

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '%s\n' "soak: $*" >&2; }
die() { say "$*"; exit 1; }

OUT_DIR=${OUT_DIR:-soak-out}
SLACK_PCT=${SLACK_PCT:-15}

verdict() {
	awk -F, -v slack="$SLACK_PCT" -f "$here/bench/soak-verdict.awk" "$1/samples.csv"
}
if [ "${1:-}" = verdict ]; then
	[ -n "${2:-}" ] || die "usage: bench/soak.sh verdict OUT_DIR"
	verdict "$2"
	exit
fi

DURATION=${DURATION:-20m}
SEGMENT=${SEGMENT:-2m}
SAMPLE=${SAMPLE:-30}
SOAK_TRADERS=${SOAK_TRADERS:-12}
SOAK_MIX=${SOAK_MIX:-market=40,limit=30,cancel=15,read=15}
SOAK_HTTP_BASE=${SOAK_HTTP_BASE:-26080}
KEEP=${KEEP:-0}
EXPECTED_ERRORS=${EXPECTED_ERRORS:-rate_limited}

seconds() {
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*[0-9]) echo "$1" ;;
	*) die "cannot read the duration $1 (use 90s, 20m or 1h)" ;;
	esac
}
total=$(seconds "$DURATION") segment=$(seconds "$SEGMENT")
[ "$total" -ge 120 ] || die "DURATION must be at least 2m (four quarters of samples)"
command -v curl >/dev/null || die "curl is needed (the nodes' /metrics)"

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
rm -rf "$OUT_DIR/devnet" "$OUT_DIR"/bench-* "$OUT_DIR"/heap-* "$OUT_DIR"/*.snap* "$OUT_DIR/samples.csv" "$OUT_DIR/state-sizes.txt" "$OUT_DIR/verdict.txt"
dir=$OUT_DIR/devnet

devnet="" sampler="" child=""
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh" # run
cleanup() {
	local p
	for p in "$child" "$sampler" "$devnet"; do
		[ -n "$p" ] || continue
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ "$KEEP" != 1 ]; then rm -rf "$dir" "$OUT_DIR"/*.snap*; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${PERPD:-}" ]; then
	say "building perpd"
	(cd "$here" && go build -o "$OUT_DIR/perpd" .)
	PERPD=$OUT_DIR/perpd
fi
[ -x "$PERPD" ] || die "PERPD=$PERPD is not an executable"

"$PERPD" devnet --nodes 3 --deployment bench --dir "$dir" --http-base "$SOAK_HTTP_BASE" >"$OUT_DIR/devnet.out" 2>&1 &
devnet=$!
for _ in $(seq 1 300); do grep -q '^try: perpd admin status' "$OUT_DIR/devnet.out" && break; sleep 0.2; done
admin=$(sed -n 's/^try: perpd admin status --human //p' "$OUT_DIR/devnet.out")
[ -n "$admin" ] || { tail -20 "$OUT_DIR/devnet.out" >&2; die "the devnet did not come up in 60 s"; }

# shellcheck disable=SC2086 # the devnet's own flags, split as printed
adm() { "$PERPD" admin "$@" $admin; }

nodes="" pids=()
for i in 1 2 3; do
	nodes+="${nodes:+,}127.0.0.1:$((SOAK_HTTP_BASE + i - 1))"
	p=""
	for _ in $(seq 1 50); do
		p=$(pgrep -P "$devnet" -f -- "serve --id node$i " || true)
		[ -n "$p" ] && break
		sleep 0.2
	done
	[ -n "$p" ] || die "no process for node$i under the devnet ($devnet)"
	pids+=("$p")
done
say "devnet up: nodes $nodes, pids ${pids[*]}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# metric NAME prints the value of an unlabelled series from a scrape on
# stdin.
metric() { awk -v n="$1" '$1 == n { printf "%.0f", $2; exit }'; }
du_bytes() { du -sb "$1" 2>/dev/null | cut -f1; }
# newest_state prints the size of the newest complete snapshot's data: the
# encoded State.
newest_state() {
	local s
	s=$(ls -1d "$1"/snapshots/*/state.bin 2>/dev/null | sort | tail -1)
	if [ -n "$s" ]; then stat -c %s "$s"; else echo 0; fi
}

# admin_get I PATH prints node I's admin listener's answer at PATH.
admin_get() {
	curl -fsS -m 30 --cacert "$dir/tls/ca.pem" --cert "$dir/tls/admin.pem" --key "$dir/tls/admin-key.pem" \
		-H "Authorization: Bearer $(cat "$dir/node$1/admin-token")" "https://127.0.0.1:$((SOAK_HTTP_BASE + 1000 + $1 - 1))$2"
}
# scrape prints node I's /metrics (empty when it does not answer in 5 s).
scrape() { admin_get "$1" /metrics 2>/dev/null || true; }
# heaps NAME saves every node's heap profile (live objects after a
# collection) as OUT_DIR/heap-nodeI-NAME.pb.gz, and its top entries by
# bytes in use beside it when go is here: where the memory beyond the
# State is. Two more, 5 s apart, go to heap-nodeI-NAME-2/-3.pb.gz: the
# heap check takes the least of the three, since a profile counts the
# buffers that were live at that moment (a bolt transaction, a scan).
heaps() {
	local i f k
	for k in 1 2 3; do
		for i in 1 2 3; do
			f=$OUT_DIR/heap-node$i-$1.pb.gz
			[ "$k" = 1 ] || f=$OUT_DIR/heap-node$i-$1-$k.pb.gz
			admin_get "$i" "/debug/pprof/heap?gc=1" >"$f" 2>/dev/null || { say "node$i's heap profile failed"; continue; }
			if [ "$k" = 1 ] && command -v go >/dev/null; then
				go tool pprof -top -nodecount=25 -sample_index=inuse_space "$f" >"${f%.pb.gz}.top.txt" 2>&1 || true
			fi
		done
		[ "$k" = 3 ] || sleep 5
	done
}

sample() {
	local t0=$1 i now n m gogc next live
	while :; do
		now=$(($(date +%s) - t0))
		for i in 1 2 3; do
			n=$dir/node$i
			m=$(scrape "$i")
			gogc=$(metric go_gc_gogc_percent <<<"$m")
			next=$(metric go_memstats_next_gc_bytes <<<"$m")
			# The live heap at the last GC, from the goal it set: the
			# sawtooth of heap_alloc between GCs hides a trend.
			live=$(awk -v n="${next:-0}" -v g="${gogc:-100}" 'BEGIN { printf "%.0f", (g > 0 ? n * 100 / (100 + g) : n) }')
			printf '%s,node%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$now" "$i" "${pids[i - 1]}" \
				"$(awk '/^VmRSS:/ { printf "%.0f", $2 * 1024 }' "/proc/${pids[i - 1]}/status" 2>/dev/null || echo)" \
				"$(metric go_memstats_heap_alloc_bytes <<<"$m")" "$live" \
				"$(metric go_goroutines <<<"$m")" \
				"$(find "/proc/${pids[i - 1]}/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)" \
				"$(stat -c %s "$n/raft.db" 2>/dev/null || echo)" "$(du_bytes "$n/snapshots")" "$(newest_state "$n")" \
				"$(metric perpd_raft_applied_index <<<"$m")" "$(cat "$OUT_DIR/phase")" "$SOAK_TRADERS"
		done >>"$OUT_DIR/samples.csv"
		sleep "$SAMPLE"
	done
}

echo "elapsed_s,node,pid,rss_bytes,heap_alloc_bytes,heap_live_bytes,goroutines,fds,raft_db_bytes,snap_dir_bytes,state_bytes,applied_index,segment,traders" >"$OUT_DIR/samples.csv"
echo 0 >"$OUT_DIR/phase"
start=$(date +%s)
sample "$start" &
sampler=$!

# --- load -----------------------------------------------------------------
k=0
while :; do
	left=$((total - ($(date +%s) - start)))
	[ "$left" -ge 10 ] || break
	d=$segment
	[ "$d" -le "$left" ] || d=$left
	k=$((k + 1))
	echo "$k" >"$OUT_DIR/phase"
	say "segment $k: ${d}s, $SOAK_TRADERS new traders ($((total - left))s of ${total}s done)"
	run "$PERPD" bench --nodes "$nodes" --traders "$SOAK_TRADERS" --duration "${d}s" --mix "$SOAK_MIX" --seed "$k" \
		--ready-timeout 60s --out "$OUT_DIR/bench-$k.json" >"$OUT_DIR/bench-$k.txt" 2>&1 ||
		{ cat "$OUT_DIR/bench-$k.txt" >&2; die "perpd bench segment $k failed"; }
	sed -n '/^op /,$p' "$OUT_DIR/bench-$k.txt" >&2
	# The State at the middle of the run, to compare with the end.
	if [ ! -s "$OUT_DIR/mid.snap" ] && [ $(($(date +%s) - start)) -ge $((total / 2)) ]; then
		adm snapshot --out "$OUT_DIR/mid.snap" >/dev/null || die "admin snapshot at the middle failed"
		heaps mid
	fi
done
echo after >"$OUT_DIR/phase"
load_s=$(($(date +%s) - start))
heaps end
say "load done after ${load_s}s ($k segments); load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- checks -------------------------------------------------------------
fail=0

# The followers catch up: replicas compares at the lowest applied index of
# the three, so wait (up to 2 minutes) until the three are within a few
# entries (timers still tick). The applied index comes from /metrics:
# /admin/state computes the state hash, which encodes the whole State and
# under a 5 s timeout, once a second, piles up on a large one.
for _ in $(seq 1 120); do
	spread=$(for i in 1 2 3; do scrape "$i" | metric perpd_raft_applied_index; echo; done |
		awk 'NF { n++; if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 } END { print (n == 3 ? max - min : -1) }') || true
	[ -n "$spread" ] && [ "$spread" -ge 0 ] && [ "$spread" -le 2 ] && break
	sleep 1
done
# Each follower replays its lazy snapshot shadow to the index and encodes
# the whole State for its hash: at 150 MB that takes longer than the quick
# asks' 5 s (runs 2 and 3). The leader waits up to 55 s for each member's
# hash (cluster/feature.go); the CLI waits 60 s for the leader.
rep=$(adm replicas --timeout 60s 2>&1) || true
rep_index=$(sed -n 's/^  "index": "\([0-9]*\)".*/\1/p' <<<"$rep")
if grep -q '"agree": true' <<<"$rep"; then
	echo "replicas: ok, the 3 nodes agree on the state hash at index $rep_index" | tee "$OUT_DIR/verdict.txt"
else
	echo "replicas: FAIL" | tee "$OUT_DIR/verdict.txt"
	printf '%s\n' "$rep" | tee -a "$OUT_DIR/verdict.txt"
	fail=1
fi

for i in 1 2 3; do
	h=$(curl -fsS -m 5 "http://127.0.0.1:$((SOAK_HTTP_BASE + i - 1))/healthz" || echo unreachable)
	m=$(scrape "$i")
	halted=$(metric perpd_halted <<<"$m")
	# shellcheck disable=SC2086
	led=$("$PERPD" admin ledger $(sed "s/127.0.0.1:$((SOAK_HTTP_BASE + 1000))/127.0.0.1:$((SOAK_HTTP_BASE + 1000 + i - 1))/; s#/node1 #/node$i #" <<<"$admin ") 2>&1 || true)
	cons=$(tr -d ' \n' <<<"$led" | grep -o '"conservation":{[^}]*}' || echo "$led")
	if grep -q '"ok":true' <<<"$h" && [ "$halted" = 0 ] && grep -q '"ok":true' <<<"$cons"; then
		echo "invariants node$i: ok (healthz ok, not halted, conservation $cons)" | tee -a "$OUT_DIR/verdict.txt"
	else
		echo "invariants node$i: FAIL (healthz $h, halted '$halted', conservation $cons)" | tee -a "$OUT_DIR/verdict.txt"
		fail=1
	fi
done

# Errors by code over every segment, and the ops run.
awk -v expected="$EXPECTED_ERRORS" -v seg="$k" -v secs="$load_s" '
	BEGIN { n = split(expected, e, ","); for (i = 1; i <= n; i++) ok[e[i]] = 1 }
	/^    "[a-z]+": \{$/ { op = $1; gsub(/[":]/, "", op) }
	/^      "count": / { v = $2; sub(/,/, "", v); count[op] += v }
	/^      "ok": / { v = $2; sub(/,/, "", v); okc[op] += v }
	/^      "errors": \{ *$/ { inerr = 1; next }
	inerr && /^      \}/ { inerr = 0 }
	inerr { c = $1; gsub(/[":]/, "", c); v = $2; sub(/,/, "", v); errs[op " " c] += v }
	END {
		for (o in count) { total += count[o]; tok += okc[o] }
		printf "ops: %d run, %d ok (%.0f ok/s) in %d s, %d segments;", total, tok, tok / secs, secs, seg
		bad = 0; any = 0
		for (x in errs) {
			split(x, p, " ")
			printf " %s %s x%d", p[1], p[2], errs[x]; any = 1
			if (!(p[2] in ok)) bad = 1
		}
		if (!any) printf " no errors"
		printf "\n"
		for (o in count) printf "  %-8s %9d ok of %9d\n", o, okc[o], count[o]
		exit bad
	}' "$OUT_DIR"/bench-*.json | tee -a "$OUT_DIR/verdict.txt" || {
	echo "errors: FAIL: an error code outside EXPECTED_ERRORS=$EXPECTED_ERRORS" | tee -a "$OUT_DIR/verdict.txt"
	fail=1
}

verdict "$OUT_DIR" | tee -a "$OUT_DIR/verdict.txt" || fail=1

# Memory outside the State: the heap in use that was not allocated under
# fsm or the snapshot shadow's replay (the State, the shadow's copy, their
# encodings and the log entries being replayed, whose sizes the State's
# bounds and the log govern), from the heap profiles at the middle and the
# end (the least of three, 5 s apart, at each). It must not grow:
# connections, caches, buffers, logs.
if command -v go >/dev/null; then
	for i in 1 2 3; do
		outside() {
			go tool pprof -top -nodecount=1000000 -nodefraction=0 -sample_index=inuse_space -ignore='perpd/perpd/fsm|perpd/perpd/node\.(replayLog|\(\*shadow\))' "$1" 2>/dev/null |
				awk '/^Showing nodes accounting for/ { v = $5; sub(/,$/, "", v); u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v)
					m = (u == "GB" ? 1024 : (u == "MB" ? 1 : (u == "kB" ? 1 / 1024 : 1 / 1048576))); printf "%.1f", v * m; exit }'
		}
		# least3 NAME: the least of node i's three profiles at NAME.
		least3() {
			local f x v=""
			for f in "$OUT_DIR/heap-node$i-$1.pb.gz" "$OUT_DIR/heap-node$i-$1-2.pb.gz" "$OUT_DIR/heap-node$i-$1-3.pb.gz"; do
				[ -s "$f" ] || continue
				x=$(outside "$f")
				[ -n "$x" ] || continue
				if [ -z "$v" ] || awk -v a="$x" -v b="$v" 'BEGIN { exit !(a < b) }'; then v=$x; fi
			done
			echo "$v"
		}
		mid=$(least3 mid) end=$(least3 end)
		if [ -z "$mid" ] || [ -z "$end" ]; then
			echo "heap outside the State node$i: not measured (a profile is missing)" | tee -a "$OUT_DIR/verdict.txt"
		elif awk -v m="$mid" -v e="$end" 'BEGIN { exit !(e <= m * 1.15 + 64) }'; then
			echo "heap outside the State node$i: ok (${mid} MB at the middle, ${end} MB at the end; bound x1.15 + 64 MB)" | tee -a "$OUT_DIR/verdict.txt"
		else
			echo "heap outside the State node$i: GROWS (${mid} MB at the middle, ${end} MB at the end; see heap-node$i-end.top.txt)" | tee -a "$OUT_DIR/verdict.txt"
			fail=1
		fi
	done
else
	echo "heap outside the State: not measured (needs go for pprof)" | tee -a "$OUT_DIR/verdict.txt"
fi

# The State's collections at the middle and the end against their
# documented bounds (fsm/state_sizes_test.go decodes the snapshots).
if adm snapshot --out "$OUT_DIR/end.snap" >/dev/null; then
	snaps=$OUT_DIR/end.snap
	[ -s "$OUT_DIR/mid.snap" ] && snaps=$OUT_DIR/mid.snap,$snaps
	if command -v go >/dev/null && [ -f "$here/fsm/state_sizes_test.go" ]; then
		if (cd "$here" && PERPD_SOAK_SNAPSHOT=$snaps PERPD_SOAK_SIZES_OUT=$OUT_DIR/state-sizes.txt \
			go test -count=1 -run '^TestSoakStateSizes$' ./fsm/ >"$OUT_DIR/state-sizes.log" 2>&1); then
			echo "state: ok, every measured collection within its bound (middle and end):" | tee -a "$OUT_DIR/verdict.txt"
		else
			echo "state: FAIL (see $OUT_DIR/state-sizes.log)" | tee -a "$OUT_DIR/verdict.txt"
			fail=1
		fi
		[ -f "$OUT_DIR/state-sizes.txt" ] && tee -a "$OUT_DIR/verdict.txt" <"$OUT_DIR/state-sizes.txt"
	else
		echo "state: not measured (needs go and this checkout's fsm/state_sizes_test.go)" | tee -a "$OUT_DIR/verdict.txt"
	fi
else
	echo "state: FAIL: admin snapshot at the end failed" | tee -a "$OUT_DIR/verdict.txt"
	fail=1
fi

if [ "$fail" = 0 ]; then
	echo "soak: PASS ($DURATION, $SOAK_TRADERS traders per segment, $k segments); samples in $OUT_DIR/samples.csv" | tee -a "$OUT_DIR/verdict.txt"
else
	echo "soak: FAIL; see $OUT_DIR/verdict.txt and $OUT_DIR/samples.csv" | tee -a "$OUT_DIR/verdict.txt"
fi
exit "$fail"
}

main "$@"
