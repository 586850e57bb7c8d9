package informers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/konglet/konglet/sync/snapshot"
)

func ptr[T any](v T) *T { return &v }

func TestTrimKeepsWhatKongletReads(t *testing.T) {
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r",
		Annotations:   map[string]string{lastApplied: `{"big":"copy"}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	if _, err := trim(route); err != nil {
		t.Fatal(err)
	}
	if route.ManagedFields != nil || route.Annotations[lastApplied] != "" || route.Annotations["keep"] != "me" {
		t.Fatalf("trimmed route: %+v", route.ObjectMeta)
	}
}

// slimCache is a Cache whose transform can be called without informers.
func slimCache() *Cache {
	return &Cache{scope: Scope{ControllerName: snapshot.DefaultControllerName, PodNamespace: "kong"},
		bound: map[types.NamespacedName]bool{{Namespace: "kong", Name: "kong"}: true}, intern: newInterner()}
}

// TestTransformSlimsServicesAndEndpointSlices: the cached copies keep every
// field the translation and the status writer read, and only those.
func TestTransformSlimsServicesAndEndpointSlices(t *testing.T) {
	c := slimCache()
	meta := func(ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "u", ResourceVersion: "7", Generation: 2,
			Labels: map[string]string{"app": "web", discoveryv1.LabelServiceName: "web"}, Annotations: map[string]string{
				snapshot.UpstreamModeAnnotation: snapshot.UpstreamModeService, "endpoints.kubernetes.io/last-change-trigger-time": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web"}}, Finalizers: []string{"f"}}
	}
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), AppProtocol: ptr("kubernetes.io/h2c")}}
	service := func(ns string) *corev1.Service {
		return &corev1.Service{ObjectMeta: meta(ns), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports,
			Selector: map[string]string{"app": "web"}, ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"},
			ExternalIPs: []string{"192.0.2.1"}, SessionAffinity: corev1.ServiceAffinityClientIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.2"}}},
				Conditions: []metav1.Condition{{Type: "x"}}}}
	}
	wantService := &snapshot.Service{Namespace: "app", Name: "web", UID: "u", ResourceVersion: "7", Type: corev1.ServiceTypeLoadBalancer, Ports: ports,
		ClusterIPs: []string{"10.0.0.1", "fd00::1"}, ExternalIPs: []string{"192.0.2.1"},
		LoadBalancer: []corev1.LoadBalancerIngress{{IP: "192.0.2.2"}}, UpstreamMode: snapshot.UpstreamModeService}
	got, _ := c.transform(service("app"))
	if !reflect.DeepEqual(got, wantService) {
		t.Errorf("Service:\n got %+v\nwant %+v", got, wantService)
	}
	// In konglet's own namespace the selector tells the publish Service.
	got, _ = c.transform(service("kong"))
	if sel := got.(*snapshot.Service).Selector; !reflect.DeepEqual(sel, map[string]string{"app": "web"}) {
		t.Errorf("Service in the Pod's namespace: selector %v", sel)
	}

	slice := func(ns string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: meta(ns), AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(false)},
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: "u", ResourceVersion: "7"},
					NodeName:  ptr("node"), Zone: ptr("a"), Hostname: ptr("h")},
				{Addresses: []string{"10.1.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Terminating: ptr(true)}},
			}}
	}
	wantSlice := &snapshot.EndpointSlice{Namespace: "app", Name: "web", ServiceName: "web", ResourceVersion: "7", AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints: []snapshot.Endpoint{{Addresses: []string{"10.1.0.1"}, Ready: true}, {Addresses: []string{"10.1.0.2"}}}}
	got, _ = c.transform(slice("app"))
	if !reflect.DeepEqual(got, wantSlice) {
		t.Errorf("EndpointSlice:\n got %+v\nwant %+v", got, wantSlice)
	}
	// Behind the publish Service, the Pods tell konglet's replicas.
	got, _ = c.transform(slice("kong"))
	want := corev1.ObjectReference{Kind: "Pod", Namespace: "kong", Name: "p"}
	if ref := got.(*snapshot.EndpointSlice).Endpoints[0].TargetRef; ref == nil || *ref != want {
		t.Errorf("EndpointSlice in the Pod's namespace: targetRef %v", ref)
	}
}

// TestTransformSlimsPods: a Pod of konglet's namespace keeps its IPs,
// conditions, labels, UID and container ports, and nothing else of what
// the chart's Kong Pod carries.
func TestTransformSlimsPods(t *testing.T) {
	ports := []corev1.ContainerPort{{Name: "proxy", ContainerPort: 8000, Protocol: corev1.ProtocolTCP}}
	conditions := []corev1.PodCondition{{Type: "konglet.dev/config-loaded", Status: corev1.ConditionTrue, Reason: "Loaded", Message: "abc"}}
	ips := []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kong", Name: "kong-a", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "kong"},
			Annotations: map[string]string{"a": "b"}, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "kong"}}},
		Spec: corev1.PodSpec{NodeName: "node", Volumes: []corev1.Volume{{Name: "v"}}, Containers: []corev1.Container{
			{Name: "proxy", Image: "kong:3.9", Ports: ports, Env: []corev1.EnvVar{{Name: "KONG_DATABASE", Value: "off"}}, Args: []string{"kong"}},
			{Name: "konglet", Image: "konglet", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.5", PodIPs: ips, HostIP: "192.0.2.9", Conditions: conditions,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Ready: true}}},
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kong", Name: "kong-a", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "kong"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Ports: ports}, {Name: "konglet"}}},
		Status:     corev1.PodStatus{PodIPs: ips, Conditions: conditions},
	}
	if got, _ := slimCache().transform(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("Pod:\n got %+v\nwant %+v", got, want)
	}
}

// TestTransformKeepsStubsOfRoutesOfOtherGateways: a route that names no
// bound Gateway keeps its parentRefs (what decides that) and, only when
// konglet wrote part of it, its status; one that names a bound Gateway or
// a ListenerSet is kept whole.
func TestTransformKeepsStubsOfRoutesOfOtherGateways(t *testing.T) {
	c := slimCache()
	ref := func(kind, ns, name string) gwv1.ParentReference {
		r := gwv1.ParentReference{Name: gwv1.ObjectName(name), Kind: ptr(gwv1.Kind(kind))}
		if ns != "" {
			r.Namespace = ptr(gwv1.Namespace(ns))
		}
		return r
	}
	status := func(controller string) gwv1.HTTPRouteStatus {
		return gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{
			ParentRef: ref("Gateway", "kong", "kong"), ControllerName: gwv1.GatewayController(controller)}}}}
	}
	route := func(ns string, st gwv1.HTTPRouteStatus, refs ...gwv1.ParentReference) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: refs}, Hostnames: []gwv1.Hostname{"a.example"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{}}}}}, Status: st}
	}
	for _, tc := range []struct {
		name             string
		in               *gwv1.HTTPRoute
		whole, keepsOurs bool
	}{
		{"bound Gateway", route("app", status("other"), ref("Gateway", "kong", "kong")), true, false},
		{"bound Gateway, same namespace", route("kong", status("other"), ref("Gateway", "", "kong")), true, false},
		{"ListenerSet", route("app", status("other"), ref("ListenerSet", "", "set")), true, false},
		{"other Gateway", route("app", status("other"), ref("Gateway", "kong", "other")), false, false},
		{"same name, other namespace", route("app", status("other"), ref("Gateway", "", "kong")), false, false},
		{"Service (mesh)", route("app", status("other"), gwv1.ParentReference{Group: ptr(gwv1.Group("")), Kind: ptr(gwv1.Kind("Service")), Name: "kong",
			Namespace: ptr(gwv1.Namespace("kong"))}), false, false},
		{"other Gateway, our old status", route("app", status(snapshot.DefaultControllerName), ref("Gateway", "kong", "other")), false, true},
	} {
		got, _ := c.transform(tc.in.DeepCopy())
		r := got.(*gwv1.HTTPRoute)
		switch {
		case tc.whole && !reflect.DeepEqual(r, tc.in):
			t.Errorf("%s: not kept whole: %+v", tc.name, r)
		case !tc.whole && (r.Spec.Rules != nil || r.Spec.Hostnames != nil || !reflect.DeepEqual(r.Spec.ParentRefs, tc.in.Spec.ParentRefs)):
			t.Errorf("%s: stub spec %+v", tc.name, r.Spec)
		case !tc.whole && tc.keepsOurs != (len(r.Status.Parents) == 1):
			t.Errorf("%s: stub status %+v", tc.name, r.Status)
		}
		if matters := c.mayMatter(r); matters != (tc.whole || tc.keepsOurs) {
			t.Errorf("%s: mayMatter = %v", tc.name, matters)
		}
	}
}

// TestTransformSharesWhatRecursAcrossRoutes: two routes decoded apart come
// out of the transform unchanged in value, pointing at one copy of what
// they have in common.
func TestTransformSharesWhatRecursAcrossRoutes(t *testing.T) {
	c := slimCache()
	route := func(name string) *gwv1.HTTPRoute {
		parent := gwv1.ParentReference{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: ptr(gwv1.Kind("Gateway")), Namespace: ptr(gwv1.Namespace("kong")), Name: "kong"}
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("app")), Name: name},
			Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
				Rules: []gwv1.HTTPRouteRule{{
					Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}}},
					BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{Weight: ptr(int32(1)),
						BackendObjectReference: gwv1.BackendObjectReference{Kind: ptr(gwv1.Kind("Service")), Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(80))}}}},
				}}},
			Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{ParentRef: parent,
				ControllerName: gwv1.GatewayController(string([]byte(snapshot.DefaultControllerName))),
				Conditions:     []metav1.Condition{{Type: string([]byte("Accepted")), Status: "True", Reason: "Accepted", Message: string([]byte("ok"))}}}}}}}
	}
	var got []*gwv1.HTTPRoute
	for _, name := range []string{"a", "b"} {
		in := route(name)
		out, _ := c.transform(in.DeepCopy())
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("route %s changed:\n got %+v\nwant %+v", name, out, in)
		}
		got = append(got, out.(*gwv1.HTTPRoute))
	}
	a, b := got[0], got[1]
	rule := func(r *gwv1.HTTPRoute) gwv1.HTTPRouteRule { return r.Spec.Rules[0] }
	same := map[string]bool{
		"namespace":             unsafe.StringData(a.Namespace) == unsafe.StringData(b.Namespace),
		"parentRef kind":        a.Spec.ParentRefs[0].Kind == b.Spec.ParentRefs[0].Kind,
		"status parentRef kind": a.Status.Parents[0].ParentRef.Kind == b.Status.Parents[0].ParentRef.Kind,
		"controller name":       unsafe.StringData(string(a.Status.Parents[0].ControllerName)) == unsafe.StringData(string(b.Status.Parents[0].ControllerName)),
		"condition message":     unsafe.StringData(a.Status.Parents[0].Conditions[0].Message) == unsafe.StringData(b.Status.Parents[0].Conditions[0].Message),
		"path type":             rule(a).Matches[0].Path.Type == rule(b).Matches[0].Path.Type,
		"backend port":          rule(a).BackendRefs[0].Port == rule(b).BackendRefs[0].Port,
		"backend weight":        rule(a).BackendRefs[0].Weight == rule(b).BackendRefs[0].Weight,
	}
	for what, shared := range same {
		if !shared {
			t.Errorf("%s not shared", what)
		}
	}
}

// TestTransformSharesWhatRecursAcrossBackends: Services and EndpointSlices
// likewise share their namespace and port names, protocols and numbers.
func TestTransformSharesWhatRecursAcrossBackends(t *testing.T) {
	c := slimCache()
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("app")), Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: string([]byte("http")), Protocol: corev1.Protocol([]byte("TCP")), Port: 80}}}}
	}
	slice := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("app")), Name: name},
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}}}
	}
	sa, _ := c.transform(svc("a"))
	sb, _ := c.transform(svc("b"))
	ea, _ := c.transform(slice("a"))
	eb, _ := c.transform(slice("b"))
	a, b := sa.(*snapshot.Service), sb.(*snapshot.Service)
	x, y := ea.(*snapshot.EndpointSlice), eb.(*snapshot.EndpointSlice)
	if !reflect.DeepEqual(a.Ports, svc("a").Spec.Ports) || !reflect.DeepEqual(x.Ports, slice("a").Ports) {
		t.Fatalf("ports changed: %+v %+v", a.Ports, x.Ports)
	}
	same := map[string]bool{
		"Service namespace":       unsafe.StringData(a.Namespace) == unsafe.StringData(b.Namespace),
		"Service port name":       unsafe.StringData(a.Ports[0].Name) == unsafe.StringData(b.Ports[0].Name),
		"EndpointSlice namespace": unsafe.StringData(x.Namespace) == unsafe.StringData(a.Namespace),
		"EndpointSlice port":      x.Ports[0].Name == y.Ports[0].Name && x.Ports[0].Port == y.Ports[0].Port && x.Ports[0].Protocol == y.Ports[0].Protocol,
	}
	for what, shared := range same {
		if !shared {
			t.Errorf("%s not shared", what)
		}
	}
}

// TestNumerousKindsHaveNoNamespaceIndex: the informers of Services,
// EndpointSlices (like every Kubernetes kind's), HTTPRoutes and GRPCRoutes
// keep no index (the cache lists them whole), which would hold every
// object's key once more.
func TestNumerousKindsHaveNoNamespaceIndex(t *testing.T) {
	c, err := New(kubefake.NewClientset(), gwfake.NewClientset(), Scope{ControllerName: snapshot.DefaultControllerName}, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	indexers := map[string]cache.Indexers{}
	for i, inf := range c.informers {
		indexers[fmt.Sprintf("Kubernetes kind %d", i)] = inf.GetIndexer().GetIndexers()
	}
	for _, f := range c.factories {
		if f, ok := f.(gwinformers.SharedInformerFactory); ok && indexers["HTTPRoute"] == nil {
			indexers["HTTPRoute"] = f.Gateway().V1().HTTPRoutes().Informer().GetIndexer().GetIndexers()
			indexers["GRPCRoute"] = f.Gateway().V1().GRPCRoutes().Informer().GetIndexer().GetIndexers()
		}
	}
	// Services, EndpointSlices, Namespaces, and the route kinds.
	if len(indexers) != 5 {
		t.Fatalf("informers found: %v", indexers)
	}
	for kind, ix := range indexers {
		if len(ix) != 0 {
			t.Errorf("%s informer has indexes %v", kind, ix)
		}
	}
}

// TestInternerKeepsNoLongStrings: a long value (a condition message may be
// 32 KiB) is not kept by the interner, which outlives the objects.
func TestInternerKeepsNoLongStrings(t *testing.T) {
	in := newInterner()
	long := strings.Repeat("m", maxInternedLen+1)
	if got := in.str(long); got != long {
		t.Fatalf("str changed the value")
	}
	short := "Accepted"
	in.str(short)
	if _, kept := in.strs[long]; kept || len(in.strs) != 1 {
		t.Errorf("the interner keeps %d strings (the long one: %v), want only the short one", len(in.strs), kept)
	}
}
