package demo

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLostTransfers(t *testing.T) {
	for _, tc := range []struct {
		delta int64
		lost  int
	}{{300, 0}, {100, 1}, {200, 1}, {0, 2}, {150, 2}} {
		if got := lostTransfers(tc.delta, []int64{100, 200}); got != tc.lost {
			t.Errorf("lostTransfers(%d) = %d, want %d", tc.delta, got, tc.lost)
		}
	}
}

func TestWrap(t *testing.T) {
	var b bytes.Buffer
	long := strings.Repeat("word ", 40)
	wrap(&b, "   why: ", "        ", long)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("not wrapped: %q", b.String())
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) > textWidth {
			t.Errorf("line %d has %d runes", i, utf8.RuneCountInString(l))
		}
		if i > 0 && !strings.HasPrefix(l, "        word") {
			t.Errorf("continuation %q", l)
		}
	}
	if got := strings.Join(strings.Fields(b.String()), " "); got != "why: "+strings.TrimSpace(long) {
		t.Errorf("words changed: %q", got)
	}
}

func TestParseDataURL(t *testing.T) {
	for _, tc := range []struct {
		in, data string
		redis    bool
		err      string
	}{
		{in: "/tmp/x.db", data: "sqlite:///tmp/x.db"},
		{in: "sqlite:///tmp/y.db", data: "sqlite:///tmp/y.db"},
		{in: "postgres://u@h/db", data: "postgres://u@h/db"},
		{in: "redis://127.0.0.1:6379/0", redis: true},
		{in: "mysql://u:pw@h/db", data: "mysql://u:pw@h/db"},
		{in: "mssql://h/db", err: "unsupported scheme"},
	} {
		data, redis, err := parseDataURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || data != tc.data || redis != tc.redis {
			t.Errorf("%s: %q %v %v", tc.in, data, redis, err)
		}
	}
	if got := shortSessions("zk://h:2181/app"); got != "zk://h:2181/app?session=3s" {
		t.Errorf("shortSessions: %q", got)
	}
	if got := shortSessions("zk://h:2181?session=9s"); got != "zk://h:2181?session=9s" {
		t.Errorf("shortSessions kept no session: %q", got)
	}
}

// Every scenario is registered once, in its order, and each of its roles is
// found by the name a worker is started with.
func TestRegistry(t *testing.T) {
	if len(registry) != 6 {
		t.Fatalf("%d scenarios registered, want 6", len(registry))
	}
	for i, s := range registry {
		if i > 0 && registry[i-1].order >= s.order {
			t.Errorf("%s after %s: out of order", s.name, registry[i-1].name)
		}
		if s.title == "" || s.menu == "" || s.menuGuard == "" || s.guard == "" || s.why == "" || s.unit == "" ||
			len(s.tables) == 0 || s.play == nil {
			t.Errorf("%s: incomplete: %+v", s.name, s)
		}
		for _, r := range s.roles {
			if got, err := findRole(r.id()); err != nil || got != r {
				t.Errorf("role %s: found %v, %v", r.id(), got, err)
			}
		}
	}
	for _, id := range []string{"", "payment", "payment/", "payment/hold", "nope/pay"} {
		if _, err := findRole(id); err == nil {
			t.Errorf("role %q found", id)
		}
	}
	if _, err := choose([]string{"transfers", "nope"}); err == nil || !strings.Contains(err.Error(), `no scenario "nope"`) {
		t.Errorf("choose: %v", err)
	}
	if got, _ := choose([]string{"forgot-to-unlock", "payment"}); len(got) != 2 || got[0].name != "payment" {
		t.Errorf("choose keeps the demo's order: %v", got)
	}
}

// The help lists every scenario, numbered, with its guard at the right
// margin of an 80-column terminal, and every name --only takes.
func TestUsage(t *testing.T) {
	var b bytes.Buffer
	usage(&b)
	out := b.String()
	for i, s := range registry {
		if !strings.Contains(out, strings.Fields(s.menu)[0]) || !strings.Contains(out, "guard: "+s.menuGuard+"\n") ||
			!strings.Contains(out, "  "+string(rune('1'+i))+". ") {
			t.Errorf("%s missing from the help:\n%s", s.name, out)
		}
	}
	only := out[strings.Index(out, "--only NAMES"):]
	for _, n := range Names() {
		if !strings.Contains(only, n) {
			t.Errorf("--only does not name %s", n)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) > helpWidth {
			t.Errorf("line of %d runes: %q", utf8.RuneCountInString(l), l)
		}
	}
}
