package translate_test

import (
	"net/http"
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
