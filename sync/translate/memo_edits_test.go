package translate_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestMemoFollowsRandomEdits: after every edit of random sequences of
// them, a translation through a Memo equals a fresh one. The edits are
// made the way the informers make them: a changed object is a new one,
// lists and maps are new, and the caches' versions count the changes of
// Services and EndpointSlices and of cluster IPs (a Memo trusts all of
// that). TestMemoMatchesAFreshTranslation names each kind of edit; this
// one mixes them.
func TestMemoFollowsRandomEdits(t *testing.T) {
	sequences := 100
	if testing.Short() {
		sequences = 10
	}
	for seed := range sequences {
		e := newRandomEditor(uint64(seed))
		var memo syncer
		sameResult(t, fmt.Sprintf("seed %d: first", seed), &memo, e.snap, nil)
		for step := range 40 {
			what := e.edit()
			e.snap.BackendsVersion, e.snap.ClusterIPsVersion = e.backendsVersion, e.clusterIPsVersion
			sameResult(t, fmt.Sprintf("seed %d, step %d: %s", seed, step, what), &memo, e.snap, e.refused)
		}
	}
}

// randomEditor edits a snapshot of a dozen routes in a dozen namespaces,
// on a Gateway with a listener for every namespace and one for labelled
// ones.
type randomEditor struct {
	rng                                *rand.Rand
	snap                               *snapshot.Snapshot
	refused                            translate.Refusals
	backendsVersion, clusterIPsVersion uint64
}

const editedRoutes = 12

func newRandomEditor(seed uint64) *randomEditor {
	e := &randomEditor{rng: rand.New(rand.NewPCG(seed, 0)), snap: benchSnapshot(editedRoutes), backendsVersion: 1, clusterIPsVersion: 1}
	gw := e.snap.Gateways[0]
	gw.UID, gw.Generation = "gw-uid", 1
	selected := gwv1.NamespacesFromSelector
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{
		Name: "labelled", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: ptr(gwv1.Hostname("*.labelled.example.com")),
		AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &selected,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"labelled": "yes"}}}},
	})
	// Some endpoints are written as IPv4-mapped IPv6 addresses from the
	// start (the cluster IPs that edits add at times too).
	for _, list := range e.snap.EndpointSlices {
		for i, ep := range list[0].Endpoints {
			if i == 0 {
				ep.Addresses = []string{"::ffff:" + ep.Addresses[0]}
				list[0].Endpoints[i] = ep
			}
		}
	}
	e.snap.AllowExternalName, e.snap.ExternalNames = true, map[string]snapshot.Resolution{}
	for i := range 4 {
		e.snap.ExternalNames[fmt.Sprintf("name-%d.example.com", i)] = snapshot.Resolution{Addrs: []netip.Addr{netip.MustParseAddr(e.endpointAddress())}}
	}
	e.snap.Namespaces = map[string]*corev1.Namespace{}
	for i := range editedRoutes {
		ns := fmt.Sprintf("ns-%d", i)
		e.snap.Namespaces[ns] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	}
	for i, r := range e.snap.HTTPRoutes {
		// Few creation times: ranks then tie on names too.
		r.CreationTimestamp = e.creationTime()
		if i%3 == 0 {
			r.Spec.Hostnames = append(r.Spec.Hostnames, e.labelledHostname())
		}
	}
	return e
}

func (e *randomEditor) creationTime() metav1.Time {
	return metav1.NewTime(time.Unix(int64(100+e.rng.IntN(5)), 0))
}

func (e *randomEditor) labelledHostname() gwv1.Hostname {
	return gwv1.Hostname(fmt.Sprintf("a%d.labelled.example.com", e.rng.IntN(4)))
}

// endpointAddress is one of the addresses the snapshot's endpoints have,
// at times written as an IPv4-mapped IPv6 address.
func (e *randomEditor) endpointAddress() string {
	address := fmt.Sprintf("198.18.0.%d", 1+e.rng.IntN(3*editedRoutes))
	if e.rng.IntN(4) == 0 {
		return "::ffff:" + address
	}
	return address
}

func (e *randomEditor) serviceKey() types.NamespacedName {
	keys := slices.SortedFunc(maps.Keys(e.snap.Services), func(a, b types.NamespacedName) int {
		return strings.Compare(a.String(), b.String())
	})
	return keys[e.rng.IntN(len(keys))]
}

// editService replaces a random Service with a copy that edit changed, as
// an informer does, and counts the change.
func (e *randomEditor) editService(edit func(*snapshot.Service)) {
	key := e.serviceKey()
	svc := *e.snap.Services[key]
	edit(&svc)
	e.snap.Services = maps.Clone(e.snap.Services)
	e.snap.Services[key] = &svc
	e.backendsVersion++
}

// edit makes one random edit and says which.
func (e *randomEditor) edit() string {
	s := e.snap
	switch e.rng.IntN(15) {
	case 0:
		i := e.rng.IntN(len(s.HTTPRoutes))
		r := s.HTTPRoutes[i].DeepCopy()
		r.Generation++
		what := "a route's "
		switch e.rng.IntN(4) {
		case 0:
			r.Spec.Hostnames, what = []gwv1.Hostname{e.labelledHostname()}, what+"hostname"
		case 1:
			key := e.serviceKey()
			ref := r.Spec.Rules[0].BackendRefs[0]
			ref.Name, ref.Namespace, ref.Weight = gwv1.ObjectName(key.Name), ptr(gwv1.Namespace(key.Namespace)), ptr(int32(e.rng.IntN(3)))
			r.Spec.Rules[0].BackendRefs, what = append(slices.Clone(r.Spec.Rules[0].BackendRefs), ref), what+"backends"
		case 2:
			// Deleted and created again: another uid, generation 1 (the
			// spec may be the same or not).
			r.CreationTimestamp, r.UID, r.Generation, what = e.creationTime(), types.UID(fmt.Sprintf("uid-%d", e.rng.Uint32())), 1, what+"rank"
		case 3:
			r.Spec.ParentRefs[0].SectionName, what = ptr(gwv1.SectionName([]string{"http", "labelled"}[e.rng.IntN(2)])), what+"listener"
		}
		s.HTTPRoutes = slices.Clone(s.HTTPRoutes)
		s.HTTPRoutes[i] = r
		return what
	case 1:
		// A GRPCRoute on an HTTPRoute's hostname: the older one wins it.
		id := e.rng.Uint32()
		g := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("grpc-%d", id), Namespace: fmt.Sprintf("ns-%d", e.rng.IntN(editedRoutes)),
			UID: types.UID(fmt.Sprintf("grpc-%d-uid", id)), Generation: 1, CreationTimestamp: e.creationTime()},
			Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("kong"))}}},
				Hostnames: []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("app-%d.example.com", e.rng.IntN(editedRoutes)))},
				Rules: []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "svc-1", Namespace: ptr(gwv1.Namespace("ns-1")), Port: ptr(gwv1.PortNumber(80))}}}}}}}}
		s.GRPCRoutes = append(slices.Clone(s.GRPCRoutes), g)
		return "a GRPCRoute added"
	case 2:
		if len(s.GRPCRoutes) > 0 && e.rng.IntN(2) == 0 {
			i := e.rng.IntN(len(s.GRPCRoutes))
			s.GRPCRoutes = slices.Delete(slices.Clone(s.GRPCRoutes), i, i+1)
			return "a GRPCRoute deleted"
		}
		if len(s.HTTPRoutes) > 1 {
			i := e.rng.IntN(len(s.HTTPRoutes))
			s.HTTPRoutes = slices.Delete(slices.Clone(s.HTTPRoutes), i, i+1)
		}
		return "an HTTPRoute deleted"
	case 3:
		e.editService(func(svc *snapshot.Service) {
			svc.Ports = slices.Clone(svc.Ports)
			if len(svc.Ports) > 0 {
				svc.Ports[0].Port = int32(80 + e.rng.IntN(2))
			}
		})
		return "a Service's port"
	case 4:
		key := e.serviceKey()
		if list := s.EndpointSlices[key]; len(list) > 0 {
			slice := *list[0]
			slice.Endpoints = slices.Clone(slice.Endpoints)
			slice.Endpoints[0].Ready = !slice.Endpoints[0].Ready
			if e.rng.IntN(3) == 0 {
				slice.Endpoints[0].Addresses = []string{e.endpointAddress()}
			}
			s.EndpointSlices = maps.Clone(s.EndpointSlices)
			s.EndpointSlices[key] = []*snapshot.EndpointSlice{&slice}
		}
		e.backendsVersion++
		return "an endpoint"
	case 5:
		// A Service of some namespace at one of the endpoints' addresses
		// (cluster IPs are unique: the API server allocates them): added,
		// deleted, or replaced by another namespace's in one step.
		address := e.endpointAddress()
		s.Services = maps.Clone(s.Services)
		what, deleted := "a cluster IP at an endpoint's address", false
		for key := range s.Services {
			if key.Name == "at-"+address {
				delete(s.Services, key)
				what, deleted = what+", deleted", true
			}
		}
		if !deleted || e.rng.IntN(2) == 0 {
			key := types.NamespacedName{Namespace: []string{"ns-other", "ns-1", "ns-2"}[e.rng.IntN(3)], Name: "at-" + address}
			s.Services[key] = snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: corev1.ServiceSpec{ClusterIP: address, ClusterIPs: []string{address}}})
			what += ", added in " + key.Namespace
		}
		e.backendsVersion++
		e.clusterIPsVersion++
		return what
	case 6:
		if len(s.ReferenceGrants) > 0 && e.rng.IntN(2) == 0 {
			s.ReferenceGrants = nil
			return "grants deleted"
		}
		s.ReferenceGrants = []*gwv1.ReferenceGrant{grantServices("ns-other", fmt.Sprintf("ns-%d", e.rng.IntN(editedRoutes))),
			grantServices("ns-1", fmt.Sprintf("ns-%d", e.rng.IntN(editedRoutes)))}
		return "grants"
	case 7:
		name := fmt.Sprintf("ns-%d", e.rng.IntN(editedRoutes))
		s.Namespaces = maps.Clone(s.Namespaces)
		ns, what := s.Namespaces[name], "a Namespace's labels"
		switch {
		case ns == nil:
			ns, what = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, "a Namespace back"
		case e.rng.IntN(4) == 0:
			delete(s.Namespaces, name) // its routes are not gone yet
			return "a Namespace gone"
		case e.rng.IntN(3) == 0:
			ns = ns.DeepCopy()
			ns.Annotations, what = map[string]string{"touched": fmt.Sprint(e.rng.Uint32())}, "a Namespace's annotations"
		case ns.Labels["labelled"] == "yes":
			ns = ns.DeepCopy()
			ns.Labels = nil
		default:
			ns = ns.DeepCopy()
			ns.Labels = map[string]string{"labelled": "yes"}
		}
		s.Namespaces[name] = ns
		return what
	case 8:
		gw := s.Gateways[0].DeepCopy()
		gw.Generation++
		gw.Spec.Listeners[1].Hostname = ptr(gwv1.Hostname([]string{"*.labelled.example.com", "a1.labelled.example.com"}[e.rng.IntN(2)]))
		s.Gateways = []*gwv1.Gateway{gw}
		return "a listener's hostname"
	case 9:
		flavor := []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat}[e.rng.IntN(2)]
		s.Kong = snapshot.DefaultKong(flavor)
		return "Kong's router: " + flavor
	case 10:
		e.refused = []translate.Refusals{nil,
			{{Kind: "Service", Namespace: "ns-1", Name: "svc-1"}: "refused by Kong"},
			{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns-2", Name: "route-2"}: "refused by Kong"},
		}[e.rng.IntN(3)]
		return "refusals"
	case 11:
		e.editService(func(svc *snapshot.Service) {
			svc.UpstreamMode = []string{"", snapshot.UpstreamModeService}[e.rng.IntN(2)]
		})
		return "a Service's upstream mode"
	case 12:
		// An ExternalName at an endpoint's address, as an IP or as a
		// name resolved there.
		var name string
		e.editService(func(svc *snapshot.Service) {
			svc.Type, svc.ExternalName = corev1.ServiceTypeExternalName, e.endpointAddress()
			if e.rng.IntN(2) == 0 {
				svc.ExternalName = fmt.Sprintf("name-%d.example.com", e.rng.IntN(len(s.ExternalNames)))
			}
			name = svc.ExternalName
		})
		return "an ExternalName Service at " + name
	case 13:
		// A status write: a new object of the same spec, uid and
		// generation (konglet's own writes, another controller's).
		s.HTTPRoutes, s.GRPCRoutes = slices.Clone(s.HTTPRoutes), slices.Clone(s.GRPCRoutes)
		for i, r := range s.HTTPRoutes {
			if e.rng.IntN(2) == 0 {
				r = r.DeepCopy()
				r.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "example.com/other"}}
				s.HTTPRoutes[i] = r
			}
		}
		for i, g := range s.GRPCRoutes {
			if e.rng.IntN(2) == 0 {
				g = g.DeepCopy()
				g.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "example.com/other"}}
				s.GRPCRoutes[i] = g
			}
		}
		return "routes' statuses"
	default:
		// A Kong Pod at one of the endpoints' addresses.
		s.Pods = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "kong", Namespace: "kong", UID: "kong-uid"},
			Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: e.endpointAddress()}}}}}
		return "a Kong Pod's IP"
	}
}
