//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fleet is n konglet processes serving the one Gateway as the replicas of
// a Deployment would: each with its own Kong double and its own Pod object
// (no kubelet runs it; konglet only writes its conditions), all named by an
// EndpointSlice of the publish Service, leader election on.
type fleet struct {
	pods  []string
	kongs []*kong
	procs []*proc
}

const fleetSlice = "kong-proxy-fleet"

// startFleet creates the Pods and the publish Service's EndpointSlice, then
// starts one konglet per Pod.
func (b *bencher) startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fleetSlice, Namespace: gatewayNS, Labels: map[string]string{discoveryv1.LabelServiceName: "kong-proxy"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000))}},
	}
	for i := range n {
		name := fmt.Sprintf("kong-%02d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gatewayNS, Labels: map[string]string{"app": "kong"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kong", Image: "kong:3.9"}}},
		}
		if _, err := b.c.kube.CoreV1().Pods(gatewayNS).Create(b.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.pods = append(f.pods, name)
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.0.%d", i+10)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: gatewayNS, Name: name},
		})
	}
	if _, err := b.c.kube.DiscoveryV1().EndpointSlices(gatewayNS).Create(b.ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range f.pods {
		k := newKong()
		f.kongs = append(f.kongs, k)
		f.procs = append(f.procs, b.startKonglet(t, k, "--pod-name", name, "--pod-namespace", gatewayNS))
	}
	return f
}

// stop ends the processes, closes the doubles and deletes the Pods, the
// EndpointSlice and the Lease (the next scenario starts without a leader).
func (b *bencher) stopFleet(t *testing.T, f *fleet) {
	t.Helper()
	for _, p := range f.procs {
		p.Stop()
	}
	for _, k := range f.kongs {
		k.Close()
	}
	for _, name := range f.pods {
		if err := b.c.kube.CoreV1().Pods(gatewayNS).Delete(b.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	if err := b.c.kube.DiscoveryV1().EndpointSlices(gatewayNS).Delete(b.ctx, fleetSlice, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	b.releaseLease(t)
}

// sum adds one series over the replicas.
func (f *fleet) sum(series string) float64 {
	total := 0.0
	for _, p := range f.procs {
		total += p.metric(series)
	}
	return total
}

// writes is konglet_status_writes_total over the replicas.
func (f *fleet) writes() float64 { return f.sum("konglet_status_writes_total") }

// quiesceAll waits until the status writes of all ps stop for quiet (at
// most timeout) and reports whether they did.
func quiesceAll(ps []*proc, quiet, timeout time.Duration) bool {
	last := -1.0
	since := time.Now()
	return poll(100*time.Millisecond, timeout, func() bool {
		w := 0.0
		for _, p := range ps {
			w += p.metric("konglet_status_writes_total")
		}
		if w != last {
			last, since = w, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	})
}

// apiServer is the kube-apiserver (and etcd) the test started: a child of
// this process, measured from /proc and from its /metrics.
type apiServer struct {
	b         *bencher
	pid, etcd int
}

func (b *bencher) apiServer(t *testing.T) apiServer {
	t.Helper()
	a := apiServer{b: b, pid: childNamed("kube-apiserver"), etcd: childNamed("etcd")}
	if a.pid == 0 {
		t.Fatal("kube-apiserver not found among this process's children")
	}
	return a
}

// childNamed is the pid of this process's child whose command is name, 0
// when there is none.
func childNamed(name string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		comm, fields, ok := procStat(path)
		if ok && comm == name && fields[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			return pid
		}
	}
	return 0
}

// procStat reads /proc/<pid>/stat: the command and the fields after it
// (fields[0] is the state, fields[1] the parent pid; utime and stime are
// fields[11] and fields[12]).
func procStat(path string) (string, []string, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, false
	}
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	fields := strings.Fields(string(raw[end+1:]))
	return string(raw[open+1 : end]), fields, len(fields) > 12
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc: 100 on
// every Linux this runs on (sysconf is not reachable without cgo).
const clockTicks = 100

// cpu is the CPU time a process has used (user + system).
func cpuTime(pid int) time.Duration {
	_, f, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	if !ok {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / clockTicks
}

// cpu is the API server's CPU time so far, and etcd's.
func (a apiServer) cpu() (apiserver, etcd time.Duration) {
	return cpuTime(a.pid), cpuTime(a.etcd)
}

// rss is the API server's VmRSS.
func (a apiServer) rss() int64 {
	v, _ := vmRSS(a.pid)
	return v
}

// series returns the API server's /metrics series of one name whose
// labels contain every one of match, as labels -> value.
func (a apiServer) series(t *testing.T, name string, match ...string) map[string]float64 {
	t.Helper()
	raw, err := a.b.c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(a.b.ctx)
	if err != nil {
		t.Fatalf("reading the API server's /metrics: %v", err)
	}
	out := map[string]float64{}
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue next
			}
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[len(name):i]] += v
		}
	}
	return out
}

// metrics sums series.
func (a apiServer) metrics(t *testing.T, name string, match ...string) float64 {
	t.Helper()
	total := 0.0
	for _, v := range a.series(t, name, match...) {
		total += v
	}
	return total
}

var requestLabels = regexp.MustCompile(`(?:^|[{,])(resource|subresource|verb)="([^"]*)"`)

// requests counts the requests the API server served so far by verb,
// resource and subresource ("PUT httproutes/status").
func (a apiServer) requests(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for labels, v := range a.series(t, "apiserver_request_total") {
		l := map[string]string{}
		for _, m := range requestLabels.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += v
	}
	return out
}

// requestsSince is what requests counted since before (non-zero only).
func (a apiServer) requestsSince(t *testing.T, before map[string]float64) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range a.requests(t) {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// watches is the number of watches the API server serves now.
func (a apiServer) watches(t *testing.T) float64 {
	return a.metrics(t, "apiserver_longrunning_requests", `verb="WATCH"`)
}

// rejected is how many requests API Priority and Fairness turned away so
// far (429s), over every priority level.
func (a apiServer) rejected(t *testing.T) float64 {
	return a.metrics(t, "apiserver_flowcontrol_rejected_requests_total")
}
