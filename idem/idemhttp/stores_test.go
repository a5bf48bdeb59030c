package idemhttp_test

import (
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/memstore"
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
	{"redis", func(t *testing.T) idem.Store { s, _, _ := teststores.Redis(t); return s }},
	{"postgres", func(t *testing.T) idem.Store { return openSQL(t, "pgx", testsvc.PostgresURL(t)) }},
	{"sqlite", func(t *testing.T) idem.Store {
		return openSQL(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "idem.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	}},
}

func openSQL(t *testing.T, driver, dsn string) *sqlstore.Store {
	s, _ := teststores.SQL(t, driver, dsn, "idemhttp")
	return s
}
