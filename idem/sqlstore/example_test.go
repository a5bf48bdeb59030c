package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
)

// An embedded SQLite ledger: the unique index on the key lets one charge
// through, however often the request arrives.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "sqlstore-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ledger.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	// For PostgreSQL: sql.Open("pgx", "postgres://...") with github.com/jackc/pgx/v5/stdlib.
	store, err := sqlstore.New(db, sqlstore.WithTable("payments_idem"), sqlstore.WithTokenTable("payments_tokens"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := store.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	for range 3 {
		id, err := idem.Do(ctx, store, "order-1001/pay", func(context.Context) (string, error) {
			charges++
			return fmt.Sprintf("ch_%d", charges), nil
		})
		fmt.Println(id, err)
	}
	fmt.Println("dialect:", store.Dialect(), "charges:", charges)
	// Output:
	// ch_1 <nil>
	// ch_1 <nil>
	// ch_1 <nil>
	// dialect: sqlite charges: 1
}
