package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/outbox"
)

// A payment and its message commit together; a second payment rolls back
// and its message is never published. The relay, leader of an election,
// publishes what committed, each account's messages in order.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", backendurl.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ob, err := outbox.New(db)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ob.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	pay := func(id, account string, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// ... the payment's own writes, through tx ...
		_, err = ob.Add(ctx, tx, outbox.Message{ID: id, Topic: "payments", Key: account, Payload: []byte(`{"amount":10}`)})
		if err != nil || !commit {
			return err
		}
		return tx.Commit()
	}
	for _, p := range []struct {
		id, account string
		commit      bool
	}{{"pay-1", "acct-a", true}, {"pay-2", "acct-b", false}, {"pay-3", "acct-a", true}} {
		if err := pay(p.id, p.account, p.commit); err != nil {
			fmt.Println(err)
			return
		}
	}

	e, _ := elect.New(memlock.New(), "payments-relay")
	relayCtx, stop := context.WithCancel(ctx)
	published := 0
	broker := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		fmt.Printf("publish %s key %s seq %d\n", m.ID, m.Key, m.Seq)
		if published++; published == 2 {
			stop()
		}
		return nil
	})
	relay, err := outbox.NewRelay(ob, e, broker)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(relay.Run(relayCtx, "relay-1"))
	// Output:
	// publish pay-1 key acct-a seq 1
	// publish pay-3 key acct-a seq 2
	// context canceled
}
