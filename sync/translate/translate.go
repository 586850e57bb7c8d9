// Package translate turns a snapshot of Gateway API objects into Kong
// declarative configuration and the statuses konglet should write. It is
// pure: no clock, no network, no logging, and it never modifies its input.
package translate

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// ObjectRef names one Kubernetes object that Kong entities are built from.
type ObjectRef struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Refusals are objects left out of the config, because Kong refused them in
// an earlier attempt or they did not fit its size limits, each with what to
// tell: a route's message is its status message as it is; a Service's is
// Kong's, told on the routes that use it.
type Refusals map[ObjectRef]string

// Result is the output of one translation.
type Result struct {
	Config *declarative.Config
	Status Status
	// RoutesTranslated is how many routes of the bound Gateways (those
	// with a parentRef to one) were translated anew: all of them, but for
	// those a Memo took over. Other routes cost a look at their
	// parentRefs.
	RoutesTranslated int
}

// Status holds the desired statuses, without timestamps: the status writer
// keeps lastTransitionTime where a condition did not change.
type Status struct {
	GatewayClasses map[string]gwv1.GatewayClassStatus
	Gateways       map[types.NamespacedName]gwv1.GatewayStatus
	ListenerSets   map[types.NamespacedName]gwv1.ListenerSetStatus
	// Routes holds, per route of any kind, only the parent entries this
	// controller owns; entries of other controllers are kept by the writer.
	Routes map[ObjectRef][]gwv1.RouteParentStatus
	// BackendTLSPolicies holds, per policy, the ancestor entries this
	// controller owns: one per bound Gateway whose routes use its targets.
	BackendTLSPolicies map[types.NamespacedName][]gwv1.PolicyAncestorStatus
}

// MarkerUpstream is an idle upstream in every configuration konglet makes:
// a restarted konglet asks Kong for it (GET /upstreams/{name}) to tell its
// own configuration from one that something else loaded, and is ready at
// once when Kong holds one of its own. It also keeps a configuration without
// routes from being empty, which Kong counts as none (/status/ready 503,
// hash zero).
const MarkerUpstream = "marker.konglet.invalid"

// Translate computes the Kong config and statuses for a snapshot. Objects
// listed in refused are left out of the config and reported as refused.
func Translate(s *snapshot.Snapshot, refused Refusals) Result {
	return newTranslator(s, refused).run(nil)
}

// translator is what every phase of a translation reads: the snapshot and
// the refusals, which it never writes, and indexes of the snapshot built on
// first use (once: routes are translated in parallel). The phases pass
// their results to each other as values.
type translator struct {
	snap    *snapshot.Snapshot
	refused Refusals
	// clusterIPs index the Services by ClusterIP (clusterIPIndex).
	clusterIPs     map[netip.Addr]types.NamespacedName
	clusterIPsOnce sync.Once
	// movedAddresses are those whose verdict (forbiddenTarget) may have
	// changed since the translation a Memo keeps outputs of: cluster IPs
	// whose Service is another, Kong Pods' IPs that came or went.
	movedAddresses map[netip.Addr]bool
	// changedNamespaces are the namespaces that appeared, went or changed
	// their labels since that translation.
	changedNamespaces map[string]bool
	// sameBackends: the Services and EndpointSlices are those the Memo's
	// outputs were resolved against (snapshot.BackendsVersion).
	sameBackends bool
	// kongPods are the IPs of this Kong Pod and its peers (built on first use).
	kongPods     map[netip.Addr]bool
	kongPodsOnce sync.Once
	// secretRefs, when not nil, collects the Secrets listeners may use.
	secretRefs map[types.NamespacedName]bool
	// backendTLS are the BackendTLSPolicies' verdicts (built on first use).
	backendTLS     *backendPolicies
	backendTLSOnce sync.Once
}

func newTranslator(s *snapshot.Snapshot, refused Refusals) *translator {
	return &translator{snap: s, refused: refused}
}

// run lists the phases of a translation; kept carries route outputs from
// one translation to the next (nil without a Memo).
func (t *translator) run(kept *keptRoutes) Result {
	classes := t.gatewayClassStatuses()
	gateways := t.buildGateways()
	ports := listenerPortsOf(gateways)
	ranked, previous := rankedRoutes(t.snap, kept)
	routes := t.translateRoutes(ranked, previous, gateways, ports)
	// The routes' statuses are merged while the configuration is
	// assembled, on another core where there is one.
	var routeStatuses map[ObjectRef][]gwv1.RouteParentStatus
	var merging sync.WaitGroup
	merging.Go(func() { routeStatuses = routes.statuses(ranked, kept) })
	certs := certificates(gateways) // before statuses: it finds conflicts
	gatewayStatuses, listenerSetStatuses := t.finishGateways(gateways, routes.attached)
	cfg, unranked := t.assemble(routes, gateways, certs, kept)
	merging.Wait()
	if len(unranked) > 0 {
		// A Memo starts the next translation from the statuses: the notes
		// go on a copy, so that a route ranked again loses its own.
		routeStatuses = maps.Clone(routeStatuses)
		noteUnranked(routeStatuses, cfg.Services, unranked)
	}
	return Result{Config: cfg, RoutesTranslated: routes.translatedOurs(), Status: Status{
		GatewayClasses: classes,
		Gateways:       gatewayStatuses,
		ListenerSets:   listenerSetStatuses,
		Routes:         routeStatuses,

		BackendTLSPolicies: t.policyStatuses(ranked, gateways),
	}}
}

// assemble builds Kong's configuration from the routes' entities and the
// listeners' certificates; unranked are the Kong routes that Kong's
// traditional_compatible router may prefer to routes Gateway API prefers.
func (t *translator) assemble(routes mergedRoutes, gateways []*gateway, certs []*declarative.Certificate, kept *keptRoutes) (cfg *declarative.Config, unranked []*declarative.Route) {
	// Priorities depend on every route that shares a precedence class.
	services, kongRoutes := routes.services, routes.kongRoutes
	if t.snap.Kong.RouterFlavor == snapshot.RouterExpressions {
		misdirected, terminators := t.misdirectedService(gateways)
		kongRoutes = append(slices.Clip(kongRoutes), terminators...)
		assignPriorities(kongRoutes)
		if misdirected != nil {
			services = append(services, misdirected)
		}
	} else {
		isolation, terminators := t.isolationService(gateways, listenerPortsOf(gateways))
		unranked = rankTraditional(append(slices.Clip(routes.kongRoutes), terminators...))
		services = append(services, isolation)
	}
	cfg = &declarative.Config{FormatVersion: declarative.FormatVersion, Services: make([]*declarative.Service, 0, len(services))}
	sortFunc(services, func(a, b *declarative.Service) int { return strings.Compare(a.Name, b.Name) })
	for _, svc := range services {
		slices.SortFunc(svc.Routes, func(a, b *declarative.Route) int { return strings.Compare(a.Name, b.Name) })
		if len(svc.Routes) > 0 {
			cfg.Services = append(cfg.Services, svc)
		}
	}
	cfg.Upstreams = kept.upstreamsByName(routes.upstreams, &declarative.Upstream{Name: MarkerUpstream})
	cfg.Certificates = append(certs, clientCertificates(gateways, services)...)
	cfg.CACertificates = t.caCertificatesOf(services)
	cfg.Plugins = t.globalPlugins(kongRoutes)
	return cfg, unranked
}

// condition builds a condition without a timestamp (the writer sets it).
func condition(typ string, ok bool, reason, message string, generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

func ptr[T any](v T) *T { return &v }
