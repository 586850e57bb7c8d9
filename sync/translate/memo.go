package translate

import (
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// Memo carries the work of one translation to the next. Between two syncs
// almost every route is unchanged, and rebuilding each one's Kong entities
// and statuses was most of a translation, mostly allocation and garbage
// collection. An HTTPRoute or GRPCRoute is reused when it is the very same
// object (informer caches keep an object's pointer until it changes), the
// Services and EndpointSlices its backends resolved to are too, and
// nothing that every route depends on changed (Gateways, ListenerSets,
// Namespaces, ReferenceGrants, Secrets, Kong, refusals...): then its
// entities and statuses are taken over and only its rank, which depends on
// the other routes, is applied again.
//
// A Memo never changes a result (TestMemoMatchesAFreshTranslation and the
// fuzz target hold it to that). A Result from a Memo stays valid until the
// Memo's next Translate, which reuses and reorders its entities; a Memo is
// not safe for concurrent use.
type Memo struct {
	shared sharedInputs
	routes map[*metav1.ObjectMeta]*routeMemo
}

// Translate is the package's Translate, reusing what it can from the
// previous call.
func (m *Memo) Translate(s *snapshot.Snapshot, refused Refusals) Result {
	shared := sharedInputsOf(s, refused)
	if !shared.equal(m.shared) {
		m.routes = nil
	}
	m.shared = shared
	t := newTranslation(s, refused)
	t.memo = m.routes
	t.nextMemo = make(map[*metav1.ObjectMeta]*routeMemo, len(m.routes))
	res := t.run()
	m.routes = t.nextMemo
	return res
}

// sharedInputs are the parts of a snapshot that any route's translation may
// read, by identity.
type sharedInputs struct {
	controller      string
	gateways        []*gwv1.Gateway
	classes         map[string]*gwv1.GatewayClass
	listenerSets    []*gwv1.ListenerSet
	grants          []*gwv1.ReferenceGrant
	namespaces      map[string]*corev1.Namespace
	secrets         map[types.NamespacedName]*corev1.Secret
	secretProblems  map[types.NamespacedName]snapshot.SecretProblem
	publishService  *corev1.Service
	pod             types.UID // a Pod's container ports never change
	kong            snapshot.Kong
	serviceUpstream bool
	refused         Refusals
	// What decides whether a backend's addresses may be targets.
	allowExternalName bool
	externalNames     map[string]snapshot.Resolution
	kongPodIPs        []string
}

// sharedInputsOf copies the lists and maps: the caller may reuse them.
func sharedInputsOf(s *snapshot.Snapshot, refused Refusals) sharedInputs {
	in := sharedInputs{controller: s.ControllerName, gateways: slices.Clone(s.Gateways), classes: maps.Clone(s.GatewayClasses),
		listenerSets: slices.Clone(s.ListenerSets), grants: slices.Clone(s.ReferenceGrants), namespaces: maps.Clone(s.Namespaces),
		secrets: maps.Clone(s.Secrets), secretProblems: maps.Clone(s.SecretProblems), publishService: s.PublishService, kong: s.Kong, serviceUpstream: s.ServiceUpstream,
		refused: maps.Clone(refused)}
	in.kong.ProxyListens, in.kong.StreamListens = slices.Clone(s.Kong.ProxyListens), slices.Clone(s.Kong.StreamListens)
	in.kong.PortMaps, in.kong.EnabledPlugins = maps.Clone(s.Kong.PortMaps), maps.Clone(s.Kong.EnabledPlugins)
	if s.Pod != nil {
		in.pod = s.Pod.UID
	}
	in.allowExternalName, in.externalNames, in.kongPodIPs = s.AllowExternalName, maps.Clone(s.ExternalNames), kongPodIPs(s)
	return in
}

func (a sharedInputs) equal(b sharedInputs) bool {
	return a.controller == b.controller && slices.EqualFunc(a.gateways, b.gateways, sameSpec) &&
		maps.EqualFunc(a.classes, b.classes, sameSpec) && slices.EqualFunc(a.listenerSets, b.listenerSets, sameSpec) &&
		slices.Equal(a.grants, b.grants) &&
		maps.Equal(a.namespaces, b.namespaces) && maps.Equal(a.secrets, b.secrets) && maps.Equal(a.secretProblems, b.secretProblems) &&
		a.publishService == b.publishService && a.pod == b.pod && a.serviceUpstream == b.serviceUpstream &&
		maps.Equal(a.refused, b.refused) && reflect.DeepEqual(a.kong, b.kong) &&
		a.allowExternalName == b.allowExternalName && maps.EqualFunc(a.externalNames, b.externalNames, sameResolution) &&
		slices.Equal(a.kongPodIPs, b.kongPodIPs)
}

func sameResolution(a, b snapshot.Resolution) bool {
	return a.Err == b.Err && slices.Equal(a.Addrs, b.Addrs)
}

// sameSpec tells whether two versions of a Gateway API object have the same
// metadata the translation reads and the same spec: the same object, or the
// same uid and generation (which the API server bumps on every spec
// change). So the status writes on Gateways that follow most syncs do not
// make the next one start over.
func sameSpec[T interface {
	comparable
	metav1.Object
}](a, b T) bool {
	return a == b || a.GetUID() != "" && a.GetUID() == b.GetUID() && a.GetGeneration() == b.GetGeneration()
}

// routeMemo is what one route's translation read beyond the shared inputs,
// and what it produced.
type routeMemo struct {
	backends   []backendInput
	hasStatus  bool // false for a route of no bound Gateway
	parents    []gwv1.RouteParentStatus
	listeners  []int // indexes (in listenerIndex) of the listeners it attached to
	services   []*declarative.Service
	kongRoutes []*kongRoute
	upstreams  []*declarative.Upstream
}

// backendInput is a Service lookup of a route's backends, and the
// EndpointSlices behind it.
type backendInput struct {
	key     types.NamespacedName
	service *corev1.Service
	slices  []*discoveryv1.EndpointSlice
}

func memoizable(r route) bool { return r.kind == kindHTTPRoute || r.kind == kindGRPCRoute }

// remembered returns the previous translation's work for r if it still holds.
func (t *translation) remembered(r route) *routeMemo {
	m := t.memo[r.meta]
	if m == nil {
		return nil
	}
	for _, b := range m.backends {
		if t.snap.Services[b.key] != b.service || !slices.Equal(t.snap.EndpointSlices[b.key], b.slices) {
			return nil
		}
	}
	return m
}

// replay applies a remembered route's work to this translation.
func (t *translation) replay(r route, m *routeMemo, rank int) {
	if m.hasStatus {
		t.status.Routes[r.key()] = m.parents
	}
	all := t.listenerIndex()
	for _, i := range m.listeners {
		all[i].attached++
		all[i].lastAttached = r.meta
	}
	t.services = append(t.services, m.services...)
	for _, kr := range m.kongRoutes {
		kr.order.route = rank
	}
	t.kongRoutes = append(t.kongRoutes, m.kongRoutes...)
	for _, u := range m.upstreams {
		if _, ok := t.upstreams[u.Name]; !ok {
			t.upstreams[u.Name] = u
		}
	}
	t.nextMemo[r.meta] = m
}

// recorder notes what a route reads and produces while it is translated.
type recorder struct {
	memo                 *routeMemo
	services, kongRoutes int // their lengths before the route
	attachedTo           []*listener
}

func (t *translation) startRecording() {
	t.recording = &recorder{memo: &routeMemo{}, services: len(t.services), kongRoutes: len(t.kongRoutes)}
}

// recordBackend notes a Service lookup.
func (t *translation) recordBackend(key types.NamespacedName, svc *corev1.Service) {
	rec := t.recording
	if rec == nil || slices.ContainsFunc(rec.memo.backends, func(b backendInput) bool { return b.key == key }) {
		return
	}
	rec.memo.backends = append(rec.memo.backends, backendInput{key: key, service: svc, slices: slices.Clone(t.snap.EndpointSlices[key])})
}

// recordAttach notes a listener the route is counted on.
func (t *translation) recordAttach(l *listener) {
	if t.recording != nil {
		t.recording.attachedTo = append(t.recording.attachedTo, l)
	}
}

// finishRecording keeps what the route produced for the next translation.
func (t *translation) finishRecording(r route) {
	rec := t.recording
	t.recording = nil
	m := rec.memo
	m.parents, m.hasStatus = t.status.Routes[r.key()]
	index := t.listenerIndex()
	for _, l := range rec.attachedTo {
		m.listeners = append(m.listeners, slices.Index(index, l))
	}
	m.services = slices.Clone(t.services[rec.services:])
	m.kongRoutes = slices.Clone(t.kongRoutes[rec.kongRoutes:])
	for _, svc := range m.services {
		if u := t.upstreams[svc.Host]; u != nil {
			m.upstreams = append(m.upstreams, u)
		}
	}
	t.nextMemo[r.meta] = m
}

// listenerIndex lists every listener in a fixed order: with the same shared
// inputs, the same listener has the same index in every translation.
func (t *translation) listenerIndex() []*listener {
	if t.listeners == nil {
		for _, g := range t.gws {
			t.listeners = append(t.listeners, g.all()...)
		}
	}
	return t.listeners
}
