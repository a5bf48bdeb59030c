package layered_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/internal/flakystore"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// errDial is what go-redis answers for about a second after Redis comes back:
// the last dial error, kept by its connection pool.
var errDial = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// backs are the back stores a layered store is tested on.
var backs = teststores.Stores("layered", "postgres", "sqlite")

// eachFlaky runs test, in parallel subtests, on a layered store over each
// back and a real Redis front whose next write can be made to fail. Redis
// itself cannot be made to refuse exactly one write and then serve the next
// request at once (a restart refuses every call for a while, and which one
// fails is up to timing), so the fault is injected by a flakystore.Store
// around the real store, which fails one call before it reaches Redis.
func eachFlaky(t *testing.T, test func(t *testing.T, s *layered.Store, front *flakystore.Store)) {
	t.Parallel()
	for _, b := range backs {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rs, _, _ := redisFront(t, testsvc.RedisAddr(t))
			front := flakystore.New(rs, errDial)
			test(t, layered.New(front, b.Open(t)), front)
		})
	}
}

// A payment recorded in the database while Redis refused the record: the
// client's retry a moment later is answered with the first charge, at once,
// instead of 409 until the in-progress deadline.
func TestFailedFrontRecordStillReplays(t *testing.T) {
	eachFlaky(t, func(t *testing.T, s *layered.Store, front *flakystore.Store) {
		ctx := context.Background()
		var charges atomic.Int32
		pay := func(context.Context) (int32, error) { return charges.Add(1), nil }

		front.RecordFails.Store(1)
		if v, err := idem.Do(ctx, s, "order-2001", pay); err != nil || v != 1 {
			t.Fatalf("first copy = %d, %v", v, err)
		}
		if front.Failed.Load() != 1 {
			t.Fatal("the front's record did not fail")
		}
		v, err := idem.Do(ctx, s, "order-2001", pay)
		if err != nil || v != 1 || charges.Load() != 1 {
			t.Fatalf("retry after the front refused the record = %d, %v with %d charges; want the first charge replayed", v, err, charges.Load())
		}
	})
}

// A payment that failed and was released in the database while Redis refused
// the release: the client's retry runs at once instead of getting 409 until
// the in-progress deadline.
func TestFailedFrontReleaseLetsRetryRun(t *testing.T) {
	errIssuer := errors.New("card issuer unreachable")
	eachFlaky(t, func(t *testing.T, s *layered.Store, front *flakystore.Store) {
		ctx := context.Background()
		var runs atomic.Int32

		front.ReleaseFails.Store(1)
		_, err := idem.Do(ctx, s, "order-2002", func(context.Context) (int32, error) {
			runs.Add(1)
			return 0, errIssuer
		})
		if !errors.Is(err, errIssuer) || front.Failed.Load() != 1 {
			t.Fatalf("first copy = %v with %d front failures; want its own failure and a refused front release", err, front.Failed.Load())
		}
		v, err := idem.Do(ctx, s, "order-2002", func(context.Context) (int32, error) { return runs.Add(1), nil })
		if err != nil || v != 2 {
			t.Fatalf("retry after the front refused the release = %d, %v; want it run", v, err)
		}
		// The retry's outcome is replayed, from the database while the
		// front still holds the first copy's claim.
		v, err = idem.Do(ctx, s, "order-2002", func(context.Context) (int32, error) { return runs.Add(1), nil })
		if err != nil || v != 2 || runs.Load() != 2 {
			t.Fatalf("third copy = %d, %v after %d runs; want the retry's outcome replayed", v, err, runs.Load())
		}
	})
}

// While the first copy of a payment really runs, the front says in progress
// and so does the database: the second copy is refused, not run.
func TestFrontAndBackInProgressRefuse(t *testing.T) {
	eachFlaky(t, func(t *testing.T, s *layered.Store, _ *flakystore.Store) {
		ctx := context.Background()
		var charges atomic.Int32
		finish := runHeld(t, s, "order-2003", &charges)
		_, err := idem.Do(ctx, s, "order-2003", func(context.Context) (int32, error) { return charges.Add(1), nil })
		finish()
		if !errors.Is(err, idem.ErrInProgress) || charges.Load() != 1 {
			t.Fatalf("copy during the first run = %v with %d charges; want ErrInProgress and 1 charge", err, charges.Load())
		}
	})
}

// The front says in progress and the database cannot be reached: the copy is
// refused as in progress, as the front says, and nothing runs.
func TestFrontInProgressBackDownRefuses(t *testing.T) {
	t.Parallel()
	rs, _, _ := redisFront(t, testsvc.RedisAddr(t))
	back, url, table := pgBack(t)
	s := layered.New(rs, back)
	ctx := context.Background()
	run, _, err := idem.Begin(ctx, s, "order-2004", "")
	if err != nil || run == nil {
		t.Fatalf("first copy = %v, %v", run, err)
	}
	t.Cleanup(func() { _ = run.Release(ctx) })

	// A database that is gone: its pool is closed.
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := sqlstore.New(db, sqlstore.WithTable(table), sqlstore.WithTokenTable(table+"_tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	var ran atomic.Bool
	_, err = idem.Do(ctx, layered.New(rs, gone), "order-2004", func(context.Context) (int, error) { ran.Store(true); return 0, nil })
	if !errors.Is(err, idem.ErrInProgress) || ran.Load() {
		t.Fatalf("copy with the database down = %v (ran: %v); want ErrInProgress from the front", err, ran.Load())
	}
}

// The same two failures through the HTTP middleware: after a refused front
// record the retry is replayed, after a refused front release it runs; never
// 409.
func TestFailedFrontWriteOverHTTP(t *testing.T) {
	eachFlaky(t, func(t *testing.T, s *layered.Store, front *flakystore.Store) {
		var calls atomic.Int32
		fail := atomic.Bool{}
		srv := httptest.NewServer(idemhttp.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			if fail.Load() {
				http.Error(w, "issuer unreachable", http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "charge "+strconv.Itoa(int(n)))
		})))
		t.Cleanup(srv.Close)

		front.RecordFails.Store(1)
		if st, _, body := postPayment(t, srv.URL, "order-2005"); st != http.StatusCreated || body != "charge 1" {
			t.Fatalf("first copy = %d %q", st, body)
		}
		if st, replayed, body := postPayment(t, srv.URL, "order-2005"); st != http.StatusCreated || replayed != "true" || body != "charge 1" || calls.Load() != 1 {
			t.Fatalf("retry after a refused front record = %d %q (replayed %q) after %d calls; want the first answer replayed", st, body, replayed, calls.Load())
		}

		fail.Store(true)
		front.ReleaseFails.Store(1)
		if st, _, _ := postPayment(t, srv.URL, "order-2006"); st != http.StatusBadGateway {
			t.Fatalf("failing copy = %d", st)
		}
		fail.Store(false)
		if st, replayed, body := postPayment(t, srv.URL, "order-2006"); st != http.StatusCreated || replayed != "" || body != "charge 3" {
			t.Fatalf("retry after a refused front release = %d %q (replayed %q); want it run", st, body, replayed)
		}
		if front.Failed.Load() != 2 {
			t.Fatalf("%d front writes refused, want 2", front.Failed.Load())
		}
	})
}

// postPayment posts a payment with the idempotency key to the server at
// url and returns its status, its Idempotent-Replayed header and its body.
func postPayment(t *testing.T, url, key string) (status int, replayed, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/pay", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b)
}
