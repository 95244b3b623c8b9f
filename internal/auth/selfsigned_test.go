package auth

import (
	"crypto/ecdsa"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestSelfSigned(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := SelfSigned(now, "epp.example", "10.1.2.3", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Fatalf("key is %T, want ECDSA", c.PrivateKey)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	for _, name := range []string{"localhost", "epp.example", "127.0.0.1", "10.1.2.3"} {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if !c.Leaf.NotAfter.Equal(now.Add(SelfSignedValidity)) || c.Leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) == false {
		t.Errorf("NotAfter %v, IPs %v", c.Leaf.NotAfter, c.Leaf.IPAddresses)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: pool, CurrentTime: now}); err == nil {
		t.Error("verified for a name it does not hold")
	}
}
