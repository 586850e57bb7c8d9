package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestReplicasOneStatusWriter runs three konglet replicas, each with its own
// Kong, against one API server: every Kong is loaded, only the leader
// writes statuses, another replica takes over when it stops, every Pod
// carries its load condition, and Programmed counts the replicas.
func TestReplicasOneStatusWriter(t *testing.T) {
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.50")
	pods := []string{"kong-a", "kong-b", "kong-c"}
	var endpoints []discoveryv1.Endpoint
	for i, name := range pods {
		w.createPod(name)
		endpoints = append(endpoints, discoveryv1.Endpoint{
			Addresses: []string{"198.18.1." + strconv.Itoa(i+1)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: w.ns, Name: name},
		})
	}
	w.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kong-proxy-1", Namespace: w.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "kong-proxy"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000))}},
		Endpoints:   endpoints,
	})
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))

	kongs := make([]*kongdouble.Double, len(pods))
	procs := make([]*process, len(pods))
	for i, name := range pods {
		kongs[i] = kongdouble.New(kongdouble.Options{})
		defer kongs[i].Close()
		// A stopped leader releases the Lease, so the takeover below takes a
		// retry period, not a lease duration; the lease is long enough that
		// a leader under -race on loaded cores keeps it (a renewal missed
		// would make two writers: a likely cause of this test's rare failures).
		procs[i] = startKonglet(t, kongs[i], append(w.kongletArgs(), "--pod-name", name, "--pod-namespace", w.ns,
			"--lease-duration", "4s", "--lease-renew-deadline", "3s", "--lease-retry-period", "200ms")...)
	}
	for i := range pods {
		eventually(t, 10*time.Second, pods[i]+"'s Kong is loaded", expectTargets(kongs[i], "app.example.com", "/", "198.18.0.50:8080"))
	}
	eventually(t, 10*time.Second, "Programmed counts three replicas", func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != "3 of 3 ready replicas hold the current configuration" {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})
	for _, name := range pods {
		pod, err := env.Kube.CoreV1().Pods(w.ns).Get(w.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := podCond(pod); c == nil || c.Status != corev1.ConditionTrue || !strings.HasPrefix(c.Message, "Kong holds configuration ") {
			t.Fatalf("%s: condition %+v", name, c)
		}
	}
	leader := leaderIndex(t, w, pods)
	for i, p := range procs {
		writes := counter(t, p, "konglet_status_writes_total")
		if (i == leader) != (writes > 0) {
			t.Fatalf("replica %s (leader: %v) wrote %v statuses: only the leader may write", pods[i], i == leader, writes)
		}
	}

	// A replica's endpoint turns not ready (its Pod going away in a Kong
	// rollout): the leader tells it on Programmed from its peer watch, and
	// no replica syncs for it (the EndpointSlices of konglet's namespace
	// wake the status path only).
	away := (leader + 2) % len(pods)
	syncs := make([]float64, len(procs))
	for i, p := range procs {
		syncs[i] = counter(t, p, "konglet_sync_duration_seconds_count")
	}
	setReady := func(ready bool) {
		t.Helper()
		slice, err := env.Kube.DiscoveryV1().EndpointSlices(w.ns).Get(w.ctx, "kong-proxy-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slice.Endpoints[away].Conditions = discoveryv1.EndpointConditions{Ready: ptr(ready), Serving: ptr(ready)}
		if _, err := env.Kube.DiscoveryV1().EndpointSlices(w.ns).Update(w.ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady(false)
	eventually(t, 10*time.Second, "Programmed counts two ready replicas", func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if want := "2 of 2 ready replicas hold the current configuration; not ready yet: " + pods[away]; c == nil || c.Status != metav1.ConditionTrue || c.Message != want {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})
	for i, p := range procs {
		if n := counter(t, p, "konglet_sync_duration_seconds_count"); n != syncs[i] {
			t.Errorf("replica %s synced %v times for an endpoint of the publish Service", pods[i], n-syncs[i])
		}
	}
	setReady(true)
	eventually(t, 10*time.Second, "Programmed counts three replicas again", func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != "3 of 3 ready replicas hold the current configuration" {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})

	// Programmed follows the slowest replica: one whose Kong cannot load the
	// current configuration turns it False, naming the Pod, until it can.
	slow := (leader + 1) % len(pods)
	kongs[slow].SetDown(true)
	r := w.getRoute("app")
	r.Spec.Hostnames = []gwv1.Hostname{"app.example.com", "slow.example.com"}
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "Programmed is False while one replica fails", func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, pods[slow]) {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})
	kongs[slow].SetDown(false)
	eventually(t, 15*time.Second, "Programmed is True again once every replica holds the configuration", func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != "3 of 3 ready replicas hold the current configuration" {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})

	// The leader stops: another replica takes the lease and writes.
	procs[leader].Stop()
	start := time.Now()
	var next int
	eventually(t, 5*time.Second, "another replica leads", func() error {
		next = leaderIndex(t, w, pods)
		if next == leader || next < 0 {
			return fmt.Errorf("lease still held by %d", next)
		}
		return nil
	})
	t.Logf("takeover after %v", time.Since(start))
	r = w.getRoute("app")
	r.Spec.Hostnames = []gwv1.Hostname{"app.example.com", "new.example.com"}
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the new leader writes the route's status", func() error {
		p, err := w.routeParent("app")
		if err != nil {
			return err
		}
		if c := cond(p.Conditions, "Accepted"); c == nil || c.ObservedGeneration != w.getRoute("app").Generation {
			return fmt.Errorf("Accepted %+v not for generation %d", c, w.getRoute("app").Generation)
		}
		return nil
	})
	// The writer counts a write once its whole pass is over: after the
	// route's status is visible.
	eventually(t, 5*time.Second, "the new leader counts its writes", func() error {
		if counter(t, procs[next], "konglet_status_writes_total") == 0 {
			return errors.New("the new leader wrote nothing")
		}
		return nil
	})
}

func (w *world) createPod(name string) {
	w.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: map[string]string{"app": "kong"}},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "proxy", Image: "kong:3.9"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "konglet.dev/config-loaded"}},
		},
	}
	if _, err := env.Kube.CoreV1().Pods(w.ns).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func podCond(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == "konglet.dev/config-loaded" {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// leaderIndex is the replica holding the Gateway's Lease, -1 for none.
func leaderIndex(t *testing.T, w *world, pods []string) int {
	t.Helper()
	lease, err := env.Kube.CoordinationV1().Leases(w.ns).Get(w.ctx, "konglet-"+w.gateway, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return -1
	}
	for i, p := range pods {
		if p == *lease.Spec.HolderIdentity {
			return i
		}
	}
	return -1
}

// counter reads an unlabelled counter from a replica's /metrics.
func counter(t *testing.T, p *process, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.Metrics() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}
