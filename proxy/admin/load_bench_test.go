package admin_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/konglet/konglet/proxy/admin"
)

// BenchmarkLoadAnswer is the client's side of a POST /config of 2.3 MiB
// (3,300 routes) that Kong answers, as it does, with every entity it
// loaded: about as large, chunked. The server only reads and writes
// bytes, so what the two variants differ by is the client's reads and
// writes. It reports the process's system CPU per load (the syscalls).
func BenchmarkLoadAnswer(b *testing.B) {
	doc := bytes.Repeat([]byte(`{"name":"httproute.ns.route-0000.0.0","protocols":["http"]},`), 2_300_000/60)
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		posts.Add(1)
		w.WriteHeader(http.StatusCreated)
		// As Kong writes it: in pieces, as its JSON encoder goes.
		for rest := doc; len(rest) > 0; {
			n := min(len(rest), 16<<10)
			w.Write(rest[:n])
			rest = rest[n:]
		}
	}))
	defer srv.Close()
	c, err := admin.New(srv.URL, 10*time.Second, 0)
	if err != nil {
		b.Fatal(err)
	}
	sys0 := systemCPU()
	for b.Loop() {
		if err := c.Load(context.Background(), doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(systemCPU()-sys0)/float64(b.N), "sys-ns/op")
	if posts.Load() < int64(b.N) {
		b.Fatalf("%d posts for %d loads", posts.Load(), b.N)
	}
}

func systemCPU() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Stime.Nano())
}
