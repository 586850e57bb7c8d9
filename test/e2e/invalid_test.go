package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestInvalidObjectsNeverBreakTheOthers: an unknown backend, a missing
// ReferenceGrant, a bad regex, a header name the Gateway API allows but
// Kong's request-transformer does not, and a listener on a port Kong does
// not listen on are each reported on themselves while a good route keeps
// working.
func TestInvalidObjectsNeverBreakTheOthers(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t, httpListener("http", 80, ""), httpListener("nowhere", 8080, ""))
	other := w.ns + "-other"
	w.create(namespace(other))
	w.backend(w.ns, "good", 80, 8080, "198.18.0.20")
	w.backend(other, "elsewhere", 80, 8080, "198.18.0.21")
	startKonglet(t, kong, w.kongletArgs()...)

	good := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}
	w.create(w.route("good", []string{"good.example.com"}, good))
	w.create(w.route("unknown-backend", []string{"unknown.example.com"},
		gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "missing", 80, 1)}}))
	w.create(w.route("no-grant", []string{"nogrant.example.com"},
		gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef(other, "elsewhere", 80, 1)}}))
	bad := w.route("bad-regex", []string{"regex.example.com"}, gwv1.HTTPRouteRule{
		Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchRegularExpression), Value: ptr("/(unclosed")}}},
		BackendRefs: good.BackendRefs,
	})
	w.create(bad)
	w.create(w.route("dotted-header", []string{"dotted.example.com"}, gwv1.HTTPRouteRule{
		Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "x.trace", Value: "1"}}}}},
		BackendRefs: good.BackendRefs,
	}))

	eventually(t, 10*time.Second, "the good route is served", expectTargets(kong, "good.example.com", "/", "198.18.0.20:8080"))
	eventually(t, 10*time.Second, "each invalid object says why", func() error {
		for _, c := range []struct{ route, typ, reason string }{
			{"good", "Accepted", "Accepted"},
			{"unknown-backend", "ResolvedRefs", "BackendNotFound"},
			{"no-grant", "ResolvedRefs", "RefNotPermitted"},
			{"bad-regex", "Accepted", "UnsupportedValue"},
		} {
			status := metav1.ConditionFalse
			if c.reason == "Accepted" {
				status = metav1.ConditionTrue
			}
			if err := w.routeCond(c.route, c.typ, status, c.reason); err != nil {
				return fmt.Errorf("%s: %w", c.route, err)
			}
		}
		// Said by konglet before any load, not learned from Kong refusing one.
		if err := w.routeCondSays("dotted-header", "Accepted", metav1.ConditionFalse, "UnsupportedValue", `header name "x.trace"`); err != nil {
			return fmt.Errorf("dotted-header: %w", err)
		}
		l, err := w.listener("nowhere")
		if err != nil {
			return err
		}
		return expectCond(l.Conditions, "Accepted", metav1.ConditionFalse, "PortUnavailable")
	})
	// A rule whose only backend is unusable answers 500, per the Gateway API.
	d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "unknown.example.com", Path: "/", Method: "GET"})
	if !ok || !hasTermination(d, 500) {
		t.Fatalf("unknown backend: want a 500 request-termination, got %+v (matched %v)", d, ok)
	}
	for _, host := range []string{"regex.example.com", "dotted.example.com"} {
		if err := expectNoRoute(kong, host, "/x")(); err != nil {
			t.Fatal(err)
		}
	}

	// Granting the reference fixes the route without any restart.
	w.create(&gwv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "allow", Namespace: other},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(w.ns)}},
			To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	eventually(t, 10*time.Second, "the granted backend is served", expectTargets(kong, "nogrant.example.com", "/", "198.18.0.21:8080"))
	eventually(t, 10*time.Second, "the granted route resolves", func() error {
		return w.routeCond("no-grant", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	})
}

func hasTermination(d kongdouble.Decision, code int) bool {
	for _, p := range d.Plugins {
		if p["name"] != "request-termination" {
			continue
		}
		if cfg, ok := p["config"].(map[string]any); ok && fmt.Sprint(cfg["status_code"]) == fmt.Sprint(code) {
			return true
		}
	}
	return false
}
