//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/harness"
)

// unrelatedSecrets: konglet's max RSS not mapped from files (what it
// allocates: the binary's pages come and go as konglet releases them) with
// 10,000 TLS Secrets of 6 KB in 100 other namespaces, which no listener
// names, against without them.
// konglet reads only the Secrets its listeners name, so the two must be
// equal within noise (a konglet that cached every TLS Secret would hold
// some 60 MB more). Both runs serve an HTTPS listener whose Secret konglet
// does read.
func (b *bencher) unrelatedSecrets(t *testing.T) {
	scen := "7 unrelated Secrets"
	const n, namespaces, perNamespace, runs = 100, 100, 100, 3
	b.ensureApps(t, n)
	cert, key, err := harness.SelfSigned("secure.bench.test", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.httpsListener(t, cert, key)()
	b.results.scenario(scen)

	// maxRSS runs konglet until it serves every route and the HTTPS
	// listener's certificate, and is idle; it returns the max RSS not
	// mapped from files sampled.
	maxRSS := func(label string) []float64 {
		var out []float64
		for range runs {
			k := newKong()
			p := b.startKonglet(t, k, "--leader-election=false")
			if !poll(time.Millisecond, 60*time.Second, func() bool {
				return b.allRoutable(k, n) && bytes.Contains(k.RawConfig(), bytes.ReplaceAll(cert, []byte("\n"), []byte(`\n`)))
			}) {
				t.Fatalf("%s: routes and certificate not served within 60s", label)
			}
			_, _ = steady(p, 3*time.Second)
			out = append(out, float64(p.MaxAnonRSS()))
			p.Stop()
			k.Close()
		}
		slices.Sort(out)
		return out
	}
	without := maxRSS("without")

	pad := bytes.Repeat([]byte("x"), 4<<10) // a CA bundle: 6 KB per Secret in all
	// Later scenarios run without them (there is no namespace controller
	// to empty the namespaces).
	defer func() {
		for ns := range namespaces {
			_ = b.c.kube.CoreV1().Secrets(fmt.Sprintf("tenant-%02d", ns)).DeleteCollection(b.ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	}()
	start := time.Now()
	for ns := range namespaces {
		name := fmt.Sprintf("tenant-%02d", ns)
		if _, err := b.c.kube.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := parallel(0, perNamespace, func(i int) error {
			return ignoreExists(retry(func() error {
				_, err := b.c.kube.CoreV1().Secrets(name).Create(b.ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tls-%03d", i), Namespace: name},
					Type:       corev1.SecretTypeTLS,
					Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, "ca.crt": pad},
				}, metav1.CreateOptions{})
				return err
			}))
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created %d Secrets in %v", namespaces*perNamespace, time.Since(start).Round(time.Millisecond))
	with := maxRSS("with")

	median := func(v []float64) float64 { return v[len(v)/2] }
	diff := median(with) - median(without)
	// Noise: the spread between runs of the same setup.
	noise := max(without[len(without)-1]-without[0], with[len(with)-1]-with[0], 2<<20)
	mibs := func(v []float64) string {
		var s []string
		for _, x := range v {
			s = append(s, fmt.Sprintf("%.1f", mib(x)))
		}
		return fmt.Sprint(s)
	}
	b.results.raw("unrelated_secrets", map[string]any{"max_anon_rss_without": without, "max_anon_rss_with": with})
	b.results.add(figure{Scenario: scen, Name: "max RSS not mapped from files (VmRSS - RssFile), no other Secrets (median of 3 runs)", Value: mib(median(without)), Unit: "MiB",
		Note: "runs: " + mibs(without) + " MiB"})
	b.results.add(figure{Scenario: scen, Name: "the same, 10,000 unrelated 6 KB TLS Secrets in 100 other namespaces (median of 3 runs)", Value: mib(median(with)), Unit: "MiB",
		Note: "runs: " + mibs(with) + " MiB"})
	b.results.add(figure{Scenario: scen, Name: "difference (with - without)", Value: mib(diff), Unit: "MiB",
		Target: fmt.Sprintf("within noise (difference at most %.1f MiB, the larger spread between runs, at least 2 MiB)", mib(noise)), Met: atMost(max(diff, -diff), noise)})
	b.results.note(scen, "%d HTTPRoutes; the Gateway has an HTTPS listener whose Secret (in the Gateway's namespace) konglet reads in both setups", b.apps)
}

// httpsListener gives the bench Gateway an HTTPS listener with a Secret in
// its namespace, and returns what takes it away (later scenarios measure
// without it).
func (b *bencher) httpsListener(t *testing.T, cert, key []byte) (restore func()) {
	_, err := b.c.kube.CoreV1().Secrets(gatewayNS).Create(b.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: gatewayNS}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	g, err := b.c.gw.GatewayV1().Gateways(gatewayNS).Get(b.ctx, gatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := gwv1.NamespacesFromAll
	g.Spec.Listeners = append(g.Spec.Listeners, gwv1.Listener{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443,
		Hostname:      ptr(gwv1.Hostname("secure.bench.test")),
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}},
		TLS:           &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "secure"}}}})
	if _, err = b.c.gw.GatewayV1().Gateways(gatewayNS).Update(b.ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		// Status writes change the Gateway meanwhile: read it again.
		if err := retry(func() error {
			g, err := b.c.gw.GatewayV1().Gateways(gatewayNS).Get(b.ctx, gatewayName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			g.Spec.Listeners = slices.DeleteFunc(g.Spec.Listeners, func(l gwv1.Listener) bool { return l.Name == "https" })
			_, err = b.c.gw.GatewayV1().Gateways(gatewayNS).Update(b.ctx, g, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Error(err)
		}
		_ = b.c.kube.CoreV1().Secrets(gatewayNS).Delete(b.ctx, "secure", metav1.DeleteOptions{})
	}
}
