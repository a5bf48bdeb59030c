package idemhttp_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// realStores are the backends the must-have tests run on; each opens a fresh,
// test-private namespace and removes it at the end.
var realStores = []struct {
	name string
	open func(t *testing.T) idem.Store
}{
	{"memory", func(*testing.T) idem.Store { return memstore.New() }},
	{"redis", func(t *testing.T) idem.Store {
		c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
		prefix := testsvc.KeyPrefix(t)
		t.Cleanup(func() {
			ctx := context.Background()
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			_ = c.Close()
		})
		return redisstore.New(c, redisstore.WithPrefix(prefix))
	}},
	{"postgres", func(t *testing.T) idem.Store { return openSQL(t, "pgx", testsvc.PostgresURL(t)) }},
	{"sqlite", func(t *testing.T) idem.Store {
		return openSQL(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "idem.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	}},
}

func openSQL(t *testing.T, driver, dsn string) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	table := "idemhttp_" + idem.NewToken()[:12]
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
	return s
}
