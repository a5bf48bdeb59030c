package latchkeyotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/refusaltest"
	"github.com/latchkey-go/latchkey/state"
)

// TestRefusalEvents writes with a stale token and moves an order illegally:
// each refusal is an event on the caller's span and a count, with no key.
func TestRefusalEvents(t *testing.T) {
	r := newRecorded(t)
	r.tel.ObserveRefusals()
	t.Cleanup(func() { fence.SetObserver(nil); state.SetObserver(nil) })
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "settle")
	refusaltest.Provoke(ctx, t, "acct-55", "ord-88")
	parent.End()
	events := map[string]int{}
	for _, s := range r.spans.Ended() {
		if s.Name() == "settle" {
			for _, e := range s.Events() {
				events[e.Name]++
			}
		}
	}
	if events["latchkey.fence.refused"] != 1 || events["latchkey.state.refused"] != 1 {
		t.Errorf("events on the caller's span: %v", events)
	}
	if n := r.sum(t, "latchkey.fence.refused", attribute.String("latchkey.fence.guard", "sql"), attribute.String("latchkey.fence.op", "update")); n != 1 {
		t.Errorf("fence.refused = %d", n)
	}
	if n := r.sum(t, "latchkey.state.refused", attribute.String("latchkey.state.table", "orders"), attribute.String("latchkey.state.reason", "illegal")); n != 1 {
		t.Errorf("state.refused = %d", n)
	}
	r.noSecrets(t, "acct-55", "ord-88")
}
