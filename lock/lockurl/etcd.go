package lockurl

import (
	"context"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/latchkey-go/latchkey/lock/etcdlock"
)

// etcdDialTimeout bounds Open's first contact with the cluster when ctx has
// no earlier deadline.
const etcdDialTimeout = 5 * time.Second

// etcd://[user:password@]host:port[,host:port...][/prefix]: an etcd cluster
// through any of the listed members, plain HTTP (gRPC without TLS). The path,
// without its leading slash, is the key prefix (etcdlock.WithPrefix); none
// means the layout of `etcdctl lock` and concurrency.Mutex.
func openEtcd(ctx context.Context, _ string, u *url.URL) (Locker, error) {
	c, opts, err := etcdConnect(ctx, u)
	if err != nil {
		return nil, err
	}
	l, err := etcdlock.New(c, opts...)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &etcdLocker{Locker: l, conns: conns{closeConn: c.Close}}, nil
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
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: etcdDialTimeout, Logger: zap.NewNop(), Context: context.Background()}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	// clientv3.New does not contact the server: check it answers now.
	sctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	defer cancel()
	if _, err := c.Get(sctx, "latchkey-lockurl-ping", clientv3.WithCountOnly()); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	var opts []etcdlock.Option
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		opts = append(opts, etcdlock.WithPrefix(p))
	}
	return c, opts, nil
}

// etcdLocker revokes the Locker's idle leases and closes its client.
type etcdLocker struct {
	*etcdlock.Locker
	conns
}

func (l *etcdLocker) Close() error { return l.close(l.Locker.Close) }

var _ Locker = (*etcdLocker)(nil)
