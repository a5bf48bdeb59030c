package sqlinbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
)

// The payment and the message id commit in one transaction: a redelivered
// copy finds the id and writes nothing.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlinbox-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE payments (msg TEXT, amount INTEGER)`); err != nil {
		panic(err)
	}
	inbox, err := sqlinbox.New(db)
	if err != nil {
		panic(err)
	}
	if err := inbox.Migrate(ctx); err != nil {
		panic(err)
	}
	handle := inbox.Wrap(func(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO payments VALUES ($1, 100)`, m.ID)
		return err
	})
	for range 2 {
		fmt.Println(handle(ctx, dedup.Message{ID: "payment-7f3a"}))
	}
	var total int
	_ = db.QueryRow(`SELECT SUM(amount) FROM payments`).Scan(&total)
	fmt.Println("total", total)
	// Output:
	// <nil>
	// <nil>
	// total 100
}
