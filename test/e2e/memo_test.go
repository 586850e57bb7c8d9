package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestStatusWritesTranslateNoRouteAgain: konglet's status writes give every
// route that attaches a new object of the same spec; the sync after them
// takes those routes over rather than translating them again
// (konglet_routes_translated_total), so a route edited afterwards is the
// one route translated.
func TestStatusWritesTranslateNoRouteAgain(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t, httpListener("http", 80, ""))
	w.backend(w.ns, "app", 80, 8080, "198.18.0.70")
	const routes = 10
	host := func(i int) string { return fmt.Sprintf("r%d.example.com", i) }
	for i := range routes {
		w.create(w.route(fmt.Sprintf("r%d", i), []string{host(i)}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	}
	p := startKonglet(t, kong, w.kongletArgs()...)
	eventually(t, 10*time.Second, "every route served, its status written", func() error {
		var errs []error
		for i := range routes {
			errs = append(errs, w.routeCond(fmt.Sprintf("r%d", i), "Accepted", metav1.ConditionTrue, "Accepted"),
				expectTargets(kong, host(i), "/", "198.18.0.70:8080")())
		}
		return errors.Join(errs...)
	})
	before := counter(t, p, "konglet_routes_translated_total")
	r := w.getRoute("r0")
	r.Spec.Hostnames = []gwv1.Hostname{"edited.example.com"}
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the edited route served", expectTargets(kong, "edited.example.com", "/", "198.18.0.70:8080"))
	if translated := counter(t, p, "konglet_routes_translated_total") - before; translated != 1 {
		t.Fatalf("%v routes translated for one edit after the status writes, want 1", translated)
	}
}
