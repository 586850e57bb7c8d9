//go:build bench

package bench

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"time"

	"github.com/konglet/konglet/test/kongdouble"
)

// kong is the Kong admin API double behind a thin recorder that times every
// POST /config (the double itself is not changed): it tells how much of a
// propagation is konglet and how much is the double validating the config
// and building its router.
type kong struct {
	*kongdouble.Double
	srv *httptest.Server

	mu    sync.Mutex
	posts []post

	hostsMu    sync.Mutex
	hostsLoads int
	hosts      map[string]bool
}

type post struct {
	Start, End time.Time
	Status     int
	Bytes      int64
}

func newKong() *kong {
	k := &kong{Double: kongdouble.New(kongdouble.Options{})}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/config" {
			k.Double.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		k.Double.ServeHTTP(rec, r)
		end := time.Now()
		k.mu.Lock()
		k.posts = append(k.posts, post{Start: start, End: end, Status: rec.status, Bytes: r.ContentLength})
		k.mu.Unlock()
	}))
	return k
}

// URL is the recorder's address: give this one to konglet.
func (k *kong) URL() string { return k.srv.URL }

func (k *kong) Close() {
	k.srv.Close()
	k.Double.Close()
}

// Posts returns the POST /config seen so far.
func (k *kong) Posts() []post {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]post(nil), k.posts...)
}

// lastPostBefore is the last accepted POST that ended at or before t.
func (k *kong) lastPostBefore(t time.Time) (post, bool) {
	ps := k.Posts()
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].Status == http.StatusCreated && !ps[i].End.After(t) {
			return ps[i], true
		}
	}
	return post{}, false
}

// routes tells whether Kong would route GET http://host/ on its :8000
// listen (Service port 80).
func (k *kong) routes(host string) bool {
	_, ok := k.Route(kongdouble.Request{ListenPort: 8000, Host: host, Path: "/", Method: "GET"})
	return ok
}

var hostExpr = regexp.MustCompile(`http\.host\) == \\"([^"\\]+)\\"`)

// Hosts is the set of exact hostnames the loaded configuration matches on,
// read from the document Kong holds (cached per load). It is how thousands
// of routes are checked at once; single routes are checked with Route.
func (k *kong) Hosts() map[string]bool {
	loads := k.Loads()
	k.hostsMu.Lock()
	defer k.hostsMu.Unlock()
	if k.hosts != nil && k.hostsLoads == loads {
		return k.hosts
	}
	raw := k.RawConfig()
	hosts := map[string]bool{}
	for _, m := range hostExpr.FindAllSubmatch(raw, -1) {
		hosts[string(m[1])] = true
	}
	k.hosts, k.hostsLoads = hosts, loads
	return hosts
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
