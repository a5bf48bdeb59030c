package dedup_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// A payment message delivered three times (a republish and a redelivery)
// charges once; the first attempt fails and is processed again, not lost.
func ExampleDeduper_Wrap() {
	ctx := context.Background()
	store := dedup.FromIdem(memstore.New()) // redisstore.New(client) across processes
	d, err := dedup.New(store)
	if err != nil {
		panic(err)
	}
	attempts, charged := 0, 0
	handle := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		attempts++
		if attempts == 1 {
			return errors.New("card network timeout")
		}
		charged += 100
		return nil
	})
	m := dedup.Message{ID: "payment-7f3a", Body: []byte(`{"amount":100}`)}
	for range 3 {
		err := handle(ctx, m)
		fmt.Printf("ack=%v err=%v\n", dedup.ShouldAck(err), err)
	}
	fmt.Println("charged", charged)
	// Output:
	// ack=false err=card network timeout
	// ack=true err=<nil>
	// ack=true err=<nil>
	// charged 100
}
