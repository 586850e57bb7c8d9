package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestL4Routes: TCPRoute, TLSRoute (passthrough) and UDPRoute created on the
// API server reach Kong's stream listens, and the listeners count them.
func TestL4Routes(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{StreamListeners: []kongdouble.Listener{
		{IP: "0.0.0.0", Port: 9000}, {IP: "0.0.0.0", Port: 9001, SSL: true}, {IP: "0.0.0.0", Port: 9053, UDP: true},
	}})
	defer kong.Close()
	passthrough := gwv1.TLSModePassthrough
	w := newWorld(t,
		gwv1.Listener{Name: "tcp", Protocol: gwv1.TCPProtocolType, Port: 7000},
		gwv1.Listener{Name: "tls", Protocol: gwv1.TLSProtocolType, Port: 7001, Hostname: ptr(gwv1.Hostname("*.example.com")),
			TLS: &gwv1.ListenerTLSConfig{Mode: &passthrough}},
		gwv1.Listener{Name: "dns", Protocol: gwv1.UDPProtocolType, Port: 53},
	)
	w.backend(w.ns, "db", 5432, 5432, "198.18.0.70", "198.18.0.71")
	w.backend(w.ns, "web", 443, 8443, "198.18.0.72")
	w.backend(w.ns, "dns", 53, 53, "198.18.0.73")
	startKonglet(t, kong, w.kongletArgs()...)

	parent := func(section string) gwv1.CommonRouteSpec {
		return gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(w.gateway), SectionName: ptr(gwv1.SectionName(section))}}}
	}
	ref := func(name string, port int32) []gwv1.BackendRef {
		return []gwv1.BackendRef{backendRef("", name, port, 1).BackendRef}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: w.ns} }
	if _, err := env.GW.GatewayV1().TCPRoutes(w.ns).Create(w.ctx, &gwv1.TCPRoute{ObjectMeta: meta("db"),
		Spec: gwv1.TCPRouteSpec{CommonRouteSpec: parent("tcp"), Rules: []gwv1.TCPRouteRule{{BackendRefs: ref("db", 5432)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.GW.GatewayV1().TLSRoutes(w.ns).Create(w.ctx, &gwv1.TLSRoute{ObjectMeta: meta("web"),
		Spec: gwv1.TLSRouteSpec{CommonRouteSpec: parent("tls"), Hostnames: []gwv1.Hostname{"web.example.com"},
			Rules: []gwv1.TLSRouteRule{{BackendRefs: ref("web", 443)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.GW.GatewayV1().UDPRoutes(w.ns).Create(w.ctx, &gwv1.UDPRoute{ObjectMeta: meta("dns"),
		Spec: gwv1.UDPRouteSpec{CommonRouteSpec: parent("dns"), Rules: []gwv1.UDPRouteRule{{BackendRefs: ref("dns", 53)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		req  kongdouble.StreamRequest
		want []string
	}{
		{"tcp", kongdouble.StreamRequest{ListenPort: 9000}, []string{"198.18.0.70:5432", "198.18.0.71:5432"}},
		{"tls", kongdouble.StreamRequest{ListenPort: 9001, TLS: true, SNI: "web.example.com"}, []string{"198.18.0.72:8443"}},
		{"udp", kongdouble.StreamRequest{ListenPort: 9053, UDP: true}, []string{"198.18.0.73:53"}},
	} {
		eventually(t, 10*time.Second, c.name+" connections reach the backends", func() error {
			d, ok := kong.RouteStream(c.req)
			var got []string
			for _, target := range d.Targets {
				got = append(got, target.Target)
			}
			if !ok || !slices.Equal(got, c.want) {
				return fmt.Errorf("routed %v to %v, want %v", ok, got, c.want)
			}
			return nil
		})
	}
	if d, ok := kong.RouteStream(kongdouble.StreamRequest{ListenPort: 9001, TLS: true, SNI: "other.org"}); ok {
		t.Fatalf("a server name outside the listener's hostname was routed to %s", d.RouteName)
	}
	eventually(t, 10*time.Second, "each L4 listener counts its route", func() error {
		for _, name := range []string{"tcp", "tls", "dns"} {
			l, err := w.listener(name)
			if err != nil {
				return err
			}
			if l.AttachedRoutes != 1 || len(l.SupportedKinds) != 1 {
				return fmt.Errorf("listener %s: attachedRoutes %d, supportedKinds %v", name, l.AttachedRoutes, l.SupportedKinds)
			}
		}
		r, err := env.GW.GatewayV1().TLSRoutes(w.ns).Get(w.ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(r.Status.Parents) != 1 {
			return fmt.Errorf("TLSRoute parents %v", r.Status.Parents)
		}
		return expectCond(r.Status.Parents[0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	})
}
