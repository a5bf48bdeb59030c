package testsvc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the PEM files of a test's own certificate authority, made
// fresh for each test: a server certificate for 127.0.0.1 and localhost, a
// client certificate, an expired server certificate, and a second CA that
// signed none of them.
type Certs struct {
	CA                          string // the CA's certificate
	ServerCert, ServerKey       string
	ClientCert, ClientKey       string // CN "latchkey-client"
	ExpiredCert, ExpiredKey     string // a server certificate that expired an hour ago
	OtherCA                     string // a CA that signed nothing here: verification against it fails
	OtherClient, OtherClientKey string // a client certificate of OtherCA
}

// NewCerts writes a fresh CA and its certificates into t.TempDir().
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, caKey := newCA(t, "latchkey test CA")
	other, otherKey := newCA(t, "another CA")
	c := &Certs{
		CA:      writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw),
		OtherCA: writePEM(t, dir, "other-ca.pem", "CERTIFICATE", other.Raw),
	}
	c.ServerCert, c.ServerKey = issue(t, dir, "server", ca, caKey, now.Add(-time.Hour), now.Add(24*time.Hour), true)
	c.ClientCert, c.ClientKey = issue(t, dir, "client", ca, caKey, now.Add(-time.Hour), now.Add(24*time.Hour), false)
	c.ExpiredCert, c.ExpiredKey = issue(t, dir, "expired", ca, caKey, now.Add(-48*time.Hour), now.Add(-time.Hour), true)
	c.OtherClient, c.OtherClientKey = issue(t, dir, "other-client", other, otherKey, now.Add(-time.Hour), now.Add(24*time.Hour), false)
	return c
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue writes a certificate signed by ca, valid from notBefore to
// notAfter, for a server (127.0.0.1, localhost) or a client, and its key.
func issue(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, notBefore, notAfter time.Time, server bool) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "latchkey-" + name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
