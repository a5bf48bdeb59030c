package layered_test

import (
	"context"
	"database/sql"
	"log"
	"net/http"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
)

// Redis answers most duplicates; PostgreSQL's unique index decides, so a
// Redis flush or failover cannot let a second charge through.
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	db, err := sql.Open("pgx", "postgres://app@127.0.0.1:5432/payments")
	if err != nil {
		log.Fatal(err)
	}
	ledger, err := sqlstore.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := ledger.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	store := layered.New(redisstore.New(rdb), ledger)

	mux := http.NewServeMux()
	mux.Handle("POST /pay", idemhttp.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	log.Fatal(http.ListenAndServe(":8080", mux))
}
