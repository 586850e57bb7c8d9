package kongdouble_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// benchDocument is a declarative document shaped like konglet's output for
// n HTTPRoutes: one service per rule with two expression routes, one
// upstream per backend Service with three targets.
func benchDocument(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"_format_version":"3.0","services":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		ns, name := "ns-"+strconv.Itoa(i%50), "route-"+strconv.Itoa(i)
		svc := "svc-" + strconv.Itoa(i) + "." + ns + ".80.svc"
		host := "app-" + strconv.Itoa(i) + ".example.com"
		prefix := "httproute." + ns + "." + name + ".0"
		fmt.Fprintf(&b, `{"name":%q,"host":%q,"tags":["k8s-name:%s","k8s-namespace:%s","k8s-kind:HTTPRoute"],"routes":[`, prefix, svc, name, ns)
		fmt.Fprintf(&b, `{"name":"%s.0.0","protocols":["http"],"expression":"(lower(http.host) == \"%s\") && (http.path == \"/exact\")","priority":70368475742211,"strip_path":false,"preserve_host":true},`, prefix, host)
		fmt.Fprintf(&b, `{"name":"%s.1.0","protocols":["http"],"expression":"(lower(http.host) == \"%s\") && (http.path == \"/api/v%d\" || http.path ^= \"/api/v%d/\")","priority":70096013754371,"strip_path":false,"preserve_host":true}]}`, prefix, host, i, i)
	}
	b.WriteString(`],"upstreams":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		ns := "ns-" + strconv.Itoa(i%50)
		fmt.Fprintf(&b, `{"name":"svc-%d.%s.80.svc","tags":["k8s-name:svc-%d","k8s-namespace:%s","k8s-kind:Service"],"targets":[`, i, ns, i, ns)
		for j := range 3 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"%08x-0000-4000-8000-%012x","target":"198.18.%d.%d:8080","weight":100}`, i, j, i/250, i%250+j)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// postRaw posts doc as a raw document (body form 3), as konglet does.
func postRaw(b testing.TB, d *kongdouble.Double, doc []byte) {
	req := httptest.NewRequest(http.MethodPost, "/config?check_hash=1&flatten_errors=1", bytes.NewReader(doc))
	req.Header.Set("Content-Type", "application/yaml")
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		b.Fatalf("POST /config = %d: %.500s", rec.Code, rec.Body.String())
	}
}

func BenchmarkPostConfig(b *testing.B) {
	const routes = 3300
	defer kongdouble.WithoutCrossCheck()()
	opts := kongdouble.Options{RouterFlavor: "expressions"}
	b.Run("cold", func(b *testing.B) {
		doc := benchDocument(routes)
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			b.StopTimer()
			d := kongdouble.New(opts)
			b.StartTimer()
			postRaw(b, d, doc)
			b.StopTimer()
			d.Close()
			b.StartTimer()
		}
	})
	b.Run("one-route-changed", func(b *testing.B) {
		d := kongdouble.New(opts)
		defer d.Close()
		postRaw(b, d, benchDocument(routes))
		n := routes
		for b.Loop() {
			b.StopTimer()
			n++
			doc := benchDocument(n)
			b.StartTimer()
			postRaw(b, d, doc)
			host := "app-" + strconv.Itoa(n-1) + ".example.com"
			if _, ok := d.Route(kongdouble.Request{Host: host, Path: "/exact"}); !ok {
				b.Fatalf("%s is not routed", host)
			}
		}
	})
}
