# latchkey — developer and CI entry points.
#   make test       services + gofmt check + go vet + race tests (what .ci/run runs)
#   make services   bring up Redis and PostgreSQL on loopback (reusing running ones)
#   make demo       run the CLI's demo
#   make bench      run the benchmarks module
#   make fmt-check  fail if any file needs gofmt

GO ?= go

.PHONY: test services demo bench fmt-check

test: fmt-check services
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

services:
	bash scripts/services.sh

demo:
	$(GO) run ./cmd/latchkey demo

bench:
	cd bench && $(GO) run .

fmt-check:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi
