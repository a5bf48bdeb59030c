package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/state"
)

// Refusals is a prometheus.Collector of the writes the resources refused:
// fenced writes with a stale token and state changes not applied. Register
// it once and call Observe (or plug FenceObserver and StateObserver into
// fence.SetObserver and state.SetObserver yourself, joined with others
// through fence.Observers and state.Observers). Its metrics:
//
//	latchkey_fence_refused_total{guard,op}      counter: guard sql, redis or memory; op update, upsert, claim, read, set, hset, del, check
//	latchkey_state_refused_total{table,reason}  counter: reason illegal, duplicate or conflict
//
// A rising fence count means lock holders wrote after their lease had
// passed on (a pause, a partition): the fence held, but the lock did not.
type Refusals struct {
	vecs
	fence *prometheus.CounterVec
	state *prometheus.CounterVec
}

var _ prometheus.Collector = (*Refusals)(nil)

// NewRefusals returns a Refusals collector. It fails with ErrInvalid on a
// bad option.
func NewRefusals(opts ...Option) (*Refusals, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	m := &Refusals{
		fence: c.counter("fence", "refused_total",
			"Fenced writes refused because their token was stale, by guard and operation.", "guard", "op"),
		state: c.counter("state", "refused_total",
			"State transitions and optimistic updates not applied, by table and reason (illegal, duplicate, conflict).", "table", "reason"),
	}
	m.vecs = vecs{m.fence, m.state}
	return m, nil
}

// FenceObserver returns the fence.Observer that counts refused writes.
func (m *Refusals) FenceObserver() fence.Observer {
	return func(_ context.Context, r fence.Refusal) { m.fence.WithLabelValues(r.Guard, r.Op).Inc() }
}

// StateObserver returns the state.Observer that counts changes not applied.
// The table label is the table's name, as the program gave it.
func (m *Refusals) StateObserver() state.Observer {
	return func(_ context.Context, r state.Refusal) { m.state.WithLabelValues(r.Table, r.Reason).Inc() }
}

// Observe makes FenceObserver and StateObserver the process's fence and
// state observers, replacing any set before.
func (m *Refusals) Observe() {
	fence.SetObserver(m.FenceObserver())
	state.SetObserver(m.StateObserver())
}

// Describe implements prometheus.Collector.
func (m *Refusals) Describe(ch chan<- *prometheus.Desc) { m.vecs.Describe(ch) }

// Collect implements prometheus.Collector.
func (m *Refusals) Collect(ch chan<- prometheus.Metric) { m.vecs.Collect(ch) }
