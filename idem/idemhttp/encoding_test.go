package idemhttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

// The record, the store key and the fingerprint are built in place, without
// the intermediate maps and strings of their plain definitions. Records and
// keys written before must still be found and replayed, so each is checked
// against the plain definition here.

// storableHeaderRef is the plain definition of the header kept for replay.
func storableHeaderRef(h http.Header, extra map[string]bool) http.Header {
	drop := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				drop[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	out := http.Header{}
	for k, vs := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if neverStored[ck] || drop[ck] || extra[ck] || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		out[ck] = append(out[ck], vs...)
	}
	return out
}

func TestRecorderRecordMatchesEncode(t *testing.T) {
	at := time.UnixMilli(1764590400123)
	for _, c := range []struct {
		name   string
		header http.Header
		extra  map[string]bool
		body   []string // the handler's writes
		max    int
		status int // written; 0: none, the handler only writes the body
	}{
		{"plain", http.Header{"Content-Type": {"application/json"}, "X-Charge": {"ch_1"}}, nil, []string{`{"charge":"ch_1"}`}, 1 << 20, 201},
		{"never stored", http.Header{"Set-Cookie": {"a=1", "b=2"}, "Date": {"x"}, "Content-Length": {"3"}, "Location": {"/p/1"}}, nil, []string{"abc"}, 1 << 20, 200},
		{"named in Connection", http.Header{"Connection": {"X-Hop, keep-alive"}, "X-Hop": {"1"}, "Keep-Alive": {"t"}, "X-Stay": {"2"}}, nil, nil, 1 << 20, 204},
		{"trailer and extra", http.Header{http.TrailerPrefix + "X-Sum": {"9"}, "X-Request-Id": {"r1"}, "X-Multi": {"a", "b", "c"}}, map[string]bool{"X-Request-Id": true}, []string{"a", "b"}, 1 << 20, 202},
		{"not canonical", http.Header{"x-lower": {"1"}}, nil, []string{"x"}, 1 << 20, 200},
		{"over the cap", http.Header{"Content-Type": {"text/plain"}}, nil, []string{"12345", "678"}, 6, 200},
		{"no status written", http.Header{"Content-Type": {"text/plain"}}, nil, []string{"hi"}, 1 << 20, 0},
		{"nothing written", http.Header{"X-Empty": {""}}, nil, nil, 1 << 20, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			for k, vs := range c.header {
				w.Header()[k] = vs
			}
			rec := &recorder{w: w, max: c.max, drop: c.extra}
			if c.status != 0 {
				rec.WriteHeader(c.status)
			}
			var body bytes.Buffer
			for _, p := range c.body {
				_, _ = rec.Write([]byte(p))
				body.WriteString(p)
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			got, err := decode(rec.record(status, at))
			if err != nil {
				t.Fatal(err)
			}
			over := body.Len() > c.max
			want := &stored{status: status, header: storableHeaderRef(c.header, c.extra), body: body.Bytes(), omitted: over, recorded: at}
			if over {
				want.body = nil
			}
			if wantDec, err := decode(want.encode()); err != nil || !reflect.DeepEqual(got, wantDec) {
				t.Errorf("record decodes to %+v, want %+v (%v)", got, wantDec, err)
			}
		})
	}
}

func TestStoreKeyMatchesKeyParts(t *testing.T) {
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	scopePart := func(s string) string {
		if len(s) <= 256 && idem.CheckKey("x"+s) == nil {
			return "=" + s
		}
		return "#" + digest(s)
	}
	for _, c := range [][4]string{
		{"authz-sha256:00ff", "POST", "/payments", "k-1"},
		{"", "PATCH", "/orders/7", "a b"},
		{"header:acct", "POST", "/p\x01", "k"},
		{"x", "POST", strings.Repeat("r", 257), "k"},
		{"x", "POST", "/caf\xe9", "k"},
		{"x", "POST", "/é\u0085", "k"},
		{"x", "POST", "", strings.Repeat("k", 255)},
	} {
		want := idem.Key("http", "p"+digest(c[0]), c[1], scopePart(c[2]), c[3])
		if got := storeKey(c[0], c[1], c[2], c[3]); got != want {
			t.Errorf("storeKey%q = %q, want %q", c, got, want)
		}
	}
}

func TestFingerprintMatchesKeyParts(t *testing.T) {
	for _, c := range []struct{ method, target, ctype, body string }{
		{"POST", "/payments", "application/json", `{"amount":100}`},
		{"PATCH", "/p/1?a=b&c=%20", "", ""},
		{"POST", "/" + strings.Repeat("long", 100), "text/plain; charset=utf-8", strings.Repeat("x", 5000)},
	} {
		r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		bsum := sha256.Sum256([]byte(c.body))
		sum := sha256.Sum256([]byte(idem.Key(c.method, r.URL.RequestURI(), c.ctype, string(bsum[:]))))
		if got, want := Fingerprint(r, []byte(c.body)), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Fingerprint(%s %s) = %s, want %s", c.method, c.target, got, want)
		}
	}
}

func TestReadBody(t *testing.T) {
	for _, c := range []struct {
		name    string
		body    string
		declare int64 // ContentLength; -1 unknown
		max     int64
		status  int
	}{
		{"declared", "hello", 5, 10, 0},
		{"unknown length", strings.Repeat("z", 3000), -1, 1 << 20, 0},
		{"declared short", "hello", 2, 10, 0},
		{"declared long", "hi", 50, 10, 0},
		{"at the cap", "0123456789", 10, 10, 0},
		{"over the cap", "0123456789x", 11, 10, http.StatusRequestEntityTooLarge},
		{"over the cap, unknown length", strings.Repeat("z", 3000), -1, 1000, http.StatusRequestEntityTooLarge},
		{"empty", "", 0, 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			r.ContentLength = c.declare
			got, status, err := readBody(r, c.max)
			if status != c.status || (status == 0) != (err == nil) {
				t.Fatalf("readBody = %d, %v; want %d", status, err, c.status)
			}
			if status == 0 && string(got) != c.body {
				t.Errorf("readBody = %q, want %q", got, c.body)
			}
		})
	}
}
