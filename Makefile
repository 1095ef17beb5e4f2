# perpd — see README.md. Every target works on a fresh machine with Go.
GO        ?= go
BIN       := bin/perpd
PKGS      := ./...
TIME      ?= 5m
NEMESIS   ?= all
NODES     ?= 5

.PHONY: build run test test-short devnet lint fmt jepsen bench clean

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

devnet: build
	./$(BIN) devnet --nodes 3 --dir ./devnet

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./fsm/... ./node/...

clean:
	rm -rf bin data devnet

# Jepsen-style fault injection against a real cluster (jepsen/README.md).
# Needs root and iptables for partitions. TIME, NEMESIS and NODES change it.
jepsen:
	$(GO) run ./jepsen/cmd/jepsen -time $(TIME) -nemesis $(NEMESIS) -nodes $(NODES)

# The short run `make test` includes: about 90 s, every nemesis, 3 nodes.
.PHONY: jepsen-short
jepsen-short:
	$(GO) run ./jepsen/cmd/jepsen -time 60s -nemesis all -nodes 3
	$(GO) test -tags jepsen_bug -count=1 -timeout 15m ./jepsen/harness
