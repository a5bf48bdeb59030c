#!/usr/bin/env bash
# Runs golangci-lint, at the version pinned here, with the root's
# .golangci.yml; installs that version into $(go env GOPATH)/bin first if
# it is missing (from the Go module proxy, about two minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
version=v2.15.0
bin="$("$GO" env GOPATH)/bin/golangci-lint"
if ! [ -x "$bin" ] || ! "$bin" version 2>/dev/null | grep -q "version ${version#v} "; then
	echo "lint: installing golangci-lint $version"
	"$GO" install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
exec "$bin" run ./...
