package prometheus

import _ "embed"

// OutboxRules is the text of outbox.rules.yml, the transactional outbox's
// alerts, kept apart from Rules.
//
//go:embed outbox.rules.yml
var OutboxRules string
