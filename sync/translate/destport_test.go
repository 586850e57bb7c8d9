package translate_test

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// destPortObjects: HTTP listeners without hostname on two ports (and one
// with a hostname on the second), and routes that pick a port by their
// parentRef's port.
const destPortObjects = classYAML + `
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec:
  ports: [{name: a, port: 80, targetPort: 8000}, {name: b, port: 8080, targetPort: 8001}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: web, protocol: HTTP, port: 80}
  - {name: alt, protocol: HTTP, port: 8080}
  - {name: alt-named, protocol: HTTP, port: 8080, hostname: a.example.com}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: kong}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-80, namespace: kong}
spec:
  parentRefs: [{name: gw, port: 80}]
  rules: [{matches: [{path: {value: /p}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: named-on-8080, namespace: kong}
spec:
  parentRefs: [{name: gw, port: 8080}]
  hostnames: [a.example.com]
  rules: [{matches: [{path: {value: /p}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-81, namespace: kong}
spec:
  parentRefs: [{name: gw, port: 81}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`

// TestDestinationPortMatching: a parentRef's port keeps a route to the
// requests of that port (HTTPRouteDestinationPortMatching), whatever port
// the Host header names; a port without listeners is NoMatchingParent. The
// traditional router can match a port only with a hostname: there a route
// without hostnames on a listener without one is refused on that parentRef
// (UnsupportedValue) rather than served on every port, and the feature is
// not claimed; with hostnames it is served on its port alone.
func TestDestinationPortMatching(t *testing.T) {
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) {
			expressions := flavor == snapshot.RouterExpressions
			kong := snapshot.DefaultKong(flavor)
			kong.ProxyListens = append(kong.ProxyListens, snapshot.Listen{Port: 8001})
			kong.PortMaps[8080] = 8001
			res := translate.Translate(buildSnapshot(t, destPortObjects, types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, kong), nil)
			claimed(t, res, features.SupportHTTPRouteDestinationPortMatching, expressions)

			accepted := func(name string) metav1.Condition {
				for _, p := range res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "kong", Name: name}] {
					for _, c := range p.Conditions {
						if c.Type == string(gwv1.RouteConditionAccepted) {
							return c
						}
					}
				}
				t.Fatalf("route %s has no Accepted condition", name)
				return metav1.Condition{}
			}
			if c := accepted("on-81"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonNoMatchingParent) {
				t.Errorf("on-81: %s %s, want False NoMatchingParent", c.Status, c.Reason)
			}
			if c := accepted("named-on-8080"); c.Status != metav1.ConditionTrue {
				t.Errorf("named-on-8080: %s %s %q", c.Status, c.Reason, c.Message)
			}
			c := accepted("on-80")
			if expressions && c.Status != metav1.ConditionTrue {
				t.Errorf("on-80: %s %s %q", c.Status, c.Reason, c.Message)
			}
			if !expressions && (c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.Contains(c.Message, "parentRef port 80")) {
				t.Errorf("on-80: %s %s %q, want False UnsupportedValue naming the port", c.Status, c.Reason, c.Message)
			}

			doc, err := declarativeJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			d := kongdouble.New(kongdouble.Options{RouterFlavor: flavor,
				ProxyListeners: []kongdouble.Listener{{Port: 8000}, {Port: 8001}, {Port: 8443, SSL: true, HTTP2: true}},
				PortMaps:       []string{"80:8000", "8080:8001", "443:8443"}})
			defer d.Close()
			if status, body := load(d, doc); status != http.StatusCreated {
				t.Fatalf("Kong refused: %d %s", status, body)
			}
			on80 := "kong/on-80/0/0"
			if !expressions {
				on80 = "" // refused
			}
			for _, c := range []struct {
				listen     int
				host, want string
			}{
				{8000, "example.org", on80},
				{8000, "a.example.com", on80},
				{8001, "example.org", ""},
				{8001, "example.org:80", ""},
				{8001, "a.example.com", "kong/named-on-8080/0/0"},
				{8000, "a.example.com:8080", on80},
			} {
				dec, ok := d.Route(kongdouble.Request{ListenPort: c.listen, Host: c.host, Path: "/p"})
				got := ""
				if ok {
					got = ruleOf(dec.RouteName)
				}
				if got != c.want {
					t.Errorf("listen %d, Host %s: %q, want %q", c.listen, c.host, got, c.want)
				}
			}
		})
	}
}
