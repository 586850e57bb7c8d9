package kongdouble_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBackendFiltersLua: a rule with two weighted backends that set
// different headers sends each request to one backend with that backend's
// headers (the rule's own filter first), whatever the values hold.
func TestBackendFiltersLua(t *testing.T) {
	value := `"]]--` + "é日本" + `\` + strings.Repeat("v", 300) // long ones: redirect_test (gopher-lua runs the chunk per request)
	filter := func(backend string) any {
		return L{M{"type": "RequestHeaderModifier", "requestHeaderModifier": M{
			"set":    L{M{"name": "Backend", "value": backend}, M{"name": "X-Rule", "value": "backend-" + backend}},
			"add":    L{M{"name": "X-Hostile", "value": value}},
			"remove": L{"X-Drop"},
		}}}
	}
	route, err := json.Marshal(M{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": M{"name": "r", "namespace": "ns"},
		"spec": M{"parentRefs": L{M{"name": "gw"}}, "rules": L{M{
			"filters": L{M{"type": "RequestHeaderModifier", "requestHeaderModifier": M{"set": L{M{"name": "X-Rule", "value": "rule"}}}}},
			"backendRefs": L{
				M{"name": "app", "port": 80, "weight": 3, "filters": filter("a")},
				M{"name": "app-b", "port": 80, "weight": 1, "filters": filter("b")},
			}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, res := translated(t, string(route)+`
---
apiVersion: v1
kind: Service
metadata: {name: app-b, namespace: ns}
spec: {ports: [{name: http, port: 80, targetPort: 3000}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-b-1, namespace: ns, labels: {kubernetes.io/service-name: app-b}}
addressType: IPv4
ports: [{name: http, port: 3000}]
endpoints: [{addresses: [198.18.0.2], conditions: {ready: true}}]
`)
	if msgs := refusals(res); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	s := dataPlane(t, cfg)
	seen := map[string]int{}
	for range 200 {
		p := send(t, s, http.MethodGet, "example.org", "/", "X-Drop", "x", "X-Hostile", "client")
		e := p.echo
		seen[e.Backend]++
		if p.status != 200 || e.Headers.Get("Backend") != e.Backend || e.Headers.Get("X-Rule") != "backend-"+e.Backend ||
			strings.Join(e.Headers.Values("X-Hostile"), "|") != "client|"+value || e.Headers.Get("X-Drop") != "" {
			t.Fatalf("%d from %q: headers %v", p.status, e.Backend, e.Headers)
		}
	}
	if seen["a"] < 100 || seen["b"] < 20 {
		t.Errorf("requests per backend %v, want about 150 and 50", seen)
	}
}
