package kongdouble_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/konglet/konglet/test/kongdouble"
)

// testCA issues certificates for the upstream TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a leaf certificate and key (PEM) for the DNS names.
func (ca *testCA) issue(t *testing.T, names ...string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}))
}

// TestUpstreamTLS: for an https service the double does what nginx does in
// Kong 3.9: the Host it sends is the TLS server name (port dropped) and the
// name verified when tls_verify is on, against the service's
// ca_certificates only; client_certificate is presented.
func TestUpstreamTLS(t *testing.T) {
	ca, other := newTestCA(t, "ca"), newTestCA(t, "other")
	serverCert, serverKey := ca.issue(t, "app.example.com")
	clientCert, clientKey := ca.issue(t, "client")
	pair, err := tls.X509KeyPair([]byte(serverCert), []byte(serverKey))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		sni    string
		client int
	}
	got := make(chan seen, 16)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.TLS.ServerName, len(r.TLS.PeerCertificates)}
	}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert}
	backend.StartTLS()
	t.Cleanup(backend.Close)

	caID, otherID, certID := "6f0e3c4b-1a2b-4c3d-8e4f-000000000001", "6f0e3c4b-1a2b-4c3d-8e4f-000000000002", "6f0e3c4b-1a2b-4c3d-8e4f-000000000003"
	service := func(name string, fields M) M {
		svc := M{"name": name, "host": "up", "protocol": "https", "port": 443,
			"routes": []any{M{"name": name, "paths": []any{"/" + name}, "plugins": []any{
				M{"name": "request-transformer", "config": M{"replace": M{"headers": []any{"host:" + fields["host"].(string)}}}}}}}}
		delete(fields, "host")
		for k, v := range fields {
			svc[k] = v
		}
		return svc
	}
	cfg := M{"_format_version": "3.0",
		"ca_certificates": []any{M{"id": caID, "cert": ca.pem}, M{"id": otherID, "cert": other.pem}},
		"certificates":    []any{M{"id": certID, "cert": clientCert, "key": clientKey}},
		"upstreams":       []any{M{"name": "up", "targets": []any{M{"target": "198.18.0.9:443"}}}},
		"services": []any{
			service("ok", M{"host": "app.example.com", "tls_verify": true, "ca_certificates": []any{caID}, "client_certificate": M{"id": certID}}),
			service("port", M{"host": "app.example.com:8443", "tls_verify": true, "ca_certificates": []any{caID}}),
			service("wrongname", M{"host": "other.example.com", "tls_verify": true, "ca_certificates": []any{caID}}),
			service("wrongca", M{"host": "app.example.com", "tls_verify": true, "ca_certificates": []any{otherID}}),
			service("noca", M{"host": "app.example.com", "tls_verify": true}),
			service("noverify", M{"host": "other.example.com"}),
		},
	}
	d := newDouble(t, kongdouble.Options{})
	load(t, d, cfg)
	dp := kongdouble.NewDataPlane(d, func(string) (string, bool) { return backend.Listener.Addr().String(), true })
	t.Cleanup(dp.Close)
	proxy := httptest.NewServer(dp.Handler(8000, false))
	t.Cleanup(proxy.Close)

	for _, c := range []struct {
		path   string
		status int
		want   seen
	}{
		{"/ok", 200, seen{"app.example.com", 1}},
		{"/port", 200, seen{"app.example.com", 0}},
		{"/wrongname", 502, seen{}},
		{"/wrongca", 502, seen{}},
		{"/noca", 502, seen{}},
		{"/noverify", 200, seen{"other.example.com", 0}},
	} {
		res := send(t, proxy, "GET", "client.example.com", c.path)
		if res.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.path, res.status, c.status, res.body)
			continue
		}
		if c.status != 200 {
			continue
		}
		if s := <-got; s != c.want {
			t.Errorf("%s: backend saw SNI %q and %d client certificates, want %q and %d", c.path, s.sni, s.client, c.want.sni, c.want.client)
		}
	}
}

// TestCACertificateSchema: Kong's ca_certificates.lua takes one CA
// certificate per entity, and only a CA; a TLS field on a service that
// does not speak TLS must be null (services.lua).
func TestCACertificateSchema(t *testing.T) {
	ca, other := newTestCA(t, "ca"), newTestCA(t, "other")
	leaf, _ := ca.issue(t, "leaf.example.com")
	for _, c := range []struct {
		name, want string
		cfg        M
	}{
		{"two certificates", "please submit only one certificate at a time",
			M{"_format_version": "3.0", "ca_certificates": []any{M{"cert": ca.pem + other.pem}}}},
		{"not a CA", `certificate does not appear to be a CA because it is missing the \"CA\" basic constraint`, // JSON-escaped
			M{"_format_version": "3.0", "ca_certificates": []any{M{"cert": leaf}}}},
		{"tls_verify on http", "value must be null",
			M{"_format_version": "3.0", "services": []any{M{"name": "s", "host": "h", "tls_verify": true}}}},
	} {
		res := postConfig(t, newDouble(t, kongdouble.Options{}), "", c.cfg)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.raw), c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.name, res.status, res.raw, c.want)
		}
	}
}
