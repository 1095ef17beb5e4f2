# perpd — see README.md. Every target works on a fresh machine with Go.
GO        ?= go
BIN       := bin/perpd
PKGS      := ./...
TIME      ?= 5m
NEMESIS   ?= all
NODES     ?= 5

.PHONY: build run test test-short devnet lint fmt jepsen bench fuzz-api bench-load bench-compare bench-ws soak clean testnet testnet-short upgrade-rehearsal race

build:
	$(GO) build -o $(BIN) .

# One node in ./data, bootstrapped on first start, resumed after.
run: build
	./$(BIN) serve --bootstrap --data ./data

# The whole suite (unit, property, cluster, short jepsen), under ~10 minutes.
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 15m $(PKGS)
	$(MAKE) jepsen-short
	$(MAKE) testnet-short

devnet: build
	./$(BIN) devnet --nodes 3 --dir ./devnet

# Go's race detector over the packages it finishes in reasonable time:
# every package but jepsen/harness (real perpd processes; make
# jepsen-short) and fsm itself, whose suite under -race did not finish in
# 30 minutes even with -short (its simulations apply millions of entries
# on one goroutine). Of fsm only the parallel snapshot decoding runs
# (TestSnapshotFastRestoreMatchesReferenceOnRandomStates and three small
# restore tests); its concurrent readers are exercised from node, httpapi,
# wsapi and cli, where load tests were written for the detector
# (TestEveryReadRouteWhileEntriesApply, TestHubUnderConnectionChurn...).
# About 16 minutes on the shared 2-core VM of 2026-11-28 with a load
# average of 3-6 from other work (httpapi 381 s, cli 209 s, fsm/... 96 s,
# node 95 s, cluster 49 s, wsapi 28 s, the other 22 packages 93 s, the fsm
# subset about 30 s), about 11 at a load of 2 (httpapi 185 s, cli 120 s,
# node 91 s, wsapi 12 s, cluster 12 s test time). Too slow for make test;
# run it when changing code that runs on more than one goroutine.
RACE_PKGS = $(shell $(GO) list ./... | grep -v -e '/jepsen/harness$$' -e '/perpd/fsm$$')
race:
	$(GO) test -race -count=1 -p 1 -timeout 30m $(RACE_PKGS)
	$(GO) test -race -count=1 -timeout 10m ./fsm \
		-run 'SnapshotFastRestoreMatchesReferenceOnRandomStates|SnapshotRoundTripKeepsStateHash|RestoreLetsTheOldStateGo|SnapshotOfEmptyMachineRestores|BuildPoRIsTheSameOnAnyNumberOfCores'

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./fsm/... ./node/...

# The hostile-input fuzz of every HTTP route (httpapi/route_fuzz_test.go),
# past the seeds the normal suite runs. One worker: each runs its own node.
FUZZTIME ?= 5m
fuzz-api:
	$(GO) test -run '^$$' -fuzz '^FuzzEveryRoute$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s -parallel 1 ./httpapi/

# A load run: a fresh 3-node devnet of the bench profile in the background
# (ports BENCH_HTTP_BASE.. so a `make devnet` on 8080 is left alone),
# `perpd bench` against all three, then the devnet stops, also when the
# run fails or is interrupted. The result is in BENCH_DIR/result.json.
BENCH_DIR       ?= ./devnet-bench
BENCH_HTTP_BASE ?= 18080
BENCH_TRADERS   ?= 32
BENCH_DURATION  ?= 30s
BENCH_MIX       ?= market=40,limit=30,cancel=15,read=15

bench-load: build
	rm -rf $(BENCH_DIR) && mkdir -p $(BENCH_DIR)
	@./$(BIN) devnet --nodes 3 --deployment bench --dir $(BENCH_DIR) --http-base $(BENCH_HTTP_BASE) \
		> $(BENCH_DIR)/devnet.out 2>&1 & devnet=$$!; \
	trap 'kill $$devnet 2>/dev/null; wait $$devnet 2>/dev/null' EXIT INT TERM; \
	./$(BIN) bench --nodes 127.0.0.1:$(BENCH_HTTP_BASE),127.0.0.1:$$(($(BENCH_HTTP_BASE)+1)),127.0.0.1:$$(($(BENCH_HTTP_BASE)+2)) \
		--traders $(BENCH_TRADERS) --duration $(BENCH_DURATION) --mix $(BENCH_MIX) --ready-timeout 60s \
		--out $(BENCH_DIR)/result.json \
	|| { status=$$?; echo "bench failed; devnet output:"; tail -20 $(BENCH_DIR)/devnet.out; exit $$status; }

# perpd against etcd (Debian etcd-server, installed when missing and run
# as root), 3 nodes each on loopback, one after the other, with the same
# load tool (`perpd bench http`) and concurrency, in ROUNDS rounds (default
# 3) that alternate which goes first: both rates, both p99s and their ratio
# per round and for the median round, all of it in bench-compare.json.
# CONCURRENCY, DURATION, WARMUP, TARGET (leader or all) and ROUNDS are read
# from the environment (bench/compare-etcd.sh). Never part of `make test`.
bench-compare: build
	PERPD=./$(BIN) ./bench/compare-etcd.sh

# 1,000 WebSocket clients on a 3-node bench devnet, subscribed to prices,
# stats and (a quarter of them) traders' accounts while the traders place
# orders: fan-out frames/s and how late they arrive, against a 3-client
# baseline; result in bench-ws.json (bench/ws-fanout.sh for the knobs).
bench-ws: build
	PERPD=./$(BIN) ./bench/ws-fanout.sh

# An operator's soak test (bench/soak.sh): a fresh 3-node bench devnet
# under `perpd bench` for DURATION (default 20m) in 2-minute segments of
# SOAK_TRADERS (12) new traders each, every node's RSS, live heap,
# goroutines, fds, raft.db, snapshot dir and State sampled every 30 s into
# soak-out/samples.csv; then the replicas' hashes, the invariants, growth
# over the second half against the State's documented bounds, and the
# refusals by code. Verdict in soak-out/verdict.txt, exit 1 on a failure.
# Ports 26080.. (SOAK_HTTP_BASE). Never part of `make test`.
soak: build
	PERPD=./$(BIN) ./bench/soak.sh

clean:
	rm -rf bin data devnet devnet-bench bench-result.json bench-compare.json bench-ws.json testnet-result.json soak-out

# Jepsen-style fault injection against a real cluster (jepsen/README.md).
# Needs root and iptables for partitions. TIME, NEMESIS and NODES change it.
jepsen:
	$(GO) run ./jepsen/cmd/jepsen -time $(TIME) -nemesis $(NEMESIS) -nodes $(NODES)

# The short run `make test` includes: about 90 s, every nemesis, 3 nodes;
# then the planted-bug self-test (about 90 s: its clusters run at once on
# their own addresses, jepsen/harness/bug_test.go). Both use the perpd of
# `make build`; the self-test builds only the jepsen_bug one.
.PHONY: jepsen-short
jepsen-short: build
	$(GO) run ./jepsen/cmd/jepsen -bin $(BIN) -time 60s -nemesis all -nodes 3
	JEPSEN_PERPD_BIN=$(abspath $(BIN)) $(GO) test -tags jepsen_bug -count=1 -parallel 8 -timeout 15m ./jepsen/harness

# docs/deploy.md rehearsed on this machine (root, Linux): three network
# namespaces on a bridge (192.0.2.0/24), perpd serve from deploy/env with
# mutual TLS, 25 ms +- 5 ms each way between hosts (tc netem, or a delaying
# relay where the kernel lacks netem); checks formation, writes through
# every node, a leader kill and a healed partition, and reports write
# latency p50/p99 in testnet-result.json. WRITES, DELAY and JITTER change it.
WRITES ?= 300
DELAY  ?= 25ms
JITTER ?= 5ms
testnet: build
	$(GO) run ./deploy/testnet -perpd $(BIN) -writes $(WRITES) -delay $(DELAY) -jitter $(JITTER) -out testnet-result.json

# The short form `make test` runs (about 20 s).
testnet-short: build
	$(GO) run ./deploy/testnet -perpd $(BIN) -writes 30 -delay $(DELAY) -jitter $(JITTER) -out testnet-result.json

# A rolling upgrade from the build at UPGRADE_FROM (a commit or tag: the
# previous release) to this tree, on loopback (deploy/upgrade-rehearsal.sh).
UPGRADE_FROM ?= 4281d61
upgrade-rehearsal: build
	rm -rf /tmp/perpd-upgrade-src && mkdir -p /tmp/perpd-upgrade-src
	git archive $(UPGRADE_FROM) | tar -x -C /tmp/perpd-upgrade-src
	cd /tmp/perpd-upgrade-src && $(GO) build -o /tmp/perpd-upgrade-old .
	./deploy/upgrade-rehearsal.sh /tmp/perpd-upgrade-old $(BIN)
