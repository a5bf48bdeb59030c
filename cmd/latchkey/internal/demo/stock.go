package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// Overselling: many buyers, one item left. Each buyer reads the stock, checks
// it, and writes it back minus one, then records the sale. The buyers are
// goroutines of the demo, served by a pool of request workers, each with its
// own connection to the data database.
const (
	stockBuyers = 100
	stockItems  = 1
	// stockWorkers is how many requests the shop serves at once (its
	// request workers, its connection pool); the other buyers queue for one.
	stockWorkers = 20
	// stockCheck is the time between seeing the item in stock and writing
	// the stock down (a payment check, a call out): the window the
	// unguarded race needs. A buyer who sees none left is refused at once.
	stockCheck = 50 * time.Millisecond
	stockTTL   = 10 * time.Second
)

type stockResult struct {
	Buyers     int   `json:"buyers"`
	InStock    int   `json:"in_stock"` // before
	Sales      int   `json:"sales"`    // rows in the sales table
	Refused    int   `json:"refused"`  // buyers told "sold out"
	Oversold   int   `json:"oversold"` // sales beyond the stock
	StockLeft  int64 `json:"stock_left"`
	DurationMS int64 `json:"duration_ms"`
	Damaged    bool  `json:"damaged"`
}

func init() {
	register(&scenario{
		order: 4,
		name:  "last-item",
		title: fmt.Sprintf("The last item: %d buyers at once for %s in stock, served %d at a time", stockBuyers,
			plural(stockItems, "item", "items"), stockWorkers),
		menu:      fmt.Sprintf("%d buyers for the last item", stockBuyers),
		menuGuard: "lock",
		guard:     "a lock around read, check, write",
		why:       "read, check, write is a race: unguarded, many buyers see 1 left before anyone writes 0",
		unit:      "items oversold",
		tables: []string{
			`CREATE TABLE IF NOT EXISTS demo_stock (item {key} PRIMARY KEY, qty BIGINT NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS demo_sales (item TEXT NOT NULL, buyer BIGINT NOT NULL)`,
		},
		play: playLastItem,
	})
}

func playLastItem(ctx context.Context, d *demo, s *Result) error {
	tlU := newTimeline()
	un, err := d.stockRun(ctx, false, tlU)
	if err != nil {
		return fmt.Errorf("unguarded run: %w", err)
	}
	s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = un, tlU.sorted(), un.Oversold
	s.say("unguarded: %s, %d refused: oversold by %d, yet the stock says %d left %s",
		plural(un.Sales, "sale", "sales"), un.Refused, un.Oversold, un.StockLeft, expected(un.Damaged))
	tlG := newTimeline()
	g, err := d.stockRun(ctx, true, tlG)
	if err != nil {
		return fmt.Errorf("guarded run: %w", err)
	}
	s.Guarded, s.Timeline.Guarded, s.Damage.Guarded = g, tlG.sorted(), g.Oversold
	s.OK = !g.Damaged
	s.say("guarded:   %s, %d refused, %d left %s (%d buyers served in %s)",
		plural(g.Sales, "sale", "sales"), g.Refused, g.StockLeft, mark(s.OK),
		g.Buyers, seconds(time.Duration(g.DurationMS)*time.Millisecond))
	return nil
}

// A purchase is one buyer's attempt, for the timeline.
type purchase struct {
	buyer int
	token uint64
	sold  bool
	at    time.Time
}

func (d *demo) stockRun(ctx context.Context, guarded bool, tl *timeline) (*stockResult, error) {
	item := d.key("item/unguarded")
	if guarded {
		item = d.key("item/guarded")
	}
	if _, err := d.data.exec(ctx, `INSERT INTO demo_stock (item, qty) VALUES ($1, $2)`, item, stockItems); err != nil {
		return nil, err
	}
	// Open every connection before the start, so all buyers really do
	// arrive at once.
	if err := warmUp(ctx, d.data.DB, min(stockWorkers, d.data.Stats().MaxOpenConnections)); err != nil {
		return nil, err
	}
	began := time.Now()
	tl.began = began
	start := make(chan struct{})
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		refused   int
		errs      []error
		purchases []purchase
	)
	serving := make(chan struct{}, stockWorkers)
	for i := range stockBuyers {
		locker := d.lockFor()
		wg.Go(func() {
			<-start
			serving <- struct{}{}
			defer func() { <-serving }()
			buy := func(ctx context.Context) (bool, error) { return buyOne(ctx, d.data, item, i) }
			var sold bool
			var err error
			var token uint64
			if guarded {
				err = lock.Do(ctx, locker, d.key("stock"), func(ctx context.Context, l *lock.Lease) error {
					token = l.Token()
					sold, err = buy(ctx)
					return err
				}, lock.WithTTL(d.ttl(stockTTL)))
			} else {
				sold, err = buy(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			purchases = append(purchases, purchase{buyer: i + 1, token: token, sold: sold, at: time.Now()})
			if err != nil {
				errs = append(errs, err)
			} else if !sold {
				refused++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d of %d buyers failed: %w", len(errs), stockBuyers, errors.Join(errs[0]))
	}
	r := &stockResult{Buyers: stockBuyers, InStock: stockItems, Refused: refused, DurationMS: ms(time.Since(began))}
	if err := d.data.row(ctx, `SELECT count(*) FROM demo_sales WHERE item = $1`, item).Scan(&r.Sales); err != nil {
		return nil, err
	}
	if err := d.data.row(ctx, `SELECT qty FROM demo_stock WHERE item = $1`, item).Scan(&r.StockLeft); err != nil {
		return nil, err
	}
	stockTimeline(tl, purchases, guarded)
	r.Oversold = max(r.Sales-stockItems, 0)
	r.Damaged = r.Oversold > 0 || r.Sales+r.Refused != stockBuyers || r.StockLeft != int64(stockItems-r.Sales)
	return r, nil
}

// buyOne is the usual hand-written deductStock: read the stock, check it,
// write it back minus one, record the sale. It reports whether it sold.
func buyOne(ctx context.Context, db *dataDB, item string, buyer int) (bool, error) {
	var qty int64
	if err := db.row(ctx, `SELECT qty FROM demo_stock WHERE item = $1`, item).Scan(&qty); err != nil {
		return false, err
	}
	if qty < 1 {
		return false, nil
	}
	if err := sleep(ctx, stockCheck); err != nil {
		return false, err
	}
	if _, err := db.exec(ctx, `UPDATE demo_stock SET qty = $1 WHERE item = $2`, qty-1, item); err != nil {
		return false, err
	}
	if _, err := db.exec(ctx, `INSERT INTO demo_sales (item, buyer) VALUES ($1, $2)`, item, buyer); err != nil {
		return false, err
	}
	return true, nil
}

// warmUp opens n connections of db and returns them to its idle pool.
func warmUp(ctx context.Context, db *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

// stockTimeline summarises a hundred purchases in a few steps: the first sale,
// the sales after it (oversold), the refusals.
func stockTimeline(tl *timeline, ps []purchase, guarded bool) {
	slices.SortFunc(ps, func(a, b purchase) int { return a.at.Compare(b.at) })
	tl.addN(tl.began, fmt.Sprintf("buyers x%d", len(ps)), kindSent, "all start at once", 0, len(ps))
	var sold, refused []purchase
	for _, p := range ps {
		if p.sold {
			sold = append(sold, p)
		} else {
			refused = append(refused, p)
		}
	}
	tokens := func(ps []purchase) string {
		if !guarded || len(ps) == 0 {
			return ""
		}
		if len(ps) == 1 {
			return fmt.Sprintf("token %d: ", ps[0].token)
		}
		lo, hi := ps[0].token, ps[0].token
		for _, p := range ps {
			lo, hi = min(lo, p.token), max(hi, p.token)
		}
		return fmt.Sprintf("tokens %d..%d: ", lo, hi)
	}
	if len(sold) > 0 {
		first := sold[0]
		tl.add(first.at, fmt.Sprintf("buyer %d", first.buyer), kindSold, tokens(sold[:1])+"read 1 left, sold the last item", first.token)
	}
	if len(sold) > 1 {
		last := sold[len(sold)-1]
		tl.addN(last.at, fmt.Sprintf("buyers x%d", len(sold)-1), kindSold,
			fmt.Sprintf("read 1 left before anyone wrote 0: sold too, oversold by %d", len(sold)-1), 0, len(sold)-1)
	}
	if len(refused) > 0 {
		last := refused[len(refused)-1]
		tl.addN(last.at, fmt.Sprintf("buyers x%d", len(refused)), kindSoldOut, tokens(refused)+"read 0 left, refused", 0, len(refused))
	}
}
