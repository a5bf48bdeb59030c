package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

// Middleware guards handlers with the Idempotency-Key header. For a guarded
// request (POST or PATCH by default) it answers:
//
//	first request with a key         runs the handler, records its response, passes it through
//	same key, same request, finished replays status, headers and body, adds Idempotent-Replayed: true
//	same key, request still running  409 with Retry-After (or, with WithWait, waits and replays)
//	same key, different request      422
//	no key (unless WithOptionalKey)  400
//	malformed key, or > 255 bytes    400
//	request body over the cap        413
//	store unreachable                503 with Retry-After; the handler does not run
//
// Handler answers of 5xx (see WithStoreStatus), 401 and 429, panics and
// hijacked connections are not recorded: the claim is released and a retry
// runs the handler again. Set-Cookie and hop-by-hop headers are never
// recorded. Error answers are application/problem+json (RFC 9457) with a
// "code" member (CodeKeyMissing and the others).
//
// Keys are scoped by principal (WithPrincipal), method and route (WithRoute),
// encoded with idem.Key so that no two scopes alias: a client never receives
// another principal's response. StoreKey builds the same key from the parts,
// for an operator looking for a request's record.
//
// The handler's request context ends at the in-progress deadline. The
// response is recorded with a context detached from the client's, so a client
// that hangs up does not leave its payment unrecorded.
//
// Middleware panics, with a message naming each bad option and its value,
// when an option is invalid or store is nil, as regexp.MustCompile does: a
// misconfigured middleware never serves a request. A program whose options
// come from a configuration file uses NewMiddleware to get the error instead.
func Middleware(store idem.Store, opts ...Option) func(http.Handler) http.Handler {
	m, err := NewMiddleware(store, opts...)
	if err != nil {
		panic("idemhttp.Middleware: " + err.Error())
	}
	return m
}

// NewMiddleware is Middleware returning an error, wrapping idem.ErrInvalid
// and naming each bad option with its value, for an invalid option or a nil
// store.
func NewMiddleware(store idem.Store, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := newConfig(opts)
	if store == nil {
		c.Invalid = append(c.Invalid, fmt.Errorf("%w: nil store", idem.ErrInvalid))
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return &handler{c: c, store: store, next: next}
	}, nil
}

type handler struct {
	c     *config
	store idem.Store
	next  http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.c
	if !c.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	var begin time.Time
	if c.observe != nil {
		begin = time.Now()
	}
	body, status, err := readBody(r, c.maxRequest)
	if err != nil {
		code := CodeBodyUnreadable
		if status == http.StatusRequestEntityTooLarge {
			code = CodeBodyTooLarge
		}
		writeProblem(w, status, code, err.Error())
		h.observe(r, begin, OutcomeBadBody, status, nil)
		return
	}
	br := &bodyReader{}
	br.Reset(body)
	r.Body = br

	key, err := c.key(r, body)
	switch {
	case errors.Is(err, ErrKeyTooLong):
		writeProblem(w, http.StatusBadRequest, CodeKeyTooLong, "the idempotency key is longer than 255 bytes")
		h.observe(r, begin, OutcomeBadKey, http.StatusBadRequest, nil)
		return
	case err != nil:
		writeProblem(w, http.StatusBadRequest, CodeKeyMalformed, err.Error())
		h.observe(r, begin, OutcomeBadKey, http.StatusBadRequest, nil)
		return
	case key == "" && c.optional:
		h.next.ServeHTTP(w, r)
		h.observe(r, begin, OutcomeUnkeyed, 0, nil)
		return
	case key == "":
		writeProblem(w, http.StatusBadRequest, CodeKeyMissing, "this request needs an idempotency key")
		h.observe(r, begin, OutcomeBadKey, http.StatusBadRequest, nil)
		return
	}
	br.Reset(body) // the key function may have read it
	r.Body = br

	scoped := storeKey(c.principal(r), r.Method, c.route(r), key)
	run, replay, err := idem.Begin(r.Context(), h.store, scoped, c.fingerprint(r, body), c.Idem...)
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		w.Header().Set("Retry-After", retryAfter(inProgress.RetryAfter))
		writeProblem(w, http.StatusConflict, CodeInProgress, "a request with this idempotency key is still being processed")
		h.observe(r, begin, OutcomeConflict, http.StatusConflict, nil)
		return
	case errors.Is(err, idem.ErrFingerprintMismatch):
		writeProblem(w, http.StatusUnprocessableEntity, CodeFingerprintMismatch, "this idempotency key was used for a different request")
		h.observe(r, begin, OutcomeMismatch, http.StatusUnprocessableEntity, nil)
		return
	case errors.Is(err, idem.ErrInvalidKey):
		writeProblem(w, http.StatusBadRequest, CodeKeyMalformed, err.Error())
		h.observe(r, begin, OutcomeBadKey, http.StatusBadRequest, nil)
		return
	case err != nil:
		if r.Context().Err() != nil {
			h.observe(r, begin, OutcomeCanceled, 0, nil)
			return // the client is gone; nobody reads an answer
		}
		c.onError(r, fmt.Errorf("idemhttp: claim: %w", err))
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "the idempotency store is unavailable; the request was not processed")
		h.observe(r, begin, OutcomeStoreError, http.StatusServiceUnavailable, err)
		return
	case replay != nil:
		status, age, err := h.replay(w, r, replay.Result)
		if c.observe != nil {
			c.observe(r, Event{Outcome: OutcomeReplayed, Status: status, Duration: time.Since(begin), Err: err, Age: age})
		}
		return
	}
	var ev Event
	if c.observe != nil {
		defer func() { h.observe(r, begin, ev.Outcome, ev.Status, ev.Err) }() // also after a panic
	}
	h.serve(w, r, run, &ev)
}

// observe reports a guarded request that began at begin, if anybody
// observes.
func (h *handler) observe(r *http.Request, begin time.Time, o Outcome, status int, err error) {
	if h.c.observe != nil {
		h.c.observe(r, Event{Outcome: o, Status: status, Duration: time.Since(begin), Err: err})
	}
}

// serve runs the handler under the claim and records or releases it, and
// says in out what happened.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, run *idem.Run, out *Event) {
	c := h.c
	rec := &recorder{w: w, max: c.maxResponse, drop: c.dropHeaders}
	ctx, cancel := run.Context(r.Context())
	defer cancel()
	finished := false
	defer func() {
		if !finished { // the handler panicked
			out.Outcome = OutcomeReleased
			if err := idem.Finish(r.Context(), run.Release); err != nil {
				c.onError(r, fmt.Errorf("idemhttp: releasing after panic: %w", err))
				out.Err = err
			}
		}
	}()
	h.next.ServeHTTP(rec, r.WithContext(ctx))
	finished = true

	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	keep := !rec.hijacked && status >= 200 && status != http.StatusUnauthorized &&
		status != http.StatusTooManyRequests && c.store(status)
	out.Status = status
	if rec.hijacked {
		out.Status = 0
	}
	if !keep {
		out.Outcome = OutcomeReleased
		if err := idem.Finish(r.Context(), run.Release); err != nil {
			c.onError(r, fmt.Errorf("idemhttp: releasing claim: %w", err))
			out.Err = err
		}
		return
	}
	out.Outcome = OutcomeExecuted
	b := rec.record(status, time.Now())
	if err := idem.Finish(r.Context(), func(ctx context.Context) error { return run.Record(ctx, b) }); err != nil {
		c.onError(r, fmt.Errorf("idemhttp: %w: %w", idem.ErrNotRecorded, err))
		out.Err = err
	}
}

// replay writes a recorded response and returns the status it answered, the
// record's age (0 when unknown) and the error of a stored response that could
// not be read.
func (h *handler) replay(w http.ResponseWriter, r *http.Request, b []byte) (int, time.Duration, error) {
	s, err := decode(b)
	if err != nil {
		h.c.onError(r, err)
		writeProblem(w, http.StatusInternalServerError, CodeNotRetained, "the stored response cannot be read")
		return http.StatusInternalServerError, 0, err
	}
	var age time.Duration
	if !s.recorded.IsZero() {
		age = max(time.Since(s.recorded), 0) // another host's clock may be ahead
	}
	w.Header().Set("Idempotent-Replayed", "true")
	if s.omitted {
		writeProblem(w, http.StatusInternalServerError, CodeNotRetained,
			"the request was processed, but its response was too large to keep for replay; it was not processed again")
		return http.StatusInternalServerError, age, nil
	}
	dst := w.Header()
	for k, vs := range s.header {
		dst[k] = append(dst[k][:0], vs...)
	}
	dst.Set("Content-Length", strconv.Itoa(len(s.body)))
	w.WriteHeader(s.status)
	_, _ = w.Write(s.body)
	return s.status, age, nil
}

// bodyReader hands the handler the body the middleware read, in one
// allocation.
type bodyReader struct{ bytes.Reader }

// Close implements io.Closer.
func (*bodyReader) Close() error { return nil }

// readBody reads the whole body, at most max bytes. A body whose length is
// declared is read into a buffer of that size (and one byte more, to see its
// end without growing).
func readBody(r *http.Request, max int64) ([]byte, int, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, 0, nil
	}
	defer r.Body.Close()
	size := int64(512)
	if n := r.ContentLength; n >= 0 {
		size = min(n, max) + 1
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):min(int64(cap(b)), max+1)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is larger than %d bytes", max)
		}
		if err == io.EOF {
			return b, 0, nil
		}
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
		}
	}
}
