package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestHTTPSSecretAboveTheLimit: a listener whose Secret holds more data
// than --max-secret-bytes says so with the size and the limit and serves
// nothing, while the HTTPS listener beside it keeps serving; once the
// Secret shrinks below the limit, its listener is served too. (A Secret
// konglet may not read is tested under the shipped RBAC in test/deploy.)
func TestHTTPSSecretAboveTheLimit(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	https := func(name, host, secret string) gwv1.Listener {
		return gwv1.Listener{Name: gwv1.SectionName(name), Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr(gwv1.Hostname(host)),
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}},
			TLS:           &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(secret)}}}}
	}
	w := newWorld(t, https("good", "good.example.com", "good"), https("big", "big.example.com", "big"))
	goodCrt, goodKey := selfSigned(t, "good.example.com", 1)
	bigCrt, bigKey := selfSigned(t, "big.example.com", 2)
	const limit = 4096
	padding := strings.Repeat("x", limit) // a CA bundle, say: the Secret is over the limit
	secrets := env.Kube.CoreV1().Secrets(w.ns)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: w.ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: goodCrt, corev1.TLSPrivateKeyKey: goodKey}},
		{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: w.ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: bigCrt, corev1.TLSPrivateKeyKey: bigKey, "ca.crt": []byte(padding)}},
	} {
		if _, err := secrets.Create(w.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.backend(w.ns, "app", 80, 8080, "198.18.0.81")
	w.create(w.route("both", []string{"good.example.com", "big.example.com"},
		gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	startKonglet(t, kong, append(w.kongletArgs(), "--max-secret-bytes", fmt.Sprint(limit))...)

	served := func(host string, crt []byte) error {
		if _, ok := kong.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: host, Host: host, Path: "/"}); !ok {
			return fmt.Errorf("%s is not served", host)
		}
		if !strings.Contains(string(kong.RawConfig()), strings.ReplaceAll(string(crt), "\n", `\n`)) {
			return fmt.Errorf("Kong does not hold the certificate of %s", host)
		}
		return nil
	}
	eventually(t, 10*time.Second, "the oversized Secret is refused on its listener; the other listener serves", func() error {
		l, err := w.listener("big")
		if err != nil {
			return err
		}
		if err := expectCond(l.Conditions, "ResolvedRefs", metav1.ConditionFalse, "InvalidCertificateRef"); err != nil {
			return err
		}
		for _, c := range l.Conditions {
			if c.Type == "ResolvedRefs" && !strings.Contains(c.Message, fmt.Sprintf("limit of %d", limit)) {
				return fmt.Errorf("message %q does not give the limit", c.Message)
			}
		}
		if strings.Contains(string(kong.RawConfig()), strings.ReplaceAll(string(bigCrt), "\n", `\n`)) {
			return fmt.Errorf("Kong holds the oversized Secret's certificate")
		}
		return served("good.example.com", goodCrt)
	})

	big, err := secrets.Get(w.ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(big.Data, "ca.crt")
	if _, err := secrets.Update(w.ctx, big, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the Secret, below the limit now, is served", func() error {
		l, err := w.listener("big")
		if err != nil {
			return err
		}
		if err := expectCond(l.Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"); err != nil {
			return err
		}
		return served("big.example.com", bigCrt)
	})
}
