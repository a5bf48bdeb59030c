package idemurl_test

import (
	"context"
	"fmt"
	"log"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemurl"
)

func ExampleOpen() {
	ctx := context.Background()
	// A program would read the URL from a flag or its configuration, e.g.
	// "sqlite:///var/lib/app/idem.db" or "redis://cache:6379/0?prefix=app:".
	store, err := idemurl.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	charges := 0
	for range 3 {
		id, err := idem.Do(ctx, store, "order-1001", func(context.Context) (string, error) {
			charges++
			return "ch_1", nil
		})
		fmt.Println(id, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// ch_1 <nil>
	// ch_1 <nil>
	// ch_1 <nil>
	// charges: 1
}
