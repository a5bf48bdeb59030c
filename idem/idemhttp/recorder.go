package idemhttp

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
)

// recorder passes the handler's response through to the client as it is
// written, and keeps a copy (up to max bytes of body) to record.
type recorder struct {
	w        http.ResponseWriter
	max      int
	status   int
	header   http.Header // snapshot taken when the status was written
	body     bytes.Buffer
	over     bool // the body passed max; the copy was dropped
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
	r.header = r.w.Header().Clone()
	r.w.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if r.body.Len()+len(p) > r.max {
			r.over = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return r.w.Write(p)
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
