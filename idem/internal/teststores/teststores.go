// Package teststores opens the idempotency stores the middleware tests run
// on, each in a namespace of its own test that is removed when the test
// ends: a key prefix on the shared Redis, tables of their own on a SQL
// database. Its benchmarks' private Redis and their CPU reports are here
// too.
package teststores

import (
	"context"
	"database/sql"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// Redis returns a store on the shared Redis under the test's own key
// prefix, which it returns too; the prefix's keys are deleted at the end.
func Redis(t testing.TB) (*redisstore.Store, *redis.Client, string) {
	t.Helper()
	c, prefix := testsvc.RedisClient(t)
	return redisstore.New(c, redisstore.WithPrefix(prefix)), c, prefix
}

// SQL returns a store on the database dsn opens with driver, in tables of
// its own (named after prefix and a random part, which it returns too),
// migrated; the tables are dropped at the end.
func SQL(t testing.TB, driver, dsn, prefix string) (*sqlstore.Store, string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	table := prefix + "_" + idem.NewToken()[:12]
	s, err := sqlstore.New(db, sqlstore.WithTable(table), sqlstore.WithTokenTable(table+"_tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_tok")
		_ = db.Close()
	})
	return s, table
}
