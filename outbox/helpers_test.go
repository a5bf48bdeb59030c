package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/outbox"
)

// dialects are the databases every plain test runs on.
var dialects = []string{"postgres", "mysql", "sqlite"}

// openDB opens a database of the dialect for t, with a table name of t's
// own; the tables are dropped at cleanup.
func openDB(t *testing.T, dialect string) (*sql.DB, string) {
	t.Helper()
	var db *sql.DB
	switch dialect {
	case "postgres":
		db = testsvc.OpenDB(t, "pgx", testsvc.PostgresURL(t))
	case "mysql":
		db = testsvc.OpenDB(t, "mysql", testsvc.MySQL(t, "interpolateParams", "true"))
	case "sqlite":
		db = testsvc.OpenDB(t, "sqlite", backendurl.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	}
	table := tableName(t)
	t.Cleanup(func() { dropTables(db, table) })
	return db, table
}

var unsafe = regexp.MustCompile(`[^a-z0-9_]`)

// tableName is a table name unique to t and this run.
func tableName(t *testing.T) string {
	p := strings.ToLower(unsafe.ReplaceAllString(strings.ToLower(testsvc.KeyPrefix(t)), "_"))
	if len(p) > 40 {
		p = p[len(p)-40:]
	}
	return "ob_" + strings.Trim(p, "_")
}

func dropTables(db *sql.DB, table string) {
	for _, s := range []string{"", "_keys", "_relay"} {
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+s)
	}
}

// newOutbox makes and migrates the outbox on db.
func newOutbox(t *testing.T, db *sql.DB, table string) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(db, outbox.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return o
}

// recorder is a Publisher that remembers every message it was given, in
// order, and fails when fail says so.
type recorder struct {
	mu   sync.Mutex
	msgs []outbox.Message // guarded by mu
	fail func(m outbox.Message) bool
}

func (r *recorder) Publish(_ context.Context, m outbox.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil && r.fail(m) {
		return fmt.Errorf("broker refused %s", m.ID)
	}
	r.msgs = append(r.msgs, m)
	return nil
}

func (r *recorder) published() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Message(nil), r.msgs...)
}

// inTx runs write in a transaction it then commits, or rolls back if
// commit is false, and runs it again after a deadlock or serialization
// failure (outbox.ErrRetry). id names the change when it never gets
// through.
func inTx(ctx context.Context, db *sql.DB, id string, commit bool, write func(*sql.Tx) error) error {
	for range 20 {
		err := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := write(tx); err != nil {
				return err
			}
			if !commit {
				return tx.Rollback()
			}
			return tx.Commit()
		}()
		if !errors.Is(err, outbox.ErrRetry) {
			return err
		}
	}
	return fmt.Errorf("%s: still retrying", id)
}
