package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem codes, in the "code" member of every problem+json answer the
// middleware writes (RFC 9457), so clients can tell the cases apart.
const (
	CodeKeyMissing          = "idempotency-key-missing"
	CodeKeyMalformed        = "idempotency-key-malformed"
	CodeKeyTooLong          = "idempotency-key-too-long"
	CodeInProgress          = "request-in-progress"
	CodeFingerprintMismatch = "idempotency-key-reused"
	CodeBodyTooLarge        = "request-body-too-large"
	CodeBodyUnreadable      = "request-body-unreadable"
	CodeStoreUnavailable    = "idempotency-store-unavailable"
	CodeNotRetained         = "response-not-retained"
	CodeTokenMissing        = "submit-token-missing"
	CodeTokenUsed           = "submit-token-used"
)

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// retryAfter renders d as whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
