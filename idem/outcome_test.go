package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// recordingStore keeps what Record was given.
type recordingStore struct{ recorded []byte }

func (s *recordingStore) Claim(context.Context, string, string, time.Duration) (Claim, error) {
	return Claim{State: Claimed, Token: NewToken()}, nil
}

func (s *recordingStore) Record(_ context.Context, _, _ string, result []byte, _ time.Duration) error {
	s.recorded = append([]byte(nil), result...)
	return nil
}

func (s *recordingStore) Release(context.Context, string, string) error { return nil }

// TestRecordedOutcomeEncoding checks that Do records a result exactly as
// json.Marshal(outcome{Value: ...}) would, which is what replays decode,
// and that the result replays equal.
func TestRecordedOutcomeEncoding(t *testing.T) {
	type payment struct {
		ID    string   `json:"id"`
		Cents int64    `json:"cents"`
		Tags  []string `json:"tags"`
	}
	for _, v := range []*payment{
		{ID: "ch_1", Cents: 4200, Tags: []string{"a<b>&c", "é"}},
		nil,
		{},
	} {
		s := &recordingStore{}
		got, err := Do(context.Background(), s, "k", func(context.Context) (*payment, error) { return v, nil })
		if err != nil || got != v {
			t.Fatalf("Do = %v, %v", got, err)
		}
		raw, _ := json.Marshal(v)
		want, _ := json.Marshal(outcome{Value: raw})
		if !bytes.Equal(s.recorded, want) {
			t.Fatalf("recorded %s, want %s", s.recorded, want)
		}
		back, err := decodeOutcome[*payment](s.recorded)
		if err != nil {
			t.Fatal(err)
		}
		if b1, b2 := mustJSON(t, back), mustJSON(t, v); !bytes.Equal(b1, b2) {
			t.Fatalf("replayed %s, want %s", b1, b2)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeOutcomeForms checks that every form a record can take decodes as
// the two-pass decoding (outcome, then its value) does: the one-pass
// shortcut for {"v":<value>} must not change what a replay returns.
func TestDecodeOutcomeForms(t *testing.T) {
	type payment struct {
		Charge string `json:"charge"`
		Amount int    `json:"amount"`
	}
	longWay := func(b []byte) (payment, string) {
		var o outcome
		if err := json.Unmarshal(b, &o); err != nil {
			return payment{}, "bad outcome"
		}
		if o.Err != nil {
			return payment{}, "kept: " + *o.Err
		}
		var v payment
		if len(o.Value) > 0 {
			if err := json.Unmarshal(o.Value, &v); err != nil {
				return payment{}, "bad value"
			}
		}
		return v, ""
	}
	for _, rec := range []string{
		`{"v":{"charge":"ch_1","amount":100}}`,
		`{"v": {"charge":"ch_1"} }`,
		`{"v":null}`,
		`{"e":"card declined"}`,
		`{"v":{"charge":"ch_1"},"e":"card declined"}`,
		`{"e":"card declined","v":{"charge":"ch_1"}}`,
		`{"v":{"charge":"ch_1"}}{"v":1}`,
		`{"v":{"charge":"ch_1"},"x":1}`,
		`{"v":"not a payment"}`,
		`{"v":}`,
		`{}`,
		``,
	} {
		want, wantErr := longWay([]byte(rec))
		got, err := decodeOutcome[payment]([]byte(rec))
		var gotErr string
		var kept *replayedError
		switch {
		case errors.As(err, &kept):
			gotErr = "kept: " + kept.msg
		case err != nil && strings.Contains(err.Error(), "decoding recorded result"):
			gotErr = "bad value"
		case err != nil:
			gotErr = "bad outcome"
		}
		if got != want || gotErr != wantErr {
			t.Errorf("decodeOutcome(%s) = %+v, %q; the long way %+v, %q", rec, got, gotErr, want, wantErr)
		}
	}
}
