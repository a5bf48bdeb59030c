package latchkeyotel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestDedupSpans delivers one message twice through a Redis-backed
// deduplicator: a processed and a duplicate span under the consumer's span,
// and no message id or body in any attribute.
func TestDedupSpans(t *testing.T) {
	r := newRecorded(t)
	c := redis.NewClient(&redis.Options{Addr: testsvc.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(testsvc.KeyPrefix(t))), dedup.WithObserver(r.tel.DedupObserver("orders")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "consume")
	msg := dedup.Message{ID: "msg-id-4410", Body: []byte("body-secret")}
	for range 2 {
		if _, err := d.Process(ctx, msg, func(context.Context, dedup.Message) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	spans := r.ended("latchkey.dedup.process")
	var outs []string
	for _, s := range spans {
		v, _ := attr(s, "latchkey.dedup.outcome")
		outs = append(outs, v.AsString())
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Error("dedup span is not a child of the consumer's span")
		}
	}
	if fmt.Sprint(outs) != "[processed duplicate]" {
		t.Errorf("outcomes %v", outs)
	}
	r.noSecrets(t, msg.ID, "body-secret")
}
