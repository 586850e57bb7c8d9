package e2e

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// flakyLink is a TCP proxy to the API server that can cut every connection
// and refuse new ones: from konglet's side, the API server is gone.
type flakyLink struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newFlakyLink(t *testing.T, target string) *flakyLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyLink{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); f.cut() })
	go f.serve()
	return f
}

func (f *flakyLink) serve() {
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		f.mu.Lock()
		if f.down {
			f.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			f.mu.Unlock()
			c.Close()
			continue
		}
		f.conns = append(f.conns, c, up)
		f.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (f *flakyLink) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = true
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func (f *flakyLink) restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = false
}

// kubeconfigVia writes a copy of the test kubeconfig that reaches the API
// server through addr.
func kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	f, err := os.CreateTemp(t.TempDir(), "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := clientcmd.WriteToFile(*cfg, f.Name()); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// TestAPIServerLoss: while the API server is unreachable konglet keeps
// Kong configured from its caches (even through a Kong restart), and once
// the API server is back its watches resume and new objects are served,
// without a konglet restart.
func TestAPIServerLoss(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "a", 80, 8080, "198.18.0.60")
	w.backend(w.ns, "b", 80, 8080, "198.18.0.61")
	w.create(w.route("a", []string{"a.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "a", 80, 1)}}))
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var target string
	for _, c := range cfg.Clusters {
		target = c.Server[len("https://"):]
	}
	link := newFlakyLink(t, target)
	args := append(w.kongletArgs(), "--kubeconfig", kubeconfigVia(t, link.ln.Addr().String()))
	startKonglet(t, kong, args...)
	eventually(t, 10*time.Second, "a is served", expectTargets(kong, "a.example.com", "/", "198.18.0.60:8080"))

	link.cut()
	w.create(w.route("b", []string{"b.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "b", 80, 1)}}))
	kong.Restart()
	eventually(t, 2*time.Second, "a is served again from the cache while the API server is away", expectTargets(kong, "a.example.com", "/", "198.18.0.60:8080"))
	if err := expectNoRoute(kong, "b.example.com", "/")(); err != nil {
		t.Fatalf("b cannot be known yet: %v", err)
	}

	link.restore()
	eventually(t, 60*time.Second, "b is served once the API server is back", expectTargets(kong, "b.example.com", "/", "198.18.0.61:8080"))
	if err := expectTargets(kong, "a.example.com", "/", "198.18.0.60:8080")(); err != nil {
		t.Fatalf("a was lost after the reconnection: %v", err)
	}
}
