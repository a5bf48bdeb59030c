package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// A lock holder writes through the guard with its lease; a paused former
// holder's late write is refused by the database.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlfence")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db"))
	defer db.Close()
	db.Exec(`CREATE TABLE inventory (sku TEXT PRIMARY KEY, qty INTEGER, fence_token BIGINT NOT NULL DEFAULT 0)`)

	inventory, err := sqlfence.New(db, "inventory", sqlfence.WithKeyColumn("sku"))
	if err != nil {
		fmt.Println(err)
		return
	}
	locker := memlock.New() // or sqllock, redislock, ...

	old, _ := locker.Acquire(ctx, "sku-42")
	inventory.Upsert(ctx, old, "sku-42", sqlfence.Values{"qty": 1})
	locker.Revoke("sku-42") // old's lease is lost while its holder is paused

	err = lock.Do(ctx, locker, "sku-42", func(ctx context.Context, lease *lock.Lease) error {
		return inventory.Update(ctx, lease, "sku-42", sqlfence.Values{"qty": 0}) // sold
	})
	fmt.Println("new holder:", err)

	err = inventory.Update(ctx, old, "sku-42", sqlfence.Values{"qty": 1}) // the old holder wakes up
	fmt.Println("old holder refused:", errors.Is(err, fence.ErrStale))

	var qty int
	db.QueryRow(`SELECT qty FROM inventory WHERE sku = 'sku-42'`).Scan(&qty)
	fmt.Println("qty:", qty)
	// Output:
	// new holder: <nil>
	// old holder refused: true
	// qty: 0
}
