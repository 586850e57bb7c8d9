//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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

// cpu is the CPU time of the replicas' processes.
func (f *fleet) cpu() time.Duration {
	var total time.Duration
	for _, p := range f.procs {
		total += cpuTime(p.Pid())
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

// heap is the API server's Go heap in use.
func (a apiServer) heap(t *testing.T) float64 {
	return a.metrics(t, "go_memstats_heap_inuse_bytes")
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

// fleetRun is what one fleet size cost.
type fleetRun struct {
	Replicas int
	// StartS: the replicas started to all of them serving every route;
	// StartCPUS: the API server's CPU over that and the status writes
	// that followed.
	StartS, StartCPUS float64
	// IdleCPU is the API server's CPU per second of wall time while
	// nothing changes; IdleRSS its RSS then (median), RSSBefore before
	// the fleet started.
	IdleCPU   float64
	IdleRSS   int64
	RSSBefore int64
	// IdleHeap and HeapBefore are its Go heap in use.
	IdleHeap, HeapBefore float64
	Watches              float64 // watches the fleet opened
	KongletRSS           []int64 // each replica's, at the end of the idle window
	FirstMS, LastMS      []float64
	// LastPostMS is from Create to the last replica's POST /config arriving.
	LastPostMS []float64
	// RouteCPUS is the API server's CPU per route created above its idle
	// rate (the creation, the fleet's reaction and status writes).
	RouteCPUS, RouteEtcdCPUS float64
	// KongletCPUS and DoubleCPUS are the CPU per route and replica of
	// konglet and of its Kong double (the test process).
	KongletCPUS, DoubleCPUS float64
	StatusWrites            float64            // per route
	Requests                map[string]float64 // API requests per route created
}

// fleetScale: the API server's cost of a fleet of replicas of one Gateway
// with 3,000 routes (and their Services and EndpointSlices): one replica,
// then twenty. Statuses are settled first, so both measure a fleet joining
// a running cluster, not the first status writes.
func (b *bencher) fleetScale(t *testing.T) {
	const routes, added = 3000, 30
	scen := "8 fleet"
	b.shrinkRoutes(t, routes)
	b.shrinkBackends(t, routes)
	b.ensureApps(t, routes)
	b.settleStatuses(t)
	b.results.scenario(scen)
	api := b.apiServer(t)
	one := b.fleetRun(t, api, 1, routes, added)
	many := b.fleetRun(t, api, 20, routes, added)
	b.results.raw("fleet", []fleetRun{one, many})
	b.results.note(scen, "each replica is a konglet process with its own Kong double (in the test process) and its own Pod object; the doubles and the konglets share the machine's %d CPUs with the API server and etcd, so the propagation to the last of 20 replicas includes queueing for the CPU that separate Kong Pods would not have", runtime.NumCPU())
	inc := func(v1, v20 float64) float64 { return (v20 - v1) / float64(many.Replicas-one.Replicas) }
	for _, r := range []fleetRun{one, many} {
		label := fmt.Sprintf("%d replica", r.Replicas)
		if r.Replicas > 1 {
			label += "s"
		}
		slices.Sort(r.KongletRSS)
		last, post := durations(r.LastMS), durations(r.LastPostMS)
		b.results.add(figure{Scenario: scen, Name: label + ": start to every replica serving the 3,000 routes", Value: r.StartS, Unit: "s"})
		b.results.add(figure{Scenario: scen, Name: label + ": API server CPU from the start to the status writes over", Value: r.StartCPUS, Unit: "s"})
		b.results.add(figure{Scenario: scen, Name: label + ": API server CPU while nothing changes", Value: r.IdleCPU * 1000, Unit: "ms/s"})
		b.results.add(figure{Scenario: scen, Name: label + ": API server RSS while nothing changes (median over 10 s)", Value: mib(float64(r.IdleRSS)), Unit: "MiB",
			Note: fmt.Sprintf("%.0f MiB before the fleet started; Go heap in use %.0f MiB, %.0f MiB before", mib(float64(r.RSSBefore)), mib(r.IdleHeap), mib(r.HeapBefore))})
		b.results.add(figure{Scenario: scen, Name: label + ": watches the fleet holds open (apiserver_longrunning_requests, WATCH)", Value: r.Watches, Unit: "watches"})
		b.results.add(figure{Scenario: scen, Name: label + ": konglet RSS per replica (median)", Value: mib(float64(r.KongletRSS[len(r.KongletRSS)/2])), Unit: "MiB",
			Note: fmt.Sprintf("max %.1f MiB", mib(float64(r.KongletRSS[len(r.KongletRSS)-1])))})
		b.results.add(figure{Scenario: scen, Name: label + ": a new route, Create returned to the last replica's Kong routing it, p50", Value: ms(percentile(last, 50)), Unit: "ms",
			Note: fmt.Sprintf("%d routes created one by one; to the first replica p50 %.1f ms", added, ms(percentile(durations(r.FirstMS), 50)))})
		b.results.add(figure{Scenario: scen, Name: label + ": the same, p99", Value: ms(percentile(last, 99)), Unit: "ms",
			Note: fmt.Sprintf("of which konglet, to the last replica's POST /config arriving: p50 %.1f ms, p99 %.1f ms", ms(percentile(post, 50)), ms(percentile(post, 99)))})
		b.results.add(figure{Scenario: scen, Name: label + ": API server CPU per route created, above its idle rate", Value: r.RouteCPUS * 1000, Unit: "ms",
			Note: fmt.Sprintf("etcd %.1f ms; API requests per route: %s", r.RouteEtcdCPUS*1000, formatRequests(r.Requests))})
		b.results.add(figure{Scenario: scen, Name: label + ": CPU per route created and replica: konglet, its Kong double", Value: r.KongletCPUS * 1000, Unit: "ms",
			Note: fmt.Sprintf("the double %.1f ms (in the test process)", r.DoubleCPUS*1000)})
		routeWrites := r.Requests["PUT httproutes/status"]
		b.results.add(figure{Scenario: scen, Name: label + ": route status writes per route created", Value: routeWrites, Unit: "writes/route", Target: "<= 1.1", Met: atMost(routeWrites, 1.1)})
		b.results.add(figure{Scenario: scen, Name: label + ": all status writes per route created (konglet_status_writes_total)", Value: r.StatusWrites, Unit: "writes/route",
			Note: fmt.Sprintf("Gateway status writes %.2f per route: attachedRoutes changes with each route created alone, Programmed's count of replicas holding the newest configuration with their loads", r.Requests["PUT gateways/status"])})
	}
	b.results.add(figure{Scenario: scen, Name: "each replica more: API server CPU at its start", Value: inc(one.StartCPUS, many.StartCPUS) * 1000, Unit: "ms"})
	b.results.add(figure{Scenario: scen, Name: "each replica more: API server CPU while nothing changes", Value: inc(one.IdleCPU, many.IdleCPU) * 1000, Unit: "ms/s"})
	b.results.add(figure{Scenario: scen, Name: "each replica more: API server RSS", Value: mib(inc(float64(one.IdleRSS), float64(many.IdleRSS))), Unit: "MiB",
		Note: fmt.Sprintf("Go heap in use %.2f MiB; both move with the API server's garbage collection (the lists of a start), see the rows above", mib(inc(one.IdleHeap, many.IdleHeap)))})
	b.results.add(figure{Scenario: scen, Name: "each replica more: watches", Value: inc(one.Watches, many.Watches), Unit: "watches"})
	b.results.add(figure{Scenario: scen, Name: "each replica more: API server CPU per route created", Value: inc(one.RouteCPUS, many.RouteCPUS) * 1000, Unit: "ms"})
}

func durations(msecs []float64) []time.Duration {
	out := make([]time.Duration, len(msecs))
	for i, v := range msecs {
		out[i] = time.Duration(v * float64(time.Millisecond))
	}
	slices.Sort(out)
	return out
}

func formatRequests(r map[string]float64) string {
	keys := slices.Sorted(maps.Keys(r))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, r[k]))
	}
	return strings.Join(parts, ", ")
}

// fleetRun starts n replicas, waits for them to serve the routes and for
// the status writes to end, measures the API server idle, then creates
// added routes one by one, each served by every replica before the next.
func (b *bencher) fleetRun(t *testing.T, api apiServer, n, routes, added int) fleetRun {
	r := fleetRun{Replicas: n, RSSBefore: api.rss(), HeapBefore: api.heap(t)}
	watches0 := api.watches(t)
	cpu0, _ := api.cpu()
	f := b.startFleet(t, n)
	defer b.stopFleet(t, f)
	start := time.Now()
	if !poll(10*time.Millisecond, 300*time.Second, func() bool {
		for _, k := range f.kongs {
			if !b.allRoutable(k, routes) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%d replicas did not all serve %d routes within 300s", n, routes)
	}
	r.StartS = time.Since(start).Seconds()
	quiesceAll(f.procs, 2*time.Second, 120*time.Second)
	cpu1, _ := api.cpu()
	r.StartCPUS = (cpu1 - cpu0).Seconds()

	// Idle: the API server's CPU and RSS, the watches and konglet's RSS.
	const idle = 10 * time.Second
	idleStart := time.Now()
	var rss []float64
	poll(500*time.Millisecond, idle, func() bool {
		rss = append(rss, float64(api.rss()))
		return false
	})
	cpu2, _ := api.cpu()
	r.IdleCPU = (cpu2 - cpu1).Seconds() / time.Since(idleStart).Seconds()
	r.IdleRSS = int64(median(rss))
	r.IdleHeap = api.heap(t)
	r.Watches = api.watches(t) - watches0
	for _, p := range f.procs {
		v, _ := vmRSS(p.Pid())
		r.KongletRSS = append(r.KongletRSS, v)
	}

	// New routes, one by one.
	requests0, writes0 := api.requests(t), f.writes()
	cpu3, etcd3 := api.cpu()
	konglet3, double3, routesStart := f.cpu(), cpuTime(os.Getpid()), time.Now()
	name := func(j int) string { return fmt.Sprintf("fleet%d-%03d", n, j) }
	hostOf := func(j int) string { return name(j) + ".bench.test" }
	defer func() {
		if err := parallel(0, added, func(j int) error {
			return retry(func() error {
				return b.c.gw.GatewayV1().HTTPRoutes(appNS(0)).Delete(b.ctx, name(j), metav1.DeleteOptions{})
			})
		}); err != nil {
			t.Error(err)
		}
	}()
	for j := range added {
		if !poll(time.Millisecond, 30*time.Second, func() bool {
			for _, k := range f.kongs {
				if !k.idle() {
					return false
				}
			}
			return true
		}) {
			t.Fatal("a double still handling a POST /config after 30s")
		}
		if err := retry(func() error {
			_, err := b.c.gw.GatewayV1().HTTPRoutes(appNS(0)).Create(b.ctx, httpRoute(appNS(0), name(j), hostOf(j), svcName(0)), metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		seen := make([]time.Time, n)
		left := n
		if !poll(time.Millisecond, 60*time.Second, func() bool {
			for i, k := range f.kongs {
				if seen[i].IsZero() && k.routes(hostOf(j)) {
					seen[i] = time.Now()
					left--
				}
			}
			return left == 0
		}) {
			t.Fatalf("route %s not served by all %d replicas within 60s (%d left)", name(j), n, left)
		}
		first, last, lastPost := seen[0], seen[0], time.Time{}
		for i, s := range seen {
			first = minTime(first, s)
			last = maxTime(last, s)
			if pst, ok := f.kongs[i].postAt(s); ok {
				lastPost = maxTime(lastPost, pst.Start)
			}
		}
		r.FirstMS = append(r.FirstMS, ms(first.Sub(t0)))
		r.LastMS = append(r.LastMS, ms(last.Sub(t0)))
		r.LastPostMS = append(r.LastPostMS, ms(lastPost.Sub(t0)))
	}
	quiesceAll(f.procs, 2*time.Second, 60*time.Second)
	cpu4, etcd4 := api.cpu()
	idleCPU := r.IdleCPU * time.Since(routesStart).Seconds()
	r.RouteCPUS, r.RouteEtcdCPUS = ((cpu4-cpu3).Seconds()-idleCPU)/float64(added), (etcd4-etcd3).Seconds()/float64(added)
	r.KongletCPUS = (f.cpu() - konglet3).Seconds() / float64(added*n)
	r.DoubleCPUS = (cpuTime(os.Getpid()) - double3).Seconds() / float64(added*n)
	r.StatusWrites = (f.writes() - writes0) / float64(added)
	r.Requests = map[string]float64{}
	for k, v := range api.requestsSince(t, requests0) {
		r.Requests[k] = v / float64(added)
	}
	t.Logf("%d replicas: %+v", n, r)
	return r
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// shrinkBackends deletes the Services and EndpointSlices of applications
// from n on, which the scenarios before left: the fleet's cluster holds
// 3,000 of each, as many as routes.
func (b *bencher) shrinkBackends(t *testing.T, n int) {
	t.Helper()
	var extra []int
	for _, ns := range appNamespaceNames() {
		svcs, err := b.c.kube.CoreV1().Services(ns).List(b.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range svcs.Items {
			var i int
			if _, err := fmt.Sscanf(svc.Name, "svc-%05d", &i); err == nil && i >= n {
				extra = append(extra, i)
			}
		}
	}
	if err := parallel(0, len(extra), func(j int) error {
		i := extra[j]
		if err := retry(func() error {
			return b.c.kube.DiscoveryV1().EndpointSlices(appNS(i)).Delete(b.ctx, svcName(i)+"-1", metav1.DeleteOptions{})
		}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		err := retry(func() error {
			return b.c.kube.CoreV1().Services(appNS(i)).Delete(b.ctx, svcName(i), metav1.DeleteOptions{})
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatalf("deleting the backends of applications from %d: %v", n, err)
	}
	t.Logf("deleted the Services and EndpointSlices of %d applications", len(extra))
}
