//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"
)

// statusWatch counts, from the API server's watch, every status change of
// the routes of one namespace and of the Gateway.
type statusWatch struct {
	routes  gwlisters.HTTPRouteLister
	gateway gwlisters.GatewayLister

	mu            sync.Mutex
	routeChanges  int
	changedAt     []time.Time // when each route status change arrived
	perRoute      map[string]int
	routeModified int
	gwChanges     int
}

type watchCounts struct{ RouteStatusChanges, RouteModified, GatewayStatusChanges, MaxPerRoute int }

func (b *bencher) watchStatuses(ctx context.Context, t *testing.T, ns string) *statusWatch {
	w := &statusWatch{perRoute: map[string]int{}}
	rf := gwinformers.NewSharedInformerFactoryWithOptions(b.c.gw, 0, gwinformers.WithNamespace(ns))
	ri := rf.Gateway().V1().HTTPRoutes()
	w.routes = ri.Lister()
	if _, err := ri.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, cur := o.(*gwv1.HTTPRoute), n.(*gwv1.HTTPRoute)
		if old.ResourceVersion == cur.ResourceVersion {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.routeModified++
		if !equality.Semantic.DeepEqual(old.Status, cur.Status) {
			w.routeChanges++
			w.changedAt = append(w.changedAt, time.Now())
			w.perRoute[cur.Name]++
		}
	}}); err != nil {
		t.Fatal(err)
	}
	gf := gwinformers.NewSharedInformerFactoryWithOptions(b.c.gw, 0, gwinformers.WithNamespace(gatewayNS),
		gwinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", gatewayName).String()
		}))
	gi := gf.Gateway().V1().Gateways()
	w.gateway = gi.Lister()
	if _, err := gi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, cur := o.(*gwv1.Gateway), n.(*gwv1.Gateway)
		if old.ResourceVersion != cur.ResourceVersion && !equality.Semantic.DeepEqual(old.Status, cur.Status) {
			w.mu.Lock()
			w.gwChanges++
			w.mu.Unlock()
		}
	}}); err != nil {
		t.Fatal(err)
	}
	rf.Start(ctx.Done())
	gf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ri.Informer().HasSynced, gi.Informer().HasSynced) {
		t.Fatal("status watch did not sync")
	}
	return w
}

func (w *statusWatch) counts() watchCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := watchCounts{RouteStatusChanges: w.routeChanges, RouteModified: w.routeModified, GatewayStatusChanges: w.gwChanges}
	for _, n := range w.perRoute {
		c.MaxPerRoute = max(c.MaxPerRoute, n)
	}
	return c
}

// changesAfter counts the route status changes that arrived after t.
func (w *statusWatch) changesAfter(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.changedAt {
		if at.After(t) {
			n++
		}
	}
	return n
}

func (w *statusWatch) resetPerRoute() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.perRoute = map[string]int{}
}

// accepted counts the routes whose entry for our Gateway says Accepted=True.
func (w *statusWatch) accepted() int {
	rs, _ := w.routes.List(labels.Everything())
	n := 0
	for _, r := range rs {
		for _, p := range r.Status.Parents {
			if string(p.ControllerName) != controllerName || string(p.ParentRef.Name) != gatewayName {
				continue
			}
			if c := meta(p.Conditions, "Accepted"); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation {
				n++
			}
		}
	}
	return n
}

// programmed is the message of the Gateway's Programmed condition.
func (w *statusWatch) programmed() string {
	g, err := w.gateway.Gateways(gatewayNS).Get(gatewayName)
	if err != nil {
		return ""
	}
	if c := meta(g.Status.Conditions, "Programmed"); c != nil {
		return c.Message
	}
	return ""
}

// attached is the http listener's attachedRoutes (-1 when not reported).
func (w *statusWatch) attached() int32 {
	g, err := w.gateway.Gateways(gatewayNS).Get(gatewayName)
	if err != nil {
		return -1
	}
	for _, l := range g.Status.Listeners {
		if l.Name == "http" {
			return l.AttachedRoutes
		}
	}
	return -1
}

func meta(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// statusWrites: 1,000 routes attached to the Gateway of one konglet, or of
// a fleet of replicas (leader election on, as deployed), then deleted;
// every status write counted.
func (b *bencher) statusWrites(t *testing.T, replicas int) {
	scen := "6 status writes"
	if replicas > 1 {
		scen = fmt.Sprintf("6 status writes, %d replicas", replicas)
	}
	const n = 1000
	const ns = "counted"
	if err := ignoreExists(retry(func() error {
		_, err := b.c.kube.CoreV1().Services(ns).Create(b.ctx, service(ns, "shared"), metav1.CreateOptions{})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	if err := ignoreExists(retry(func() error {
		_, err := b.c.kube.DiscoveryV1().EndpointSlices(ns).Create(b.ctx, endpointSlice(ns, "shared", "198.19.200.1", "198.19.200.2", "198.19.200.3"), metav1.CreateOptions{})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	b.results.scenario(scen)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	w := b.watchStatuses(ctx, t, ns)
	var f *fleet
	if replicas == 1 {
		// One konglet without a Pod, leader election on.
		k := newKong()
		defer k.Close()
		f = &fleet{kongs: []*kong{k}, procs: []*proc{b.startKonglet(t, k)}}
	} else {
		f = b.startFleet(t, replicas)
		defer b.stopFleet(t, f)
	}
	ready := fmt.Sprintf("%d of %d ready replicas hold the current configuration", replicas, replicas)
	if !poll(10*time.Millisecond, 60*time.Second, func() bool {
		for _, k := range f.kongs {
			if k.Loads() == 0 {
				return false
			}
		}
		return w.attached() == 0 && (replicas == 1 || w.programmed() == ready)
	}) {
		t.Fatalf("konglet did not load and report the Gateway within 60s (Programmed: %q)", w.programmed())
	}
	quiesceAll(f.procs, time.Second, 30*time.Second)
	api := b.apiServer(t)
	rejected0, requests0 := api.rejected(t), api.requests(t)
	apiCPU0, _ := api.cpu()
	writes0, c0 := f.writes(), w.counts()
	loads0 := f.kongs[0].Loads()

	// Attach.
	t0 := time.Now()
	if err := parallel(0, n, func(i int) error {
		return ignoreExists(retry(func() error {
			_, err := b.c.gw.GatewayV1().HTTPRoutes(ns).Create(b.ctx, httpRoute(ns, fmt.Sprintf("c-%04d", i), fmt.Sprintf("c-%04d.counted.test", i), "shared"), metav1.CreateOptions{})
			return err
		}))
	}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	var servedAt time.Time
	served := func() bool {
		if servedAt.IsZero() {
			for _, k := range f.kongs {
				hosts := k.Hosts()
				for i := range n {
					if !hosts[fmt.Sprintf("c-%04d.counted.test", i)] {
						return false
					}
				}
			}
			servedAt = time.Now()
		}
		return true
	}
	if !poll(10*time.Millisecond, 300*time.Second, func() bool { return served() && w.accepted() == n && w.attached() == n }) {
		t.Fatalf("after 300s: %d routes Accepted, attachedRoutes %d, all served: %v", w.accepted(), w.attached(), served())
	}
	attachedAt := time.Now()
	late := w.changesAfter(created)
	loadsServed := loadsAt(f.kongs[0], servedAt) - loads0
	quiesceAll(f.procs, 2*time.Second, 60*time.Second)
	writes1, c1 := f.writes(), w.counts()
	apiCPU1, _ := api.cpu()
	rejected1, requests := api.rejected(t), api.requestsSince(t, requests0)
	t.Logf("API requests during the attach: %v", requests)
	maxPerRoute := c1.MaxPerRoute
	w.resetPerRoute()

	// Detach.
	t1 := time.Now()
	if err := parallel(0, n, func(i int) error {
		return retry(func() error {
			return b.c.gw.GatewayV1().HTTPRoutes(ns).Delete(b.ctx, fmt.Sprintf("c-%04d", i), metav1.DeleteOptions{})
		})
	}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if !poll(10*time.Millisecond, 180*time.Second, func() bool { return w.attached() == 0 }) {
		t.Fatalf("after 180s: attachedRoutes %d", w.attached())
	}
	detachedAt := time.Now()
	quiesceAll(f.procs, 2*time.Second, 60*time.Second)
	writes2, c2 := f.writes(), w.counts()

	attachWrites, detachWrites := writes1-writes0, writes2-writes1
	b.results.raw("statuswrites", map[string]any{
		"creates_s": created.Sub(t0).Seconds(), "attached_after_last_create_ms": ms(attachedAt.Sub(created)), "attached_after_first_create_ms": ms(attachedAt.Sub(t0)),
		"deletes_s": deleted.Sub(t1).Seconds(), "detached_after_last_delete_ms": ms(detachedAt.Sub(deleted)),
		"konglet_writes": []float64{writes0, writes1, writes2}, "watch": []watchCounts{c0, c1, c2}, "loads": f.kongs[0].Loads(),
		"replicas": replicas, "apf_rejected": rejected1 - rejected0, "apiserver_cpu_attach_s": (apiCPU1 - apiCPU0).Seconds(), "apiserver_requests_attach": requests,
	})
	b.results.add(figure{Scenario: scen, Name: "attach: first Create to all 1,000 Accepted and attachedRoutes=1000", Value: attachedAt.Sub(t0).Seconds(), Unit: "s",
		Note: fmt.Sprintf("the 1,000 Creates took %.2f s", created.Sub(t0).Seconds())})
	attach := figure{Scenario: scen, Name: "attach: last Create to all Accepted and attachedRoutes=1000", Value: ms(attachedAt.Sub(created)), Unit: "ms"}
	if replicas > 1 {
		attach.Target, attach.Met = "<= 2 s", atMost(attach.Value, 2000)
	}
	attach.Note = fmt.Sprintf("%d route statuses changed after the last Create", late)
	b.results.add(attach)
	b.results.add(figure{Scenario: scen, Name: "attach: last Create to all 1,000 routes served by every replica's Kong", Value: ms(servedAt.Sub(created)), Unit: "ms",
		Note: fmt.Sprintf("loads of the first until then: %d", loadsServed)})
	b.results.add(figure{Scenario: scen, Name: "attach: API server CPU, first Create to the status writes over", Value: (apiCPU1 - apiCPU0).Seconds(), Unit: "s",
		Note: fmt.Sprintf("requests API Priority and Fairness rejected meanwhile: %.0f", rejected1-rejected0)})
	b.results.add(figure{Scenario: scen, Name: "attach: status writes (konglet_status_writes_total)", Value: attachWrites, Unit: "writes",
		Note: fmt.Sprintf("API server saw %d route and %d Gateway status changes; at most %d for one route", c1.RouteStatusChanges-c0.RouteStatusChanges, c1.GatewayStatusChanges-c0.GatewayStatusChanges, maxPerRoute)})
	b.results.add(figure{Scenario: scen, Name: "detach: last Delete to attachedRoutes=0", Value: ms(detachedAt.Sub(deleted)), Unit: "ms",
		Note: fmt.Sprintf("the 1,000 Deletes took %.2f s", deleted.Sub(t1).Seconds())})
	b.results.add(figure{Scenario: scen, Name: "detach: status writes (konglet_status_writes_total)", Value: detachWrites, Unit: "writes",
		Note: fmt.Sprintf("API server saw %d route and %d Gateway status changes", c2.RouteStatusChanges-c1.RouteStatusChanges, c2.GatewayStatusChanges-c1.GatewayStatusChanges)})
	per := (attachWrites + detachWrites) / n
	b.results.add(figure{Scenario: scen, Name: "status writes per route, attach + detach", Value: per, Unit: "writes/route", Target: "<= 1.1", Met: atMost(per, 1.1)})
	b.results.add(figure{Scenario: scen, Name: "config loads during attach + detach", Value: float64(f.kongs[0].Loads() - loads0), Unit: "loads"})
	if apiSeen := float64(c2.RouteStatusChanges - c0.RouteStatusChanges + c2.GatewayStatusChanges - c0.GatewayStatusChanges); apiSeen != attachWrites+detachWrites {
		b.results.note(scen, "konglet counted %.0f status writes, the API server's watch showed %.0f status changes (a write that changes nothing is not seen; a missed watch event would be)", attachWrites+detachWrites, apiSeen)
	}
}

// loadsAt counts the accepted POST /config that started before t.
func loadsAt(k *kong, t time.Time) int {
	n := 0
	for _, p := range k.Posts() {
		if p.Status == 201 && p.Start.Before(t) {
			n++
		}
	}
	return n
}
