package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// The e2e environment has no endpoints controller and no kubelet: the
// tests write the publish Service's EndpointSlice themselves, and check the
// Pod conditions that a readiness gate reads (konglet.dev/config-loaded)
// rather than the Pods' Ready condition.

const (
	loadedCond  = "konglet.dev/config-loaded"
	currentCond = "konglet.dev/config-current"
)

// setEndpoints writes the publish Service's EndpointSlice: one endpoint per
// Pod, with its Ready condition.
func (w *world) setEndpoints(ready map[string]bool) {
	w.t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kong-proxy-1", Namespace: w.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "kong-proxy"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8000))}},
	}
	i := 0
	for name, ok := range ready {
		i++
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"198.18.2." + strconv.Itoa(i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ok)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: w.ns, Name: name},
		})
	}
	api := env.Kube.DiscoveryV1().EndpointSlices(w.ns)
	current, err := api.Get(w.ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(w.ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = current.ResourceVersion
		_, err = api.Update(w.ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// replicas creates a Pod and starts a konglet with its own Kong for each
// name.
func (w *world) replicas(names []string, args ...string) ([]*kongdouble.Double, []*process) {
	w.t.Helper()
	kongs := make([]*kongdouble.Double, len(names))
	procs := make([]*process, len(names))
	for i, name := range names {
		w.createPod(name)
		kongs[i] = kongdouble.New(kongdouble.Options{})
		w.t.Cleanup(kongs[i].Close)
		procs[i] = startKonglet(w.t, kongs[i], append(append(w.kongletArgs(), "--pod-name", name, "--pod-namespace", w.ns), args...)...)
	}
	return kongs, procs
}

// podCondition is one of konglet's conditions on a Pod.
func (w *world) podCondition(pod, typ string) (*corev1.PodCondition, error) {
	p, err := env.Kube.CoreV1().Pods(w.ns).Get(w.ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for i, c := range p.Status.Conditions {
		if string(c.Type) == typ {
			return &p.Status.Conditions[i], nil
		}
	}
	return nil, fmt.Errorf("Pod %s has no %s condition", pod, typ)
}

func (w *world) expectPodCondition(pod, typ string, status corev1.ConditionStatus, reason, contains string) func() error {
	return func() error {
		c, err := w.podCondition(pod, typ)
		if err != nil {
			return err
		}
		if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("Pod %s: %s = %s %s %q, want %s %s containing %q", pod, typ, c.Status, c.Reason, c.Message, status, reason, contains)
		}
		return nil
	}
}

func (w *world) expectProgrammed(status metav1.ConditionStatus, contains string) func() error {
	return func() error {
		c := cond(w.getGateway().Status.Conditions, "Programmed")
		if c == nil || c.Status != status || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("Programmed = %+v, want %s containing %q", c, status, contains)
		}
		return nil
	}
}

// watchProgrammed polls the Gateway's Programmed until the test ends or stop
// is called, which returns every False seen.
func (w *world) watchProgrammed() (stop func() []string) {
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		falls []string
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			g, err := env.GW.GatewayV1().Gateways(w.ns).Get(w.ctx, w.gateway, metav1.GetOptions{})
			if err == nil {
				if c := cond(g.Status.Conditions, "Programmed"); c != nil && c.Status == metav1.ConditionFalse {
					mu.Lock()
					falls = append(falls, c.Reason+": "+c.Message)
					mu.Unlock()
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() []string {
		close(done)
		wg.Wait()
		return falls
	}
}

// TestUnloadableConfigKeepsEveryReplicaReady: a configuration that no Kong
// takes (every replica fails the same way) leaves every Kong serving its
// last good one, and so every Pod's readiness condition True; the second
// condition, the metric and the Gateway say that the newest is not loaded.
func TestUnloadableConfigKeepsEveryReplicaReady(t *testing.T) {
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.70")
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	pods := []string{"kong-a", "kong-b", "kong-c"}
	w.setEndpoints(map[string]bool{"kong-a": true, "kong-b": true, "kong-c": true})
	kongs, procs := w.replicas(pods)
	eventually(t, 15*time.Second, "Programmed counts three replicas", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration"))

	for _, k := range kongs {
		k.FailNext(http.StatusInternalServerError, 1_000_000)
	}
	r := w.getRoute("app")
	r.Spec.Hostnames = append(r.Spec.Hostnames, "more.example.com")
	if _, err := env.GW.GatewayV1().HTTPRoutes(w.ns).Update(w.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the Gateway says no replica holds the current configuration",
		w.expectProgrammed(metav1.ConditionFalse, "0 of 3 ready replicas hold the current configuration; failed to load it: kong-a: Kong answered 500"))
	for i, name := range pods {
		eventually(t, 10*time.Second, name+" says it failed", w.expectPodCondition(name, currentCond, corev1.ConditionFalse, "LoadFailed", "Kong answered 500"))
		if err := w.expectPodCondition(name, loadedCond, corev1.ConditionTrue, "Loaded", "Kong holds configuration ")(); err != nil {
			t.Fatalf("the readiness condition must stay True while Kong serves its last configuration: %v", err)
		}
		if err := httpStatus(procs[i].Metrics()+"/readyz", 200); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := metricIs(procs[i].Metrics(), "konglet_kong_config_current", "0"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := expectTargets(kongs[i], "app.example.com", "/", "198.18.0.70:8080")(); err != nil {
			t.Fatalf("%s's Kong lost its last good configuration: %v", name, err)
		}
	}

	for _, k := range kongs {
		k.ClearFaults()
	}
	eventually(t, 40*time.Second, "every replica loads it once Kong takes it", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration"))
	for _, name := range pods {
		eventually(t, 5*time.Second, name+" is current", w.expectPodCondition(name, currentCond, corev1.ConditionTrue, "Current", "Kong holds the newest configuration "))
	}
}

// TestRestartedKongletIsReadyBeforeTheAPIServer: a konglet that restarts
// while the API server is away, beside a Kong that holds its configuration,
// is ready at once (/readyz), its Pod's readiness condition never turns
// False, and Kong is not loaded again once the API server is back.
func TestRestartedKongletIsReadyBeforeTheAPIServer(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.71")
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	w.createPod("kong-a")
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var target string
	for _, c := range cfg.Clusters {
		target = c.Server[len("https://"):]
	}
	link := newFlakyLink(t, target)
	args := append(w.kongletArgs(), "--kubeconfig", kubeconfigVia(t, link.ln.Addr().String()), "--pod-name", "kong-a", "--pod-namespace", w.ns)
	first := startKonglet(t, kong, args...)
	eventually(t, 10*time.Second, "served", expectTargets(kong, "app.example.com", "/", "198.18.0.71:8080"))
	eventually(t, 10*time.Second, "the Pod says so", w.expectPodCondition("kong-a", currentCond, corev1.ConditionTrue, "Current", ""))

	// Watch the readiness condition from here on (the test reaches the API
	// server directly, not through the link).
	done := make(chan struct{})
	var notReady []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if c, err := w.podCondition("kong-a", loadedCond); err == nil && c.Status != corev1.ConditionTrue {
				notReady = append(notReady, c.Reason+": "+c.Message)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()

	first.Stop()
	link.cut()
	loads, posts := kong.Loads(), kong.Posts()
	second := startKonglet(t, kong, args...)
	eventually(t, 5*time.Second, "ready while the API server is away", func() error { return httpStatus(second.Metrics()+"/readyz", 200) })
	// Logged before it turns ready; the harness reads the log through a
	// pipe, which may lag.
	eventually(t, 5*time.Second, "a log of the configuration taken over", func() error {
		if !strings.Contains(second.Logs(), "Kong holds a configuration from konglet: ready") {
			return errors.New("not logged")
		}
		return nil
	})

	link.restore()
	eventually(t, 60*time.Second, "the Pod tells the configuration is current once the API server answers",
		w.expectPodCondition("kong-a", currentCond, corev1.ConditionTrue, "Current", kong.ConfigHash()))
	if err := w.expectPodCondition("kong-a", loadedCond, corev1.ConditionTrue, "Loaded", kong.ConfigHash())(); err != nil {
		t.Fatal(err)
	}
	if err := httpStatus(second.Metrics()+"/readyz", 200); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	if len(notReady) > 0 {
		t.Fatalf("the readiness condition turned False across the restart: %v", notReady)
	}
	if kong.Loads() != loads || kong.Posts() != posts {
		t.Fatalf("Kong was sent its own configuration again: loads %d -> %d, posts %d -> %d", loads, kong.Loads(), posts, kong.Posts())
	}
}

// TestLeaderKongDownStatusesKeepFlowing: while the leader's own Kong is
// down, the leader still writes statuses from the translation, and the
// Gateway counts only the replicas that hold the configuration.
func TestLeaderKongDownStatusesKeepFlowing(t *testing.T) {
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.72")
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	pods := []string{"kong-a", "kong-b", "kong-c"}
	w.setEndpoints(map[string]bool{"kong-a": true, "kong-b": true, "kong-c": true})
	kongs, procs := w.replicas(pods)
	eventually(t, 15*time.Second, "Programmed counts three replicas", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration"))
	leader := leaderIndex(t, w, pods)
	if leader < 0 {
		t.Fatal("no leader")
	}

	kongs[leader].SetDown(true)
	w.create(w.route("fresh", []string{"fresh.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	created := time.Now()
	eventually(t, 2*time.Second, "the new route gets its status within 2 s", func() error {
		return w.routeCond("fresh", "Accepted", metav1.ConditionTrue, "Accepted")
	})
	t.Logf("status %v after the create, the leader's Kong down", time.Since(created))
	eventually(t, 10*time.Second, "the Gateway counts what the replicas hold",
		w.expectProgrammed(metav1.ConditionFalse, "2 of 3 ready replicas hold the current configuration; failed to load it: "+pods[leader]+": reading Kong's GET /"))
	if err := w.expectPodCondition(pods[leader], loadedCond, corev1.ConditionTrue, "Loaded", "")(); err != nil {
		t.Fatalf("the leader's readiness condition: %v", err)
	}
	if err := httpStatus(procs[leader].Metrics()+"/readyz", 200); err != nil {
		t.Fatal(err)
	}

	kongs[leader].SetDown(false)
	eventually(t, 40*time.Second, "back to three", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration"))
	eventually(t, 5*time.Second, "the leader's Kong serves the new route", expectTargets(kongs[leader], "fresh.example.com", "/", "198.18.0.72:8080"))
}

// TestScaleOutKeepsProgrammed: from three replicas to five, Programmed is
// never False: the new Pods are pending until they load and turn ready.
func TestScaleOutKeepsProgrammed(t *testing.T) {
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.73")
	w.create(w.route("app", []string{"app.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}}))
	ready := map[string]bool{"kong-a": true, "kong-b": true, "kong-c": true}
	w.setEndpoints(ready)
	w.replicas([]string{"kong-a", "kong-b", "kong-c"})
	eventually(t, 15*time.Second, "Programmed counts three replicas", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration"))

	stop := w.watchProgrammed()
	// The Deployment scales out: the new Pods are endpoints, not ready
	// (their readiness gate waits for konglet).
	ready["kong-d"], ready["kong-e"] = false, false
	w.setEndpoints(ready)
	eventually(t, 10*time.Second, "the new Pods are pending", w.expectProgrammed(metav1.ConditionTrue, "3 of 3 ready replicas hold the current configuration; not ready yet: kong-d, kong-e"))
	w.replicas([]string{"kong-d", "kong-e"})
	for _, name := range []string{"kong-d", "kong-e"} {
		eventually(t, 15*time.Second, name+" holds a configuration", w.expectPodCondition(name, loadedCond, corev1.ConditionTrue, "Loaded", ""))
	}
	// What the endpoints controller does once the gate passes.
	ready["kong-d"], ready["kong-e"] = true, true
	w.setEndpoints(ready)
	eventually(t, 10*time.Second, "Programmed counts five replicas", w.expectProgrammed(metav1.ConditionTrue, "5 of 5 ready replicas hold the current configuration"))
	if falls := stop(); len(falls) > 0 {
		t.Fatalf("Programmed was False during the scale-out: %v", falls)
	}
}

// TestUnusableGatewayIsNotReady: a --gateway that names no Gateway makes
// the Pod not ready, and says so in the log, a metric and the Pod
// condition; the Gateway appearing makes it ready.
func TestUnusableGatewayIsNotReady(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.createPod("kong-a")
	p := startKonglet(t, kong, "--gateway", w.ns+"/typo", "--publish-service", w.ns+"/kong-proxy", "--pod-name", "kong-a", "--pod-namespace", w.ns)
	missing := "Gateway " + w.ns + "/typo not found (check --gateway)"
	eventually(t, 10*time.Second, "the Pod says why it is not ready", w.expectPodCondition("kong-a", loadedCond, corev1.ConditionFalse, "NoUsableGateway", missing))
	if err := httpStatus(p.Metrics()+"/readyz", http.StatusServiceUnavailable); err != nil {
		t.Fatal(err)
	}
	if err := metricIs(p.Metrics(), `konglet_gateway_usable{gateway="`+w.ns+`/typo"}`, "0"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Logs(), `"level":"ERROR","msg":"cannot serve a bound Gateway","gateway":"`+w.ns+`/typo","problem":"`+missing+`"`) {
		t.Fatalf("no clear log line:\n%s", p.Logs())
	}

	// Of another controller's class: still not ready, and told.
	w.create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: w.class + "-other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}})
	t.Cleanup(func() {
		_ = env.GW.GatewayV1().GatewayClasses().Delete(w.ctx, w.class+"-other", metav1.DeleteOptions{})
	})
	w.create(&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "typo", Namespace: w.ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(w.class + "-other"), Listeners: []gwv1.Listener{httpListener("http", 80, "")}}})
	eventually(t, 10*time.Second, "another controller's Gateway is told", w.expectPodCondition("kong-a", loadedCond, corev1.ConditionFalse, "NoUsableGateway", "belongs to example.com/other, not to konglet"))
	if err := httpStatus(p.Metrics()+"/readyz", http.StatusServiceUnavailable); err != nil {
		t.Fatal(err)
	}

	// Bound to a Gateway of ours: ready.
	p2 := startKonglet(t, kong, append(w.kongletArgs(), "--pod-name", "kong-a", "--pod-namespace", w.ns)...)
	p.Stop()
	eventually(t, 10*time.Second, "ready with a usable Gateway", func() error { return httpStatus(p2.Metrics()+"/readyz", 200) })
	eventually(t, 10*time.Second, "the Pod is ready", w.expectPodCondition("kong-a", loadedCond, corev1.ConditionTrue, "Loaded", ""))
}
