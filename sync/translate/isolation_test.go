package translate_test

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

const isolationInput = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: konglet}
spec: {controllerName: konglet.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: any, protocol: HTTP, port: 80}
  - {name: wildcard, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: exact, protocol: HTTP, port: 80, hostname: foo.example.com}
  - {name: other-port, protocol: HTTP, port: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: ns}
spec:
  ports: [{name: a, port: 80, targetPort: 8000}, {name: b, port: 8080, targetPort: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-any, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: any}]
  rules: [{matches: [{path: {value: /}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-wildcard, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: wildcard}]
  rules: [{matches: [{path: {value: /}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-exact, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: exact}]
  rules: [{matches: [{path: {type: Exact, value: /only}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-other-port, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: other-port}]
  rules: [{matches: [{path: {type: Exact, value: /port}}], backendRefs: [{name: app, port: 80}]}]
`

// TestListenerIsolation: a request is served only by routes of the most
// specific listener that matches its port and hostname, never by a route of
// a broader listener, even when that route would match it better.
func TestListenerIsolation(t *testing.T) {
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(isolationInput), "isolation"); err != nil {
		t.Fatal(err)
	}
	snap := objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{Namespace: "ns", Name: "kong-proxy"}, snapshot.DefaultKong(snapshot.RouterExpressions))
	doc, err := declarativeJSON(translate.Translate(snap, nil))
	if err != nil {
		t.Fatal(err)
	}
	kong := kongdouble.New(kongdouble.Options{PortMaps: []string{}})
	defer kong.Close()
	if status, body := load(kong, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	for _, c := range []struct {
		host, path string
		want       string // ns/route, "" for 404
	}{
		{"foo.example.com:80", "/only", "ns/on-exact"},
		{"foo.example.com:80", "/elsewhere", ""}, // not the wildcard's, not the catch-all's
		{"bar.example.com:80", "/elsewhere", "ns/on-wildcard"},
		{"a.b.example.com:80", "/", "ns/on-wildcard"},
		{"example.org:80", "/only", "ns/on-any"},
		{"foo.example.com:8080", "/port", "ns/on-other-port"},
		{"foo.example.com:8080", "/only", ""},    // the exact listener is on port 80 only
		{"example.org:80", "/port", "ns/on-any"}, // the other port's route is not on 80
	} {
		d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: c.host, Path: c.path, Method: "GET"})
		got := ""
		if ok {
			got = strings.Join(strings.Split(ruleOf(d.RouteName), "/")[:2], "/")
		}
		if got != c.want {
			t.Errorf("%s%s: served by %q, want %q", c.host, c.path, got, c.want)
		}
	}
}
