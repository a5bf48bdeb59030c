package idemhttptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// Upstream is the application behind the target: a payment endpoint that
// counts its executions per idempotency key. Put it behind the middleware
// (idemhttp.Middleware(store)(up)) or behind a proxy; Run steers it through
// the request's query and through Hold.
//
// Every request is an execution. It answers 201 with a JSON body naming the
// execution number, plus headers a replay must repeat (Content-Type,
// Location, X-Charge) and headers it must not (Set-Cookie and the
// hop-by-hop X-Hop). The query parameter fail=STATUS makes the first
// execution for a key answer STATUS instead; fail=panic makes it panic.
type Upstream struct {
	mu    sync.Mutex
	runs  map[string]int           // guarded by mu; executions per key
	holds map[string]chan struct{} // guarded by mu; keys whose executions wait
}

// NewUpstream returns an Upstream with no executions.
func NewUpstream() *Upstream {
	return &Upstream{runs: map[string]int{}, holds: map[string]chan struct{}{}}
}

// Executions returns how many times a request carrying key (in the
// Idempotency-Key header, quoted or bare) has run.
func (u *Upstream) Executions(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[key]
}

// Hold makes executions for key wait, once counted, until release is called
// or their request's context ends. release is safe to call more than once.
func (u *Upstream) Hold(key string) (release func()) {
	ch := make(chan struct{})
	u.mu.Lock()
	u.holds[key] = ch
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			delete(u.holds, key)
			u.mu.Unlock()
			close(ch)
		})
	}
}

// ServeHTTP executes the request.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, _ := idemhttp.ParseKey(r.Header.Get(idemhttp.DefaultHeader))
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.runs[key]++
	n := u.runs[key]
	hold := u.holds[key]
	u.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	status := http.StatusCreated
	if f := r.URL.Query().Get("fail"); f != "" && n == 1 {
		if f == "panic" {
			panic(http.ErrAbortHandler) // net/http drops the connection quietly
		}
		s, err := strconv.Atoi(f)
		if err != nil || s < 200 || s > 599 {
			http.Error(w, "bad fail parameter", http.StatusBadRequest)
			return
		}
		status = s
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/charges/%d", n))
	h.Set("X-Charge", fmt.Sprintf("ch_%d", n))
	h.Add("Set-Cookie", fmt.Sprintf("session=first-client-%d", n))
	h.Set("Connection", "X-Hop")
	h.Set("X-Hop", "per-connection")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"execution": n, "status": status, "method": r.Method, "body": string(body),
		"principal": r.Header.Get("Authorization"),
	})
}
