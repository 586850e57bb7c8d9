package translate_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// TestGRPCRouting sends gRPC calls through the double's router: the method
// matches pick the right rule, and the cleartext route stays unserved.
func TestGRPCRouting(t *testing.T) {
	snap := loadSnapshot(t, snapshot.RouterExpressions, "testdata/golden/grpc/input.yaml")
	doc, err := declarativeJSON(translate.Translate(snap, nil))
	if err != nil {
		t.Fatal(err)
	}
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	if status, body := load(kong, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	grpc := http.Header{"Content-Type": {"application/grpc"}}
	for _, c := range []struct {
		path    string
		headers http.Header
		want    string
	}{
		{"/helloworld.Greeter/SayHello", http.Header{"Content-Type": {"application/grpc"}, "X-Tenant": {"blue"}}, "kong/greeter/0/0"},
		{"/helloworld.Greeter/SayHello", grpc, "kong/greeter/1/0"},
		{"/helloworld.Greeter/SayGoodbye", grpc, "kong/greeter/1/0"},
		{"/other.Service/Check", grpc, "kong/greeter/1/1"},
		{"/grpc.health.v1.Health/Watch", grpc, "kong/greeter/1/2"},
		{"/other.Service/Other", grpc, "kong/greeter/2/0"},
	} {
		d, ok := kong.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "grpc.example.com", Host: "grpc.example.com",
			Method: "POST", Path: c.path, Headers: c.headers})
		if !ok || ruleOf(d.RouteName) != c.want {
			t.Errorf("%s: served by %q (%v), want %s", c.path, d.RouteName, ok, c.want)
		}
	}
	if d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "x", Method: "POST", Path: "/a.B/C", Headers: grpc}); ok {
		t.Errorf("the cleartext GRPCRoute must not be served without HTTP/2, got %s", d.RouteName)
	}
}

// TestGRPCRouteNamedRule: GRPCRoute rules with names
// (GRPCRouteNamedRouteRule) are accepted and served like any other, each
// as its own Kong service.
func TestGRPCRouteNamedRule(t *testing.T) {
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(classYAML+`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec: {ports: [{name: http, port: 80, targetPort: 8000}]}
---
apiVersion: v1
kind: Service
metadata: {name: greeter, namespace: app}
spec: {ports: [{name: grpc, port: 50051}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: greeter, namespace: app}
spec:
  parentRefs: [{name: gw, namespace: kong}]
  rules:
  - name: greet
    matches: [{method: {service: helloworld.Greeter, method: SayHello}}]
    backendRefs: [{name: greeter, port: 50051}]
  - name: rest
    backendRefs: [{name: greeter, port: 50051}]
`), "input"); err != nil {
		t.Fatal(err)
	}
	kong := snapshot.DefaultKong(snapshot.RouterExpressions)
	kong.ProxyListens[0].HTTP2 = true // cleartext gRPC (h2c) on Kong's 8000
	snap := objs.Build(snapshot.DefaultControllerName, nil, publishService, kong)
	res := translate.Translate(snap, nil)
	parents := res.Status.Routes[translate.ObjectRef{Group: "gateway.networking.k8s.io", Kind: "GRPCRoute", Namespace: "app", Name: "greeter"}]
	if len(parents) != 1 || meta(parents[0].Conditions, "Accepted").Status != "True" {
		t.Fatalf("statuses %+v", parents)
	}
	services := 0
	for _, svc := range res.Config.Services {
		if strings.HasPrefix(svc.Name, "grpcroute.app.greeter.") {
			services++
		}
	}
	if services != 2 {
		t.Fatalf("%d Kong services for the two named rules", services)
	}
}
