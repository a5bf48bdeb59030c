// Package blocks is where the guides' Go blocks are compiled: docs_test.go
// writes each block into a function of this package, beside this file, which
// declares what the blocks use without declaring it themselves: the
// context, the clients, and the application's own functions.
package blocks

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/lock"
)

// The connections and values a service already has.
var (
	ctx       context.Context
	rdb       *redis.Client
	db        *sql.DB
	pool      *pgxpool.Pool
	locker    lock.Locker
	store     *redisstore.Store
	accounts  *sqlfence.Guard
	filter    *bloomfilter.Filter
	mux       *http.ServeMux
	hostname  string
	dir       string
	balanceOf func(*sql.DB) int64
)

// The service's own code, which the blocks call.
var (
	errInsufficient error
	pay             func(http.ResponseWriter, *http.Request)
	payHandler      http.Handler
	checkout        http.Handler
	accountID       func(*http.Request) string
	userID          func(*http.Request) string
	charge          func(ctx context.Context, id string, body []byte) error
	relay           func(ctx context.Context, token uint64) error
	capture         func(ctx context.Context, token uint64) error
	callProvider    func(ctx context.Context) error
	psp             interface {
		Charge(ctx context.Context, cents int64) (Charge, error)
	}
)

// Charge is what the payment provider answers.
type Charge struct {
	ID     string
	Amount int64
}
