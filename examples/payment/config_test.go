package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// An in-progress deadline the idempotency guard cannot keep fails the
// service's start, instead of answering every payment 500.
func TestBadInProgressFailsStart(t *testing.T) {
	t.Parallel()
	schema := "pay_" + randHex(6)
	admin := openDB(t, testsvc.PostgresURL(t))
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		testsvc.Unavailable(t, "postgres: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })
	u, err := url.Parse(testsvc.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	rdb := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })

	s, err := newService(ctx, Config{Name: "a", Prefix: testsvc.KeyPrefix(t), InProgress: 400 * 24 * time.Hour}, openDB(t, u.String()), rdb)
	if err == nil {
		s.Close()
		t.Fatal("the service started with a 400-day in-progress deadline")
	}
	if !strings.Contains(err.Error(), "WithInProgress(9600h0m0s)") {
		t.Fatalf("start failed with %q, want the deadline named", err)
	}
}
