package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// Client sends a payment to several instances of the service, one attempt
// after another, with the same idempotency key every time, until an answer
// comes that a retry would not change. It is the gateway or app in front of
// the service: it times out and retries, so the service must take each
// payment once however many copies arrive.
type Client struct {
	// Servers are the instances' base URLs; attempts go round them.
	Servers []string
	// HTTP sends the requests. Default: a client without a timeout of its
	// own (Timeout bounds each attempt).
	HTTP *http.Client
	// Attempts bounds the attempts. Default: 30.
	Attempts int
	// Timeout gives attempt n (from 1) its time limit. Default: 5 s each.
	Timeout func(n int) time.Duration
	// MaxBackoff caps the jittered wait between attempts and any Retry-After
	// the server asks for. Default: 1 s.
	MaxBackoff time.Duration
	// OnAttempt, if set, is told of every attempt's end.
	OnAttempt func(Attempt)
}

// Attempt is one try of a payment.
type Attempt struct {
	N        int
	Server   string
	Status   int    // 0 when no answer came
	Code     string // the problem's code, for error answers
	Replayed bool
	Err      error // the transport's error, a timeout included
}

// Answer is the final answer to a payment.
type Answer struct {
	Status   int
	Body     []byte
	Replayed bool   // Idempotent-Replayed: the answer of an earlier attempt
	Instance string // the instance that made the answer
	Attempts int
}

// errGaveUp means every attempt ended in an answer worth retrying, or none.
var errGaveUp = errors.New("payment client: gave up after the last attempt")

// Pay sends req under key until it gets a final answer: a 2xx, or a 4xx other
// than 409 request-in-progress and 429. It returns errGaveUp (wrapping the
// last attempt's error) when the attempts run out, or ctx's error.
func (c *Client) Pay(ctx context.Context, key string, req payRequest) (Answer, error) {
	if len(c.Servers) == 0 {
		return Answer{}, errors.New("payment client: no servers")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, err
	}
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = 30
	}
	maxBackoff := c.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = time.Second
	}
	start := rand.IntN(len(c.Servers))
	var last error
	for n := 1; n <= attempts; n++ {
		server := c.Servers[(start+n-1)%len(c.Servers)]
		a, ans, wait := c.try(ctx, server, key, body, n)
		if c.OnAttempt != nil {
			c.OnAttempt(a)
		}
		if ans != nil {
			ans.Attempts = n
			return *ans, nil
		}
		last = a.Err
		if last == nil {
			last = fmt.Errorf("status %d %s", a.Status, a.Code)
		}
		if n == attempts {
			break
		}
		backoff := time.Duration(rand.Int64N(int64(min(maxBackoff, 20*time.Millisecond<<min(n, 6)))))
		backoff = max(backoff, min(wait, maxBackoff))
		select {
		case <-ctx.Done():
			return Answer{}, ctx.Err()
		case <-time.After(backoff):
		}
	}
	return Answer{}, fmt.Errorf("%w: %w", errGaveUp, last)
}

// try makes attempt n. It returns a final answer, or none and how long the
// server asked to wait.
func (c *Client) try(ctx context.Context, server, key string, body []byte, n int) (Attempt, *Answer, time.Duration) {
	a := Attempt{N: n, Server: server}
	timeout := 5 * time.Second
	if c.Timeout != nil {
		timeout = c.Timeout(n)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, strings.TrimSuffix(server, "/")+"/pay", bytes.NewReader(body))
	if err != nil {
		a.Err = err
		return a, nil, 0
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(idemhttp.DefaultHeader, key)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		a.Err = err
		return a, nil, 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		a.Err = err
		return a, nil, 0
	}
	a.Status = resp.StatusCode
	a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	if resp.StatusCode >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		a.Code = p.Code
	}
	retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusConflict && a.Code == idemhttp.CodeInProgress
	if retry {
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return a, nil, wait
	}
	inst := resp.Header.Get("X-Instance")
	if inst == "" { // answers the middleware makes itself name no maker
		inst = resp.Header.Get(servedByHeader)
	}
	return a, &Answer{Status: resp.StatusCode, Body: b, Replayed: a.Replayed, Instance: inst}, 0
}
