# Rookery's entry points. `make test` is the test command the README and CI use.
.PHONY: test build bench bench-dynamo check

test:
	@scripts/test.sh

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
