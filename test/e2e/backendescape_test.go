package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// An escape is one way a route author could try to make Kong connect
// somewhere it must not (its own admin API on loopback above all), and
// what konglet must say about it on the route.
type escape struct {
	name      string
	service   corev1.ServiceSpec
	endpoints []string // addresses of a hand-written EndpointSlice
	reason    string
	message   string // a part of the ResolvedRefs message
}

// TestBackendEscapes: with ExternalName Services allowed, every backend
// that would reach Kong's admin API, cloud metadata, "this host" or
// another namespace's Service without a ReferenceGrant is refused on its
// route with the reason, while a good route beside them is served; no
// such address ever reaches Kong's configuration.
func TestBackendEscapes(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	other, dbIP := w.otherTeamDB()
	externalName := func(name string) corev1.ServiceSpec {
		return corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: name}
	}
	selectorless := corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 8001}}}
	escapes := []escape{
		{name: "name-localhost", service: externalName("localhost"), reason: "RefNotPermitted", message: "a loopback address"},
		{name: "ip-loopback", service: externalName("127.0.0.1"), reason: "RefNotPermitted", message: "a loopback address"},
		{name: "ip-metadata", service: externalName("169.254.169.254"), reason: "RefNotPermitted", message: "link-local"},
		{name: "ip-unspecified", service: externalName("0.0.0.0"), reason: "RefNotPermitted", message: "unspecified"},
		{name: "ip-other-clusterip", service: externalName(dbIP), reason: "RefNotPermitted", message: "the ClusterIP of Service " + other + "/db"},
		{name: "name-unresolvable", service: externalName("nothing.konglet.invalid"), reason: "BackendNotFound", message: "does not resolve"},
		{name: "slice-other-clusterip", service: selectorless, endpoints: []string{"198.18.0.30", dbIP}, reason: "RefNotPermitted", message: "the ClusterIP of Service " + other + "/db"},
		// The API server itself refuses these in EndpointSlices today;
		// konglet does not count on it.
		{name: "slice-loopback", service: selectorless, endpoints: []string{"127.0.0.1"}, reason: "RefNotPermitted", message: "a loopback address"},
		{name: "slice-metadata", service: selectorless, endpoints: []string{"169.254.169.254"}, reason: "RefNotPermitted", message: "link-local"},
	}
	w.backend(w.ns, "good", 80, 8080, "198.18.0.20")
	w.create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "partner", Namespace: w.ns}, Spec: externalName("192.0.2.10")})
	var tried []escape
	for _, e := range escapes {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: w.ns}, Spec: e.service}
		if _, err := env.Kube.CoreV1().Services(w.ns).Create(w.ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Service %s: %v", e.name, err)
		}
		if e.endpoints != nil {
			var eps []discoveryv1.Endpoint
			for _, a := range e.endpoints {
				eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}})
			}
			slice := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: e.name, Namespace: w.ns, Labels: map[string]string{discoveryv1.LabelServiceName: e.name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("web"), Port: ptr(int32(8001))}},
				Endpoints:   eps,
			}
			if _, err := env.Kube.DiscoveryV1().EndpointSlices(w.ns).Create(w.ctx, slice, metav1.CreateOptions{}); err != nil {
				t.Logf("the API server refuses the EndpointSlice of %s itself: %v", e.name, err)
				continue
			}
		}
		tried = append(tried, e)
		w.create(w.route(e.name, []string{e.name + ".example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", e.name, 8001, 1)}}))
	}
	w.create(w.route("good", []string{"good.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}))
	// A host rewrite changes the Host header Kong sends, never where it
	// connects.
	w.create(w.route("rewrite", []string{"rewrite.example.com"}, gwv1.HTTPRouteRule{
		Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite,
			URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: ptr(gwv1.PreciseHostname("localhost"))}}},
		BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}))
	w.create(w.route("partner", []string{"partner.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "partner", 443, 1)}}))
	startKonglet(t, kong, append(w.kongletArgs(), "--allow-external-name")...)

	eventually(t, 10*time.Second, "the good route and the allowed ExternalName are served", func() error {
		return errors.Join(expectTargets(kong, "good.example.com", "/", "198.18.0.20:8080")(),
			expectTargets(kong, "rewrite.example.com", "/", "198.18.0.20:8080")(),
			expectTargets(kong, "partner.example.com", "/", "192.0.2.10:443")())
	})
	for _, e := range tried {
		eventually(t, 10*time.Second, e.name+" is refused on its route", func() error {
			return w.routeCondSays(e.name, "ResolvedRefs", metav1.ConditionFalse, e.reason, e.message)
		})
	}
	if err := noForbiddenTarget(kong.RawConfig()); err != nil {
		t.Fatal(err)
	}
}

// TestAClusterIPTakenLaterRefusesTheBackend: a route is served with an
// endpoint at an address no Service holds; then another namespace's
// Service takes that address as its ClusterIP. The route's backend is
// refused at once, although nothing of the route, its Service or its
// EndpointSlice changed (the translation's Memo translates again the
// routes with an address at a cluster IP that changed hands), while a
// route beside it stays served.
func TestAClusterIPTakenLaterRefusesTheBackend(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	// A free ClusterIP: one the API server allocates, released again.
	other := w.ns + "-b"
	w.create(namespace(other))
	w.create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: other},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "sql", Port: 5432}}}})
	probe, err := env.Kube.CoreV1().Services(other).Get(w.ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := probe.Spec.ClusterIP
	if err := env.Kube.CoreV1().Services(other).Delete(w.ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.backend(w.ns, "web", 80, 8080, "198.18.0.40", free)
	w.backend(w.ns, "good", 80, 8080, "198.18.0.41")
	w.create(w.route("web", []string{"web.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "web", 80, 1)}}))
	w.create(w.route("good", []string{"good.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)
	both := []string{"198.18.0.40:8080", free + ":8080"}
	slices.Sort(both) // Kong's targets are listed in order
	eventually(t, 10*time.Second, "both routes served, web at both endpoints", func() error {
		return errors.Join(expectTargets(kong, "web.example.com", "/", both...)(),
			expectTargets(kong, "good.example.com", "/", "198.18.0.41:8080")())
	})
	// The address may take a moment to be free again.
	eventually(t, 10*time.Second, "another namespace's Service takes the address as its ClusterIP", func() error {
		_, err := env.Kube.CoreV1().Services(other).Create(w.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: other},
			Spec: corev1.ServiceSpec{ClusterIP: free, Ports: []corev1.ServicePort{{Name: "sql", Port: 5432}}}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier try created it
		}
		return err
	})
	eventually(t, 10*time.Second, "the backend at the taken address is refused", func() error {
		return w.routeCondSays("web", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", "the ClusterIP of Service "+other+"/db")
	})
	eventually(t, 10*time.Second, "Kong no longer targets the taken address, and still serves the other route", func() error {
		if strings.Contains(string(kong.RawConfig()), free+":8080") {
			return fmt.Errorf("%s:8080 is still a target", free)
		}
		return expectTargets(kong, "good.example.com", "/", "198.18.0.41:8080")()
	})
}

// TestAKongPodsIPGivenLaterRefusesTheBackend: a route is served with an
// endpoint at an address no Pod holds; then a new Kong replica gets that
// IP (in a status update, as the kubelet gives it). The backend is refused
// at once: the Kong Pods' status ports listen on their IPs.
func TestAKongPodsIPGivenLaterRefusesTheBackend(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.createPod("kong-a")
	w.createPod("kong-b") // a replica scheduled, with no IP yet
	w.backend(w.ns, "web", 80, 8080, "198.18.0.50", "198.18.0.51")
	w.create(w.route("web", []string{"web.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "web", 80, 1)}}))
	startKonglet(t, kong, append(w.kongletArgs(), "--pod-name", "kong-a", "--pod-namespace", w.ns)...)
	eventually(t, 10*time.Second, "the route served at both endpoints", expectTargets(kong, "web.example.com", "/", "198.18.0.50:8080", "198.18.0.51:8080"))
	pod, err := env.Kube.CoreV1().Pods(w.ns).Get(w.ctx, "kong-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP, pod.Status.PodIPs = "198.18.0.51", []corev1.PodIP{{IP: "198.18.0.51"}}
	if _, err := env.Kube.CoreV1().Pods(w.ns).UpdateStatus(w.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the backend at the new replica's IP is refused", func() error {
		return w.routeCondSays("web", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", "the address of a Kong Pod")
	})
	eventually(t, 10*time.Second, "Kong no longer targets the replica", func() error {
		if strings.Contains(string(kong.RawConfig()), "198.18.0.51:8080") {
			return fmt.Errorf("198.18.0.51:8080 is still a target")
		}
		return nil
	})
}

// TestExternalNameOffByDefault: without --allow-external-name an
// ExternalName backend is refused with a message that names the flag.
func TestExternalNameOffByDefault(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	w.create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "partner", Namespace: w.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "192.0.2.10"}})
	w.create(w.route("partner", []string{"partner.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "partner", 80, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)
	eventually(t, 10*time.Second, "the ExternalName backend is refused", func() error {
		return w.routeCondSays("partner", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", "--allow-external-name")
	})
	if err := noForbiddenTarget(kong.RawConfig()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kong.RawConfig()), "192.0.2.10") {
		t.Fatal("the ExternalName's address reached Kong")
	}
}

// noForbiddenTarget checks every target of a loaded configuration.
func noForbiddenTarget(raw []byte) error {
	var cfg struct {
		Upstreams []struct {
			Name    string `json:"name"`
			Targets []struct {
				Target string `json:"target"`
			} `json:"targets"`
		} `json:"upstreams"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	for _, u := range cfg.Upstreams {
		for _, target := range u.Targets {
			ap, err := netip.ParseAddrPort(target.Target)
			if err != nil {
				return fmt.Errorf("upstream %s: target %q is not an address (Kong would resolve it)", u.Name, target.Target)
			}
			if a := ap.Addr().Unmap(); a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() {
				return fmt.Errorf("upstream %s targets %s", u.Name, target.Target)
			}
		}
	}
	return nil
}

// TestServiceModeChecksEndpointsToo: in Service mode (for a mesh) Kong is
// given the Service's DNS name, which for a headless Service resolves to
// its endpoints: a hand-written one with another namespace's ClusterIP is
// refused there too, while a good Service is served by name.
func TestServiceModeChecksEndpointsToo(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	other, dbIP := w.otherTeamDB()
	w.backend(w.ns, "good", 80, 8080, "198.18.0.21")
	w.create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: w.ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "web", Port: 5432}}}})
	w.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "headless", Namespace: w.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("web"), Port: ptr(int32(5432))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{dbIP}}},
	})
	w.create(w.route("good", []string{"good.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "good", 80, 1)}}))
	w.create(w.route("headless", []string{"headless.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "headless", 5432, 1)}}))
	startKonglet(t, kong, append(w.kongletArgs(), "--service-upstream")...)

	eventually(t, 10*time.Second, "the good Service is served by its name", expectTargets(kong, "good.example.com", "/", "good."+w.ns+".svc:80"))
	eventually(t, 10*time.Second, "the headless Service with another namespace's ClusterIP is refused", func() error {
		return w.routeCondSays("headless", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", other+"/db")
	})
	if strings.Contains(string(kong.RawConfig()), "headless."+w.ns+".svc") {
		t.Fatal("the refused Service's name reached Kong")
	}
}

// TestExactHeaderThatLooksLikeAKongRegex: on Kong's traditional_compatible
// router a header value that starts with ~* is a regex; an Exact match
// written so must match only that very value, not everything (~*.*).
func TestExactHeaderThatLooksLikeAKongRegex(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{RouterFlavor: "traditional_compatible"})
	defer kong.Close()
	w := newWorld(t)
	w.backend(w.ns, "app", 80, 8080, "198.18.0.22")
	w.create(w.route("token", []string{"app.example.com"}, gwv1.HTTPRouteRule{
		Matches:     []gwv1.HTTPRouteMatch{{Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Token", Value: "~*.*"}}}},
		BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)},
	}))
	startKonglet(t, kong, w.kongletArgs()...)
	request := func(token string) kongdouble.Request {
		return kongdouble.Request{ListenPort: 8000, Host: "app.example.com", Path: "/", Method: "GET", Headers: http.Header{"X-Token": {token}}}
	}
	eventually(t, 10*time.Second, "the exact value is routed", func() error {
		if _, ok := kong.Route(request("~*.*")); !ok {
			return fmt.Errorf("X-Token: ~*.* is not routed")
		}
		return nil
	})
	if d, ok := kong.Route(request("anything")); ok {
		t.Fatalf("X-Token: anything is routed by %s: the exact match became a regex", d.RouteName)
	}
}

// otherTeamDB creates a Service in a namespace of another team, which no
// ReferenceGrant opens to this world's routes, and returns the namespace
// and the ClusterIP the API server gave it.
func (w *world) otherTeamDB() (string, string) {
	w.t.Helper()
	other := w.ns + "-b"
	w.create(namespace(other))
	w.create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: other},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "sql", Port: 5432}}}})
	db, err := env.Kube.CoreV1().Services(other).Get(w.ctx, "db", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return other, db.Spec.ClusterIP
}
