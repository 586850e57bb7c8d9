package translate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// pkiFor makes a CA and a certificate it signs for names, as PEM.
func pkiFor(t *testing.T, names ...string) (caPEM, certPEM, keyPEM string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}))
}

// backendTLSObjects: a Gateway presenting a client certificate, a Service
// "app" with one endpoint, and a policy per port: https verifies
// app.example.com, alt verifies wrong.example.com. hostname may replace
// the first policy's hostname.
func backendTLSObjects(caPEM, clientCert, clientKey, hostname string) string {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	return classYAML + fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec: {ports: [{name: http, port: 80, targetPort: 8000}]}
---
apiVersion: v1
kind: Secret
metadata: {name: client, namespace: kong}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80}]
  tls: {backend: {clientCertificateRef: {name: client}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: kong}
data: {ca.crt: %q}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: kong}
spec: {ports: [{name: https, port: 443, targetPort: 8443}, {name: alt, port: 8443, targetPort: 8443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: kong, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: https, port: 8443}, {name: alt, port: 8443}]
endpoints: [{addresses: [198.18.0.9]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: https, namespace: kong, generation: 1}
spec:
  targetRefs: [{group: "", kind: Service, name: app, sectionName: https}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: %q}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: alt, namespace: kong, generation: 1}
spec:
  targetRefs: [{group: "", kind: Service, name: app, sectionName: alt}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: wrong.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: kong, generation: 1}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /app}}]
    backendRefs: [{name: app, port: 443}]
  - matches: [{path: {type: Exact, value: /alt}}]
    backendRefs: [{name: app, port: 8443}]
  - matches: [{path: {type: Exact, value: /host-filter}}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: HOST, value: evil.example.com}]}}]
    backendRefs: [{name: app, port: 443}]
`, b64(clientCert), b64(clientKey), caPEM, hostname)
}

func translateObjects(t *testing.T, objects, flavor string) translate.Result {
	t.Helper()
	return translate.Translate(buildSnapshot(t, objects, types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, snapshot.DefaultKong(flavor)), nil)
}

// TestBackendTLSThroughKong: the translation, loaded into the Kong double,
// reaches a TLS backend with the policy's hostname as SNI and Host, checks
// its certificate against the ConfigMap's CA and presents the Gateway's
// client certificate; a policy whose hostname the certificate does not
// name fails the request, and a rule that would change the Host is not
// served. Both router flavors.
func TestBackendTLSThroughKong(t *testing.T) {
	caPEM, serverCert, serverKey := pkiFor(t, "app.example.com")
	_, clientCert, clientKey := pkiFor(t, "client")
	pair, err := tls.X509KeyPair([]byte(serverCert), []byte(serverKey))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Host, SNI string
		Client    int
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(seen{r.Host, r.TLS.ServerName, len(r.TLS.PeerCertificates)})
	}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert}
	backend.StartTLS()
	t.Cleanup(backend.Close)

	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) {
			res := translateObjects(t, backendTLSObjects(caPEM, clientCert, clientKey, "app.example.com"), flavor)
			doc, err := declarativeJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			d := kongdouble.New(kongdouble.Options{RouterFlavor: flavor})
			defer d.Close()
			if status, body := load(d, doc); status != http.StatusCreated {
				t.Fatalf("Kong refused: %d %s", status, body)
			}
			dp := kongdouble.NewDataPlane(d, func(target string) (string, bool) {
				return backend.Listener.Addr().String(), target == "198.18.0.9:8443"
			})
			defer dp.Close()
			proxy := httptest.NewServer(dp.Handler(8000, false))
			defer proxy.Close()
			get := func(path string) (int, seen) {
				req, _ := http.NewRequest(http.MethodGet, proxy.URL+path, nil)
				req.Host = "client.example.com"
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Body.Close()
				var s seen
				_ = json.NewDecoder(r.Body).Decode(&s)
				return r.StatusCode, s
			}
			if status, s := get("/app"); status != 200 || s != (seen{"app.example.com", "app.example.com", 1}) {
				t.Errorf("/app: %d, backend saw %+v; want 200 with Host and SNI app.example.com and the client certificate", status, s)
			}
			if status, _ := get("/alt"); status != http.StatusBadGateway {
				t.Errorf("/alt (certificate does not name wrong.example.com): %d, want 502", status)
			}
			if status, _ := get("/host-filter"); status == 200 {
				t.Errorf("/host-filter: served (%d), want the rule refused", status)
			}
		})
	}
}

// TestBackendTLSPolicyHostile: a hostname that is not a lowercase DNS name
// never reaches Kong; the policy says why and its backend is refused (500),
// never served without TLS.
func TestBackendTLSPolicyHostile(t *testing.T) {
	caPEM, _, _ := pkiFor(t, "app.example.com")
	_, clientCert, clientKey := pkiFor(t, "client")
	for _, hostname := range []string{"App.Example.com", "a.example.com,host:b", "a.example.com\nx", "a.example.com:443", "*.example.com", ""} {
		res := translateObjects(t, backendTLSObjects(caPEM, clientCert, clientKey, hostname), snapshot.RouterExpressions)
		doc, err := declarativeJSON(res)
		if err != nil {
			t.Fatal(err)
		}
		if hostname != "" && strings.Contains(string(doc), hostname) {
			t.Errorf("hostname %q reached Kong's configuration", hostname)
		}
		ancestors := res.Status.BackendTLSPolicies[types.NamespacedName{Namespace: "kong", Name: "https"}]
		if len(ancestors) != 1 || !hasCondition(ancestors[0].Conditions, "Accepted", metav1.ConditionFalse, "Invalid") {
			t.Errorf("hostname %q: policy status %+v, want Accepted=False Invalid", hostname, ancestors)
		}
		parents := res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "kong", Name: "r"}]
		if len(parents) != 1 || !hasCondition(parents[0].Conditions, "ResolvedRefs", metav1.ConditionFalse, "InvalidBackendTLSPolicy") {
			t.Errorf("hostname %q: route status %+v, want ResolvedRefs=False InvalidBackendTLSPolicy", hostname, parents)
		}
		for _, svc := range res.Config.Services {
			if svc.Name == "httproute.kong.r.0" && svc.Host != "no-backend.konglet.invalid" {
				t.Errorf("hostname %q: the backend is still served (host %s, protocol %s)", hostname, svc.Host, svc.Protocol)
			}
		}
	}
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) bool {
	return slices.ContainsFunc(conds, func(c metav1.Condition) bool {
		return c.Type == typ && c.Status == status && c.Reason == reason
	})
}

// TestBackendTLSConfigMaps: konglet reads only the ConfigMaps policies name
// in their own namespace, whatever else they name.
func TestBackendTLSConfigMaps(t *testing.T) {
	s := &snapshot.Snapshot{BackendTLSPolicies: []*gwv1.BackendTLSPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"}, Spec: gwv1.BackendTLSPolicySpec{Validation: gwv1.BackendTLSPolicyValidation{
			CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}, {Kind: "Secret", Name: "key"}, {Group: "example.com", Kind: "ConfigMap", Name: "x"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "p"}, Spec: gwv1.BackendTLSPolicySpec{Validation: gwv1.BackendTLSPolicyValidation{
			CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}, {Kind: "ConfigMap", Name: "ca"}}}}},
	}}
	got := translate.BackendTLSConfigMaps(s)
	want := []types.NamespacedName{{Namespace: "team-a", Name: "ca"}, {Namespace: "team-b", Name: "ca"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestBackendTLSRefusedCA: a ConfigMap whose CA certificate Kong refused
// (an expired one: Kong reads the clock, the translation does not) is
// left out, and the policy tells Kong's message; its backends fail.
func TestBackendTLSRefusedCA(t *testing.T) {
	caPEM, _, _ := pkiFor(t, "app.example.com")
	_, clientCert, clientKey := pkiFor(t, "client")
	snap := buildSnapshot(t, backendTLSObjects(caPEM, clientCert, clientKey, "app.example.com"), types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, snapshot.DefaultKong(snapshot.RouterExpressions))
	refused := translate.Refusals{{Kind: "ConfigMap", Namespace: "kong", Name: "ca"}: `certificate expired, "Not After" time is in the past`}
	res := translate.Translate(snap, refused)
	if len(res.Config.CACertificates) != 0 {
		t.Errorf("the refused CA is still in the config: %d ca_certificates", len(res.Config.CACertificates))
	}
	ancestors := res.Status.BackendTLSPolicies[types.NamespacedName{Namespace: "kong", Name: "https"}]
	if len(ancestors) != 1 || !hasCondition(ancestors[0].Conditions, "ResolvedRefs", metav1.ConditionFalse, "InvalidCACertificateRef") ||
		!strings.Contains(ancestors[0].Conditions[1].Message, "certificate expired") {
		t.Errorf("policy status %+v, want ResolvedRefs=False InvalidCACertificateRef with Kong's message", ancestors)
	}
}

// TestBackendTLSConfigMapProblems: a ConfigMap konglet could not keep (over
// --max-configmap-bytes, beyond the watch cap, forbidden) makes the policy
// say why, and its backends fail rather than go unverified.
func TestBackendTLSConfigMapProblems(t *testing.T) {
	caPEM, _, _ := pkiFor(t, "app.example.com")
	_, clientCert, clientKey := pkiFor(t, "client")
	key := types.NamespacedName{Namespace: "kong", Name: "ca"}
	for _, tc := range []struct {
		problem snapshot.ReadProblem
		says    string
	}{
		{snapshot.ReadProblem{Size: 70000, Limit: 65536}, "holds 70000 bytes under ca.crt, more than konglet's limit of 65536 (--max-configmap-bytes)"},
		{snapshot.ReadProblem{Unwatched: 256}, "more ConfigMaps than konglet watches at once (256, --max-configmap-watches"},
		{snapshot.ReadProblem{Forbidden: true}, "konglet may not read ConfigMap kong/ca"},
	} {
		snap := buildSnapshot(t, backendTLSObjects(caPEM, clientCert, clientKey, "app.example.com"), types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, snapshot.DefaultKong(snapshot.RouterExpressions))
		delete(snap.ConfigMaps, key)
		snap.ConfigMapProblems[key] = tc.problem
		res := translate.Translate(snap, nil)
		if len(res.Config.CACertificates) != 0 {
			t.Errorf("%+v: %d ca_certificates in the config, want none", tc.problem, len(res.Config.CACertificates))
		}
		ancestors := res.Status.BackendTLSPolicies[types.NamespacedName{Namespace: "kong", Name: "https"}]
		if len(ancestors) != 1 || !hasCondition(ancestors[0].Conditions, "Accepted", metav1.ConditionFalse, "NoValidCACertificate") ||
			!strings.Contains(ancestors[0].Conditions[1].Message, tc.says) {
			t.Errorf("%+v: policy status %+v, want NoValidCACertificate saying %q", tc.problem, ancestors, tc.says)
		}
		parents := res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "kong", Name: "r"}]
		if len(parents) != 1 || !hasCondition(parents[0].Conditions, "ResolvedRefs", metav1.ConditionFalse, "InvalidBackendTLSPolicy") {
			t.Errorf("%+v: route status %+v, want ResolvedRefs=False InvalidBackendTLSPolicy", tc.problem, parents)
		}
		for _, svc := range res.Config.Services {
			if svc.Name == "httproute.kong.r.0" && svc.Host != "no-backend.konglet.invalid" {
				t.Errorf("%+v: the backend is still served (host %s, protocol %s)", tc.problem, svc.Host, svc.Protocol)
			}
		}
	}
}

// TestBackendTLSThroughAnIntermediate: a backend whose certificate an
// intermediate CA issued, under the policy's root, is verified (nginx's
// default depth, 1, would refuse it).
func TestBackendTLSThroughAnIntermediate(t *testing.T) {
	issue := func(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		return cert, key, der
	}
	caTmpl := func(serial int64, name string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, IsCA: true,
			BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	root, rootKey, rootDER := issue(caTmpl(1, "root"), nil, nil)
	inter, interKey, interDER := issue(caTmpl(2, "intermediate"), root, rootKey)
	_, leafKey, leafDER := issue(&x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "app.example.com"},
		DNSNames: []string{"app.example.com"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, inter, interKey)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, interDER}, PrivateKey: leafKey}}}
	backend.StartTLS()
	t.Cleanup(backend.Close)
	rootPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}))
	_, clientCert, clientKey := pkiFor(t, "client")
	res := translateObjects(t, backendTLSObjects(rootPEM, clientCert, clientKey, "app.example.com"), snapshot.RouterExpressions)
	doc, err := declarativeJSON(res)
	if err != nil {
		t.Fatal(err)
	}
	d := kongdouble.New(kongdouble.Options{RouterFlavor: snapshot.RouterExpressions})
	defer d.Close()
	if status, body := load(d, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	dp := kongdouble.NewDataPlane(d, func(target string) (string, bool) {
		return backend.Listener.Addr().String(), target == "198.18.0.9:8443"
	})
	defer dp.Close()
	proxy := httptest.NewServer(dp.Handler(8000, false))
	defer proxy.Close()
	r, err := http.Get(proxy.URL + "/app")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("/app through an intermediate CA: %d, want 200", r.StatusCode)
	}
}
