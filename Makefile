# latchkey — developer and CI entry points.
#   make test       services + gofmt check + go vet + lint + race tests (what .ci/run runs);
#                   keeps artifacts/demo.png, the demo's pictures as Chromium drew them
#   make lint       golangci-lint with .golangci.yml (scripts/lint.sh installs it)
#   make services   install the race detector's C toolchain and the servers the tests
#                   use, and bring up Redis, PostgreSQL, MariaDB, NATS and RabbitMQ on
#                   loopback (reusing running ones): scripts/services.sh
#   make demo       run the CLI's demo
#   make bench      run the benchmarks module
#   make fmt-check  fail if any file needs gofmt

GO ?= go

.PHONY: test services demo bench fmt-check lint

# -race needs cgo; Go turns it off when it finds no C compiler, and a
# CGO_ENABLED=0 from the environment or "go env -w" would do the same.
test: fmt-check services lint
	$(GO) vet ./...
	LATCHKEY_ARTIFACTS="$(CURDIR)/artifacts" CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m ./...

services:
	GO="$(GO)" bash scripts/services.sh

lint:
	GO="$(GO)" bash scripts/lint.sh

demo:
	$(GO) run ./cmd/latchkey demo

bench:
	cd bench && $(GO) run .

fmt-check:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi
