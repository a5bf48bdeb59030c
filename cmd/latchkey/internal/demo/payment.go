package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// The double charge: one click on "Pay", and within 200 ms the request
// arrives three times (the click, a double click, the gateway's retry after
// its timeout), then once more because the order service's message was
// redelivered by the queue. Two instances of the payment service, child
// processes on loopback ports behind a round-robin balancer, take the copies.
const (
	payAmount = 10000 // cents
	// payBank is how long the card network takes to charge: longer than the
	// gateway's timeout, which is why the gateway retries.
	payBank           = 150 * time.Millisecond
	payGatewayTimeout = 100 * time.Millisecond
	payDoubleClick    = 40 * time.Millisecond
	payRedelivery     = 180 * time.Millisecond
	// payWait is how long a copy that arrives while the first runs waits for
	// its answer (idemhttp.WithWait) instead of getting 409.
	payWait = 5 * time.Second
)

// A payCopy is one arrival of the payment.
type payCopy struct {
	N        int    `json:"copy"`
	Via      string `json:"via"` // click, double click, gateway retry, queue redelivery
	Instance string `json:"instance"`
	Status   int    `json:"status,omitempty"` // 0: no answer (timed out)
	Replayed bool   `json:"replayed,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
	body     []byte
}

type paymentRun struct {
	Copies       int       `json:"copies"`
	Charges      int       `json:"charges"` // what the card network charged
	ExtraCharges int       `json:"extra_charges"`
	Answers      []payCopy `json:"answers"`
	Replays      int       `json:"replays"`
	// Identical: every answer a client received is byte for byte the same
	// and names the one charge made.
	Identical bool  `json:"identical"`
	GateHits  int   `json:"ledger_gate_hits"` // duplicates the unique ledger row stopped
	Damaged   bool  `json:"damaged"`
	DurationM int64 `json:"duration_ms"`
}

func init() {
	register(&scenario{
		order:     1,
		name:      "payment",
		title:     "One payment arrives 3 times in 200 ms at two instances, then once more from the queue",
		menu:      "one payment arriving 3 times in 200 ms at two instances, then once more from a queue",
		menuGuard: "Idempotency-Key + unique ledger",
		guard:     "Idempotency-Key (idemhttp) on a shared store + a unique ledger row before the charge",
		why: "the copies are the same operation: the key makes the first one run and every other " +
			"get its answer; the ledger's unique row is the last gate should the key store fail",
		unit: "extra charges",
		tables: []string{
			// The guarded service's books: a payment's row is written
			// before the card is charged, and its primary key is the last
			// gate behind the idempotency key ("take the number first, then
			// work").
			`CREATE TABLE IF NOT EXISTS demo_ledger (gate_key {key} PRIMARY KEY, charge_id TEXT NOT NULL,
		instance TEXT NOT NULL)`,
			// What the card network charged: one row per charge, whatever
			// our books say.
			`CREATE TABLE IF NOT EXISTS demo_bank_charges (payment_id TEXT NOT NULL, charge_id TEXT NOT NULL,
		amount BIGINT NOT NULL, instance TEXT NOT NULL)`,
		},
		roles: []*role{payRole},
		play:  playPayment,
	})
}

// payRole is an instance of the payment service.
var payRole = roleOf("pay", pay)

// payInstances are the instances' names, in the balancer's order.
var payInstances = []string{"A", "B"}

// payParams are an instance's.
type payParams struct {
	Bank    time.Duration // how long the card network takes
	Private bool          // sabotage: instance-private books
}

func playPayment(ctx context.Context, d *demo, s *Result) error {
	// Two instances serve both runs: POST /unguarded/pay charges for every
	// copy, POST /guarded/pay is behind the guards.
	var parts []part
	for _, inst := range payInstances {
		parts = append(parts, part{name: "instance " + inst, role: payRole,
			params: payParams{Bank: payBank, Private: d.sabotage}})
	}
	servers, err := d.cast(ctx, parts...)
	if err != nil {
		return err
	}
	defer servers.kill()
	var addrs []string
	for _, p := range servers {
		addrs = append(addrs, p.ready.Addr)
	}
	for _, guarded := range []bool{false, true} {
		tl := newTimeline()
		r, err := d.paymentRun(ctx, guarded, servers, addrs, tl)
		if err != nil {
			return fmt.Errorf("%s run: %w", runName(guarded), err)
		}
		if guarded {
			s.Guarded, s.Timeline.Guarded, s.Damage.Guarded = r, tl.sorted(), r.ExtraCharges
			s.OK = !r.Damaged
			same := "identical answers"
			if !r.Identical {
				same = "DIFFERENT answers"
			}
			s.say("guarded:   %d copies -> %s, %d replayed with %s %s", r.Copies,
				plural(r.Charges, "charge", "charges"), r.Replays, same, mark(s.OK))
			continue
		}
		s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = r, tl.sorted(), r.ExtraCharges
		s.say("unguarded: %d copies -> %s: %d extra, the customer paid %s %s", r.Copies,
			plural(r.Charges, "charge", "charges"), r.ExtraCharges, money(int64(r.Charges)*payAmount),
			expected(r.Damaged))
	}
	return nil
}

func runName(guarded bool) string {
	if guarded {
		return "guarded"
	}
	return "unguarded"
}

func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

func (d *demo) paymentRun(ctx context.Context, guarded bool, servers group, addrs []string, tl *timeline) (*paymentRun, error) {
	began := time.Now()
	paymentID := fmt.Sprintf("R-1.%s.%s", d.runID, runName(guarded))
	body, _ := json.Marshal(map[string]any{"payment_id": paymentID, "amount": payAmount})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	// The servers report their charges while the copies are in flight.
	reports := readReports(ctx, servers)
	c := &payClient{http: client, addrs: addrs, path: "/" + runName(guarded) + "/pay", body: body, tl: tl}
	answers := c.sendCopies(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	r := &paymentRun{Copies: 4}
	if err := d.data.row(ctx, `SELECT count(*) FROM demo_bank_charges WHERE payment_id = $1`, paymentID).Scan(&r.Charges); err != nil {
		return nil, err
	}
	// Every charge was reported before its answer went out; let the readers
	// drain what is in the pipes.
	_ = sleep(ctx, 100*time.Millisecond)
	chargeIDs := tally(reports.wait(), servers, tl, r)
	r.judge(answers, chargeIDs, guarded)
	r.DurationM = ms(time.Since(began))
	return r, nil
}

// chargeReports reads what the servers report while the copies are in
// flight.
type chargeReports struct {
	stop    chan struct{}
	readers sync.WaitGroup
	charged [][]event // charged[i]: what servers[i] reported; read after wait
}

// readReports starts reading what each of servers reports.
func readReports(ctx context.Context, servers group) *chargeReports {
	c := &chargeReports{stop: make(chan struct{}), charged: make([][]event, len(servers))}
	for i, p := range servers {
		c.readers.Go(func() { c.read(ctx, i, p) })
	}
	return c
}

// read collects p's events until wait stops it or ctx is done.
func (c *chargeReports) read(ctx context.Context, i int, p *proc) {
	for {
		ev, err := p.Next(ctx, 50*time.Millisecond)
		if err == nil {
			c.charged[i] = append(c.charged[i], ev)
			continue
		}
		select {
		case <-c.stop:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// wait stops the readers and returns what each server reported.
func (c *chargeReports) wait() [][]event {
	close(c.stop)
	c.readers.Wait()
	return c.charged
}

// A payClient sends the copies of one payment, as the browser, the gateway
// and the queue do, and keeps the answers.
type payClient struct {
	http  *http.Client
	addrs []string
	path  string // the run's endpoint
	body  []byte
	tl    *timeline

	mu      sync.Mutex
	answers []payCopy // guarded by mu
}

// sendCopies sends the four copies at their moments and returns the answers
// once every copy has its answer or gave up.
func (c *payClient) sendCopies(ctx context.Context) []payCopy {
	var copies sync.WaitGroup
	copies.Go(func() {
		c.record(c.send(ctx, 1, "click", "browser", payGatewayTimeout))
		// The gateway gave up on the first copy: it retries.
		c.record(c.send(ctx, 3, "gateway retry", "gateway", payWait+5*time.Second))
	})
	copies.Go(func() {
		_ = sleep(ctx, payDoubleClick)
		c.record(c.send(ctx, 2, "double click", "browser", payWait+5*time.Second))
	})
	copies.Go(func() {
		_ = sleep(ctx, payRedelivery)
		c.record(c.send(ctx, 4, "queue redelivery", "queue", payWait+5*time.Second))
	})
	copies.Wait()
	return c.answers
}

func (c *payClient) record(a payCopy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers = append(c.answers, a)
}

// send sends copy n, as actor, and waits for its answer up to timeout.
func (c *payClient) send(ctx context.Context, n int, via, actor string, timeout time.Duration) payCopy {
	inst := (n - 1) % 2 // the balancer's round robin
	a := payCopy{N: n, Via: via, Instance: payInstances[inst]}
	c.tl.add(time.Now(), actor, kindSent, fmt.Sprintf("copy %d (%s) -> instance %s", n, via, payInstances[inst]), 0)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+c.addrs[inst]+c.path, bytes.NewReader(c.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-customer")
	resp, err := c.http.Do(req)
	if err != nil {
		c.tl.add(time.Now(), actor, kindTimeout, fmt.Sprintf("copy %d: no answer after %d ms, gave up", n, ms(timeout)), 0)
		return a
	}
	defer resp.Body.Close()
	a.body, _ = io.ReadAll(resp.Body)
	a.Status = resp.StatusCode
	a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	var charge struct {
		ChargeID string `json:"charge_id"`
	}
	_ = json.Unmarshal(a.body, &charge)
	a.ChargeID = charge.ChargeID
	what := fmt.Sprintf("copy %d <- %d, charge %s", n, a.Status, a.ChargeID)
	kind := kindAnswered
	switch {
	case a.Status == http.StatusConflict:
		what, kind = fmt.Sprintf("copy %d <- 409 Conflict: still in progress", n), kindConflict
	case a.Replayed:
		what, kind = fmt.Sprintf("copy %d <- %d replayed: charge %s, same answer", n, a.Status, a.ChargeID), kindReplayed
	}
	c.tl.add(time.Now(), actor, kind, what, 0)
	return a
}

// tally puts what the servers reported on the timeline, counts the
// duplicates the ledger stopped into r, and returns the charges made.
func tally(charged [][]event, servers group, tl *timeline, r *paymentRun) []string {
	var chargeIDs []string
	for i, evs := range charged {
		for _, ev := range evs {
			switch ev.Kind {
			case kindCharged:
				chargeIDs = append(chargeIDs, ev.ID)
				tl.event(servers[i].name, ev, fmt.Sprintf("card charged %s, charge %s", money(payAmount), ev.ID))
			case kindRefused:
				r.GateHits++
				tl.event(servers[i].name, ev, "ledger row exists: duplicate stopped by the unique index")
			}
		}
	}
	return chargeIDs
}

// judge compares the answers the clients received with the charges made:
// identical answers name the one charge, and a guarded run must give them.
func (r *paymentRun) judge(answers []payCopy, chargeIDs []string, guarded bool) {
	slices.SortFunc(answers, func(a, b payCopy) int { return cmp.Compare(a.N, b.N) })
	r.Answers = answers
	r.ExtraCharges = max(r.Charges-1, 0)
	r.Identical = len(chargeIDs) == 1
	var first []byte
	for _, a := range answers {
		if a.Status == 0 {
			continue
		}
		if a.Replayed {
			r.Replays++
		}
		if first == nil {
			first = a.body
		}
		if !bytes.Equal(a.body, first) || a.Status != http.StatusOK || len(chargeIDs) != 1 || a.ChargeID != chargeIDs[0] {
			r.Identical = false
		}
	}
	if first == nil {
		r.Identical = false
	}
	r.Damaged = r.Charges != 1 || (guarded && !r.Identical)
}

// pay is an instance of the payment service: POST /unguarded/pay and
// POST /guarded/pay charge the card for {"payment_id", "amount"}. Unguarded
// it charges for every copy. Guarded, idemhttp runs the handler once per
// payment_id and replays its answer, and the handler writes the payment's
// ledger row (primary key: the payment) before it charges, so a copy that
// slipped past the key is stopped there.
func pay(ctx context.Context, w *worker, p payParams) error {
	st, err := w.stores(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = st.close() }()
	mw, err := idemhttp.NewMiddleware(st.idem, idemhttp.WithBodyKey("payment_id"),
		idemhttp.WithWait(payWait), idemhttp.WithInProgress(30*time.Second))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	svc := &payService{w: w, p: p}
	mux.Handle("POST /unguarded/pay", svc.handler(false))
	mux.Handle("POST /guarded/pay", mw(svc.handler(true)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	w.ready(event{Addr: ln.Addr().String()})
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

var errBadPayment = errors.New("payment_id and a positive amount are required")

// A payService is the payment service of one instance.
type payService struct {
	w *worker
	p payParams
}

func (svc *payService) handler(guarded bool) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { svc.pay(rw, r, guarded) })
}

func (svc *payService) pay(rw http.ResponseWriter, r *http.Request, guarded bool) {
	w := svc.w
	var req struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.PaymentID == "" || req.Amount <= 0 {
		http.Error(rw, errBadPayment.Error(), http.StatusBadRequest)
		return
	}
	// A client that hangs up does not take back a charge on its way.
	ctx := context.WithoutCancel(r.Context())
	chargeID := newChargeID()
	if guarded {
		gate := req.PaymentID
		if svc.p.Private {
			gate = w.name + "/" + gate // sabotage: each instance its own books
		}
		res, err := w.data.exec(ctx, `INSERT INTO demo_ledger (gate_key, charge_id, instance) VALUES ($1, $2, $3) `+
			w.data.dialect.DoNothing("gate_key"), gate, chargeID, w.name)
		if err != nil {
			http.Error(rw, "ledger unavailable", http.StatusServiceUnavailable)
			return
		}
		if n, _ := res.RowsAffected(); n == 0 {
			// Taken before: answer with the payment's charge, charge nothing.
			var inst string
			if err := w.data.row(ctx, `SELECT charge_id, instance FROM demo_ledger WHERE gate_key = $1`, gate).Scan(&chargeID, &inst); err != nil {
				http.Error(rw, "ledger unavailable", http.StatusServiceUnavailable)
				return
			}
			w.emit(event{Kind: kindRefused, ID: chargeID}) // the ledger's gate
			writePaid(rw, req.PaymentID, chargeID, req.Amount, inst)
			return
		}
	}
	// The card network: slow, and it charges whoever asks.
	time.Sleep(svc.p.Bank)
	if _, err := w.data.exec(ctx, `INSERT INTO demo_bank_charges (payment_id, charge_id, amount, instance)
		VALUES ($1, $2, $3, $4)`, req.PaymentID, chargeID, req.Amount, w.name); err != nil {
		http.Error(rw, "card network unavailable", http.StatusBadGateway)
		return
	}
	w.emit(event{Kind: kindCharged, ID: chargeID})
	writePaid(rw, req.PaymentID, chargeID, req.Amount, w.name)
}

func writePaid(rw http.ResponseWriter, paymentID, chargeID string, amount int64, instance string) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{
		"payment_id": paymentID, "charge_id": chargeID,
		"amount": amount, "status": "charged", "instance": strings.TrimPrefix(instance, "instance "),
	})
}

func newChargeID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "ch_" + hex.EncodeToString(b[:])
}
