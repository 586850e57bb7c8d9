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

// routeTargets asks the double where Kong would send a request on its
// :8000 listen (Service port 80) and returns the upstream targets.
func routeTargets(kong *kongdouble.Double, host, path string) ([]string, error) {
	d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: host, Path: path, Method: "GET"})
	if !ok {
		return nil, fmt.Errorf("Kong would answer 404 for %s%s", host, path)
	}
	var out []string
	for _, t := range d.Targets {
		out = append(out, t.Target)
	}
	return out, nil
}

func expectTargets(kong *kongdouble.Double, host, path string, want ...string) func() error {
	return func() error {
		got, err := routeTargets(kong, host, path)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s%s goes to %v, want %v", host, path, got, want)
		}
		return nil
	}
}

func expectNoRoute(kong *kongdouble.Double, host, path string) func() error {
	return func() error {
		if d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: host, Path: path, Method: "GET"}); ok {
			return fmt.Errorf("%s%s still routed by %s", host, path, d.RouteName)
		}
		return nil
	}
}

// TestHTTPRouteLifecycle: an HTTPRoute created on the API server reaches the
// Pod IPs through Kong, the Gateway tells the truth, and deleting the route
// takes it away again.
func TestHTTPRouteLifecycle(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.10", "198.18.0.11")
	startKonglet(t, kong, w.kongletArgs()...)

	r := w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}})
	w.create(r)
	eventually(t, 10*time.Second, "the route is served", expectTargets(kong, "app.example.com", "/anything", "198.18.0.10:8080", "198.18.0.11:8080"))
	if err := expectNoRoute(kong, "other.example.com", "/")(); err != nil {
		t.Fatalf("a request for another host must not match: %v", err)
	}
	eventually(t, 10*time.Second, "the Gateway is programmed with the Service address and one route", func() error {
		g := w.getGateway()
		svc, err := env.Kube.CoreV1().Services(w.ns).Get(w.ctx, "kong-proxy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != svc.Spec.ClusterIP {
			return fmt.Errorf("addresses %v, want the ClusterIP %s", g.Status.Addresses, svc.Spec.ClusterIP)
		}
		if err := expectCond(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed"); err != nil {
			return err
		}
		if err := expectCond(g.Status.Conditions, "Accepted", metav1.ConditionTrue, "Accepted"); err != nil {
			return err
		}
		l, err := w.listener("http")
		if err != nil {
			return err
		}
		if l.AttachedRoutes != 1 {
			return fmt.Errorf("attachedRoutes %d, want 1", l.AttachedRoutes)
		}
		return w.routeCond("app", "Accepted", metav1.ConditionTrue, "Accepted")
	})
	if err := w.routeCond("app", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"); err != nil {
		t.Fatal(err)
	}

	if err := env.GW.GatewayV1().HTTPRoutes(w.ns).Delete(w.ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the deleted route is no longer served", expectNoRoute(kong, "app.example.com", "/anything"))
	eventually(t, 10*time.Second, "attachedRoutes drops to 0", func() error {
		l, err := w.listener("http")
		if err != nil {
			return err
		}
		if l.AttachedRoutes != 0 {
			return fmt.Errorf("attachedRoutes %d, want 0", l.AttachedRoutes)
		}
		return nil
	})
}
