// Package snapshot is the read-only view of the cluster and of the local Kong
// that one translation works from. Objects are shared with the informer
// caches: nothing that receives a Snapshot may modify what it points to.
package snapshot

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Router flavors of Kong, as GET / reports them.
const (
	RouterExpressions          = "expressions"
	RouterTraditionalCompat    = "traditional_compatible"
	RouterTraditional          = "traditional"
	DefaultControllerName      = "konglet.dev/gateway-controller"
	ServiceNameLabel           = discoveryv1.LabelServiceName
	UpstreamModeAnnotation     = "konglet.dev/upstream"
	UpstreamModeService        = "service"
	UpstreamModeEndpoints      = "endpoints"
	DefaultKongHTTPListenPort  = 8000
	DefaultKongHTTPSListenPort = 8443
)

// Listen is one port Kong accepts connections on.
type Listen struct {
	Port  int
	SSL   bool
	HTTP2 bool
	UDP   bool
}

// Kong is what the local Kong says about itself in GET /.
type Kong struct {
	RouterFlavor   string
	ProxyListens   []Listen
	StreamListens  []Listen
	PortMaps       map[int]int // host (Service) port -> Kong listen port
	EnabledPlugins map[string]bool
	PluginsKnown   bool // false when GET / was not read (offline): every plugin counts as enabled
	// UntrustedLua is kong.conf's untrusted_lua ("sandbox" by default, "on"
	// or "off"): whether Kong runs the Lua of pre-function plugins.
	UntrustedLua string
}

// Equal tells whether two Kongs are the same to a translation.
func (k Kong) Equal(o Kong) bool {
	return k.RouterFlavor == o.RouterFlavor && slices.Equal(k.ProxyListens, o.ProxyListens) &&
		slices.Equal(k.StreamListens, o.StreamListens) && maps.Equal(k.PortMaps, o.PortMaps) &&
		maps.Equal(k.EnabledPlugins, o.EnabledPlugins) && k.PluginsKnown == o.PluginsKnown && k.UntrustedLua == o.UntrustedLua
}

// DefaultKong is the Kong that the Helm chart installs by default, used when
// no Kong can be asked (offline translation).
func DefaultKong(flavor string) Kong {
	return Kong{
		RouterFlavor: flavor,
		ProxyListens: []Listen{
			{Port: DefaultKongHTTPListenPort},
			{Port: DefaultKongHTTPSListenPort, SSL: true, HTTP2: true},
		},
		PortMaps:     map[int]int{80: DefaultKongHTTPListenPort, 443: DefaultKongHTTPSListenPort},
		UntrustedLua: "sandbox",
	}
}

// PluginEnabled tells whether Kong would accept a plugin of that name.
func (k Kong) PluginEnabled(name string) bool {
	return !k.PluginsKnown || k.EnabledPlugins[name]
}

// LuaAllowed tells whether Kong would run the Lua of a pre-function plugin:
// the plugin is enabled and untrusted_lua lets Lua run (Kong accepts such a
// plugin with untrusted_lua=off, then fails every request that reaches it).
func (k Kong) LuaAllowed() bool {
	return k.PluginEnabled("pre-function") && (k.UntrustedLua == "sandbox" || k.UntrustedLua == "on")
}

// ReadProblem is why konglet holds no usable copy of an object it reads
// by name (a Secret a listener may use, a ConfigMap of CA certificates).
type ReadProblem struct {
	// Forbidden: RBAC does not let konglet read that kind there.
	Forbidden bool
	// Size, when above Limit: the object holds that many bytes of data, and
	// its data was dropped as it arrived.
	Size, Limit int
	// Err is the last error reading the object, which has not been read yet
	// ("" if none came before konglet stopped waiting).
	Err string
	// Unwatched, when not 0: the object is not read, because more objects
	// of its kind are named than konglet watches at once (this many).
	Unwatched int
}

// Snapshot is everything one translation reads.
type Snapshot struct {
	ControllerName string
	// Gateways are the Gateways this konglet is bound to (by --gateway), in
	// the order given; a missing one is simply absent.
	Gateways        []*gwv1.Gateway
	GatewayClasses  map[string]*gwv1.GatewayClass
	HTTPRoutes      []*gwv1.HTTPRoute
	GRPCRoutes      []*gwv1.GRPCRoute
	TLSRoutes       []*gwv1.TLSRoute
	TCPRoutes       []*gwv1.TCPRoute
	UDPRoutes       []*gwv1.UDPRoute
	ListenerSets    []*gwv1.ListenerSet
	ReferenceGrants []*gwv1.ReferenceGrant
	Services        map[types.NamespacedName]*Service
	// EndpointSlices by the Service they belong to. A list is never
	// modified in place: a change replaces it (WithEndpointSlice), so a
	// translation may keep it to compare with the next snapshot's.
	EndpointSlices map[types.NamespacedName][]*EndpointSlice
	// BackendsVersion names Services and EndpointSlices as they are: two
	// snapshots of one cache with the same version (not 0) hold the same
	// ones (the caches count their changes; 0 is unknown).
	BackendsVersion uint64
	// ClusterIPsVersion likewise names the Services' cluster IPs: the same
	// version (not 0) is the same Services at the same cluster IPs.
	ClusterIPsVersion uint64
	Namespaces        map[string]*corev1.Namespace
	// Secrets are the TLS Secrets that listeners reference, as read; a
	// Secret in SecretProblems is not here.
	Secrets map[types.NamespacedName]*corev1.Secret
	// SecretProblems say why a referenced Secret could not be used although
	// it may exist (DESIGN decision 8).
	SecretProblems map[types.NamespacedName]ReadProblem
	// BackendTLSPolicies are every BackendTLSPolicy (sorted by namespace
	// and name); ConfigMaps only those their caCertificateRefs name in
	// their own namespace (BackendTLSConfigMaps), as read.
	BackendTLSPolicies []*gwv1.BackendTLSPolicy
	ConfigMaps         map[types.NamespacedName]*corev1.ConfigMap
	// ConfigMapProblems say why a named ConfigMap could not be used
	// although it may exist; one here is not in ConfigMaps.
	ConfigMapProblems map[types.NamespacedName]ReadProblem
	// PublishService is the Service in front of this Kong (nil if unknown:
	// listener ports are then checked against Kong's port_maps only).
	PublishService *Service
	// Pod is the Pod konglet runs in (nil offline); it resolves named targetPorts.
	Pod *corev1.Pod
	// Pods are the Pods of the own namespace: the peers whose konglet
	// conditions tell how many replicas hold the configuration.
	Pods []*corev1.Pod
	Kong Kong
	// ServiceUpstream targets Services by DNS name instead of Pod IPs, so that
	// a mesh balances (DESIGN decision 9); a Service annotation overrides it.
	ServiceUpstream bool
	// AllowExternalName lets backendRefs name ExternalName Services. Off by
	// default: a tenant's ExternalName can point anywhere, Kong's own admin
	// API on loopback included.
	AllowExternalName bool
	// ExternalNames are the addresses konglet resolved for the names of the
	// ExternalName Services that routes use (with AllowExternalName): Kong
	// is given these checked addresses, never a name to resolve itself.
	ExternalNames map[string]Resolution
}

// Resolution is what one DNS name resolved to, or why it did not.
type Resolution struct {
	Addrs []netip.Addr
	Err   string
}

// Object finds an object of the snapshot by kind (Service, ConfigMap or a route kind),
// namespace and name; nil when it is not there.
func (s *Snapshot) Object(kind, namespace, name string) metav1.Object {
	if kind == "Service" {
		if svc := s.Services[types.NamespacedName{Namespace: namespace, Name: name}]; svc != nil {
			return svc.GetObjectMeta()
		}
		return nil
	}
	if kind == "ConfigMap" {
		// A BackendTLSPolicy's CA certificates, which Kong may refuse.
		if cm := s.ConfigMaps[types.NamespacedName{Namespace: namespace, Name: name}]; cm != nil {
			return cm
		}
		return nil
	}
	switch kind {
	case "HTTPRoute":
		return find(s.HTTPRoutes, namespace, name)
	case "GRPCRoute":
		return find(s.GRPCRoutes, namespace, name)
	case "TLSRoute":
		return find(s.TLSRoutes, namespace, name)
	case "TCPRoute":
		return find(s.TCPRoutes, namespace, name)
	case "UDPRoute":
		return find(s.UDPRoutes, namespace, name)
	}
	return nil
}

func find[T metav1.Object](list []T, namespace, name string) metav1.Object {
	for _, o := range list {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}
