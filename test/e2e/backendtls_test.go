package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestBackendTLSPolicyOnTheAPIServer: a BackendTLSPolicy and its CA
// ConfigMap, read through konglet's informers from the API server, make
// the route's backend spoken to with the policy's hostname, and konglet
// writes the policy's ancestor status there.
func TestBackendTLSPolicyOnTheAPIServer(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 443, 8443, "198.18.0.90")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: w.ns},
		Data: map[string]string{"ca.crt": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}}
	if _, err := env.Kube.CoreV1().ConfigMaps(w.ns).Create(w.ctx, ca, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Name: "app-tls", Namespace: w.ns}, Spec: gwv1.BackendTLSPolicySpec{
		TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "app"}}},
		Validation: gwv1.BackendTLSPolicyValidation{Hostname: "app.example.com",
			CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
	}}
	if _, err := env.GW.GatewayV1().BackendTLSPolicies(w.ns).Create(w.ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.create(w.route("secure", []string{"secure.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 443, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)

	eventually(t, 10*time.Second, "the policy's ancestor status is written", func() error {
		p, err := env.GW.GatewayV1().BackendTLSPolicies(w.ns).Get(w.ctx, "app-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.Ancestors) != 1 {
			return fmt.Errorf("%d ancestors", len(p.Status.Ancestors))
		}
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			if c := apimeta.FindStatusCondition(p.Status.Ancestors[0].Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s is %+v", typ, c)
			}
		}
		return nil
	})
	eventually(t, 10*time.Second, "the backend is spoken to with the policy's hostname", func() error {
		d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "secure.example.com", Path: "/", Method: "GET"})
		if !ok {
			return fmt.Errorf("no route")
		}
		for _, p := range d.Plugins {
			if p["name"] == "request-transformer" && replacesHeader(p["config"], "host:app.example.com") {
				return nil
			}
		}
		return fmt.Errorf("no plugin sets the Host to app.example.com: %v", d.Plugins)
	})
}

// replacesHeader tells whether a request-transformer config replaces a
// header with want ("name:value").
func replacesHeader(config any, want string) bool {
	c, _ := config.(map[string]any)
	replace, _ := c["replace"].(map[string]any)
	headers, _ := replace["headers"].([]any)
	for _, h := range headers {
		if h == want {
			return true
		}
	}
	return false
}
