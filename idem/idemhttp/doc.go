// Package idemhttp is net/http middleware for the Idempotency-Key header (IETF
// draft "The Idempotency-Key HTTP Header Field", with Stripe's behaviour),
// and for one-time submit tokens.
//
//	store := redisstore.New(rdb)                       // or sqlstore, layered
//	mux.Handle("POST /pay", idemhttp.Middleware(store)(payHandler))
//
// [Middleware] runs a guarded request's handler once per key and replays its
// response to every later copy; see its documentation for the status of each
// case. Because it is a func(http.Handler) http.Handler, it fits any router
// built on net/http (chi's Use, gorilla/mux's Use) and adapts to gin and echo
// through their net/http wrappers.
//
// Defaults, each changed by an option: the key comes from the Idempotency-Key
// header (quoted sf-string or bare, at most 255 bytes) and is required on
// POST and PATCH; it is scoped by a hash of the Authorization header, the
// method and the URL path; the fingerprint covers method, path and query,
// Content-Type and body; claims last 1 minute in progress and outcomes 24
// hours; request and response bodies are capped at 1 MiB; 5xx, 401, 429 and
// panics are not recorded.
//
// Misconfiguration fails where it is written, never on a request: [Middleware]
// and [RequireToken] panic at construction, naming each bad option and its
// value (a nil function, a duration out of range, a header name that is not
// one, no method to guard) or the nil store, as regexp.MustCompile does.
// [NewMiddleware] returns the same as an error wrapping idem.ErrInvalid, for
// options read from a configuration file.
//
// [RequireToken] spends a token issued with idem.IssueToken before a form's
// submit handler runs, so a double-clicked submit is refused with 409.
package idemhttp
