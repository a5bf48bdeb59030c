// Package metrics exports latchkey's locks, idempotency middleware,
// message deduplication and outboxes to Prometheus. It is the only latchkey package that
// imports client_golang: the core packages report through small hooks
// (lock.Observer, idemhttp.WithObserver, dedup.WithObserver, fence.SetObserver,
// state.SetObserver) and this package
// turns those reports into collectors that a program registers.
//
//	locks, _ := metrics.NewLock()     // errors only for a bad option
//	idm, _ := metrics.NewIdem()
//	dd, _ := metrics.NewDedup()
//	refused, _ := metrics.NewRefusals()
//	reg.MustRegister(locks, idm, dd, refused)
//	refused.Observe()                                // stale fenced writes and refused state changes, process-wide
//
//	locker.SetObserver(locks.Observer("redis"))     // any backend's Locker
//	mw := idemhttp.Middleware(store, idemhttp.WithObserver(idm.Observer("pay")))
//	d, _ := dedup.New(store, dedup.WithObserver(dd.Observer("orders")))
//	ob := metrics.NewOutbox()                       // pending messages and their age, read at each scrape
//	ob.Add("payments", payments)                    // an *outbox.Outbox
//	dd.BloomFill("views", func() float64 {          // any func() float64, read at each scrape
//		s, _ := filter.Stats(context.Background()) // a bloomfilter.Filter
//		return s.Current.FillRatio
//	})
//
// Every metric is named latchkey_<subsystem>_<name>, durations are histograms
// in seconds, and labels are few and bounded: the backend, handler or
// consumer name the program chose, and an outcome from a fixed set. Keys,
// tokens, message ids and bodies never become labels.
package metrics
