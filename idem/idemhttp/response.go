package idemhttp

import (
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// stored is a response as kept in the store.
type stored struct {
	status  int
	header  http.Header
	body    []byte
	omitted bool // the body was larger than the cap: not kept, never replayed truncated
	// recorded is when the response was recorded, by the recording
	// process's clock; zero for a record of version 1, which has none.
	recorded time.Time
}

// encodingVersion is the version encode writes; decode reads it and
// version 1, which has no recording time.
const encodingVersion = 2

// encode writes: version, flags, the recording time (uvarint Unix
// milliseconds; version 2 only), status (uvarint), header count (uvarint),
// then for each header line name and value (uvarint length + bytes), then
// the body.
func (s *stored) encode() []byte {
	lines := 0
	for _, vs := range s.header {
		lines += len(vs)
	}
	b := appendHead(make([]byte, 0, 24+len(s.body)), s.omitted, s.recorded, s.status, lines)
	for k, vs := range s.header {
		for _, v := range vs {
			b = appendLine(b, k, v)
		}
	}
	return append(b, s.body...)
}

// headRoom is the most bytes the head of a record (appendHead) takes.
const headRoom = 2 + 3*binary.MaxVarintLen64

// appendHead appends what a record begins with: version, flags, the
// recording time, the status and the number of header lines.
func appendHead(b []byte, omitted bool, recorded time.Time, status, lines int) []byte {
	var flags byte
	if omitted {
		flags |= 1
	}
	b = append(b, encodingVersion, flags)
	b = binary.AppendUvarint(b, uint64(max(recorded.UnixMilli(), 0)))
	b = binary.AppendUvarint(b, uint64(status))
	return binary.AppendUvarint(b, uint64(lines))
}

// appendLine appends one header line: name and value, each as uvarint length
// and bytes.
func appendLine(b []byte, k, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errCorrupt = errors.New("idemhttp: stored response is corrupt")

func decode(b []byte) (*stored, error) {
	if len(b) < 2 || b[0] < 1 || b[0] > encodingVersion {
		return nil, errCorrupt
	}
	version := b[0]
	s := &stored{omitted: b[1]&1 != 0, header: http.Header{}}
	b = b[2:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		v := string(b[:n])
		b = b[n:]
		return v, true
	}
	if version >= 2 {
		ms, ok := next()
		if !ok || ms > math.MaxInt64 {
			return nil, errCorrupt
		}
		s.recorded = time.UnixMilli(int64(ms))
	}
	status, ok := next()
	if !ok || status < 100 || status > 999 {
		return nil, errCorrupt
	}
	s.status = int(status)
	lines, ok := next()
	if !ok || lines > uint64(len(b)) {
		return nil, errCorrupt
	}
	for range lines {
		k, ok1 := str()
		v, ok2 := str()
		if !ok1 || !ok2 {
			return nil, errCorrupt
		}
		s.header[k] = append(s.header[k], v)
	}
	s.body = b
	return s, nil
}

// neverStored are response headers that are never kept for replay: cookies
// belong to the first client's session, hop-by-hop headers to its connection
// (RFC 9110 7.6.1), and the rest are recomputed on replay.
var neverStored = map[string]bool{
	"Set-Cookie":          true,
	"Set-Cookie2":         true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Date":                true,
	"Content-Length":      true,
	"Idempotent-Replayed": true,
}

// appendStorable appends the lines of h that may be replayed, names in
// canonical form, and returns b and the number of lines. It leaves out the
// fixed list (neverStored), the headers named in Connection, trailers, and
// any in extra.
func appendStorable(b []byte, h http.Header, extra map[string]bool) ([]byte, int) {
	var drop map[string]bool
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if drop == nil {
					drop = map[string]bool{}
				}
				drop[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	lines := 0
	for k, vs := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if neverStored[ck] || drop[ck] || extra[ck] || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vs {
			b = appendLine(b, ck, v)
			lines++
		}
	}
	return b, lines
}
