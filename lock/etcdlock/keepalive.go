package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connClient is implemented by *clientv3.Client (and types that embed it):
// the gRPC connection its requests go through.
type connClient interface {
	ActiveConnection() *grpc.ClientConn
}

// keepAliveStreams is how many LeaseKeepAlive streams a Locker keeps open.
// The server answers the requests of one stream one at a time, each after a
// check of its leadership; a few streams let keep-alives from concurrent
// locks be answered together.
const keepAliveStreams = 4

// stallAfter is how long the oldest unanswered keep-alive of a stream may
// wait before a caller that gives up on it also gives up on the stream (the
// connection may be dead without an error yet): the next keep-alive opens a
// new stream.
const stallAfter = 2 * time.Second

// retryWait is the pause before a keep-alive whose stream broke is sent again
// on a new stream.
const retryWait = 20 * time.Millisecond

var (
	errKeeperClosed = errors.New("etcdlock: keep-alive streams closed")
	errStalled      = errors.New("etcdlock: keep-alive stream stalled")
	errOutOfOrder   = errors.New("etcdlock: keep-alive answer out of order")
)

// A keeper sends lease keep-alives over a few long-lived LeaseKeepAlive
// streams instead of opening one stream per keep-alive (as
// clientv3.Lease.KeepAliveOnce does). It sends only what its callers ask for:
// nothing is kept alive in the background.
//
// A stream answers its requests in the order they were sent, so each stream
// keeps its unanswered requests in a queue, in send order, and hands each
// answer to the head of the queue (checking the lease ID). A caller that
// gives up leaves its request in the queue, where its answer is discarded.
// When a stream breaks, every request still in its queue fails: the caller
// does not know whether the server renewed the lease, treats it as not
// renewed, and sends the keep-alive again on a new stream.
type keeper struct {
	lc       pb.LeaseClient // nil: every keep-alive goes through fallback
	fallback Client
	ctx      context.Context // parent of the streams' contexts
	cancel   context.CancelFunc
	closed   atomic.Bool
	next     atomic.Uint32 // round robin over slots
	slots    [keepAliveStreams]slot
	wg       sync.WaitGroup // stream openers and receivers
}

// A slot holds one stream at a time, opened when first needed and again
// after it broke.
type slot struct {
	mu      sync.Mutex
	cur     *kaStream     // nil if none is open
	opening chan struct{} // closed when the open in progress ends; nil if none
	openErr error         // why the last stream could not be opened or broke
}

// A kaStream is one LeaseKeepAlive stream.
type kaStream struct {
	k      *keeper
	sl     *slot
	st     pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc

	sendMu chan struct{} // 1-buffered, full while a request is queued and sent

	mu      sync.Mutex
	pending []*kaCall // sent, unanswered, in send order; guarded by mu
	err     error     // why the stream broke, nil while open; guarded by mu
}

// A kaCall is one keep-alive request and, once done is closed, its outcome.
type kaCall struct {
	id   int64
	sent time.Time
	ttl  int64
	err  error
	done chan struct{}
}

func newKeeper(c Client) *keeper {
	k := &keeper{fallback: c}
	if cc, ok := c.(connClient); ok {
		if conn := cc.ActiveConnection(); conn != nil {
			k.lc = pb.NewLeaseClient(conn)
		}
	}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	return k
}

// keepAliveOnce renews lease id once and returns the TTL the server granted,
// counted by the server from when the request arrived, after the call began.
// It returns rpctypes.ErrLeaseNotFound if the lease is gone. A request whose
// stream broke before its answer came is never taken as confirmed: the
// keep-alive is sent again on a new stream, until ctx ends.
func (k *keeper) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	if k.lc == nil || k.closed.Load() {
		return k.viaClient(ctx, id)
	}
	sl := &k.slots[k.next.Add(1)%keepAliveStreams]
	for try := 0; ; try++ {
		if try > 0 {
			t := time.NewTimer(retryWait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return 0, ctx.Err()
			}
		}
		s, err := k.stream(ctx, sl)
		if err == nil {
			var ttl int64
			ttl, err = s.roundTrip(ctx, id)
			if err == nil {
				if ttl <= 0 {
					return 0, rpctypes.ErrLeaseNotFound
				}
				return ttl, nil
			}
		}
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case k.closed.Load():
			return k.viaClient(ctx, id)
		case !retryable(err):
			return 0, err
		}
	}
}

// viaClient is keepAliveOnce on a stream of its own, through the Client.
func (k *keeper) viaClient(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	ka, err := k.fallback.KeepAliveOnce(ctx, id)
	if err != nil {
		return 0, err
	}
	return ka.TTL, nil
}

// retryable reports whether a keep-alive that failed with err may succeed on
// a new stream: the errors clientv3 retries KeepAliveOnce on (the connection
// broke, the server lost its leader) and the stream's own.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, errStalled) || errors.Is(err, errOutOfOrder) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal:
		return true
	}
	return false
}

// stream returns sl's open stream, opening one if there is none.
func (k *keeper) stream(ctx context.Context, sl *slot) (*kaStream, error) {
	for {
		sl.mu.Lock()
		if k.closed.Load() {
			sl.mu.Unlock()
			return nil, errKeeperClosed
		}
		if s := sl.cur; s != nil {
			sl.mu.Unlock()
			return s, nil
		}
		if sl.opening == nil {
			sl.opening = make(chan struct{})
			k.wg.Add(1)
			go k.open(sl, sl.opening)
		}
		opening := sl.opening
		sl.mu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sl.mu.Lock()
		s, err := sl.cur, sl.openErr
		sl.mu.Unlock()
		if s != nil {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		// Not reached: a stream that broke leaves its error.
	}
}

// open opens a stream for sl, waiting for the connection to be ready (or the
// keeper to close), and closes done.
func (k *keeper) open(sl *slot, done chan struct{}) {
	defer k.wg.Done()
	defer close(done)
	sctx, cancel := context.WithCancel(k.ctx)
	st, err := k.lc.LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.opening, sl.openErr = nil, err
	if err != nil {
		cancel()
		return
	}
	if k.closed.Load() {
		cancel()
		sl.openErr = errKeeperClosed
		return
	}
	s := &kaStream{k: k, sl: sl, st: st, cancel: cancel, sendMu: make(chan struct{}, 1)}
	sl.cur = s
	k.wg.Add(1)
	go s.recv()
}

// close ends every stream; the keep-alives waiting on them are sent again
// through the Client, as are later ones. It waits for the keeper's
// goroutines. It is safe to call more than once.
func (k *keeper) close() {
	// With every slot locked, no stream call is between its check of closed
	// and registering its opener with wg.
	for i := range k.slots {
		k.slots[i].mu.Lock()
	}
	k.closed.Store(true)
	for i := range k.slots {
		k.slots[i].mu.Unlock()
	}
	k.cancel()
	k.wg.Wait()
}

// roundTrip sends a keep-alive for id on s and waits for its answer: the TTL
// granted (<= 0 if the lease is gone), or the error that broke the stream.
func (s *kaStream) roundTrip(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	call := &kaCall{id: int64(id), done: make(chan struct{})}
	select {
	case s.sendMu <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		<-s.sendMu
		return 0, err
	}
	call.sent = time.Now()
	s.pending = append(s.pending, call)
	s.mu.Unlock()
	// Send blocks only while the server does not take the stream's data
	// (flow control): a caller that gives up meanwhile gives up the stream.
	stop := context.AfterFunc(ctx, func() { s.fail(errStalled) })
	err := s.st.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
	stop()
	<-s.sendMu
	if err != nil {
		s.fail(err) // fails call too
	}
	select {
	case <-call.done:
		return call.ttl, call.err
	case <-ctx.Done():
		s.abandon(call)
		return 0, ctx.Err()
	}
}

// abandon is called when the caller of call gave up. call stays queued, so
// that its answer, if it comes, is matched to it and discarded. If nothing
// was answered since it was sent, for stallAfter, the stream is given up.
func (s *kaStream) abandon(call *kaCall) {
	s.mu.Lock()
	stalled := len(s.pending) > 0 && s.pending[0] == call && time.Since(call.sent) >= stallAfter
	s.mu.Unlock()
	if stalled {
		s.fail(errStalled)
	}
}

// recv hands each answer to the oldest unanswered request, until the stream
// breaks.
func (s *kaStream) recv() {
	defer s.k.wg.Done()
	for {
		resp, err := s.st.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		if len(s.pending) == 0 || s.pending[0].id != resp.ID {
			s.mu.Unlock()
			s.fail(fmt.Errorf("%w: lease %x", errOutOfOrder, resp.ID))
			return
		}
		call := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.mu.Unlock()
		call.ttl = resp.TTL
		close(call.done)
	}
}

// fail breaks s with err (the first error wins): every request still
// unanswered fails with it, and the slot forgets s.
func (s *kaStream) fail(err error) {
	if s.k.closed.Load() {
		err = errKeeperClosed
	}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	s.cancel()
	s.sl.mu.Lock()
	if s.sl.cur == s {
		s.sl.cur, s.sl.openErr = nil, err
	}
	s.sl.mu.Unlock()
	for _, c := range pending {
		c.err = err
		close(c.done)
	}
}
