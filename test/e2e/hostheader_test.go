package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestListenersIsolatedFromLyingHost: two listeners, port 80 for any
// hostname and port 8080 for admin.example.com, stay apart even when the
// Host header names the other port, and a trailing-dot Host is routed as
// the name without the dot.
func TestListenersIsolatedFromLyingHost(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{
		ProxyListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 8000}, {IP: "0.0.0.0", Port: 8001}, {IP: "0.0.0.0", Port: 8443, SSL: true, HTTP2: true}},
		PortMaps:       []string{"80:8000", "8080:8001", "443:8443"},
	})
	defer kong.Close()
	w := newWorld(t, httpListener("public", 80, ""), httpListener("admin", 8080, "admin.example.com"))
	// Service port 8080 reaches Kong's second listen in this test.
	svc, err := env.Kube.CoreV1().Services(w.ns).Get(w.ctx, "kong-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range svc.Spec.Ports {
		if p.Port == 8080 {
			svc.Spec.Ports[i].TargetPort = intstr.FromInt32(8001)
		}
	}
	if _, err := env.Kube.CoreV1().Services(w.ns).Update(w.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.backend(w.ns, "public", 80, 8080, "198.18.0.20")
	w.backend(w.ns, "admin", 80, 8080, "198.18.0.21")
	for _, listener := range []string{"public", "admin"} {
		r := w.route(listener, nil, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", listener, 80, 1)}})
		r.Spec.ParentRefs[0].SectionName = ptr(gwv1.SectionName(listener))
		w.create(r)
	}
	startKonglet(t, kong, w.kongletArgs()...)

	target := func(listen int, host string) (string, error) {
		d, ok := kong.Route(kongdouble.Request{ListenPort: listen, Host: host, Path: "/", Method: "GET"})
		if !ok || len(d.Targets) != 1 {
			return "", fmt.Errorf("port %d, Host %q: no route with one target", listen, host)
		}
		return d.Targets[0].Target, nil
	}
	const public, admin = "198.18.0.20:8080", "198.18.0.21:8080"
	eventually(t, 10*time.Second, "both listeners are served", func() error {
		for listen, want := range map[int]string{8000: public, 8001: admin} {
			if got, err := target(listen, "admin.example.com"); err != nil || got != want {
				return fmt.Errorf("port %d: %q (%v), want %s", listen, got, err, want)
			}
		}
		return nil
	})
	for _, c := range []struct {
		listen int
		host   string
		want   string
	}{
		{8000, "admin.example.com:8080", public}, // names the admin port, reached port 80
		{8001, "admin.example.com:80", admin},
		{8001, "admin.example.com.", admin},
		{8001, "ADMIN.example.com.:80", admin},
		{8000, "admin.example.com.:8080", public},
	} {
		if got, err := target(c.listen, c.host); err != nil || got != c.want {
			t.Errorf("port %d, Host %q: went to %q (%v), want %s", c.listen, c.host, got, err, c.want)
		}
	}
	eventually(t, 10*time.Second, "the GatewayClass claims listener isolation", func() error {
		class, err := env.GW.GatewayV1().GatewayClasses().Get(w.ctx, w.class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(class.Status.SupportedFeatures, func(f gwv1.SupportedFeature) bool {
			return f.Name == gwv1.FeatureName(features.SupportGatewayHTTPListenerIsolation)
		}) {
			return fmt.Errorf("supportedFeatures %v", class.Status.SupportedFeatures)
		}
		return nil
	})
}
