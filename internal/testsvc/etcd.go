package testsvc

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EtcdServer is a single-member etcd child process owned by one test, for
// tests that stop, pause or restart the server. Its data directory lives in
// t.TempDir() and survives Stop, Start and Restart, so revisions (and with
// them fencing tokens) keep increasing across a restart. All methods are safe
// for concurrent use; Start and Restart report failures with t.Fatalf.
type EtcdServer struct {
	*process
	clientPort int
	peerPort   int
}

// etcdStartTimeout bounds how long Start waits for /health. A restart on an
// existing data directory takes about 2 s (SERVICES.md).
const etcdStartTimeout = 20 * time.Second

// StartEtcd starts a private etcd (Debian's etcd-server: `etcd` on PATH) on
// free client and peer ports of 127.0.0.1 with its data directory in
// t.TempDir(), followed by args, waits until /health answers, and stops it in
// t.Cleanup. It calls Unavailable when etcd is not on PATH (apt-get install
// etcd-server etcd-client). The log is etcd.log in the server's directory and
// is shown when it fails to start.
func StartEtcd(t testing.TB, args ...string) *EtcdServer {
	t.Helper()
	return startEtcd(t, "http", &http.Client{Timeout: 500 * time.Millisecond}, args)
}

// StartEtcdTLS is StartEtcd for a member that serves its clients over TLS
// only, with c's server certificate, and with clientCerts requires a client
// certificate signed by c's CA (--client-cert-auth), as a Kubernetes etcd
// does.
func StartEtcdTLS(t testing.TB, c *Certs, clientCerts bool, args ...string) *EtcdServer {
	t.Helper()
	tlsArgs := []string{"--cert-file", c.ServerCert, "--key-file", c.ServerKey, "--trusted-ca-file", c.CA}
	if clientCerts {
		tlsArgs = append(tlsArgs, "--client-cert-auth")
	}
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(c.CA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("testsvc: read the CA %s: %v", c.CA, err)
	}
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}
	return startEtcd(t, "https", hc, append(tlsArgs, args...))
}

func startEtcd(t testing.TB, scheme string, hc *http.Client, args []string) *EtcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		Unavailable(t, "testsvc: etcd not found on PATH (apt-get install etcd-server etcd-client)")
	}
	dir := t.TempDir()
	s := &EtcdServer{}
	client := func() string { return scheme + "://" + s.Endpoint() }
	s.process = &process{
		t: t, name: "etcd", dir: dir, log: filepath.Join(dir, "etcd.log"),
		timeout: etcdStartTimeout,
		command: func() *exec.Cmd {
			peer := "http://127.0.0.1:" + strconv.Itoa(s.peerPort)
			argv := []string{
				"--name", "t1",
				"--data-dir", filepath.Join(dir, "data"),
				"--logger=zap",
				"--listen-client-urls", client(), "--advertise-client-urls", client(),
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", "t1=" + peer,
			}
			return exec.Command(bin, append(argv, args...)...)
		},
		ready: func() bool { return etcdHealthy(hc, client()) },
	}
	// A failed first start may leave a half-initialised member behind.
	s.startOnFreePorts(5, func() { _ = os.RemoveAll(filepath.Join(dir, "data")) }, &s.clientPort, &s.peerPort)
	return s
}

// Endpoint returns the client address, 127.0.0.1:PORT, as etcd's Go client
// takes it in Config.Endpoints. It stays the same across Stop, Start and
// Restart.
func (s *EtcdServer) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(s.clientPort)
}

// etcdHealthy reports whether GET /health answers {"health":"true"}.
func etcdHealthy(hc *http.Client, base string) bool {
	resp, err := hc.Get(base + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b [64]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b[:n]), `"true"`)
}

// etcdDial checks that the client port accepts TCP, for tests.
func etcdDial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}
