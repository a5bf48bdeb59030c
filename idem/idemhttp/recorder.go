package idemhttp

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// recorder passes the handler's response through to the client as it is
// written, and keeps a copy (up to max bytes of body) to record, already in
// the record's encoding: buf holds headRoom bytes for the record's head, the
// storable header lines, and the body.
type recorder struct {
	w        http.ResponseWriter
	max      int
	drop     map[string]bool // headers never recorded, besides neverStored
	status   int
	buf      []byte // nil until the status is written
	lines    int    // header lines in buf
	bodyAt   int    // where the body begins in buf
	over     bool   // the body passed max; the copy was dropped
	hijacked bool
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.status != 0 {
		r.w.WriteHeader(code) // superfluous; let net/http log it
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.w.WriteHeader(code) // informational, not the final answer
		return
	}
	r.status = code
	r.snapshot(r.w.Header())
	r.w.WriteHeader(code)
}

// snapshot keeps the storable lines of h, the header as it was sent.
func (r *recorder) snapshot(h http.Header) {
	n := headRoom + 64
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	r.buf, r.lines = appendStorable(make([]byte, headRoom, n), h, r.drop)
	r.bodyAt = len(r.buf)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if len(r.buf)-r.bodyAt+len(p) > r.max {
			r.over = true
			r.buf = r.buf[:r.bodyAt]
		} else {
			r.buf = append(r.buf, p...)
		}
	}
	return r.w.Write(p)
}

// record returns the record of the response (see stored.encode), answered
// with status and recorded at the time given.
func (r *recorder) record(status int, recorded time.Time) []byte {
	if r.buf == nil { // the handler wrote nothing: its header as it is now
		r.snapshot(r.w.Header())
	}
	var head [headRoom]byte
	h := appendHead(head[:0], r.over, recorded, status, r.lines)
	start := headRoom - len(h)
	copy(r.buf[start:], h)
	return r.buf[start:]
}

// Flush keeps streaming handlers working.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.w).Flush()
}

// Hijack hands the connection over; such a response is never recorded.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.hijacked = true
	return http.NewResponseController(r.w).Hijack()
}

// Unwrap lets http.ResponseController reach the other optional methods.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }
