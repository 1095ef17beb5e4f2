package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"
)

// PeerTLS is the mutual TLS of the inter-node channels (raft and the admin
// listener). Identity is membership: a peer is accepted when its
// certificate chains to the cluster's own CA (docs/decisions-tls.md), with
// no host name or IP check, so a node certificate names no address and
// survives re-addressing. A node certificate carries both the serverAuth
// and clientAuth usages; an operator certificate only clientAuth, which the
// admin listener accepts and the raft transport refuses.
type PeerTLS struct {
	cert tls.Certificate
	pool *x509.CertPool
	// expires is the earliest NotAfter of the node's certificate and the
	// CA's: from then the cluster's mutual TLS refuses this member.
	expires time.Time
}

// Expires is when this member's TLS stops being accepted: the earlier of
// its certificate's and the cluster CA's NotAfter, as loaded at start (a
// renewed file is read at the next start, so the gauge of it,
// perpd_tls_expiry_timestamp_seconds, stays until then).
func (p *PeerTLS) Expires() time.Time { return p.expires }

// LoadPeerTLS reads a PEM certificate, its key and the cluster CA.
func LoadPeerTLS(certFile, keyFile, caFile string) (*PeerTLS, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("tls: --tls-cert, --tls-key and --tls-ca go together")
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	// The key is a secret like the cluster secret: whoever reads it acts
	// as this member (or operator) on the cluster's mutual TLS.
	if err := checkPrivate(keyFile); err != nil {
		return nil, fmt.Errorf("tls: --tls-key: %w", err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return NewPeerTLS(cert, key, ca)
}

// NewPeerTLS builds a PeerTLS from PEM bytes.
func NewPeerTLS(certPEM, keyPEM, caPEM []byte) (*PeerTLS, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate and key: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("tls: the CA file holds no PEM certificate")
	}
	leaf := cert.Leaf // X509KeyPair parses it
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate: %w", err)
		}
	}
	expires := leaf.NotAfter
	for rest := caPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if ca, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" && ca.NotAfter.Before(expires) {
			expires = ca.NotAfter
		}
	}
	return &PeerTLS{cert: cert, pool: pool, expires: expires}, nil
}

// ServerConfig is for the admin listener: TLS 1.3, and a client
// certificate from the cluster CA is required (node or operator).
func (p *PeerTLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{p.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.pool,
	}
}

// raftServerConfig is ServerConfig that also requires the client to hold a
// node certificate (serverAuth usage): an operator's certificate opens the
// admin listener, never the raft log.
func (p *PeerTLS) raftServerConfig() *tls.Config {
	c := p.ServerConfig()
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || !slices.Contains(cs.PeerCertificates[0].ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			return errors.New("raft: peer certificate is not a node certificate (no serverAuth usage)")
		}
		return nil
	}
	return c
}

// ClientConfig is for dialing a peer or an admin listener: TLS 1.3, this
// certificate presented, and the server's chain checked against the cluster
// CA for the serverAuth usage. The name check is skipped on purpose (see
// PeerTLS), so the chain is verified here instead of by crypto/tls.
func (p *PeerTLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{p.cert},
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, p.pool, x509.ExtKeyUsageServerAuth)
		},
	}
}

func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("tls: peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("tls: peer certificate is not from the cluster CA: %w", err)
	}
	return nil
}

// RequireLoopback refuses a listen address that is not loopback-only. A
// node without TLS keeps raft and admin on loopback, where only this
// machine's users reach them. what names the address in the message.
func RequireLoopback(what, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, addr, err)
	}
	if isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("%s %s is not a loopback address: without TLS, raft and admin listen on loopback only; "+
		"to serve other hosts add --tls-cert, --tls-key and --tls-ca (certificates from the cluster CA, see README \"Running a node\")", what, addr)
}

func isLoopbackHost(host string) bool {
	if host == "" {
		return false // every interface
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
