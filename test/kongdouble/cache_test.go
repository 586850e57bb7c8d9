package kongdouble_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// postDoc posts a raw document (body form 3) with flattened errors.
func postDoc(t *testing.T, d *kongdouble.Double, doc string) response {
	t.Helper()
	return do(t, http.MethodPost, d.URL()+"/config?flatten_errors=1", "application/yaml", []byte(doc))
}

// withoutTimestamps drops what differs between two loads of one document.
func withoutTimestamps(v any) any {
	switch x := v.(type) {
	case M:
		out := M{}
		for k, e := range x {
			if k != "created_at" && k != "updated_at" {
				out[k] = withoutTimestamps(e)
			}
		}
		return out
	case L:
		out := make(L, len(x))
		for i, e := range x {
			out[i] = withoutTimestamps(e)
		}
		return out
	}
	return v
}

// TestCacheKeepsVerdicts loads a document B after a document A that shares
// most of its elements, and expects the answer a fresh double gives for B:
// whatever was cached from A cannot change the status, the errors, the
// ids, the hash or the routing.
func TestCacheKeepsVerdicts(t *testing.T) {
	const svcA = `{"name":"a","host":"up","routes":[{"name":"ra","expression":"http.path == \"/a\"","priority":1}]}`
	const svcB = `{"name":"b","host":"up","routes":[{"name":"rb","expression":"http.path == \"/b\"","priority":1}]}`
	const up = `{"name":"up","targets":[{"target":"10.0.0.1:80"}]}`
	c1, k1 := certPair(t, "one.example.com")
	c2, k2 := certPair(t, "two.example.com")
	cert, cert2 := string(mustJSON(t, M{"cert": c1, "key": k1})), string(mustJSON(t, M{"cert": c2, "key": k2}))
	doc := func(parts ...string) string {
		return `{"_format_version":"3.0",` + strings.Join(parts, ",") + `}`
	}
	base := doc(`"services":[`+svcA+`,`+svcB+`]`, `"upstreams":[`+up+`]`)
	cases := []struct{ name, a, b string }{
		{"same document", base, base},
		{"a reference now dangles", doc(`"services":[`+svcA+`]`, `"routes":[{"name":"top","service":"a","paths":["/t"]}]`),
			doc(`"services":[`+svcB+`]`, `"routes":[{"name":"top","service":"a","paths":["/t"]}]`)},
		{"a reference now resolves to another id", doc(`"services":[{"name":"a","host":"up","id":"11111111-1111-4111-8111-111111111111"}]`, `"routes":[{"name":"top","service":"a","paths":["/t"]}]`),
			doc(`"services":[{"name":"a","host":"up","id":"22222222-2222-4222-8222-222222222222"}]`, `"routes":[{"name":"top","service":"a","paths":["/t"]}]`)},
		{"a target under an upstream that changed id", doc(`"upstreams":[{"name":"up"}]`, `"targets":[{"target":"10.0.0.1:80","upstream":"up"}]`),
			doc(`"upstreams":[{"name":"up","id":"33333333-3333-4333-8333-333333333333"}]`, `"targets":[{"target":"10.0.0.1:80","upstream":"up"}]`)},
		{"a name now declared twice", base, doc(`"services":[`+svcA+`,`+svcB+`,`+svcA+`]`, `"upstreams":[`+up+`]`)},
		{"a route name now declared twice", base, doc(`"services":[`+svcA+`,`+strings.Replace(svcB, `"rb"`, `"ra"`, 1)+`]`, `"upstreams":[`+up+`]`)},
		{"an element now invalid", base, doc(`"services":[`+svcA+`,`+strings.Replace(svcB, `"host":"up"`, `"host":"up:1"`, 1)+`]`, `"upstreams":[`+up+`]`)},
		{"an element moved", base, doc(`"services":[`+svcB+`,`+svcA+`]`, `"upstreams":[`+up+`]`)},
		{"an id derived from a position", doc(`"certificates":[` + cert + `]`), doc(`"certificates":[` + cert2 + `,` + cert + `]`)},
		{"an unknown top-level field", base, doc(`"services":[`+svcA+`]`, `"servcies":[]`)},
		{"not JSON any more", base, base[:len(base)-1]},
		{"trailing data", base, base + ` ]`},
		{"a duplicate key", base, doc(`"services":[`+svcA+`]`, `"services":[`+svcB+`]`)},
		{"an escaped key", base, doc(`"\u0073ervices":[` + svcA + `]`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := kongdouble.Options{RouterFlavor: "expressions"}
			warm, fresh := newDouble(t, opts), newDouble(t, opts)
			postDoc(t, warm, c.a)
			got, want := postDoc(t, warm, c.b), postDoc(t, fresh, c.b)
			if got.status != want.status || !reflect.DeepEqual(withoutTimestamps(got.body), withoutTimestamps(want.body)) {
				t.Fatalf("after A, B = %d %s\nfresh, B = %d %s", got.status, got.raw, want.status, want.raw)
			}
			if got.status != http.StatusCreated {
				return // the warm double keeps A, as Kong does
			}
			if warm.ConfigHash() != fresh.ConfigHash() {
				t.Errorf("hash %s, fresh %s", warm.ConfigHash(), fresh.ConfigHash())
			}
			for _, path := range []string{"/a", "/b", "/t"} {
				g, gok := warm.Route(kongdouble.Request{Path: path})
				w, wok := fresh.Route(kongdouble.Request{Path: path})
				if gok != wok || !reflect.DeepEqual(g, w) {
					t.Errorf("GET %s routes to %+v (%v), fresh %+v (%v)", path, g, gok, w, wok)
				}
			}
		})
	}
}
