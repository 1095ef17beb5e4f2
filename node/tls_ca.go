package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway cluster CA, for devnet and test harnesses: ECDSA
// P-256, valid for a year. A production cluster's operator runs its own CA
// (any tool) with the same profile (docs/decisions-tls.md).
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
}

const caValidity = 365 * 24 * time.Hour

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a certificate for name: a node certificate (serverAuth and
// clientAuth) when node, else an operator's (clientAuth only). Loopback
// and localhost are in its names for tools that check them; perpd does not.
func (ca *CA) Issue(name string, node bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if node {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}

// PeerTLS issues a certificate and returns it as a PeerTLS, in memory.
func (ca *CA) PeerTLS(name string, node bool) (*PeerTLS, error) {
	c, k, err := ca.Issue(name, node)
	if err != nil {
		return nil, err
	}
	return NewPeerTLS(c, k, ca.CertPEM)
}

// CertFiles are the PEM files of one certificate and the CA.
type CertFiles struct{ Cert, Key, CA string }

// Args are the --tls-* flags naming the files (no secret: paths only).
func (f CertFiles) Args() []string {
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
}

// WriteFiles issues a certificate for name and writes it, its key and the
// CA certificate into dir (created 0700), every file with mode 0600.
func (ca *CA) WriteFiles(dir, name string, node bool) (CertFiles, error) {
	c, k, err := ca.Issue(name, node)
	if err != nil {
		return CertFiles{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return CertFiles{}, err
	}
	f := CertFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	for path, b := range map[string][]byte{f.Cert: c, f.Key: k, f.CA: ca.CertPEM} {
		if err := writePrivate(path, b); err != nil {
			return CertFiles{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
