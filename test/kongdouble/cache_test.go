package kongdouble_test

import (
	"encoding/json"
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

// TestCacheSequences posts a sequence of documents to one double, each
// differing from the previous one by elements added, removed, changed,
// reordered, renamed or moved, some of them invalid, and expects after each
// one what a fresh double answers for it: the warm double's tables, built
// from the differences between documents, must not drift, and a refused
// document must leave them as they were.
func TestCacheSequences(t *testing.T) {
	route := func(name, path string) string {
		return `{"name":"` + name + `","expression":"http.path == \"` + path + `\"","priority":1}`
	}
	svc := func(name, host string, extra string, routes ...string) string {
		return `{"name":"` + name + `","host":"` + host + `"` + extra + `,"routes":[` + strings.Join(routes, ",") + `]}`
	}
	up := func(name string, targets ...string) string {
		var ts []string
		for _, t := range targets {
			ts = append(ts, `{"target":"`+t+`"}`)
		}
		return `{"name":"` + name + `","targets":[` + strings.Join(ts, ",") + `]}`
	}
	doc := func(colls ...string) string {
		return `{"_format_version":"3.0",` + strings.Join(colls, ",") + `}`
	}
	list := func(coll string, elems ...string) string {
		return `"` + coll + `":[` + strings.Join(elems, ",") + `]`
	}
	a, b, c := svc("a", "up1", "", route("ra", "/a")), svc("b", "up2", "", route("rb", "/b")), svc("c", "up1", "", route("rc", "/c"))
	ups := list("upstreams", up("up1", "10.0.0.1:80", "10.0.0.2:80"), up("up2", "10.0.0.3"))
	top := list("routes", `{"name":"top","service":"a","expression":"http.path == \"/t\"","priority":2}`)
	plugin := list("plugins", `{"name":"request-termination","route":"top","config":{"status_code":418}}`)
	topTarget := list("targets", `{"target":"10.0.0.9:80","upstream":"up2"}`)
	c1, k1 := certPair(t, "one.example.com")
	c2, k2 := certPair(t, "two.example.com")
	cert1, cert2 := string(mustJSON(t, M{"cert": c1, "key": k1})), string(mustJSON(t, M{"cert": c2, "key": k2}))
	base := doc(list("services", a, b), ups, top, plugin)
	steps := []struct{ name, doc string }{
		{"base", base},
		{"a service added, one removed", doc(list("services", a, c), ups, top, plugin)},
		{"a route changed", doc(list("services", svc("a", "up1", "", route("ra", "/a2")), c), ups, top, plugin)},
		{"reordered", doc(plugin, top, ups, list("services", c, svc("a", "up1", "", route("ra", "/a2"))))},
		{"the referred service renamed", doc(list("services", svc("a2", "up1", "", route("ra", "/a")), c), ups, top, plugin)},
		{"the same again", doc(list("services", svc("a2", "up1", "", route("ra", "/a")), c), ups, top, plugin)},
		{"back", base},
		{"the referred service replaced", doc(list("services", svc("a", "up2", `,"id":"11111111-1111-4111-8111-111111111111"`, route("ra", "/a")), b), ups, top, plugin)},
		{"the referred service disabled", doc(list("services", svc("a", "up2", `,"enabled":false`, route("ra", "/a")), b), ups, top, plugin)},
		{"enabled again", base},
		{"a name declared twice", doc(list("services", a, b, svc("b", "up1", "")), ups, top, plugin)},
		{"a route moved to another service", doc(list("services", svc("a", "up1", ""), svc("b", "up2", "", route("rb", "/b"), route("ra", "/a"))), ups, top, plugin)},
		{"a plugin twice on a route", doc(list("services", a, b), ups, top, strings.Replace(plugin, `}]`,
			`},{"name":"request-termination","route":"top","id":"33333333-3333-4333-8333-333333333333"}]`, 1))},
		{"plugins nested under a route", doc(list("services", svc("a", "up1", "", strings.Replace(route("ra", "/a"), `}`,
			`,"plugins":[{"name":"cors"},{"name":"request-termination","config":{"status_code":404}}]}`, 1)), b), ups, top, plugin)},
		{"one of them changed", doc(list("services", svc("a", "up1", "", strings.Replace(route("ra", "/a"), `}`,
			`,"plugins":[{"name":"cors"},{"name":"request-termination","config":{"status_code":405}}]}`, 1)), b), ups, top, plugin)},
		{"an upstream replaced under a top-level target", doc(list("services", a, b), list("upstreams", up("up1", "10.0.0.1:80"), `{"name":"up2","id":"22222222-2222-4222-8222-222222222222"}`), topTarget)},
		{"its target moved to another upstream", doc(list("services", a, b), list("upstreams", up("up1", "10.0.0.1:80"), `{"name":"up2"}`), strings.Replace(topTarget, "up2", "up1", 1))},
		{"certificates by position", doc(list("certificates", cert1, cert2))},
		{"certificates swapped", doc(list("certificates", cert2, cert1))},
		{"a certificate twice", doc(list("certificates", cert1, cert1))},
		{"empty", doc(`"_comment":"nothing"`)},
		{"base from nothing", base},
		{"a dangling reference", doc(list("services", b, c), ups, top, plugin)},
		{"an invalid element", doc(list("services", a, svc("b", "up2:1", "", route("rb", "/b"))), ups, top, plugin)},
		{"base once more", base},
	}
	opts := kongdouble.Options{RouterFlavor: "expressions"}
	warm := newDouble(t, opts)
	requests := []kongdouble.Request{{Path: "/a"}, {Path: "/a2"}, {Path: "/b"}, {Path: "/c"}, {Path: "/t"}}
	for _, s := range steps {
		fresh := newDouble(t, opts)
		checked := kongdouble.FastChecked()
		got := postDoc(t, warm, s.doc)
		fast := kongdouble.FastChecked() > checked
		want := postDoc(t, fresh, s.doc)
		if got.status != want.status || !reflect.DeepEqual(withoutTimestamps(got.body), withoutTimestamps(want.body)) {
			t.Fatalf("%s: warm double answers %d %.2000s\nfresh one %d %.2000s", s.name, got.status, got.raw, want.status, want.raw)
		}
		if got.status != http.StatusCreated {
			continue
		}
		if !fast {
			t.Errorf("%s: accepted by schemas.load only", s.name)
		}
		if warm.ConfigHash() != fresh.ConfigHash() {
			t.Errorf("%s: hash %s, fresh %s", s.name, warm.ConfigHash(), fresh.ConfigHash())
		}
		for _, req := range requests {
			g, gok := warm.Route(req)
			w, wok := fresh.Route(req)
			if gok != wok || !reflect.DeepEqual(withoutTimestamps(decisionJSON(t, g)), withoutTimestamps(decisionJSON(t, w))) {
				t.Errorf("%s: %s routes to %+v (%v), fresh %+v (%v)", s.name, req.Path, g, gok, w, wok)
			}
		}
	}
}

// decisionJSON is a Decision as JSON values, for withoutTimestamps.
func decisionJSON(t *testing.T, d kongdouble.Decision) any {
	var v any
	if err := json.Unmarshal(mustJSON(t, d), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
