package idemgrpc

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// MaxKeyLen is the longest client key accepted, in bytes (255, as idemhttp).
const MaxKeyLen = 255

// Errors about the client's key; the server interceptor answers each with
// InvalidArgument.
var (
	// ErrKeyMissing means a call of a guarded method carried no key.
	ErrKeyMissing = errors.New("idemgrpc: idempotency key missing")
	// ErrKeyMalformed means the key is empty, holds a byte that is not
	// printable ASCII, or was sent more than once.
	ErrKeyMalformed = errors.New("idemgrpc: idempotency key malformed")
	// ErrKeyTooLong means the key is longer than MaxKeyLen bytes.
	ErrKeyTooLong = errors.New("idemgrpc: idempotency key longer than 255 bytes")
)

// checkKey allows 1 to MaxKeyLen bytes of printable ASCII, spaces included,
// the same keys idemhttp accepts.
func checkKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrKeyMalformed)
	}
	if len(k) > MaxKeyLen {
		return ErrKeyTooLong
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return fmt.Errorf("%w: byte 0x%02x at position %d is not printable ASCII", ErrKeyMalformed, k[i], i)
		}
	}
	return nil
}

// incomingKey reads the key from the call's metadata: "" when there is none.
func incomingKey(ctx context.Context, name string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], checkKey(vs[0])
	}
	return "", fmt.Errorf("%w: %s sent %d times", ErrKeyMalformed, name, len(vs))
}

// AuthorizationPrincipal is the default principal: a SHA-256 of the call's
// "authorization" metadata (never the credential itself), the same value
// idemhttp.AuthorizationPrincipal gives for the same header, or "" for calls
// without one, which therefore share one key space.
func AuthorizationPrincipal(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get("authorization")
	if len(vs) == 0 || vs[0] == "" {
		return ""
	}
	return idemhttp.AuthorizationDigest(strings.Join(vs, ", "))
}

// PeerCertPrincipal is a principal for mutual TLS: a SHA-256 of the public
// key of the client certificate the server verified, or "" when the peer
// presented none. Give it to WithPrincipal when clients authenticate by
// certificate; a renewed certificate with the same key stays one principal.
func PeerCertPrincipal(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return spkiPrincipal(info.State.VerifiedChains[0][0])
}

func spkiPrincipal(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "spki-sha256:" + hex.EncodeToString(sum[:])
}

// StoreKey returns the key under which the server interceptor keeps the
// record of a call: principal (what the WithPrincipal function returned;
// the key holds only its SHA-256), the full method name and the client's
// key, encoded with idem.Key so that no two scopes alias. An operator finds
// a customer's record with it in any store (see idem.Inspector). It returns
// ErrKeyTooLong or ErrKeyMalformed for a key the interceptor would refuse.
func StoreKey(principal, fullMethod, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return storeKey(principal, fullMethod, key), nil
}

func storeKey(principal, fullMethod, key string) string {
	method := fullMethod
	if len(method) > 256 || !utf8.ValidString(method) || idem.CheckKey(method) != nil {
		method = "#" + digest(method)
	} else {
		method = "=" + method
	}
	return idem.Key("grpc", "p"+digest(principal), method, key)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
