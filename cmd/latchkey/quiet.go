package main

import (
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

// quietClients stops the client libraries' own log lines (go-redis's
// "redis: … pool.go:…: failed to dial after 5 attempts", go-sql-driver's
// "[mysql] … closing bad idle connection"): each failure they log also comes
// back as an error, which the command reports in its own words, once.
func quietClients() {
	redis.SetLogger(&logging.VoidLogger{})
	_ = mysql.SetLogger(&mysql.NopLogger{})
}
