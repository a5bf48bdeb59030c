package natsoutbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/outbox"
	"github.com/latchkey-go/latchkey/outbox/natsoutbox"
)

// TestRepublishDroppedByTheStream: a message published again under its id
// is dropped by the stream's duplicate window; the stored copy carries the
// id, the key and the sequence number.
func TestRepublishDroppedByTheStream(t *testing.T) {
	nc, err := nats.Connect(testsvc.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "outbox_nats_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(ctx, name) }()
	p, err := natsoutbox.New(js)
	if err != nil {
		t.Fatal(err)
	}
	m := outbox.Message{ID: "pay-1", Topic: name, Key: "acct-1", Seq: 7, Payload: []byte("10")}
	for range 2 {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
	raw, err := s.GetLastMsgForSubject(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	h := raw.Header
	if h.Get(jetstream.MsgIDHeader) != "pay-1" || h.Get(outbox.HeaderKey) != "acct-1" || h.Get(outbox.HeaderSeq) != "7" || string(raw.Data) != "10" {
		t.Fatalf("stored %v %q", h, raw.Data)
	}
}
