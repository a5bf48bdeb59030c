package lockurl_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// tlsQuery is the query naming a CA and, when cert is not "", the
// client's certificate and key.
func tlsQuery(ca, cert, key string) string {
	q := url.Values{"cacert": {ca}}
	if cert != "" {
		q.Set("cert", cert)
		q.Set("key", key)
	}
	return q.Encode()
}

// refused opens rawURL, which must fail, and checks that the error says
// why, without the password, before the deadline of a client's retries.
func refused(t *testing.T, rawURL, says, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	l, err := lockurl.Open(ctx, rawURL)
	if err == nil {
		l.Close()
		t.Errorf("%s: opened", lockurl.Redact(rawURL))
		return
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("%s: %v, want it to say %q", lockurl.Redact(rawURL), err, says)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("the error shows the password: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: told only by a timeout: %v", lockurl.Redact(rawURL), err)
	}
}

// holds opens rawURL and takes and releases a lock with it.
func holds(t *testing.T, rawURL string) {
	t.Helper()
	l := open(t, rawURL)
	lease, err := l.Acquire(t.Context(), testsvc.KeyPrefix(t)+"tls", lock.WithTTL(5*time.Second), lock.WithWait(0))
	if err != nil {
		t.Fatalf("%s: %v", lockurl.Redact(rawURL), err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// An etcd that serves clients over TLS and asks for their certificates, as
// every Kubernetes etcd does: reached with etcdctl's three files, and
// refused, each in its own words, without the client certificate, with a
// CA that did not sign the server's, or with a client certificate of
// another CA.
func TestEtcdWithClientCertificates(t *testing.T) {
	c := testsvc.NewCerts(t)
	ep := testsvc.StartEtcdTLS(t, c, true).Endpoint()
	holds(t, "etcd://"+ep+"/app?"+tlsQuery(c.CA, c.ClientCert, c.ClientKey))

	refused(t, "etcd://"+ep+"/app?"+tlsQuery(c.CA, "", ""), "refused this client's certificate, or its lack of one", "")
	refused(t, "etcd://"+ep+"/app?"+tlsQuery(c.OtherCA, c.ClientCert, c.ClientKey), "certificate signed by unknown authority", "")
	refused(t, "etcd://"+ep+"/app?"+tlsQuery(c.CA, c.OtherClient, c.OtherClientKey), "refused this client's certificate", "")
	refused(t, "etcd://"+ep+"/app?cacert=/nonexistent/ca.pem", "no such file", "")
	refused(t, "etcd://"+ep+"/app?"+url.Values{"cacert": {c.CA}, "cert": {c.ClientCert}}.Encode(), "go together", "")
	refused(t, "etcd://"+ep+"/app?tls=maybe", "unknown parameters", "")
}

// A Redis with TLS, client certificates, a default password and an ACL
// user: reached as the user over rediss:// with the CA and the client's
// certificate; refused for a wrong password (WRONGPASS, the password never
// shown), a wrong CA, a server certificate that has expired, and no client
// certificate.
func TestRedisWithTLSAndACLUser(t *testing.T) {
	const secret, userSecret = "def4ult-pw", "al1ce-pw"
	c := testsvc.NewCerts(t)
	start := func(cert, key string) string {
		port := testsvc.FreePort(t)
		testsvc.StartRedis(t, "--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
			"--tls-ca-cert-file", c.CA, "--tls-auth-clients", "yes", "--requirepass", secret,
			"--user", "alice", "on", ">"+userSecret, "~*", "&*", "+@all")
		return "127.0.0.1:" + strconv.Itoa(port)
	}
	addr := start(c.ServerCert, c.ServerKey)
	files := tlsQuery(c.CA, c.ClientCert, c.ClientKey)
	holds(t, "rediss://alice:"+userSecret+"@"+addr+"?"+files)
	holds(t, "redis://:"+secret+"@"+addr+"?"+files) // the files turn TLS on for redis:// too

	refused(t, "rediss://alice:guess-"+userSecret+"@"+addr+"?"+files, "WRONGPASS", userSecret)
	refused(t, "rediss://alice:"+userSecret+"@"+addr+"?"+tlsQuery(c.OtherCA, c.ClientCert, c.ClientKey), "certificate signed by unknown authority", userSecret)
	refused(t, "rediss://alice:"+userSecret+"@"+addr+"?"+tlsQuery(c.CA, "", ""), "certificate required", userSecret)
	expired := start(c.ExpiredCert, c.ExpiredKey)
	refused(t, "rediss://alice:"+userSecret+"@"+expired+"?"+files, "certificate has expired", userSecret)
}

// An etcd with authentication on, where each service's role may use its
// own prefix: the service's user takes locks under it; a user without the
// permission, or a wrong password, is told so at Open and takes nothing.
func TestEtcdWithAuthentication(t *testing.T) {
	ep := testsvc.StartEtcd(t).Endpoint()
	ctx := t.Context()
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(root.RoleAdd(ctx, "root"))
	must(root.UserAdd(ctx, "root", "r00t-pw"))
	must(root.UserGrantRole(ctx, "root", "root"))
	must(root.RoleAdd(ctx, "payments"))
	must(root.RoleGrantPermission(ctx, "payments", "payments/", clientv3.GetPrefixRangeEnd("payments/"), clientv3.PermissionType(clientv3.PermReadWrite)))
	must(root.UserAdd(ctx, "billing", "b1lling-pw"))
	must(root.UserGrantRole(ctx, "billing", "payments"))
	must(root.UserAdd(ctx, "reports", "rep0rts-pw"))
	must(root.AuthEnable(ctx))

	holds(t, "etcd://billing:b1lling-pw@"+ep+"/payments/")
	refused(t, "etcd://reports:rep0rts-pw@"+ep+"/payments/", `user "reports" may not use the keys under "payments/"`, "rep0rts-pw")
	refused(t, "etcd://billing:guess@"+ep+"/payments/", "authentication failed", "guess")
	refused(t, "etcd://"+ep+"/payments/", "user name is empty", "")
}

// A PostgreSQL that takes TCP connections over TLS only, reached with
// libpq's own parameters through pgx (sslmode=verify-full, sslrootcert):
// locks, read-write locks and semaphores work; a CA that did not sign the
// server's certificate is refused at Open, in TLS's words; and sslmode=disable is refused by the
// server, which takes nothing without TLS.
func TestPostgresVerifyFull(t *testing.T) {
	c := testsvc.NewCerts(t)
	srv := testsvc.StartPostgresTLS(t, c)
	base := "postgres://postgres@127.0.0.1:" + strconv.Itoa(srv.Port()) + "/postgres?connect_timeout=5&"
	verified := base + url.Values{"sslmode": {"verify-full"}, "sslrootcert": {c.CA}}.Encode()
	holds(t, verified)
	rw, err := lockurl.OpenRW(t.Context(), verified)
	if err != nil {
		t.Fatalf("OpenRW over TLS: %v", err)
	}
	rw.Close()
	sems, err := lockurl.OpenSemaphores(t.Context(), verified)
	if err != nil {
		t.Fatalf("OpenSemaphores over TLS: %v", err)
	}
	sems.Close()

	refused(t, base+url.Values{"sslmode": {"verify-full"}, "sslrootcert": {c.OtherCA}}.Encode(), "certificate signed by unknown authority", "")
	refused(t, base+"sslmode=disable", "no pg_hba.conf entry", "")
}

// A MariaDB that requires TLS of every TCP client, reached with the CA in
// the URL (cacert=, as on the other backends): locks and semaphores work; a CA that did not sign the server's
// certificate is refused at Open in TLS's words, and a connection without
// TLS by the server.
func TestMySQLVerifiedTLS(t *testing.T) {
	c := testsvc.NewCerts(t)
	srv := testsvc.StartMySQLTLS(t, c)
	base := "mysql://app@" + srv.Addr() + "/test?timeout=5s"
	verified := base + "&" + url.Values{"cacert": {c.CA}}.Encode()
	holds(t, verified)
	sems, err := lockurl.OpenSemaphores(t.Context(), verified)
	if err != nil {
		t.Fatalf("OpenSemaphores over TLS: %v", err)
	}
	sems.Close()

	refused(t, base+"&"+url.Values{"cacert": {c.OtherCA}}.Encode(), "certificate signed by unknown authority", "")
	// MariaDB answers a client without TLS, under require_secure_transport,
	// as it answers a wrong password.
	refused(t, base, "Access denied", "")
	refused(t, verified+"&tls=true", "give one", "")
}

// A Redis Cluster whose nodes serve clients over TLS, ask for their
// certificates and talk to each other over TLS, with an ACL user: reached
// through any node's TLS port with the URL's files, and refused without
// the client certificate.
func TestRedisClusterWithTLS(t *testing.T) {
	const userSecret = "cl0ster-pw"
	c := testsvc.NewCerts(t)
	tlsPorts := make([]string, 3)
	testsvc.StartRedisCluster(t, func(i int) []string {
		tlsPorts[i] = strconv.Itoa(testsvc.FreePort(t))
		return []string{"--tls-port", tlsPorts[i], "--tls-cluster", "yes",
			"--tls-cert-file", c.ServerCert, "--tls-key-file", c.ServerKey, "--tls-ca-cert-file", c.CA,
			"--tls-auth-clients", "yes", "--user", "alice", "on", ">" + userSecret, "~*", "&*", "+@all"}
	})
	files := tlsQuery(c.CA, c.ClientCert, c.ClientKey)
	holds(t, "redis-cluster://alice:"+userSecret+"@127.0.0.1:"+tlsPorts[0]+",127.0.0.1:"+tlsPorts[1]+"?"+files)
	refused(t, "redis-cluster://alice:"+userSecret+"@127.0.0.1:"+tlsPorts[2]+"?"+tlsQuery(c.CA, "", ""), "certificate required", userSecret)
}
