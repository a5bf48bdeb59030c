package idemhttp

import (
	"net/http"
	"time"
)

// Recorded is a response as the middleware keeps it for replay.
type Recorded struct {
	// Status is the handler's status code.
	Status int
	// Header holds the headers replayed with it (never Set-Cookie,
	// hop-by-hop headers, Date or Content-Length).
	Header http.Header
	// Body is the response body; nil when BodyOmitted.
	Body []byte
	// BodyOmitted says the body was larger than WithMaxResponseBody: the
	// first client got it, copies get 500 "response-not-retained".
	BodyOmitted bool
	// RecordedAt is when the response was recorded, by the recording
	// host's clock, to the millisecond; zero for a record made before
	// records kept their time.
	RecordedAt time.Time
}

// ReadRecorded decodes the result of a record the middleware made (an
// idem.Record's Result), for an operator's tools. It fails for a result
// written by anything else, such as idem.Do.
func ReadRecorded(result []byte) (*Recorded, error) {
	s, err := decode(result)
	if err != nil {
		return nil, err
	}
	r := &Recorded{Status: s.status, Header: s.header, Body: s.body, BodyOmitted: s.omitted, RecordedAt: s.recorded}
	if r.BodyOmitted {
		r.Body = nil
	}
	return r, nil
}
