package teststores

import (
	"path/filepath"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// Named is a backend a test runs on, and how to open a store on it.
type Named struct {
	Name string
	Open func(t *testing.T) idem.Store
}

// Stores returns the named backends, in the order named: "memory", "redis"
// (Redis), "postgres", "mysql" and "sqlite" (SQL tables named after prefix),
// and "layered" (Redis in front of PostgreSQL).
func Stores(prefix string, names ...string) []Named {
	inSQL := func(driver string, dsn func(t *testing.T) string) func(t *testing.T) idem.Store {
		return func(t *testing.T) idem.Store { s, _ := SQL(t, driver, dsn(t), prefix); return s }
	}
	onRedis := func(t *testing.T) idem.Store { s, _, _ := Redis(t); return s }
	onPostgres := inSQL("pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) })
	open := map[string]func(t *testing.T) idem.Store{
		"memory":   func(*testing.T) idem.Store { return memstore.New() },
		"redis":    onRedis,
		"postgres": onPostgres,
		"mysql":    inSQL("mysql", func(t *testing.T) string { return testsvc.MySQL(t, "interpolateParams", "true") }),
		"sqlite": inSQL("sqlite", func(t *testing.T) string {
			return "file:" + filepath.Join(t.TempDir(), "idem.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		}),
		"layered": func(t *testing.T) idem.Store { return layered.New(onRedis(t), onPostgres(t)) },
	}
	stores := make([]Named, len(names))
	for i, n := range names {
		stores[i] = Named{n, open[n]}
	}
	return stores
}
