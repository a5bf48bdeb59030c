package semaphore

import (
	"errors"
	"testing"

	"github.com/latchkey-go/latchkey/lock"
)

func TestKeyRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{"payments", 4, 1},
		{"a/b/c", 16, 16},
		{"\x00 odd }{ name", 1, 1},
	} {
		got, err := parseKey(key(r))
		if err != nil || got != r {
			t.Errorf("parseKey(key(%+v)) = (%+v, %v)", r, got, err)
		}
	}
	if k := key(Request{"payments", 4, 1}); k != "4/1/payments" {
		t.Errorf("key = %q, want \"4/1/payments\": observers see this key", k)
	}
}

func TestParseKeyRefusesWhatKeyCannotMake(t *testing.T) {
	for _, k := range []string{"", "4", "4/1", "4/1/", "x/1/n", "4/x/n", "04/1/n", "4/01/n", "+4/1/n",
		"0/0/n", "2/3/n", "2/0/n", "100001/1/n"} {
		if r, err := parseKey(k); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("parseKey(%q) = (%+v, %v), want ErrInvalid", k, r, err)
		}
	}
}
