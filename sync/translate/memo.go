package translate

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// Memo carries the work of one translation to the next. Between two syncs
// almost every route is unchanged, and rebuilding each one's Kong entities
// and statuses was most of a translation, mostly allocation and garbage
// collection. An HTTPRoute or GRPCRoute is reused when it is the very same
// object (informer caches keep an object's pointer until it changes) or
// one of the same uid and generation (a status write, konglet's own among
// them, makes a new object of the same spec), the Services and
// EndpointSlices its backends resolved to are too, its namespace did not
// change, none of its backends' addresses is a cluster IP that changed
// hands or a Kong Pod's that came or went, and nothing else that every
// route depends on changed (Gateways, ListenerSets, ReferenceGrants,
// Secrets, Kong, refusals...): then its entities and statuses are taken
// over and only its rank, which depends on the other routes, is applied
// again.
//
// A Memo never changes a result (TestMemoMatchesAFreshTranslation,
// TestMemoFollowsRandomEdits and the fuzz target hold it to that). A
// Result from a Memo stays valid until the Memo's next Translate, which
// reuses and reorders its entities; a Memo is not safe for concurrent use.
type Memo struct {
	shared sharedInputs
	routes map[routeIdentity]*routeOutput
	ranks  int // how many routes the last translation ranked
	// upstreams are the last translation's, by name and in order.
	upstreams       map[string]*declarative.Upstream
	sortedUpstreams []*declarative.Upstream
	routeStatuses   map[ObjectRef][]gwv1.RouteParentStatus // the last translation's
	// backendsVersion is the last snapshot's BackendsVersion, and
	// clusterIPs the index of its Services by ClusterIP.
	backendsVersion uint64
	clusterIPs      map[netip.Addr]types.NamespacedName
}

// Translate is the package's Translate, reusing what it can from the
// previous call.
func (m *Memo) Translate(s *snapshot.Snapshot, refused Refusals) Result {
	shared := sharedInputsOf(s, refused)
	t := newTranslator(s, refused)
	switch {
	case !shared.equal(m.shared):
		m.routes = nil
	case shared.clusterIPs != 0 && shared.clusterIPs == m.shared.clusterIPs:
		// The caches counted no change of any Service's cluster IPs.
		t.clusterIPsOnce.Do(func() { t.clusterIPs = m.clusterIPs })
	default:
		// Any Service created or deleted in the cluster changes the
		// cluster IPs (and offline nothing counts them): only routes with
		// an endpoint at one that changed hands are translated again
		// (reusable), not all of them.
		t.movedAddresses = movedClusterIPs(m.clusterIPs, t.clusterIPIndex())
	}
	// Cluster IPs that moved are other Services, whatever the versions say.
	clusterIPsMoved := t.movedAddresses != nil
	// Kong Pods' IPs, which come and go with every rollout, are forbidden
	// targets too: those that came or went count as moved.
	t.movedAddresses = withMovedKongPods(t.movedAddresses, m.shared.kongPodIPs, shared.kongPodIPs)
	// Namespaces come and go, and change, all the time in some clusters;
	// the translation reads only their labels, for the routes in them
	// (allowedRoutes) and for ListenerSets (allowedListeners), whose
	// listeners any route may attach to.
	if changed := changedNamespaces(m.shared.namespaces, shared.namespaces); len(changed) > 0 {
		if holdListenerSets(changed, shared.listenerSets, shared.gateways) { // the same as before when routes are kept
			m.routes = nil
		}
		t.changedNamespaces = changed
	}
	m.shared = shared
	kept := &keptRoutes{previous: m.routes, previousRanks: m.ranks,
		upstreams: m.upstreams, sortedUpstreams: m.sortedUpstreams, previousStatuses: m.routeStatuses}
	// Every output kept was resolved against these very Services and
	// EndpointSlices (in the last translation, or checked in it).
	t.sameBackends = s.BackendsVersion != 0 && s.BackendsVersion == m.backendsVersion && !clusterIPsMoved
	res := t.run(kept)
	m.routes, m.ranks, m.routeStatuses = kept.next, kept.nextRanks, kept.nextStatuses
	m.upstreams, m.sortedUpstreams = kept.upstreams, kept.sortedUpstreams
	m.backendsVersion, m.clusterIPs = s.BackendsVersion, t.clusterIPIndex()
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
	secretProblems  map[types.NamespacedName]snapshot.ReadProblem
	publishService  *snapshot.Service
	pod             types.UID // a Pod's container ports never change
	kong            snapshot.Kong
	serviceUpstream bool
	refused         Refusals
	// What decides whether a backend's addresses may be targets.
	allowExternalName bool
	externalNames     map[string]snapshot.Resolution
	kongPodIPs        []string
	// clusterIPs is the caches' ClusterIPsVersion (0: not counted), the
	// version of the cluster IPs any route's endpoints are checked against
	// (forbiddenTarget). Neither it nor the namespaces are compared by
	// equal: a Memo translates again only the routes a change of them
	// concerns.
	clusterIPs uint64
	// What decides the TLS to backends.
	backendTLS        []*gwv1.BackendTLSPolicy
	configMaps        map[types.NamespacedName]*corev1.ConfigMap
	configMapProblems map[types.NamespacedName]snapshot.ReadProblem
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
	in.clusterIPs = s.ClusterIPsVersion
	in.backendTLS, in.configMaps, in.configMapProblems = slices.Clone(s.BackendTLSPolicies), maps.Clone(s.ConfigMaps), maps.Clone(s.ConfigMapProblems)
	return in
}

func (a sharedInputs) equal(b sharedInputs) bool {
	return a.controller == b.controller && slices.EqualFunc(a.gateways, b.gateways, sameSpec) &&
		maps.EqualFunc(a.classes, b.classes, sameSpec) && slices.EqualFunc(a.listenerSets, b.listenerSets, sameSpec) &&
		slices.Equal(a.grants, b.grants) &&
		maps.Equal(a.secrets, b.secrets) && maps.Equal(a.secretProblems, b.secretProblems) &&
		a.publishService == b.publishService && a.pod == b.pod && a.serviceUpstream == b.serviceUpstream &&
		maps.Equal(a.refused, b.refused) && a.kong.Equal(b.kong) &&
		a.allowExternalName == b.allowExternalName && maps.EqualFunc(a.externalNames, b.externalNames, sameResolution) &&
		slices.EqualFunc(a.backendTLS, b.backendTLS, sameSpec) && maps.Equal(a.configMaps, b.configMaps) &&
		maps.Equal(a.configMapProblems, b.configMapProblems)
}

// withMovedKongPods adds to moved (nil: none) the IPs that are Kong Pods'
// in one of two sorted lists and not in the other.
func withMovedKongPods(moved map[netip.Addr]bool, before, now []string) map[netip.Addr]bool {
	if slices.Equal(before, now) {
		return moved
	}
	if moved == nil {
		moved = map[netip.Addr]bool{}
	}
	for _, ips := range [2][2][]string{{before, now}, {now, before}} {
		for _, ip := range ips[0] {
			if _, found := slices.BinarySearch(ips[1], ip); !found {
				if a, err := netip.ParseAddr(ip); err == nil {
					moved[a.Unmap()] = true
				}
			}
		}
	}
	return moved
}

// movedClusterIPs lists the cluster IPs whose Service differs between two
// indexes (clusterIPIndex): added, removed or taken by another Service.
func movedClusterIPs(before, now map[netip.Addr]types.NamespacedName) map[netip.Addr]bool {
	moved := map[netip.Addr]bool{}
	for addr, key := range before {
		if owner, ok := now[addr]; !ok || owner != key {
			moved[addr] = true
		}
	}
	for addr := range now {
		if _, ok := before[addr]; !ok {
			moved[addr] = true
		}
	}
	return moved
}

// changedNamespaces names the namespaces that exist in one of the maps and
// not in the other, or with other labels.
func changedNamespaces(before, now map[string]*corev1.Namespace) map[string]bool {
	changed := map[string]bool{}
	for name, ns := range before {
		if other, ok := now[name]; !ok || other != ns && !labels.Equals(other.Labels, ns.Labels) {
			changed[name] = true
		}
	}
	for name := range now {
		if _, ok := before[name]; !ok {
			changed[name] = true
		}
	}
	return changed
}

// holdListenerSets tells whether one of the namespaces holds a ListenerSet
// of one of the Gateways (the caches hold every ListenerSet of the cluster).
func holdListenerSets(namespaces map[string]bool, sets []*gwv1.ListenerSet, gateways []*gwv1.Gateway) bool {
	return slices.ContainsFunc(sets, func(set *gwv1.ListenerSet) bool {
		parent, ok := listenerSetParent(set)
		return ok && namespaces[set.Namespace] && slices.ContainsFunc(gateways, func(g *gwv1.Gateway) bool {
			return types.NamespacedName{Namespace: g.Namespace, Name: g.Name} == parent
		})
	})
}

func sameResolution(a, b snapshot.Resolution) bool {
	return a.Err == b.Err && slices.Equal(a.Addrs, b.Addrs)
}

// sameSpec tells whether two versions of a Gateway API object have the same
// metadata the translation reads and the same spec: the same object, or the
// same uid and generation (which the API server sets from 1 and bumps on
// every spec change; a generation 0 comes from elsewhere and proves
// nothing). So the status writes on Gateways that follow most syncs do not
// make the next one start over.
func sameSpec[T interface {
	comparable
	metav1.Object
}](a, b T) bool {
	return a == b || a.GetUID() != "" && a.GetGeneration() != 0 && a.GetUID() == b.GetUID() && a.GetGeneration() == b.GetGeneration()
}

// backendInput is a Service lookup of a route's backends, and the
// EndpointSlices behind it.
type backendInput struct {
	key     types.NamespacedName
	service *snapshot.Service
	slices  []*snapshot.EndpointSlice
}

// independent tells whether a route's output depends on no other route
// (beyond lostOn, which is computed first): HTTPRoutes' and GRPCRoutes',
// the many. Only theirs are kept for the next translation and translated
// in parallel (a TCPRoute's or UDPRoute's depends on the older routes on
// its listeners).
func independent(r route) bool { return r.kind == kindHTTPRoute || r.kind == kindGRPCRoute }

// keptRoutes hand the route outputs of one translation to the next.
type keptRoutes struct {
	previous, next map[routeIdentity]*routeOutput
	// previousRanks and nextRanks are how many routes each ranked.
	previousRanks, nextRanks int
	// previousStatuses and nextStatuses are the routes' statuses of each.
	previousStatuses, nextStatuses map[ObjectRef][]gwv1.RouteParentStatus
	// upstreams are the routes' upstreams by name and sortedUpstreams all
	// of the configuration, in order: the previous translation's, then
	// this one's.
	upstreams       map[string]*declarative.Upstream
	sortedUpstreams []*declarative.Upstream
}

// upstreamsByName lists the routes' upstreams and the marker by name. The
// names the previous translation had are in order already: only the
// others are sorted, then merged in (names are unique, so this is the
// order a sort of all of them gives). k is nil without a Memo.
func (k *keptRoutes) upstreamsByName(upstreams map[string]*declarative.Upstream, marker *declarative.Upstream) []*declarative.Upstream {
	byName := func(a, b *declarative.Upstream) int { return cmp.Compare(a.Name, b.Name) }
	fresh := []*declarative.Upstream{marker}
	var inOrder []*declarative.Upstream
	if k == nil {
		for _, u := range upstreams {
			fresh = append(fresh, u)
		}
	} else {
		inOrder = make([]*declarative.Upstream, 0, len(upstreams))
		for _, u := range k.sortedUpstreams {
			if now, ok := upstreams[u.Name]; ok {
				inOrder = append(inOrder, now)
			}
		}
		if len(inOrder) < len(upstreams) {
			for name, u := range upstreams {
				if _, ok := k.upstreams[name]; !ok {
					fresh = append(fresh, u)
				}
			}
		}
	}
	sortFunc(fresh, byName)
	sorted := make([]*declarative.Upstream, 0, len(upstreams)+1)
	for _, u := range fresh {
		before, _ := slices.BinarySearchFunc(inOrder, u, byName)
		sorted, inOrder = append(append(sorted, inOrder[:before]...), u), inOrder[before:]
	}
	sorted = append(sorted, inOrder...)
	if k != nil {
		k.upstreams, k.sortedUpstreams = upstreams, sorted
	}
	return sorted
}

// routeIdentity is what a route's output is kept under: the route's uid
// when it has one and a generation (from an API server), else the object.
type routeIdentity struct {
	uid  types.UID
	meta *metav1.ObjectMeta
}

func identityOf(meta *metav1.ObjectMeta) routeIdentity {
	if meta.UID != "" && meta.Generation != 0 {
		return routeIdentity{uid: meta.UID}
	}
	return routeIdentity{meta: meta}
}

// previousOf returns the previous translation's output for the route of
// meta, whether or not it still holds, when the route is the very same
// object or one of the same spec (the same route, uid and generation). k is
// nil without a Memo.
func (k *keptRoutes) previousOf(kind gwv1.Kind, meta *metav1.ObjectMeta) *routeOutput {
	if k == nil {
		return nil
	}
	out := k.previous[identityOf(meta)]
	if out != nil && out.route.kind == kind && out.route.meta.Namespace == meta.Namespace && out.route.meta.Name == meta.Name &&
		sameSpec(out.route.meta, meta) {
		return out
	}
	return nil
}

// reusable returns out, the previous translation's output for the very
// same route object (nil: none), if it still holds: its namespace is not
// one of the changed ones, its backends resolve to the same Services and
// EndpointSlices (surely so when sameBackends), and no address they have
// moved (whether the route may connect there may have changed).
func (t *translator) reusable(out *routeOutput, namespace string, lostOn map[int]string) *routeOutput {
	if out == nil || !maps.Equal(out.lostOn, lostOn) || t.changedNamespaces[namespace] {
		return nil
	}
	for _, b := range out.backends {
		if !t.sameBackends && (t.snap.Services[b.key] != b.service || !slices.Equal(t.snap.EndpointSlices[b.key], b.slices)) ||
			t.atMovedAddress(b) {
			return nil
		}
	}
	return out
}

// atMovedAddress tells whether an address of a backend's Service moved
// (translator.movedAddresses): one of its endpoints' (ready or not), or of
// what its ExternalName is, the addresses backendAddresses checks.
func (t *translator) atMovedAddress(b backendInput) bool {
	moved := func(addr string) bool {
		a, err := netip.ParseAddr(addr)
		return err == nil && t.movedAddresses[a.Unmap()]
	}
	switch {
	case len(t.movedAddresses) == 0 || b.service == nil:
		return false
	case b.service.Type == corev1.ServiceTypeExternalName:
		name := b.service.ExternalName
		return moved(name) || slices.ContainsFunc(t.snap.ExternalNames[name].Addrs, func(a netip.Addr) bool { return t.movedAddresses[a.Unmap()] })
	}
	for _, slice := range b.slices {
		for _, ep := range slice.Endpoints {
			if slices.ContainsFunc(ep.Addresses, moved) {
				return true
			}
		}
	}
	return false
}

// statuses returns the map of route statuses to start from: a copy of the
// previous translation's, which has the entries of every route taken over
// (a copy of a map is much cheaper than as many insertions), or an empty
// one for n routes. k is nil without a Memo.
func (k *keptRoutes) statuses(n int) map[ObjectRef][]gwv1.RouteParentStatus {
	if k == nil || k.previousStatuses == nil {
		return make(map[ObjectRef][]gwv1.RouteParentStatus, n)
	}
	return maps.Clone(k.previousStatuses)
}

// keep hands a route's output, and its rank, to the next translation.
func (k *keptRoutes) keep(r route, rank int, out *routeOutput) {
	if k != nil && independent(r) {
		out.route, out.rank = r, rank
		k.next[identityOf(r.meta)] = out
	}
}
