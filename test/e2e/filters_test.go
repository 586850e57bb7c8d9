package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// echo is what the test backend saw of a request Kong sent it.
type echo struct {
	Host    string      `json:"host"`
	Path    string      `json:"path"`
	Headers http.Header `json:"headers"`
}

// TestFiltersOnTheWire sends real requests through the double's data plane
// (its router, plugins and proxy, as Kong would run the config konglet
// loaded) to a backend that echoes what it received: header modifiers, URL
// rewrites and redirects do what the Gateway API says.
func TestFiltersOnTheWire(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "yes")
		_ = json.NewEncoder(w).Encode(echo{Host: r.Host, Path: r.URL.RequestURI(), Headers: r.Header})
	}))
	defer backend.Close()
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	// The backend's Pod IP stands for the test server on loopback.
	plane := kongdouble.NewDataPlane(kong, func(target string) (string, bool) {
		return backend.Listener.Addr().String(), target == "198.18.0.90:8080"
	})
	proxy := httptest.NewServer(plane.Handler(8000, false))
	defer proxy.Close()

	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.90")
	prefix := gwv1.PathMatchPathPrefix
	match := func(p string) []gwv1.HTTPRouteMatch {
		return []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr(p)}}}
	}
	backends := []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}
	w.create(w.route("filters", []string{"f.example.com"},
		gwv1.HTTPRouteRule{Matches: match("/headers"), BackendRefs: backends, Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
				Set: []gwv1.HTTPHeader{{Name: "X-Set", Value: "set"}}, Add: []gwv1.HTTPHeader{{Name: "X-Add", Value: "added"}}, Remove: []string{"X-Remove"}}},
			{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
				Set: []gwv1.HTTPHeader{{Name: "X-Response", Value: "modified"}}}},
		}},
		gwv1.HTTPRouteRule{Matches: match("/old"), BackendRefs: backends, Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
				Hostname: ptr(gwv1.PreciseHostname("internal.example.com")),
				Path:     &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")}}},
		}},
		gwv1.HTTPRouteRule{Matches: match("/moved"), Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
				Scheme: ptr("https"), StatusCode: ptr(301)}},
		}},
	))
	startKonglet(t, kong, w.kongletArgs()...)
	eventually(t, 10*time.Second, "the route is served", expectTargets(kong, "f.example.com", "/headers", "198.18.0.90:8080"))

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(path string, header http.Header) (*http.Response, echo) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, proxy.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "f.example.com"
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e echo
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}

	resp, got := send("/headers/x", http.Header{"X-Set": {"client"}, "X-Add": {"client"}, "X-Remove": {"gone"}})
	if got.Headers.Get("X-Set") != "set" || fmt.Sprint(got.Headers["X-Add"]) != "[client added]" || got.Headers.Get("X-Remove") != "" {
		t.Errorf("upstream headers: %v", got.Headers)
	}
	if got.Host != "f.example.com" || got.Path != "/headers/x" {
		t.Errorf("upstream host %q path %q: the Host is preserved and the path untouched", got.Host, got.Path)
	}
	if resp.Header.Get("X-Response") != "modified" || resp.Header.Get("X-Backend") != "yes" {
		t.Errorf("response headers: %v", resp.Header)
	}

	_, got = send("/old/page?q=1", nil)
	if got.Host != "internal.example.com" || got.Path != "/new/page?q=1" {
		t.Errorf("rewrite: upstream host %q path %q, want internal.example.com /new/page?q=1", got.Host, got.Path)
	}

	resp, _ = send("/moved/here?x=y", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://f.example.com/moved/here?x=y" {
		t.Errorf("redirect: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
