package main

import (
	"context"
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
	pgURL := schemaURL(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })

	s, err := newService(ctx, Config{Name: "a", Prefix: testsvc.KeyPrefix(t), InProgress: 400 * 24 * time.Hour}, openDB(t, pgURL), rdb)
	if err == nil {
		s.Close()
		t.Fatal("the service started with a 400-day in-progress deadline")
	}
	if !strings.Contains(err.Error(), "WithInProgress(9600h0m0s)") {
		t.Fatalf("start failed with %q, want the deadline named", err)
	}
}
