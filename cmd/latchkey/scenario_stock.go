package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// The seeds' overselling example: many buyers, one item left. Each buyer
// reads the stock, checks it, and writes it back minus one, then records
// the sale; the buyers are goroutines, each with its own connection to the
// SQLite file.
const (
	stockBuyers = 100
	stockItems  = 1
	// stockCheck is the time between reading the stock and writing it (a
	// payment check, a call out): the window the unguarded race needs.
	stockCheck = 5 * time.Millisecond
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

func (d *demo) lastItem(ctx context.Context) *scenario {
	s := &scenario{
		Name:  "last-item",
		Title: fmt.Sprintf("The last item: %d buyers at once for %s in stock", stockBuyers, plural(stockItems, "item", "items")),
		Why:   "read, check, write is a race: unguarded, many buyers see 1 left before anyone writes 0",
		OK:    true,
	}
	began := time.Now()
	defer func() { s.DurationMS = ms(time.Since(began)) }()
	un, err := d.stockRun(ctx, false)
	if err != nil {
		return s.failed(fmt.Errorf("unguarded run: %w", err))
	}
	s.Unguarded = un
	s.say("unguarded: %s, %d refused: oversold by %d, yet the stock says %d left %s",
		plural(un.Sales, "sale", "sales"), un.Refused, un.Oversold, un.StockLeft, expected(un.Damaged))
	g, err := d.stockRun(ctx, true)
	if err != nil {
		return s.failed(fmt.Errorf("guarded run: %w", err))
	}
	s.Guarded = g
	s.OK = !g.Damaged
	s.say("guarded:   %s, %d refused, %d left %s (%d buyers served in %s)",
		plural(g.Sales, "sale", "sales"), g.Refused, g.StockLeft, mark(s.OK),
		g.Buyers, seconds(time.Duration(g.DurationMS)*time.Millisecond))
	return s
}

func (d *demo) stockRun(ctx context.Context, guarded bool) (*stockResult, error) {
	item := d.key("item/unguarded")
	if guarded {
		item = d.key("item/guarded")
	}
	if _, err := d.data.ExecContext(ctx, `INSERT INTO demo_stock (item, qty) VALUES (?, ?)`, item, stockItems); err != nil {
		return nil, err
	}
	// Open every connection before the start, so all buyers really do
	// arrive at once.
	if err := warmUp(ctx, d.data, stockBuyers); err != nil {
		return nil, err
	}
	began := time.Now()
	start := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
		errs    []error
	)
	for i := range stockBuyers {
		locker := d.lockFor()
		wg.Go(func() {
			<-start
			buy := func(ctx context.Context) (bool, error) { return buyOne(ctx, d.data, item, i) }
			var sold bool
			var err error
			if guarded {
				err = lock.Do(ctx, locker, d.key("stock"), func(ctx context.Context, _ *lock.Lease) error {
					sold, err = buy(ctx)
					return err
				}, lock.WithTTL(stockTTL))
			} else {
				sold, err = buy(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
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
	if err := d.data.QueryRowContext(ctx, `SELECT count(*) FROM demo_sales WHERE item = ?`, item).Scan(&r.Sales); err != nil {
		return nil, err
	}
	if err := d.data.QueryRowContext(ctx, `SELECT qty FROM demo_stock WHERE item = ?`, item).Scan(&r.StockLeft); err != nil {
		return nil, err
	}
	r.Oversold = max(r.Sales-stockItems, 0)
	r.Damaged = r.Oversold > 0 || r.Sales+r.Refused != stockBuyers || r.StockLeft != int64(stockItems-r.Sales)
	return r, nil
}

// buyOne is the seeds' deductStock: read the stock, check it, write it back
// minus one, record the sale. It reports whether it sold.
func buyOne(ctx context.Context, db *sql.DB, item string, buyer int) (bool, error) {
	var qty int64
	if err := db.QueryRowContext(ctx, `SELECT qty FROM demo_stock WHERE item = ?`, item).Scan(&qty); err != nil {
		return false, err
	}
	if err := sleep(ctx, stockCheck); err != nil {
		return false, err
	}
	if qty < 1 {
		return false, nil
	}
	if _, err := db.ExecContext(ctx, `UPDATE demo_stock SET qty = ? WHERE item = ?`, qty-1, item); err != nil {
		return false, err
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO demo_sales (item, buyer) VALUES (?, ?)`, item, buyer); err != nil {
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
