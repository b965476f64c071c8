# Rookery's entry points. `make test` is the test command the README and CI use.
.PHONY: test build bench bench-dynamo check faults soak

test:
	@scripts/test.sh

# The fault test of the scaled-out deployment (make test runs a short one): SEEDS new seeds, or
# SEED=n to rerun one seed's schedule.
SEEDS ?= 5
faults:
	go test -count=1 -timeout 0 -v -run TestFaults ./faults -faults.seeds=$(SEEDS) $(if $(SEED),-faults.seed=$(SEED))

# A soak: new seeds of the fault test until SOAK has passed.
SOAK ?= 30m
soak:
	go test -count=1 -timeout 0 -v -run TestFaults ./faults -faults.soak=$(SOAK)

build:
	go build -o bin/rookery ./cmd/rookery

# Table benchmarks on the embedded backend (see docs/performance.md for how to read them).
bench:
	go test -run '^$$' -bench . -benchtime 2s -count 5 ./table/pebble/

# The same benchmarks against DynamoDB Local, for reference.
bench-dynamo:
	go test -run '^$$' -bench . -benchtime 200x -count 3 ./table/dynamo/

# What CI checks besides the tests.
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
