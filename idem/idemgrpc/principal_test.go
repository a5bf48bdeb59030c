package idemgrpc_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/interop/grpc_testing"

	"github.com/latchkey-go/latchkey/idem/idemgrpc"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// certPool returns a pool of the PEM certificates in files.
func certPool(t *testing.T, files ...string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("no certificate in %s", f)
		}
	}
	return pool
}

// keyPair loads a certificate and its key from PEM files.
func keyPair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// dialAs returns a client that presents the certificate cert/key to the
// mutual-TLS server at addr, whose certificate certs.CA signed.
func dialAs(t *testing.T, addr string, certs *testsvc.Certs, cert, key string) grpc_testing.TestServiceClient {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{
		RootCAs:      certPool(t, certs.CA),
		Certificates: []tls.Certificate{keyPair(t, cert, key)},
		ServerName:   "127.0.0.1",
		MinVersion:   tls.VersionTLS12,
	})
	return dial(t, addr, grpc.WithTransportCredentials(creds))
}

// A client that authenticates by certificate is its own principal: two
// clients of different certificates sending the same key each run once,
// and one client's retry over a new connection is replayed, not run again.
func TestPeerCertPrincipalScopesKeysByClientCertificate(t *testing.T) {
	certs := testsvc.NewCerts(t)
	svc := &paySvc{}
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{keyPair(t, certs.ServerCert, certs.ServerKey)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    certPool(t, certs.CA, certs.OtherCA),
		MinVersion:   tls.VersionTLS12,
	})
	opts := []idemgrpc.Option{idemgrpc.WithMethods(unaryCall), idemgrpc.WithPrincipal(idemgrpc.PeerCertPrincipal)}
	addr := serveWith(t, svc, grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(idemgrpc.UnaryServerInterceptor(memstore.New(), opts...)))

	first := pay(t, dialAs(t, addr, certs, certs.ClientCert, certs.ClientKey), "k-1", "100 EUR")
	wantCode(t, first, codes.OK, "")
	again := pay(t, dialAs(t, addr, certs, certs.ClientCert, certs.ClientKey), "k-1", "100 EUR")
	wantCode(t, again, codes.OK, "")
	if !again.replayed() || svc.calls.Load() != 1 {
		t.Fatalf("the same certificate over a new connection ran again: replayed %v, %d runs", again.replayed(), svc.calls.Load())
	}
	bob := pay(t, dialAs(t, addr, certs, certs.OtherClient, certs.OtherClientKey), "k-1", "100 EUR")
	wantCode(t, bob, codes.OK, "")
	if bob.replayed() || svc.calls.Load() != 2 {
		t.Fatalf("another certificate got the first one's answer: replayed %v, %d runs", bob.replayed(), svc.calls.Load())
	}
}

// A predicate chooses the guarded methods as a list does: the unary payment
// is replayed, and the method it does not choose runs on every call without
// a key.
func TestMethodFuncChoosesGuardedMethods(t *testing.T) {
	svc := &paySvc{}
	guard := idemgrpc.UnaryServerInterceptor(memstore.New(),
		idemgrpc.WithMethodFunc(func(fullMethod string) bool { return fullMethod == unaryCall }))
	c := dial(t, serveWith(t, svc, grpc.ChainUnaryInterceptor(guard)))
	first, again := pay(t, c, "k-1", "100 EUR"), pay(t, c, "k-1", "100 EUR")
	wantCode(t, first, codes.OK, "")
	wantCode(t, again, codes.OK, "")
	if !again.replayed() || svc.calls.Load() != 1 {
		t.Fatalf("the chosen method ran again: replayed %v, %d runs", again.replayed(), svc.calls.Load())
	}
	for range 2 {
		if _, err := c.EmptyCall(t.Context(), &grpc_testing.Empty{}); err != nil {
			t.Fatalf("a method the predicate does not choose, called without a key: %v", err)
		}
	}
	if svc.calls.Load() != 3 {
		t.Fatalf("%d runs, want 3: the unchosen method is not guarded", svc.calls.Load())
	}
}
