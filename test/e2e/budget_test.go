package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/test/kongdouble"
)

// hugeRoute is an HTTPRoute near the API server's size limit and within
// the CRD's: 16 hostnames, 8 rules of 16 matches, each with 16 headers of
// 600 bytes. konglet makes one Kong route per match and hostname, so it
// expands about sixteenfold.
func hugeRoute(ns string) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns}}
	r.Spec.ParentRefs = []gwv1.ParentReference{{Name: "kong", Namespace: ptr(gwv1.Namespace(strings.TrimSuffix(ns, "-big")))}}
	for h := range 16 {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(fmt.Sprintf("h%d.huge.example.com", h)))
	}
	for rule := range 8 {
		var matches []gwv1.HTTPRouteMatch
		for m := range 16 {
			match := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr(fmt.Sprintf("/r%d/m%d", rule, m))}}
			for h := range 16 {
				match.Headers = append(match.Headers, gwv1.HTTPHeaderMatch{Name: gwv1.HTTPHeaderName(fmt.Sprintf("x-h%d", h)),
					Value: fmt.Sprintf("%d-%d-%d-", rule, m, h) + strings.Repeat("v", 600)})
			}
			matches = append(matches, match)
		}
		r.Spec.Rules = append(r.Spec.Rules, gwv1.HTTPRouteRule{Matches: matches})
	}
	return r
}

// TestHugeRouteIsLeftOutAndTheOthersKeepLoading: a tenant's HTTPRoute of
// about 1.3 MB, whose configuration would be far above Kong's 10 MiB body
// limit, is left out and told why, while ten good routes keep being served
// and edited.
func TestHugeRouteIsLeftOutAndTheOthersKeepLoading(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	big := w.ns + "-big"
	w.create(namespace(big))
	w.backend(w.ns, "good", 80, 8080, "198.18.0.30")
	startKonglet(t, kong, w.kongletArgs()...)
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}
	for i := range 10 {
		w.create(w.route(fmt.Sprintf("good-%d", i), []string{fmt.Sprintf("good%d.example.com", i)}, rule))
	}
	eventually(t, 10*time.Second, "the good routes are served", expectTargets(kong, "good9.example.com", "/", "198.18.0.30:8080"))

	huge := hugeRoute(big)
	raw, _ := json.Marshal(huge)
	start := time.Now()
	if _, err := env.GW.GatewayV1().HTTPRoutes(big).Create(w.ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the %d-byte route: %v", len(raw), err)
	}
	var message string
	eventually(t, 20*time.Second, "the huge route says why it is left out", func() error {
		r, err := env.GW.GatewayV1().HTTPRoutes(big).Get(w.ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if c := cond(p.Conditions, "Accepted"); c != nil {
				if err := expectCond(p.Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedValue"); err != nil {
					return err
				}
				message = c.Message
				if !strings.Contains(message, "--max-object-config-bytes") || !strings.Contains(message, "1048576 bytes") {
					return fmt.Errorf("message %q names neither the limit nor its flag", message)
				}
				return nil
			}
		}
		return fmt.Errorf("no status yet: %+v", r.Status.Parents)
	})
	t.Logf("a %d-byte HTTPRoute: %s (%v after its create)", len(raw), message, time.Since(start).Round(time.Millisecond))
	if doc := kong.RawConfig(); len(doc) > 1<<20 || strings.Contains(string(doc), "huge.example.com") {
		t.Fatalf("Kong holds %d bytes, with the huge route: %v", len(doc), strings.Contains(string(doc), "huge.example.com"))
	}
	if d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "h0.huge.example.com", Path: "/r0/m0", Method: "GET"}); ok {
		t.Fatalf("the huge route is served: %+v", d)
	}

	// Later edits of the others still load.
	edited := w.getRoute("good-3")
	edited.Spec.Hostnames = append(edited.Spec.Hostnames, "edited.example.com")
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "an edit of a good route is served", expectTargets(kong, "edited.example.com", "/", "198.18.0.30:8080"))
	w.create(w.route("good-new", []string{"new.example.com"}, rule))
	eventually(t, 10*time.Second, "a new good route is served", expectTargets(kong, "new.example.com", "/", "198.18.0.30:8080"))
	eventually(t, 10*time.Second, "the new route is Accepted", func() error {
		return w.routeCond("good-new", "Accepted", metav1.ConditionTrue, "Accepted")
	})
}

// TestClientCertificateValidationIsNotServedWithout: an HTTPS listener that
// spec.tls.frontend asks to validate client certificates is not served
// (Kong's open-source edition cannot validate them) and says so; the HTTP
// listener keeps working, and the feature is not claimed.
func TestClientCertificateValidationIsNotServedWithout(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	https := gwv1.Listener{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr(gwv1.Hostname("secure.example.com")),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
	w := newWorld(t, httpListener("http", 80, ""), https)
	gw := w.getGateway()
	gw.Spec.TLS = &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{
		CACertificateRefs: []gwv1.ObjectReference{{Group: "", Kind: "ConfigMap", Name: "client-ca"}}}}}}
	if _, err := env.GW.GatewayV1().Gateways(w.ns).Update(w.ctx, gw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w.getGateway().Spec.TLS == nil {
		t.Fatal("the API server dropped spec.tls")
	}
	crt, key := selfSigned(t, "secure.example.com", 1)
	if _, err := env.Kube.CoreV1().Secrets(w.ns).Create(w.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert", Namespace: w.ns},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.backend(w.ns, "app", 80, 8080, "198.18.0.40")
	w.create(w.route("app", []string{"secure.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)

	eventually(t, 10*time.Second, "the HTTP listener serves the route", expectTargets(kong, "secure.example.com", "/", "198.18.0.40:8080"))
	eventually(t, 10*time.Second, "the HTTPS listener says why it is not served", func() error {
		l, err := w.listener("https")
		if err != nil {
			return err
		}
		if err := expectCond(l.Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedValue"); err != nil {
			return err
		}
		if msg := cond(l.Conditions, "Accepted").Message; !strings.Contains(msg, "client certificates") {
			return fmt.Errorf("message %q", msg)
		}
		return expectCond(l.Conditions, "Programmed", metav1.ConditionFalse, "Invalid")
	})
	if d, ok := kong.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "secure.example.com", Host: "secure.example.com", Path: "/"}); ok {
		t.Fatalf("HTTPS served without client certificates: %+v", d)
	}
	class, err := env.GW.GatewayV1().GatewayClasses().Get(w.ctx, w.class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range class.Status.SupportedFeatures {
		if string(f.Name) == string(features.SupportGatewayFrontendClientCertificateValidation) {
			t.Fatalf("GatewayClass claims %s", f.Name)
		}
	}
}
