// Package informers watches, with client-go informers, the objects that the
// bound Gateways can use, and tells the sync loop when any of them changes.
package informers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwinformersv1 "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// Scope says which objects are watched.
type Scope struct {
	// ControllerName is the GatewayClass controllerName konglet owns.
	ControllerName string
	// ServiceUpstream targets Services by DNS name (for a mesh).
	ServiceUpstream bool
	Gateways        []types.NamespacedName
	PodNamespace    string
	PodName         string
	PublishService  types.NamespacedName // empty: the Service that selects the Pod
	// MaxSecretBytes caps a Secret's data (0: DefaultMaxSecretBytes).
	MaxSecretBytes int
	// MaxSecretWatches caps the Secrets watched at once (0:
	// DefaultMaxSecretWatches).
	MaxSecretWatches int
	// MaxConfigMapBytes caps a CA ConfigMap's ca.crt (0:
	// DefaultMaxConfigMapBytes); MaxConfigMapWatches the ConfigMaps
	// watched at once (0: DefaultMaxConfigMapWatches).
	MaxConfigMapBytes, MaxConfigMapWatches int
}

// Cache holds the watched objects and notifies Trigger on every change.
type Cache struct {
	Trigger *Trigger
	scope   Scope
	bound   map[types.NamespacedName]bool // scope.Gateways

	factories  []interface{ Start(<-chan struct{}) }
	informers  []cache.SharedIndexInformer // run by Start, outside factories
	synced     []cache.InformerSynced
	classes    gwlisters.GatewayClassLister
	gateways   []gwlisters.GatewayLister
	httpRoutes gwlisters.HTTPRouteLister
	grpcRoutes gwlisters.GRPCRouteLister
	tlsRoutes  gwlisters.TLSRouteLister
	tcpRoutes  gwlisters.TCPRouteLister
	udpRoutes  gwlisters.UDPRouteLister
	sets       gwlisters.ListenerSetLister
	grants     gwlisters.ReferenceGrantLister
	// serviceIndex holds the cached Services and EndpointSlices as
	// snapshots do.
	serviceIndex *backendIndex
	namespaces   corelisters.NamespaceLister
	secrets      *namedWatchers[*corev1.Secret]
	backendTLS   *backendTLS
	pods         corelisters.PodLister
	hasPodScope  bool
	// backends are the Services the last snapshot's routes name (nil before
	// the first): events of other Services and of their EndpointSlices
	// cannot change anything konglet writes, and wake nothing.
	backends atomic.Pointer[map[types.NamespacedName]bool]
	// externalNames, when set, allows ExternalName backends and resolves
	// the names routes use.
	externalNames *ExternalNames
	// intern shares the values that recur across routes (see transform).
	intern *interner
	// snapshotting serializes Snapshot.
	snapshotting sync.Mutex
}

// New sets up the informers; Start runs them.
func New(kube kubernetes.Interface, gw gwclient.Interface, scope Scope, trigger *Trigger) (*Cache, error) {
	c := &Cache{Trigger: trigger, scope: scope, bound: map[types.NamespacedName]bool{}, intern: newInterner(), serviceIndex: newBackendIndex()}
	for _, g := range scope.Gateways {
		c.bound[g] = true
	}
	gwTransform := gwinformers.WithTransform(c.transform)

	// The Kubernetes kinds get an informer each rather than client-go's
	// informer factory, whose generic lookup links the informers and
	// listers of every API group into the binary (about 1.5 MiB more
	// resident). The numerous kinds are listed whole, never by namespace:
	// no informer keeps a namespace index, which would hold every object's
	// key once more.
	services := c.informer(&corev1.Service{}, listWatch[*corev1.ServiceList](kube.CoreV1().Services(metav1.NamespaceAll)), kube)
	endpointSlices := c.informer(&discoveryv1.EndpointSlice{}, listWatch[*discoveryv1.EndpointSliceList](kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)), kube)
	namespaces := c.informer(&corev1.Namespace{}, listWatch[*corev1.NamespaceList](kube.CoreV1().Namespaces()), kube)
	c.namespaces = corelisters.NewNamespaceLister(namespaces.GetIndexer())
	if err := c.watch(services, endpointSlices, namespaces); err != nil {
		return nil, err
	}
	// Secrets are watched one by one, only those that listeners may use
	// (DESIGN decision 8), and so are the ConfigMaps of CA certificates
	// that BackendTLSPolicies name: see Snapshot.
	c.secrets = newNamedWatchers(c, secretKind(kube), cmp.Or(max(scope.MaxSecretBytes, 0), DefaultMaxSecretBytes),
		cmp.Or(max(scope.MaxSecretWatches, 0), DefaultMaxSecretWatches))
	configMaps := newNamedWatchers(c, configMapKind(kube), cmp.Or(max(scope.MaxConfigMapBytes, 0), DefaultMaxConfigMapBytes),
		cmp.Or(max(scope.MaxConfigMapWatches, 0), DefaultMaxConfigMapWatches))
	if scope.PodName != "" && scope.PodNamespace != "" {
		// The Pods of the own namespace: this one, and its peers whose
		// konglet conditions make the Gateway's Programmed.
		pods := c.informer(&corev1.Pod{}, listWatch[*corev1.PodList](kube.CoreV1().Pods(scope.PodNamespace)), kube)
		c.pods = corelisters.NewPodLister(pods.GetIndexer())
		c.hasPodScope = true
		if err := c.watch(pods); err != nil {
			return nil, err
		}
	}

	all := gwinformers.NewSharedInformerFactoryWithOptions(gw, resyncNever, gwTransform)
	all.InformerFor(&gwv1.HTTPRoute{}, func(c gwclient.Interface, resync time.Duration) cache.SharedIndexInformer {
		return gwinformersv1.NewHTTPRouteInformer(c, metav1.NamespaceAll, resync, cache.Indexers{})
	})
	all.InformerFor(&gwv1.GRPCRoute{}, func(c gwclient.Interface, resync time.Duration) cache.SharedIndexInformer {
		return gwinformersv1.NewGRPCRouteInformer(c, metav1.NamespaceAll, resync, cache.Indexers{})
	})
	v1 := all.Gateway().V1()
	c.classes = v1.GatewayClasses().Lister()
	c.httpRoutes = v1.HTTPRoutes().Lister()
	c.grpcRoutes = v1.GRPCRoutes().Lister()
	c.tlsRoutes = v1.TLSRoutes().Lister()
	c.tcpRoutes = v1.TCPRoutes().Lister()
	c.udpRoutes = v1.UDPRoutes().Lister()
	c.sets = v1.ListenerSets().Lister()
	c.grants = v1.ReferenceGrants().Lister()
	if err := c.watch(v1.GatewayClasses().Informer(), v1.HTTPRoutes().Informer(), v1.GRPCRoutes().Informer(),
		v1.TLSRoutes().Informer(), v1.TCPRoutes().Informer(), v1.UDPRoutes().Informer(), v1.ListenerSets().Informer(),
		v1.ReferenceGrants().Informer()); err != nil {
		return nil, err
	}
	if err := c.watchBackendTLS(all, configMaps); err != nil {
		return nil, err
	}
	c.factories = append(c.factories, all)
	// Each bound Gateway is watched by name: konglet never caches the
	// Gateways of other proxies.
	for _, g := range scope.Gateways {
		f := gwinformers.NewSharedInformerFactoryWithOptions(gw, resyncNever, gwTransform, gwinformers.WithNamespace(g.Namespace),
			gwinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", g.Name).String()
			}))
		c.gateways = append(c.gateways, f.Gateway().V1().Gateways().Lister())
		if err := c.watch(f.Gateway().V1().Gateways().Informer()); err != nil {
			return nil, err
		}
		c.factories = append(c.factories, f)
	}
	return c, nil
}

// listWatcher is a typed client of one kind, in a namespace or all.
type listWatcher[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// listWatch lists and watches one kind through its typed client.
func listWatch[L runtime.Object](api listWatcher[L]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return api.List(ctx, o)
		},
		WatchFuncWithContext: api.Watch,
	}
}

// informer makes an informer of obj's kind, with no index, slimmed by
// Cache.transform, that Start runs. kube tells whether the API server can
// stream the initial list (as client-go's own informers ask).
func (c *Cache) informer(obj runtime.Object, lw *cache.ListWatch, kube kubernetes.Interface) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, kube), obj, resyncNever, cache.Indexers{})
	_ = inf.SetTransform(c.transform) // cannot fail before the informer runs
	c.informers = append(c.informers, inf)
	return inf
}

func (c *Cache) watch(informers ...cache.SharedIndexInformer) error {
	for _, inf := range informers {
		reg, err := inf.AddEventHandler(c.events())
		if err != nil {
			return err
		}
		// Synced once the handler has seen every object listed, not only
		// the store: the handler keeps serviceIndex.
		c.synced = append(c.synced, reg.HasSynced)
	}
	return nil
}

// events asks for a sync on every change that can matter, once
// serviceIndex holds the change (Services and EndpointSlices), and wakes
// the status path alone for the EndpointSlices replicas are counted from.
func (c *Cache) events() cache.ResourceEventHandler {
	notify := func(obj any) {
		switch {
		case c.mayMatter(obj) || hasClusterIP(obj):
			c.Trigger.Notify()
		case c.countsReplicas(obj):
			c.Trigger.NotifyStatus()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.serviceIndex.put(nil, obj)
			notify(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			c.serviceIndex.put(oldObj, newObj)
			c.onUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			c.serviceIndex.remove(obj)
			notify(obj)
		},
	}
}

// clusterIPs are a Service's cluster IPs (none for headless and
// ExternalName Services).
func clusterIPs(obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*snapshot.Service)
	if !ok {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(svc.ClusterIPs), func(ip string) bool { return ip == corev1.ClusterIPNone })
}

// hasClusterIP tells whether obj is a Service with a cluster IP: one that
// appears, goes or changes its IPs anywhere may make a backend's endpoint
// another namespace's ClusterIP, which the translation refuses without a
// ReferenceGrant (or no longer). Unlike EndpointSlices, Services change
// rarely, and their IPs almost never.
func hasClusterIP(obj any) bool { return len(clusterIPs(obj)) > 0 }

// mayMatter tells whether a change of obj can change a translation (and
// the statuses it makes). A Service (or EndpointSlice) matters when a
// route names it, or when the Service is in konglet's own namespace (where
// the publish Service is); in a cluster of many teams most do not, and
// every replica would otherwise sync on every rollout anywhere. The other
// EndpointSlices of konglet's namespace and of the publish Service only
// tell the leader which replicas are ready (countsReplicas). A route that starts to
// name a Service is itself a change, and its sync reads the Service from
// the cache. Likewise a route matters when it names a bound Gateway (or a
// ListenerSet), or still shows a status konglet wrote.
func (c *Cache) mayMatter(obj any) bool {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	var key types.NamespacedName
	publishing := false // where the publish Service may be
	switch o := obj.(type) {
	case *snapshot.Service:
		key = types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		publishing = key.Namespace == c.scope.PodNamespace || key == c.scope.PublishService
	case *snapshot.EndpointSlice:
		key = types.NamespacedName{Namespace: o.Namespace, Name: o.ServiceName}
	case *gwv1.HTTPRoute:
		return c.routeMatters(o.Namespace, o.Spec.CommonRouteSpec, o.Status.RouteStatus)
	case *gwv1.GRPCRoute:
		return c.routeMatters(o.Namespace, o.Spec.CommonRouteSpec, o.Status.RouteStatus)
	case *gwv1.TLSRoute:
		return c.routeMatters(o.Namespace, o.Spec.CommonRouteSpec, o.Status.RouteStatus)
	case *gwv1.TCPRoute:
		return c.routeMatters(o.Namespace, o.Spec.CommonRouteSpec, o.Status.RouteStatus)
	case *gwv1.UDPRoute:
		return c.routeMatters(o.Namespace, o.Spec.CommonRouteSpec, o.Status.RouteStatus)
	default:
		return true
	}
	backends := c.backends.Load()
	return backends == nil || (*backends)[key] || publishing
}

// countsReplicas tells whether obj is an EndpointSlice the status writer
// counts ready replicas from (Programmed): one of konglet's own namespace
// (where the publish Service is chosen when none is configured), or of
// the configured publish Service. A Kong rollout changes them for every Pod
// that comes or goes; they wake the leader's status path, not a sync on
// every replica.
func (c *Cache) countsReplicas(obj any) bool {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	es, ok := obj.(*snapshot.EndpointSlice)
	return ok && (es.Namespace == c.scope.PodNamespace || (types.NamespacedName{Namespace: es.Namespace, Name: es.ServiceName}) == c.scope.PublishService)
}

// onUpdate skips what cannot change the translation: resyncs, and status-only
// writes to Gateway API objects (ours included) whose generation is unchanged.
func (c *Cache) onUpdate(oldObj, newObj any) {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(newObj)
	if err1 == nil && err2 == nil {
		if o.GetResourceVersion() == n.GetResourceVersion() {
			return
		}
		if isGatewayAPI(newObj) && o.GetGeneration() == n.GetGeneration() && o.GetGeneration() != 0 &&
			labels.Equals(o.GetLabels(), n.GetLabels()) && o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) {
			return
		}
	}
	if !c.mayMatter(oldObj) && !c.mayMatter(newObj) && slices.Equal(clusterIPs(oldObj), clusterIPs(newObj)) {
		if c.countsReplicas(oldObj) || c.countsReplicas(newObj) {
			c.Trigger.NotifyStatus()
		}
		return
	}
	if o, ok := oldObj.(*corev1.Namespace); ok && labels.Equals(o.Labels, newObj.(*corev1.Namespace).Labels) {
		return // the translation reads only their labels
	}
	if n, ok := newObj.(*corev1.Pod); ok {
		// Every load updates this Pod's condition: that is for statuses.
		c.Trigger.NotifyStatus()
		// A Pod's IPs, set once it is scheduled, are forbidden targets
		// (the translation's kongPodIPs), and this Pod's labels choose the
		// publish Service where none is configured (publishService): they
		// wait for no other change.
		o, ok := oldObj.(*corev1.Pod)
		choosesPublishService := n.Name == c.scope.PodName && c.scope.PublishService.Name == ""
		if ok && slices.Equal(o.Status.PodIPs, n.Status.PodIPs) && (!choosesPublishService || labels.Equals(o.Labels, n.Labels)) {
			return
		}
	}
	c.Trigger.Notify()
}

func isGatewayAPI(obj any) bool {
	switch obj.(type) {
	case *gwv1.Gateway, *gwv1.GatewayClass, *gwv1.HTTPRoute, *gwv1.GRPCRoute, *gwv1.TLSRoute, *gwv1.TCPRoute, *gwv1.UDPRoute,
		*gwv1.ListenerSet, *gwv1.ReferenceGrant, *gwv1.BackendTLSPolicy:
		return true
	}
	return false
}

// trim keeps out of the cache what konglet never reads and what is often
// the largest part of an object: managedFields, and the copy of the whole
// object that kubectl apply keeps in an annotation. Informers hand the
// transform a freshly decoded object, which it may change in place. (Cache.
// transform slims the most numerous kinds further.)
func trim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		delete(m.GetAnnotations(), lastApplied)
	}
	return obj, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Start runs the informers until ctx ends.
func (c *Cache) Start(ctx context.Context) {
	c.secrets.ctx, c.backendTLS.configMaps.ctx = ctx, ctx
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	for _, inf := range c.informers {
		go inf.RunWithContext(ctx)
	}
}

// WaitForSync blocks until every cache has synced (true) or ctx ends.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.synced...)
}

// Snapshot is a read-only view of the caches for a translation. The
// objects are the cache's own: the translation must not modify them (and
// does not). It runs after Start.
//
// It also records what the view names: the Services whose events wake a
// sync (backends), the Secrets and ConfigMaps to watch, the external names
// to resolve. Calls take turns, so that the one that reads the caches last
// records last, and an older view never takes back what a newer one named.
// A call may thus wait out another's namedWait for new watchers (up to
// namedWait for the Secrets and again for the ConfigMaps, and only when
// objects are newly named): without its turn it would not wait for them,
// and would report their objects unread.
func (c *Cache) Snapshot(kong snapshot.Kong) (*snapshot.Snapshot, error) {
	c.snapshotting.Lock()
	defer c.snapshotting.Unlock()
	s, err := c.objects(kong)
	if err != nil {
		return nil, err
	}
	backends := translate.BackendServices(s)
	previous := c.backends.Swap(&backends)
	// A change to a Service named only now, made after the snapshot read
	// the Services and before this record, was taken for one that does
	// not matter (mayMatter): the index then holds another version of it
	// than the snapshot, and a sync must follow.
	if previous != nil && c.serviceIndex.changedSince(s.Services, s.EndpointSlices, backends, *previous) {
		c.Trigger.Notify()
	}
	if c.externalNames != nil {
		s.AllowExternalName = true
		s.ExternalNames = c.externalNames.Lookup(translate.ExternalNames(s))
	}
	c.backendTLS.record(s)
	// The Secrets come last: which ones listeners may use depends on all
	// the above. A new one is waited for, briefly (namedWait).
	c.secrets.update(translate.SecretRefs(s))
	c.secrets.fill(s.Secrets, s.SecretProblems)
	return s, nil
}

// StatusSnapshot is the view statuses are written against: the objects,
// Pods and BackendTLSPolicies, without Secrets, ConfigMaps or resolved
// names. It records nothing and waits for nothing, so the status leader
// takes one at every round of its peers' changes without holding up a
// sync.
func (c *Cache) StatusSnapshot() (*snapshot.Snapshot, error) {
	return c.objects(snapshot.Kong{})
}

// objects lists the caches into a snapshot for kong.
func (c *Cache) objects(kong snapshot.Kong) (*snapshot.Snapshot, error) {
	everything := labels.Everything()
	var objs snapshot.Objects
	var err error
	if objs.GatewayClasses, err = c.classes.List(everything); err != nil {
		return nil, err
	}
	for i, l := range c.gateways {
		if g, err := l.Gateways(c.scope.Gateways[i].Namespace).Get(c.scope.Gateways[i].Name); err == nil {
			objs.Gateways = append(objs.Gateways, g)
		}
	}
	if objs.HTTPRoutes, err = c.httpRoutes.List(everything); err != nil {
		return nil, err
	}
	if objs.GRPCRoutes, err = c.grpcRoutes.List(everything); err != nil {
		return nil, err
	}
	if objs.TLSRoutes, err = c.tlsRoutes.List(everything); err != nil {
		return nil, err
	}
	if objs.TCPRoutes, err = c.tcpRoutes.List(everything); err != nil {
		return nil, err
	}
	if objs.UDPRoutes, err = c.udpRoutes.List(everything); err != nil {
		return nil, err
	}
	if objs.ListenerSets, err = c.sets.List(everything); err != nil {
		return nil, err
	}
	if objs.ReferenceGrants, err = c.grants.List(everything); err != nil {
		return nil, err
	}
	var backendVersions versions
	objs.Services, objs.EndpointSlices, backendVersions = c.serviceIndex.handOut()
	if objs.Namespaces, err = c.namespaces.List(everything); err != nil {
		return nil, err
	}
	s := objs.Build(c.scope.ControllerName, c.scope.Gateways, c.scope.PublishService, kong)
	s.BackendsVersion, s.ClusterIPsVersion = backendVersions.backends, backendVersions.clusterIPs
	s.ServiceUpstream = c.scope.ServiceUpstream
	if c.hasPodScope {
		if s.Pods, err = c.pods.Pods(c.scope.PodNamespace).List(everything); err != nil {
			return nil, err
		}
		for _, pod := range s.Pods {
			if pod.Name == c.scope.PodName {
				s.Pod = pod
			}
		}
	}
	if c.scope.PublishService.Name == "" {
		s.PublishService = c.publishService(s)
	}
	if s.BackendTLSPolicies, err = c.backendTLS.policiesSorted(); err != nil {
		return nil, err
	}
	return s, nil
}

// publishService is, when none is configured, the Service in the Pod's
// namespace that selects the Pod (preferring a LoadBalancer, then a name
// with "proxy" in it, then the first by name).
func (c *Cache) publishService(s *snapshot.Snapshot) *snapshot.Service {
	if s.Pod == nil {
		return nil
	}
	var candidates []*snapshot.Service
	for key, svc := range s.Services {
		if key.Namespace == s.Pod.Namespace && len(svc.Selector) > 0 &&
			labels.SelectorFromSet(svc.Selector).Matches(labels.Set(s.Pod.Labels)) {
			candidates = append(candidates, svc)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	score := func(svc *snapshot.Service) int {
		n := 0
		if svc.Type == corev1.ServiceTypeLoadBalancer {
			n += 2
		}
		if strings.Contains(svc.Name, "proxy") {
			n++
		}
		return n
	}
	slices.SortFunc(candidates, func(a, b *snapshot.Service) int {
		if d := score(b) - score(a); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return candidates[0]
}

// AllowExternalNames lets routes use ExternalName Services, whose names
// are resolved by names (konglet --allow-external-name).
func (c *Cache) AllowExternalNames(names *ExternalNames) { c.externalNames = names }

// String describes the scope for logs.
func (s Scope) String() string {
	return fmt.Sprintf("gateways=%v pod=%s/%s", s.Gateways, s.PodNamespace, s.PodName)
}

// resyncNever: every change arrives as an event; a periodic full resync would
// only cost CPU.
const resyncNever time.Duration = 0

// Notify asks for a sync (for example after a failure, or when Kong lost
// its configuration).
func (c *Cache) Notify() { c.Trigger.Notify() }

// Wait blocks until the next coalesced batch of changes.
func (c *Cache) Wait(ctx context.Context) error { return c.Trigger.Wait(ctx) }

// WaitStatus blocks until a change that only statuses depend on.
func (c *Cache) WaitStatus(ctx context.Context) error { return c.Trigger.WaitStatus(ctx) }
