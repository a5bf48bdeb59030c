// Package prometheus holds latchkey's Prometheus recording and alerting
// rules (latchkey.rules.yml) and their promtool unit tests
// (latchkey.rules.test.yml); its Go tests run `promtool check rules` and
// `promtool test rules` so that `go test ./...` covers them. Rules is the
// rule file's text, for programs and tests that load it.
package prometheus

import _ "embed"

// Rules is the text of latchkey.rules.yml.
//
//go:embed latchkey.rules.yml
var Rules string
