package node

import (
	"testing"
	"time"
)

// A PeerTLS expires at the earlier of its certificate's end and the
// cluster CA's (perpd_tls_expiry_timestamp_seconds): a leaf issued to end
// before its CA gives the leaf's, one issued past it the CA's.
func TestPeerTLSExpiresAtTheEarlierOfCertificateAndCA(t *testing.T) {
	ca, err := NewCA("expiry")
	if err != nil {
		t.Fatal(err)
	}
	caEnd := ca.cert.NotAfter
	issuedUntil := func(end time.Time) *PeerTLS {
		t.Helper()
		saved := ca.cert.NotAfter
		ca.cert.NotAfter = end // Issue gives the leaf the CA's NotAfter
		defer func() { ca.cert.NotAfter = saved }()
		p, err := ca.PeerTLS("node1", true)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	soon := time.Now().Add(48 * time.Hour)
	if got := issuedUntil(soon).Expires(); got.Unix() != soon.Unix() {
		t.Fatalf("a leaf ending before its CA: expires %v, want the leaf's %v", got, soon)
	}
	late := caEnd.Add(365 * 24 * time.Hour)
	if got := issuedUntil(late).Expires(); got.Unix() != caEnd.Unix() {
		t.Fatalf("a leaf ending after its CA: expires %v, want the CA's %v", got, caEnd)
	}
}
