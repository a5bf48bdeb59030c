package lockurl

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock/redlock"
)

// redlock://[user:password@]host:port,host:port,host:port[/db][?opts]: Redlock
// over independent Redis masters (lock/redlock), majority quorum. The
// credentials, database and options (as redis.ParseURL reads them) apply to
// every node. Open fails unless a quorum of the nodes answers PING.
func openRedlock(ctx context.Context, raw string, u *url.URL) (Locker, error) {
	if u.Opaque != "" || u.Host == "" {
		return nil, invalidf("redlock URL names no node; write redlock://host:port,host:port,host:port")
	}
	auth := ""
	if u.User != nil {
		auth = u.User.String() + "@"
	}
	var clients []*redis.Client
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			closeAll()
			return nil, invalidf("redlock URL has an empty node in %q", u.Host)
		}
		node := &url.URL{Scheme: "redis", Host: h, Path: u.Path, RawQuery: u.RawQuery}
		opt, err := backendurl.RedisOptions(strings.Replace(node.String(), "redis://", "redis://"+auth, 1))
		if err != nil {
			closeAll()
			return nil, invalidf("%w", err)
		}
		// A context's deadline bounds every call, so a partitioned node
		// costs the per-node timeout, not go-redis's own read timeout.
		opt.ContextTimeoutEnabled = true
		clients = append(clients, redis.NewClient(opt))
	}
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Ping(ctx).Err()
		}()
	}
	wg.Wait()
	var up int
	var first error
	for _, err := range errs {
		if err == nil {
			up++
		} else if first == nil {
			first = err
		}
	}
	if up < len(clients)/2+1 {
		closeAll()
		return nil, fmt.Errorf("only %d of %d redlock nodes answer: %w", up, len(clients), first)
	}
	rc := make([]redlock.Client, len(clients))
	for i, c := range clients {
		rc[i] = c
	}
	l, err := redlock.New(rc)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &redlockLocker{Locker: l, conns: conns{closeConn: func() error { closeAll(); return nil }}}, nil
}

// redlockLocker closes its clients after the Locker.
type redlockLocker struct {
	*redlock.Locker
	conns
}

func (l *redlockLocker) Close() error { return l.close(l.Locker.Close) }

var _ Locker = (*redlockLocker)(nil)
