package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/harness"
	"github.com/konglet/konglet/test/kongdouble"
)

// selfSigned makes a certificate and key for host; serial tells two apart.
func selfSigned(t *testing.T, host string, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := harness.SelfSigned(host, serial)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// TestHTTPSRotationAndMergedGateways: an HTTPS listener serves its Secret's
// certificate, a rotated Secret reaches Kong without a restart, and a
// second Gateway bound to the same Kong sees none of the first one's routes
// while listeners that clash across them are Conflicted.
func TestHTTPSRotationAndMergedGateways(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	https := gwv1.Listener{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr(gwv1.Hostname("secure.example.com")),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
	w := newWorld(t, httpListener("http", 80, "one.example.com"), https)
	crt, key := selfSigned(t, "secure.example.com", 1)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert", Namespace: w.ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	if _, err := env.Kube.CoreV1().Secrets(w.ns).Create(w.ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A second Gateway of the same class on the same Kong.
	second := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: w.ns}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(w.class),
		Listeners:        []gwv1.Listener{httpListener("http", 80, "two.example.com"), httpListener("clash", 80, "one.example.com")},
	}}
	w.create(second)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.80")
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}
	onFirst := w.route("secure", []string{"secure.example.com", "one.example.com"}, rule)
	w.create(onFirst)
	startKonglet(t, kong, append(w.kongletArgs(), "--gateway", w.ns+"/second")...)

	eventually(t, 10*time.Second, "the HTTPS route is served with the Secret's certificate", func() error {
		d, ok := kong.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "secure.example.com", Host: "secure.example.com", Path: "/"})
		if !ok || len(d.Targets) != 1 {
			return fmt.Errorf("https: %v %+v", ok, d)
		}
		if !strings.Contains(string(kong.RawConfig()), strings.ReplaceAll(string(crt), "\n", `\n`)) {
			return fmt.Errorf("Kong does not hold the Secret's certificate")
		}
		return nil
	})
	if strings.Contains(string(kong.RawConfig()), "two.example.com") {
		t.Fatal("a route of the first Gateway leaked onto the second Gateway's hostname")
	}
	eventually(t, 10*time.Second, "the clashing listeners of both Gateways are Conflicted", func() error {
		l, err := w.listener("http")
		if err != nil {
			return err
		}
		if err := expectCond(l.Conditions, "Conflicted", metav1.ConditionTrue, "HostnameConflict"); err != nil {
			return fmt.Errorf("first Gateway: %w", err)
		}
		g, err := env.GW.GatewayV1().Gateways(w.ns).Get(w.ctx, "second", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ls := range g.Status.Listeners {
			if ls.Name == "clash" {
				return expectCond(ls.Conditions, "Conflicted", metav1.ConditionTrue, "HostnameConflict")
			}
		}
		return fmt.Errorf("second Gateway has no status for its listener clash: %+v", g.Status)
	})

	// Rotation: a new certificate in the same Secret reaches Kong.
	crt2, key2 := selfSigned(t, "secure.example.com", 2)
	secret.Data = map[string][]byte{corev1.TLSCertKey: crt2, corev1.TLSPrivateKeyKey: key2}
	if _, err := env.Kube.CoreV1().Secrets(w.ns).Update(w.ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the rotated certificate reaches Kong", func() error {
		if !strings.Contains(string(kong.RawConfig()), strings.ReplaceAll(string(crt2), "\n", `\n`)) {
			return fmt.Errorf("Kong still holds the old certificate")
		}
		return nil
	})
}
