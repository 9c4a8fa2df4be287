package main

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
	"strings"
	"testing"
	"time"
)

// testPKI is a CA that signs certificates for the tests, written as PEM
// files under dir.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), serial: 1}
	p.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stoker test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

// issue signs a certificate for the DNS names (and no IP address), for
// servers and clients, and returns its certificate and key files.
func (p *testPKI) issue(t *testing.T, name string, dnsNames ...string) (certFile, keyFile string) {
	t.Helper()
	p.serial++
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    dnsNames,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPeerTLSByName: a coordinator whose --peers is a dns:/// name dials
// the addresses the name resolves to over mutual TLS and checks each
// worker's certificate against the name, as it must in Kubernetes, where a
// Secret's certificate names the headless Service, never a pod IP. The
// workers' certificates name no IP address at all. A worker whose
// certificate names another service is refused, and so is the right
// worker dialed by its static address (a static peer is checked against
// the address, as before).
func TestPeerTLSByName(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	const name = "stoker-workers.stoker.svc.cluster.local"
	pki := newTestPKI(t)
	goodCert, goodKey := pki.issue(t, "worker", name)
	otherCert, otherKey := pki.issue(t, "other", "other-workers.stoker.svc.cluster.local")
	coordCert, coordKey := pki.issue(t, "coordinator", "coordinator.stoker.svc.cluster.local")
	tokens := filepath.Join(pki.dir, "tokens")
	if err := os.WriteFile(tokens, []byte("peer-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := writeDataset(t, faultSamples, faultClasses, 0)
	worker := func(label, cert, key string) *serveProc {
		return launchServe(t, serveConfig{name: label, dataset: data, workers: 1, args: []string{
			"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.caFile, "--auth-tokens", tokens}})
	}
	good, other := worker("worker "+name, goodCert, goodKey), worker("worker of another name", otherCert, otherKey)
	good.waitReady(t, ctx)
	other.waitReady(t, ctx)
	port := func(p *serveProc) string {
		_, port, _ := net.SplitHostPort(p.addr)
		return port
	}
	d := startTestDNS(t, name)
	d.Set("127.0.0.1")
	// The coordinators serve their trainer in plaintext (no --tls-cert)
	// and present --peer-cert to the workers.
	coordinator := func(label, peers string) *serveProc {
		return launchServe(t, serveConfig{name: label, dataset: data, peers: peers, peerRefresh: 500 * time.Millisecond, args: []string{
			"--peer-ca", pki.caFile, "--peer-cert", coordCert, "--peer-key", coordKey, "--peer-token-file", tokens}})
	}
	byName := coordinator("coordinator by name", fmt.Sprintf("dns://%s/%s:%s", d.Addr(), name, port(good)))
	wrongName := coordinator("coordinator to the other name", fmt.Sprintf("dns://%s/%s:%s", d.Addr(), name, port(other)))
	static := coordinator("coordinator by address", good.addr)
	for _, c := range []*serveProc{byName, wrongName, static} {
		c.waitReady(t, ctx)
	}

	waitPeersReady(t, ctx, byName, 1)
	spec := testJob(faultBatch, 14)
	res := consumeEpoch(t, ctx, byName.addr, spec, consumeOpts{})
	checkEpoch(t, res, spec, faultSamples)
	if n := good.metric(t, ctx, "stoker_work_leases_total", `outcome="done"`); n == 0 {
		t.Errorf("the worker made no batch: the epoch did not go through TLS by name")
	} else {
		t.Logf("the worker named %s made %v batches over TLS", name, n)
	}

	// The refusals: each coordinator says why, and never has a peer.
	for _, c := range []struct {
		p    *serveProc
		want string
	}{
		{wrongName, "certificate is valid for other-workers.stoker.svc.cluster.local, not " + name},
		{static, "doesn't contain any IP SANs"},
	} {
		waitFor(t, ctx, hangGuard, c.p.name+" logs why the worker is refused", func() bool {
			for _, r := range c.p.findLogs("peer unavailable", nil) {
				if err, _ := r["err"].(string); strings.Contains(err, c.want) {
					t.Logf("%s: %s", c.p.name, err)
					return true
				}
			}
			return false
		})
		if n := c.p.metric(t, ctx, "stoker_peers_ready"); n != 0 {
			t.Errorf("%s has %v peers ready, want 0", c.p.name, n)
		}
	}
}
