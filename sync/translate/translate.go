// Package translate turns a snapshot of Gateway API objects into Kong
// declarative configuration and the statuses konglet should write. It is
// pure: no clock, no network, no logging, and it never modifies its input.
package translate

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
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
}

// placeholderUpstream is the one entity of a config that has nothing else.
const placeholderUpstream = "placeholder.konglet.invalid"

// Translate computes the Kong config and statuses for a snapshot. Objects
// listed in refused are left out of the config and reported as refused.
func Translate(s *snapshot.Snapshot, refused Refusals) Result {
	return newTranslation(s, refused).run(nil)
}

func newTranslation(s *snapshot.Snapshot, refused Refusals) *translation {
	return &translation{
		snap:    s,
		refused: refused,
		status: Status{
			GatewayClasses: map[string]gwv1.GatewayClassStatus{},
			Gateways:       map[types.NamespacedName]gwv1.GatewayStatus{},
			ListenerSets:   map[types.NamespacedName]gwv1.ListenerSetStatus{},
		},
		listenerHosts: map[gwv1.PortNumber][]string{},
		listenerPorts: map[string]map[gwv1.PortNumber]bool{},
	}
}

// run translates; kept carries route outputs between translations (nil
// without a Memo).
func (t *translation) run(kept *keptRoutes) Result {
	t.gatewayClasses()
	t.gateways()
	routes := t.translateRoutes(rankedRoutes(t.snap), len(allListeners(t.gws)), kept)
	t.finishGateways(routes.attached)
	t.status.Routes = routes.statuses
	return Result{Config: t.config(routes), Status: t.status}
}

type translation struct {
	snap    *snapshot.Snapshot
	refused Refusals
	status  Status
	gws     []*gateway
	// listenerHosts are the hostnames of the usable listeners of each port.
	listenerHosts map[gwv1.PortNumber][]string
	// listenerPorts are the ports of the usable listeners of each Kong
	// protocol (http, https, tcp...).
	listenerPorts map[string]map[gwv1.PortNumber]bool
	// clusterIPs index the Services by ClusterIP (built on first use).
	clusterIPs map[netip.Addr]*corev1.Service
	// kongPods are the IPs of this Kong Pod and its peers (built on first use).
	kongPods map[netip.Addr]bool
}

func (t *translation) config(routes mergedRoutes) *declarative.Config {
	// Priorities depend on every route that shares a precedence class.
	t.assignPriorities(routes.kongRoutes)
	cfg := &declarative.Config{FormatVersion: declarative.FormatVersion}
	slices.SortFunc(routes.services, func(a, b *declarative.Service) int { return cmp.Compare(a.Name, b.Name) })
	for _, svc := range routes.services {
		slices.SortFunc(svc.Routes, func(a, b *declarative.Route) int { return cmp.Compare(a.Name, b.Name) })
		if len(svc.Routes) > 0 {
			cfg.Services = append(cfg.Services, svc)
		}
	}
	for _, u := range routes.upstreams {
		cfg.Upstreams = append(cfg.Upstreams, u)
	}
	slices.SortFunc(cfg.Upstreams, func(a, b *declarative.Upstream) int { return cmp.Compare(a.Name, b.Name) })
	cfg.Certificates = t.certificates()
	cfg.Plugins = t.globalPlugins(routes.kongRoutes)
	if len(cfg.Services) == 0 && len(cfg.Upstreams) == 0 && len(cfg.Certificates) == 0 {
		// Kong counts a config without entities as none: its /status/ready
		// stays 503 and its hash stays zero. One idle upstream makes "no
		// routes yet" a real, loaded configuration.
		cfg.Upstreams = []*declarative.Upstream{{Name: placeholderUpstream}}
	}
	return cfg
}

// condition builds a condition without a timestamp (the writer sets it).
func condition(typ string, ok bool, reason, message string, generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}
