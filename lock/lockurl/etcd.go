package lockurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
)

// etcdDialTimeout bounds Open's first contact with the cluster when ctx has
// no earlier deadline.
const etcdDialTimeout = 5 * time.Second

// etcdOpener opens what newFn (etcdlock.New, NewRW, NewSemaphores) makes
// on the client an etcd URL names, made into a T by on.
// etcd://[user:password@]host:port[,host:port...][/prefix][?cacert=FILE&cert=FILE&key=FILE]:
// an etcd cluster through any of the listed members. The path, without its
// leading slash, is the key prefix (etcdlock.WithPrefix); none means the
// layout of `etcdctl lock` and concurrency.Mutex. The user and password
// are those of etcd's authentication (etcdctl's --user); cacert, cert and
// key are etcdctl's --cacert, --cert and --key, and turn TLS on: the CA
// that signs the members' certificates, and the client's certificate for a
// cluster started with --client-cert-auth. Without them the connection is
// plain gRPC.
func etcdOpener[V, T any](newFn func(etcdlock.Client, ...etcdlock.Option) (V, error), on func(V, func() error) T) backendurl.Opener[T] {
	return func(ctx context.Context, _ string, u *url.URL) (T, error) {
		c, opts, err := etcdConnect(ctx, u)
		if err != nil {
			return none[T](err)
		}
		v, err := newFn(c, opts...)
		return owning(v, err, c.Close, on)
	}
}

// etcdConnect returns a client of the cluster an etcd URL names, checked to
// answer, and the options its path asks for.
func etcdConnect(ctx context.Context, u *url.URL) (*clientv3.Client, []etcdlock.Option, error) {
	if u.Opaque != "" || u.Host == "" {
		return nil, nil, invalidf("etcd URL names no member; write etcd://host:port[,host:port]")
	}
	var eps []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, nil, invalidf("etcd URL has an empty member in %q", u.Host)
		}
		eps = append(eps, h)
	}
	rest, tlsCfg, err := backendurl.TakeTLS(u.String())
	if err != nil {
		return nil, nil, invalidf("etcd URL: %w", err)
	}
	if _, query, ok := strings.Cut(rest, "?"); ok && query != "" {
		return nil, nil, invalidf("etcd URL: unknown parameters %q (known: cacert=FILE, cert=FILE, key=FILE)", query)
	}
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: etcdDialTimeout, Logger: zap.NewNop(), Context: context.Background(), TLS: tlsCfg}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if tlsCfg != nil {
		if err := backendurl.ProbeTLS(ctx, eps, tlsCfg); err != nil {
			return nil, nil, fmt.Errorf("etcd: %w", err)
		}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	var opts []etcdlock.Option
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" {
		opts = append(opts, etcdlock.WithPrefix(prefix))
	}
	// clientv3.New does not contact the server: check it answers now, and
	// that the user may read where the locks live.
	sctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	defer cancel()
	if _, err := c.Get(sctx, prefix+"latchkey-lockurl-ping", clientv3.WithCountOnly()); err != nil {
		_ = c.Close()
		if errors.Is(err, rpctypes.ErrPermissionDenied) {
			return nil, nil, fmt.Errorf("etcd: user %q may not use the keys under %q: %w (grant its role readwrite on that prefix)",
				cfg.Username, prefix, err)
		}
		return nil, nil, err
	}
	return c, opts, nil
}

// etcdLocker revokes the Locker's idle leases and closes its client.
type etcdLocker struct {
	*etcdlock.Locker
	conns
}

func (l *etcdLocker) Close() error { return l.close(l.Locker.Close) }

func etcdLockerOn(l *etcdlock.Locker, closeConn func() error) Locker {
	return &etcdLocker{Locker: l, conns: conns{closeConn: closeConn}}
}

var _ Locker = (*etcdLocker)(nil)
