//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
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

// post is one POST /config; End is zero while it is being handled. The
// double swaps its router before it writes its answer (every entity, in
// JSON), so a route is served a while before End.
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
		k.mu.Lock()
		i := len(k.posts)
		k.posts = append(k.posts, post{Start: time.Now(), Bytes: r.ContentLength})
		k.mu.Unlock()
		k.Double.ServeHTTP(rec, r)
		k.mu.Lock()
		k.posts[i].End, k.posts[i].Status = time.Now(), rec.status
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

// postAt is the last POST that started at or before t (the one that was
// being handled, or had been, when a change was seen at t).
func (k *kong) postAt(t time.Time) (post, bool) {
	ps := k.Posts()
	for i := len(ps) - 1; i >= 0; i-- {
		if !ps[i].Start.After(t) {
			return ps[i], true
		}
	}
	return post{}, false
}

// idle tells whether no POST /config is being handled.
func (k *kong) idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.posts) == 0 || !k.posts[len(k.posts)-1].End.IsZero()
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

// doubleCost posts a document to the double as konglet does (the raw
// document, labelled YAML) and returns the median of three answers: to a
// fresh double (cold), and to one that holds the document already, with
// one route's hostname changed (warm, what a sync after an edit costs).
func doubleCost(doc []byte) (cold, warm time.Duration, err error) {
	post := func(d *kongdouble.Double, body []byte) (time.Duration, error) {
		start := time.Now()
		resp, err := http.Post(d.URL()+"/config?check_hash=1&flatten_errors=1", "application/yaml", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("the double answered %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	host := hostExpr.FindSubmatch(doc)
	if host == nil {
		return 0, 0, fmt.Errorf("no hostname in the document")
	}
	var colds, warms []time.Duration
	for i := range 3 {
		d := kongdouble.New(kongdouble.Options{})
		c, err := post(d, doc)
		if err == nil {
			changed := bytes.Replace(doc, host[1], []byte(fmt.Sprintf("changed-%d.%s", i, host[1])), 1)
			var w time.Duration
			if w, err = post(d, changed); err == nil {
				colds, warms = append(colds, c), append(warms, w)
			}
		}
		d.Close()
		if err != nil {
			return 0, 0, err
		}
	}
	slices.Sort(colds)
	slices.Sort(warms)
	return colds[1], warms[1], nil
}
