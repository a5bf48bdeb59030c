package testsvc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to one
// target and injects network faults on demand: cut connections, added
// latency, and a blackhole where bytes vanish. Point the client under test at
// Addr instead of the server. All methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled on close; bounds dials to the target
	cancel context.CancelFunc

	latency   atomic.Int64 // time.Duration added to every chunk
	blackhole atomic.Bool

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[*proxyConn]struct{}
	wg     sync.WaitGroup // every goroutine of the proxy
}

// proxyDialTimeout bounds a dial to the target.
const proxyDialTimeout = 5 * time.Second

// NewProxy starts a proxy on 127.0.0.1 on a free port that forwards to target
// (host:port). t.Cleanup closes the listener and every connection and waits
// until all the proxy's goroutines have ended.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsvc: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut breaks the link: every open connection is closed at once (the client
// sees a reset) and new connections are accepted and immediately reset,
// until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

// Restore ends a Cut: new connections are forwarded again. Connections
// closed by Cut stay closed.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// SetLatency delays every chunk of bytes forwarded, in both directions, by d
// from the moment the proxy read it (so a request and its answer take at least
// 2d more). Order is kept. 0 removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	p.latency.Store(int64(d))
}

// Blackhole, when on, keeps every connection open but forwards nothing: bytes
// read from either side, including any already queued, are dropped, as in a
// network partition where packets vanish. New connections are accepted and
// dialed through but carry nothing either. Off resumes forwarding on the
// same connections; what was dropped stays lost.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

func (p *Proxy) close() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or similar: wait and go on.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		p.mu.Lock()
		switch {
		case p.closed:
			c.Close()
		case p.cut:
			reset(c)
		default:
			p.wg.Add(1)
			go p.handle(c)
		}
		p.mu.Unlock()
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	c := &proxyConn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.cut {
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.conns[c] = struct{}{}
	var dirs sync.WaitGroup
	dirs.Add(2)
	p.wg.Add(4)
	p.mu.Unlock()

	go p.forward(c, client, server, &dirs)
	go p.forward(c, server, client, &dirs)
	dirs.Wait()
	c.close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// chunk is a piece of the byte stream waiting to be written.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst through a queue, so latency delays each chunk
// without slowing the stream down. It runs a reader and a writer goroutine
// (two of the four counted in p.wg by handle, this goroutine being the other).
func (p *Proxy) forward(c *proxyConn, src, dst net.Conn, dirs *sync.WaitGroup) {
	defer p.wg.Done()
	defer dirs.Done()
	queue := make(chan chunk, 64)
	go p.read(c, src, queue)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-queue:
		case <-c.done:
			return
		}
		if !ok {
			// src sent FIN: pass it on, keep the other direction going.
			if tc, isTCP := dst.(*net.TCPConn); isTCP {
				_ = tc.CloseWrite()
			}
			return
		}
		if !waitDue(c, ch.due, &timer) {
			return
		}
		if p.blackhole.Load() {
			continue
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close()
			return
		}
	}
}

// read is forward's reader: it queues what src sends, each chunk due after
// the proxy's latency, and drops it while the proxy is a black hole. It
// closes queue when src ends.
func (p *Proxy) read(c *proxyConn, src net.Conn, queue chan<- chunk) {
	defer p.wg.Done()
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.blackhole.Load() {
			ch := chunk{b: append([]byte(nil), buf[:n]...)}
			if d := time.Duration(p.latency.Load()); d > 0 {
				ch.due = time.Now().Add(d)
			}
			select {
			case queue <- ch:
			case <-c.done:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				c.close()
			}
			return
		}
	}
}

// waitDue waits until due (none if zero or past) on *timer, which it
// makes on first use; false if c closed meanwhile.
func waitDue(c *proxyConn, due time.Time, timer **time.Timer) bool {
	wait := time.Until(due)
	if due.IsZero() || wait <= 0 {
		return true
	}
	if *timer == nil {
		*timer = time.NewTimer(wait)
	} else {
		(*timer).Reset(wait)
	}
	select {
	case <-(*timer).C:
		return true
	case <-c.done:
		return false
	}
}

// proxyConn is one proxied connection: the client's side and the target's.
type proxyConn struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
}

// close closes both sides, gracefully.
func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
	})
}

// abort closes both sides with a reset, as a broken link would.
func (c *proxyConn) abort() {
	c.once.Do(func() {
		close(c.done)
		reset(c.client)
		reset(c.server)
	})
}

// reset closes c so that the peer sees a connection reset, not an orderly EOF.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
