package idemhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem/memstore"
)

// TestRecordedTimeRoundTrip checks that a record keeps its recording time
// to the millisecond, and that a record of version 1, which has none, still
// replays (a store written by an earlier release).
func TestRecordedTimeRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	s := &stored{status: 201, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{"ok":1}`), recorded: at}
	got, err := decode(s.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !got.recorded.Equal(at) || got.status != 201 || string(got.body) != `{"ok":1}` || got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("decoded %+v", got)
	}
	// Version 1: version, flags, status, header count, body.
	v1 := append([]byte{1, 0, 0xc9, 0x01, 0}, `{"old":1}`...)
	old, err := decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if old.status != 201 || string(old.body) != `{"old":1}` || !old.recorded.IsZero() {
		t.Fatalf("version 1 decoded %+v", old)
	}
	if _, err := decode(append([]byte{3}, v1[1:]...)); err == nil {
		t.Fatal("a version from the future decoded")
	}
}

// TestReplayAge checks the age a replay reports: the time since the record
// was made, 0 for a record without a time, and never below 0 for a record
// whose host's clock is ahead.
func TestReplayAge(t *testing.T) {
	h := Middleware(memstore.New())(http.NotFoundHandler()).(*handler)
	replayOf := func(recorded time.Time) time.Duration {
		s := &stored{status: 200, header: http.Header{}, body: []byte("x"), recorded: recorded}
		b := s.encode()
		if recorded.IsZero() {
			b = append([]byte{1, 0, 0xc8, 0x01, 0}, 'x') // version 1
		}
		w := httptest.NewRecorder()
		status, age, err := h.replay(w, httptest.NewRequest(http.MethodPost, "/", nil), b)
		if err != nil || status != 200 || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %v", status, err)
		}
		return age
	}
	if age := replayOf(time.Now().Add(-time.Hour)); age < time.Hour || age > 2*time.Hour {
		t.Errorf("age of a record made an hour ago: %v", age)
	}
	if age := replayOf(time.Time{}); age != 0 {
		t.Errorf("age of a record without a time: %v", age)
	}
	if age := replayOf(time.Now().Add(time.Hour)); age != 0 {
		t.Errorf("age of a record from a clock an hour ahead: %v", age)
	}
}
