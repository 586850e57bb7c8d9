package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestKongRefusalLeavesOutOnlyTheRefusedRoute: Kong refuses what one route
// produces; konglet loads the ten others, reports Kong's message on that
// route, and serves it again once it changes.
func TestKongRefusalLeavesOutOnlyTheRefusedRoute(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.30")
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}
	for i := range 10 {
		w.create(w.route(fmt.Sprintf("good-%d", i), []string{fmt.Sprintf("good-%d.example.com", i)}, rule))
	}
	w.create(w.route("bad", []string{"bad.example.com"}, rule))
	kong.RefuseEntity("route", "httproute."+w.ns+".bad.0.0.0")
	startKonglet(t, kong, w.kongletArgs()...)

	for i := range 10 {
		eventually(t, 10*time.Second, "good route served", expectTargets(kong, fmt.Sprintf("good-%d.example.com", i), "/", "198.18.0.30:8080"))
	}
	eventually(t, 10*time.Second, "the refused route says what Kong said", func() error {
		p, err := w.routeParent("bad")
		if err != nil {
			return err
		}
		c := cond(p.Conditions, "Accepted")
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "refused by test") {
			return fmt.Errorf("Accepted = %+v, want False with Kong's message", c)
		}
		return nil
	})
	if err := expectNoRoute(kong, "bad.example.com", "/")(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a Warning Event on the refused route", func() error {
		events, err := env.Kube.EventsV1().Events(w.ns).List(w.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "HTTPRoute" && e.Regarding.Name == "bad" && e.Reason == "KongRefused" && strings.Contains(e.Note, "refused by test") {
				return nil
			}
		}
		return fmt.Errorf("no KongRefused Event among %d events", len(events.Items))
	})

	// Kong stops refusing; a change to the route brings it back, no restart.
	kong.ClearFaults()
	r := w.getRoute("bad")
	r.Spec.Hostnames = append(r.Spec.Hostnames, "bad2.example.com")
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the fixed route is served", expectTargets(kong, "bad.example.com", "/", "198.18.0.30:8080"))
	eventually(t, 10*time.Second, "the fixed route is Accepted", func() error {
		return w.routeCond("bad", "Accepted", metav1.ConditionTrue, "Accepted")
	})
}

// TestKongRestartAndOutage: a Kong that restarts (empty config, new node
// id) gets the configuration again at once; a Kong that is down or busy is
// retried without konglet exiting, and /readyz tells.
func TestKongRestartAndOutage(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.40")
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	p := startKonglet(t, kong, w.kongletArgs()...)
	eventually(t, 10*time.Second, "served", expectTargets(kong, "app.example.com", "/", "198.18.0.40:8080"))
	eventually(t, 5*time.Second, "ready", func() error { return httpStatus(p.Metrics()+"/readyz", 200) })

	loads := kong.Loads()
	kong.Restart()
	if _, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "app.example.com", Path: "/"}); ok {
		t.Fatal("a restarted Kong still routes: the double did not forget its config")
	}
	// konglet polls every 100ms in these tests: well within a second.
	eventually(t, time.Second, "reloaded after the restart", expectTargets(kong, "app.example.com", "/", "198.18.0.40:8080"))
	if kong.Loads() != loads+1 {
		t.Fatalf("loads = %d after a restart, want %d", kong.Loads(), loads+1)
	}

	// Down: the admin API closes connections. konglet keeps running and the
	// newest config reaches Kong when it is back.
	kong.SetDown(true)
	w.backend(w.ns, "second", 80, 8080, "198.18.0.41")
	w.create(w.route("second", []string{"second.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "second", 80, 1)}}))
	eventually(t, 10*time.Second, "konglet says Kong is unreachable", func() error {
		return metricIs(p.Metrics(), "konglet_kong_reachable", "0")
	})
	kong.SetDown(false)
	kong.FailNext(http.StatusTooManyRequests, 1)
	eventually(t, 15*time.Second, "the change made during the outage is served", expectTargets(kong, "second.example.com", "/", "198.18.0.41:8080"))
	if p.Exited() {
		t.Fatal("konglet exited during the outage")
	}
}

func httpStatus(url string, want int) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s: %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

// metricIs checks one unlabelled sample on /metrics.
func metricIs(base, name, value string) error {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if rest == value {
				return nil
			}
			return fmt.Errorf("%s = %s, want %s", name, rest, value)
		}
	}
	return fmt.Errorf("%s not exported", name)
}
