package sqllock

// TurnName is the named lock of key's turn on MySQL for a Locker on table
// in database schema (turns.go).
func TurnName(schema, table, key string) string {
	return (&turns{prefix: schema + "." + table}).turnName(key)
}
