package lockurl

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// zkDialTimeout bounds Open's wait for a ZooKeeper session when ctx has no
// earlier deadline.
const zkDialTimeout = 5 * time.Second

// zkOpener opens what newFn (zklock.New, NewRW, NewSemaphores) makes, made
// into a T by on, waiting at most zkDialTimeout for the session; it has no
// connection of the opener's to close, closing its session itself.
// zk://[user:password@]host:port[,host:port...][/prefix][?session=30s&tick=2s&names=kazoo]: a
// ZooKeeper ensemble through any of the listed servers (port 2181 when none
// is given). A user and password authenticate the session with the digest
// scheme, and the nodes created are then that identity's alone
// (zklock.WithDigestAuth). The path is the parent of the lock znodes (zklock.WithPrefix;
// none means /latchkey). session is the session timeout to ask for, which
// bounds the TTLs Acquire accepts; tick is the servers' tickTime
// (zklock.WithTickTime: give it when it is longer than 2 s); names=kazoo writes kazoo's node names
// instead of Curator's (see zklock).
func zkOpener[V, T any](newFn func(context.Context, []string, ...zklock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, _ string, u *url.URL) (T, error) {
		servers, opts, err := zkConfig(u)
		if err != nil {
			return none[T](err)
		}
		dctx, cancel := context.WithTimeout(ctx, zkDialTimeout)
		defer cancel()
		v, err := newFn(dctx, servers, opts...)
		if err != nil {
			return none[T](err)
		}
		return on(v, nil), nil
	}
}

// zkLockerOn is a zklock Locker as a Locker.
func zkLockerOn(l *zklock.Locker, _ func() error) Locker { return l }

// zkConfig reads a zk URL: the servers and the options it asks for.
func zkConfig(u *url.URL) ([]string, []zklock.Option, error) {
	if u.Opaque != "" || u.Host == "" {
		return nil, nil, invalidf("zk URL names no server; write zk://host:port[,host:port][/prefix]")
	}
	servers, err := zkServers(u.Host)
	if err != nil {
		return nil, nil, err
	}
	var opts []zklock.Option
	if u.User != nil {
		password, ok := u.User.Password()
		if !ok || u.User.Username() == "" {
			return nil, nil, invalidf("zk URL: digest authentication needs user:password@")
		}
		opts = append(opts, zklock.WithDigestAuth(u.User.Username(), password))
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		opts = append(opts, zklock.WithPrefix(p))
	}
	for k, v := range u.Query() {
		opt, err := zkParam(k, v)
		if err != nil {
			return nil, nil, err
		}
		if opt != nil {
			opts = append(opts, opt)
		}
	}
	return servers, opts, nil
}

// zkServers returns the servers of a zk URL's host list, each with ZooKeeper's
// port 2181 unless it names one.
func zkServers(hosts string) ([]string, error) {
	var servers []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, invalidf("zk URL has an empty server in %q", hosts)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "2181")
		}
		servers = append(servers, h)
	}
	return servers, nil
}

// zkParam returns the option a zk URL's query parameter k (given the values
// v) sets, or nil for one that keeps the default (names=curator).
func zkParam(k string, v []string) (zklock.Option, error) {
	switch {
	case k == "session" && len(v) == 1:
		d, err := time.ParseDuration(v[0])
		if err != nil {
			return nil, invalidf("zk URL: session: %w", err)
		}
		return zklock.WithSessionTimeout(d), nil
	case k == "tick" && len(v) == 1:
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return nil, invalidf("zk URL: tick: want a positive duration such as 2s, got %q", v[0])
		}
		return zklock.WithTickTime(d), nil
	case k == "names" && len(v) == 1 && v[0] == "kazoo":
		return zklock.WithNodeNames(zklock.KazooNames), nil
	case k == "names" && len(v) == 1 && v[0] == "curator":
		return nil, nil
	}
	return nil, invalidf("zk URL: unknown or repeated parameter %q (known: session=DURATION, tick=DURATION, names=curator|kazoo)", k)
}

var _ Locker = (*zklock.Locker)(nil)
