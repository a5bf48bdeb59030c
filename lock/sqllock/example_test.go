package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// Several processes on one machine share a lock through one SQLite file.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "latchkey-example")
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one writer per process; see the package doc

	locker, err := sqllock.New(ctx, db, sqllock.SQLite) // creates the table
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	err = lock.Do(ctx, locker, "order:1001:capture", func(ctx context.Context, lease *lock.Lease) error {
		fmt.Println("capturing payment with fencing token", lease.Token() > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// capturing payment with fencing token true
	// done: <nil>
}
