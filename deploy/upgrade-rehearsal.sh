#!/usr/bin/env bash
# upgrade-rehearsal.sh OLD_PERPD NEW_PERPD
#
# A rolling upgrade rehearsed on loopback (docs/deploy.md, "Upgrades"):
# three nodes of the old build form a cluster and take writes; each node in
# turn (followers first, the leader after handing leadership over) is
# stopped and started on the same data with the new build, and after every
# step the cluster takes a write through the upgraded node and all three
# nodes reach one state hash (old and new builds apply the same entries the
# same way). The feature level cannot be raised while an old build runs;
# once all run the new one it is raised, and the hashes still agree.
#
#   git archive <release> | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/perpd-old .)
#   deploy/upgrade-rehearsal.sh /tmp/perpd-old bin/perpd
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
dir=${DIR:-/tmp/perpd-upgrade}
base=${BASE:-18180}
rm -rf "$dir" && mkdir -p "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
http() { echo "127.0.0.1:$((base + $1))"; }
raft() { echo "127.0.0.1:$((base - 1000 + $1))"; }
adm() { echo "127.0.0.1:$((base + 1000 + $1))"; }
# Raft and admin over mutual TLS, as between hosts: a production cluster
# rolls with TLS (without it, raft's cluster-secret stream of 2026-11-29
# refuses an older build's connections; docs/deploy.md).
"$(dirname "$0")/make-certs.sh" "$dir/tls" node1=127.0.0.1 node2=127.0.0.1 node3=127.0.0.1 -- admin >/dev/null
declare -A pid
start() { # BIN I ARGS...
  local bin=$1 i=$2; shift 2
  "$bin" serve --id "node$i" --data "$dir/node$i" --http "$(http "$i")" --raft "$(raft "$i")" --admin "$(adm "$i")" \
    --tls-cert "$dir/tls/node$i.pem" --tls-key "$dir/tls/node$i-key.pem" --tls-ca "$dir/tls/ca.pem" \
    --deployment bench "$@" >>"$dir/node$i.log" 2>&1 &
  pid[$i]=$!; pids+=("$!")
}
stop() { kill "${pid[$1]}"; wait "${pid[$1]}" 2>/dev/null || true; }
admin() {
  local i=$1; shift
  "$new" admin --addr "$(adm "$i")" --data "$dir/node$i" --timeout 5s \
    --tls-cert "$dir/tls/admin.pem" --tls-key "$dir/tls/admin-key.pem" --tls-ca "$dir/tls/ca.pem" "$@"
}
poll() { # SECONDS CMD...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "timed out: $*" >&2; tail -5 "$dir"/node*.log >&2; exit 1; }
    sleep 0.3
  done
}
members3() { admin "$1" status | grep -c '"suffrage": "Voter"' | grep -qx 3; }
leader_of() { admin 1 status 2>/dev/null | sed -n '/"leader"/,/}/s/.*"id": "\(node[0-9]\)".*/\1/p' | head -1; }
same_hash() { # all three report one appliedIndex and stateHash
  local a b c
  a=$(admin 1 state | tr -d ' \n'); b=$(admin 2 state | tr -d ' \n'); c=$(admin 3 state | tr -d ' \n')
  [ "$a" = "$b" ] && [ "$b" = "$c" ]
}
write() { # through node I; prints the index
  curl -sf -o /dev/null -D - -X POST -H 'idempotency-key: '"$2" -H 'content-type: application/json' -d '{}' \
    "http://$(http "$1")/v1/signup" | tr -d '\r' | sed -n 's/^X-Raft-Index: //Ip'
}
step() { echo "== $*"; }

step "three nodes of the old build"
start "$old" 1 --bootstrap
poll 30 admin 1 status
for i in 2 3; do
  mkdir -p "$dir/node$i" && chmod 700 "$dir/node$i"
  install -m 0600 "$dir/node1/cluster-secret" "$dir/node$i/cluster-secret"
  start "$old" "$i" --join "$(adm 1)"
done
poll 60 members3 1
sleep 2 # the markets are listed
for i in 1 2 3; do write "$i" "old-$i" >/dev/null; done
# A trader on the old build: funded, a filled market order (a position), a
# resting limit order and a dead-man switch, so the new build takes over
# money, positions, the book and timers, not only accounts.
key=$(curl -sf -X POST -H 'idempotency-key: trader' "http://$(http 1)/v1/signup" | sed 's/.*"apiKey":"\([^"]*\)".*/\1/')
trade() { # I IDEM BODY PATH
  curl -sf -o /dev/null -X POST -H "x-api-key: $key" -H "idempotency-key: $2" -H 'content-type: application/json' \
    -d "$3" "http://$(http "$1")$4"
}
poll 20 same_hash # the key is on every node before node 2 and 3 are asked
trade 2 fund '{}' /v1/faucet
poll 20 same_hash
trade 3 mkt '{"marketId":"BTC-PERP","side":"buy","type":"market","contracts":"1000","reduceOnly":false,"leverage":"10"}' /v1/orders
# A buy 10% under BTC-PERP's mid (the first market listed), on its tick.
mid=$(curl -sf "http://$(http 1)/v1/markets" | grep -o '"midQ8":"[0-9]*"' | head -1 | cut -d'"' -f4)
tick=$(curl -sf "http://$(http 1)/v1/markets" | grep -o '"tickSizeQ8":"[0-9]*"' | head -1 | cut -d'"' -f4)
trade 1 lim '{"marketId":"BTC-PERP","side":"buy","type":"limit","contracts":"100","reduceOnly":false,"limitPriceQ8":"'$((mid * 9 / 10 / tick * tick))'"}' /v1/orders
trade 2 dms '{"timeoutMs":"3600000"}' /v1/cancel-all-after
poll 20 same_hash
# Each node's newest snapshot is the old build's, so each upgraded node
# starts from a snapshot it did not write.
for i in 1 2 3; do admin "$i" snapshot --out "$dir/old-node$i.snap" >/dev/null; done
echo "   formed; writes and a trader's orders through every node; snapshots by the old build; one state hash: $(admin 1 state | tr -d ' \n')"

upgrade() {
  local i=$1
  stop "$i"
  start "$new" "$i"
  poll 60 admin "$i" status
  poll 30 write "$i" "new-$i"
  poll 30 same_hash
  echo "   node$i runs the new build; a write through it applied; one state hash: $(admin "$i" state | tr -d ' \n')"
}
leader=$(leader_of)
step "upgrade the followers, then the leader ($leader)"
for i in 1 2 3; do
  [ "node$i" = "$leader" ] && continue
  upgrade "$i"
  if admin "$i" feature-level --raise 1 >/dev/null 2>&1; then
    echo "FAIL: the feature level rose while an old build runs" >&2; exit 1
  fi
  echo "   raising the feature level is refused: $(admin "$i" feature-level 2>&1 | tr -d '\n' | cut -c1-160)"
done
l=${leader#node}
admin "$l" transfer-leadership >/dev/null
poll 30 test "$(leader_of)" != "$leader"
upgrade "$l"

step "raise the feature level"
# From an old build below level 2, the domains the new build adds (USDx,
# referral, leaderboards, Proof of Reserves) stay off until the raise: their
# routes answer 503 feature_unavailable and the old log applies as before.
code() { curl -s -o /dev/null -w '%{http_code}' "http://$(http "$1")$2"; }
from=$(admin 1 feature-level | tr -d ' \n' | sed -n 's/.*"featureLevel":\([0-9]*\).*/\1/p')
if [ "${from:-0}" -lt 2 ]; then
  [ "$(code 1 /v1/usdx)" = 503 ] || { echo "FAIL: /v1/usdx answered $(code 1 /v1/usdx) below the build's level" >&2; exit 1; }
fi
target=$(admin 1 feature-level | tr -d ' \n' | sed -n 's/.*"buildLevel":\([0-9]*\).*/\1/p')
# An old build already at the new build's level (a release with no new
# level since) leaves nothing to raise: the rest still holds.
if [ "${from:-0}" != "$target" ]; then
  admin 1 feature-level --raise "$target" >/dev/null
fi
raised() { admin "$1" feature-level | tr -d ' \n' | grep -q "\"featureLevel\":$target,"; }
for i in 1 2 3; do poll 10 raised "$i"; done
poll 30 same_hash
for i in 1 2 3; do write "$i" "raised-$i" >/dev/null; done
# The trader's position and resting order came through the upgrade.
got=$(curl -sf -H "x-api-key: $key" "http://$(http 3)/v1/positions")
grep -q '"contracts":"1000"' <<<"$got" || { echo "FAIL: the trader's position did not survive the upgrade: $got" >&2; exit 1; }
got=$(curl -sf -H "x-api-key: $key" "http://$(http 2)/v1/orders")
grep -q '"lim"' <<<"$got" || { echo "FAIL: the trader's resting order did not survive the upgrade: $got" >&2; exit 1; }
usdx_on() { [ "$(code "$1" /v1/usdx)" = 200 ]; }
for i in 1 2 3; do poll 10 usdx_on "$i"; done
poll 30 same_hash
echo "   level $from -> $target on every node; the new domains answer; writes go on; one state hash: $(admin 1 state | tr -d ' \n')"
echo "upgrade rehearsal: PASS"
