package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestRetryAfterHonouredWhileRoutesChange: Kong answers a load with 429
// and Retry-After: 1 while routes keep being created; konglet asks again
// no sooner than Kong said, then loads every route.
func TestRetryAfterHonouredWhileRoutesChange(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.70")
	w.create(w.route("first", []string{"first.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)
	eventually(t, 10*time.Second, "the first route is served", expectTargets(kong, "first.example.com", "/", "198.18.0.70:8080"))

	kong.FailNext(http.StatusTooManyRequests, 1)
	before := kong.Posts()
	w.create(w.route("busy-0", []string{"busy-0.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	eventually(t, 10*time.Second, "Kong answered 429", func() error {
		if kong.Posts() == before {
			return fmt.Errorf("no POST yet")
		}
		return nil
	})
	refused := time.Now()
	after429 := kong.Posts()
	// Changes keep coming while Kong asked for a second's rest.
	var asked int
	for i := 1; time.Since(refused) < 800*time.Millisecond; i++ {
		w.create(w.route(fmt.Sprintf("busy-%d", i), []string{fmt.Sprintf("busy-%d.example.com", i)},
			gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
		asked = i
	}
	if n := kong.Posts(); n != after429 {
		t.Fatalf("Kong was asked %d more times within 800 ms of a 429 with Retry-After: 1", n-after429)
	}
	last := fmt.Sprintf("busy-%d.example.com", asked)
	eventually(t, 10*time.Second, "every route created meanwhile is served", expectTargets(kong, last, "/", "198.18.0.70:8080"))
}
