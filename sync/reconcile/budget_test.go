package reconcile

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

func ref(ns, name string) translate.ObjectRef {
	return translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: ns, Name: name}
}

func TestLeaveOutCutsTheNamespaceThatTakesTheMost(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// The attacker was first and split 60 bytes over six routes, each
	// smaller than the victim's one route of 25.
	var shares []share
	for i := range 6 {
		shares = append(shares, share{ref: ref("attacker", fmt.Sprint("r", i)), size: 10, created: t0})
	}
	shares = append(shares, share{ref: ref("victim", "big"), size: 25, created: t0.Add(time.Hour)},
		share{ref: ref("other", "small"), size: 5, created: t0.Add(time.Hour)})
	out := Budget{Total: 100}.leaveOut(20, shares) // 20 + 60 + 25 + 5 = 110
	if len(out) != 1 {
		t.Fatalf("left out %v, want one attacker route", out)
	}
	for r, v := range out {
		if r.Namespace != "attacker" || v.size != 10 || !strings.Contains(v.message, "10 bytes") || !strings.Contains(v.message, "100 bytes") ||
			!strings.Contains(v.message, "--max-config-bytes") {
			t.Fatalf("left out %v: %+v", r, v)
		}
	}
	// Cut down to the victim's 25: now the two namespaces take the same,
	// and the tie goes by namespace name, then by the newest route.
	out = Budget{Total: 75}.leaveOut(20, shares) // cut 35 or more
	for r := range out {
		if r.Namespace != "attacker" {
			t.Fatalf("left out %v of %v: the attacker's namespace still takes more", r, out)
		}
	}
	if len(out) != 4 {
		t.Fatalf("left out %d routes, want 4: %v", len(out), out)
	}
}

func TestLeaveOutPerObjectAndNothingWhenRoutesAreNotTheCause(t *testing.T) {
	shares := []share{{ref: ref("a", "huge"), size: 70}, {ref: ref("b", "fine"), size: 30}}
	out := Budget{Total: 1000, PerObject: 50}.leaveOut(10, shares)
	if v, ok := out[ref("a", "huge")]; len(out) != 1 || !ok || !strings.Contains(v.message, "70 bytes") ||
		!strings.Contains(v.message, "50 bytes one object may take (--max-object-config-bytes)") {
		t.Fatalf("left out %v", out)
	}
	// Certificates and upstreams alone are over the limit: cutting routes
	// cannot help, and none is cut for it.
	if out := (Budget{Total: 100}).leaveOut(150, shares); len(out) != 0 {
		t.Fatalf("left out %v although the rest alone is over", out)
	}
	if out := (Budget{}).leaveOut(150, shares); len(out) != 0 {
		t.Fatalf("no budget left out %v", out)
	}
}

const budgetBase = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: konglet}
spec: {controllerName: konglet.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong, generation: 1}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
`

// service is the backend of a namespace's routes.
func service(ns string) string {
	return fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: %s}\nspec: {ports: [{port: 80}]}\n", ns)
}

// route is an HTTPRoute of ns with n exact-path matches of 200 bytes.
func route(ns, name string, generation, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s, namespace: %s, generation: %d}\n", name, ns, generation)
	b.WriteString("spec:\n  parentRefs: [{name: gw, namespace: kong}]\n  rules:\n  - backendRefs: [{name: a, port: 80}]\n    matches:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - path: {type: Exact, value: /%s-%d-%s}\n", name, i, strings.Repeat("x", 200))
	}
	return b.String()
}

type fakeCache struct{ snap *snapshot.Snapshot }

func (c *fakeCache) WaitForSync(context.Context) bool { return true }
func (c *fakeCache) Snapshot(snapshot.Kong) (*snapshot.Snapshot, error) {
	return c.snap, nil
}
func (c *fakeCache) StatusSnapshot() (*snapshot.Snapshot, error) { return c.snap, nil }
func (c *fakeCache) Notify()                                     {}
func (c *fakeCache) Wait(context.Context) error                  { return nil }
func (c *fakeCache) WaitStatus(context.Context) error            { return nil }

func (c *fakeCache) set(t *testing.T, yaml string) {
	t.Helper()
	c.snap = snapshotOf(t, yaml)
}

// snapshotOf builds the snapshot that set(yaml) would hold.
func snapshotOf(t *testing.T, yaml string) *snapshot.Snapshot {
	t.Helper()
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(yaml), "test"); err != nil {
		t.Fatal(err)
	}
	return objs.Build(snapshot.DefaultControllerName, nil, snapshotPublish, snapshot.DefaultKong(snapshot.RouterExpressions))
}

var snapshotPublish = types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}

// fakeKong takes any document, as Kong would behind a large enough limit.
type fakeKong struct{ loaded []byte }

func (k *fakeKong) Info(context.Context) (admin.Info, error) {
	return admin.Info{RouterFlavor: snapshot.RouterExpressions, ProxyListeners: []admin.Listen{{Port: 8000}}, PortMaps: map[int]int{80: 8000}}, nil
}
func (k *fakeKong) ConfigHash(context.Context) (string, error) {
	return declarative.Hash(k.loaded), nil
}
func (k *fakeKong) Load(_ context.Context, doc []byte) error {
	k.loaded = doc
	return nil
}
func (k *fakeKong) HasUpstream(context.Context, string) (bool, error) { return k.loaded != nil, nil }

// accepted returns the Accepted condition of a route's one parent.
func accepted(t *testing.T, l *Loop, ns, name string) (bool, string) {
	t.Helper()
	var job statusJob
	select {
	case job = <-l.statuses:
	default:
		t.Fatal("no statuses offered")
	}
	// Put it back for the next look of the same sync.
	l.statuses <- job
	parents := job.status.Routes[ref(ns, name)]
	if len(parents) != 1 {
		t.Fatalf("%s/%s has %d parents", ns, name, len(parents))
	}
	for _, c := range parents[0].Conditions {
		if c.Type == string(gwv1.RouteConditionAccepted) {
			return c.Status == "True", c.Message
		}
	}
	t.Fatalf("%s/%s has no Accepted", ns, name)
	return false, ""
}

func TestSyncLeavesOutWhatIsOverBudgetAndLetsItBackIn(t *testing.T) {
	cache, kong := &fakeCache{}, &fakeKong{}
	l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()),
		Options{Budget: Budget{Total: 45_000, PerObject: 40_000}})
	// An edit bumps the generation: the big route's is its match count.
	objects := func(bigMatches, goodGeneration int) string {
		return budgetBase + service("big") + service("good") +
			route("big", "big", bigMatches, bigMatches) + route("good", "one", goodGeneration, 20) + route("good", "two", 1, 20)
	}

	// A match is about 365 bytes of configuration: 150 are 55 kB, over the
	// per-object limit.
	cache.set(t, objects(150, 1))
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, msg := accepted(t, l, "big", "big"); ok || !strings.Contains(msg, "above the 40000 bytes one object may take") {
		t.Fatalf("big route: accepted %v, %q", ok, msg)
	}
	if ok, _ := accepted(t, l, "good", "one"); !ok || strings.Contains(string(kong.loaded), "/big-") || !strings.Contains(string(kong.loaded), "/one-19-") {
		t.Fatalf("good route accepted %v; loaded %d bytes", ok, len(kong.loaded))
	}

	// 95 matches (35 kB) fit per object, but not with the good routes'
	// 15 kB under 45 kB: the big namespace takes the most.
	cache.set(t, objects(95, 1))
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, msg := accepted(t, l, "big", "big"); ok || !strings.Contains(msg, "above the 45000 bytes Kong takes (--max-config-bytes)") {
		t.Fatalf("big route: accepted %v, %q", ok, msg)
	}
	if len(kong.loaded) > 45_000 || !strings.Contains(string(kong.loaded), "/two-19-") {
		t.Fatalf("loaded %d bytes", len(kong.loaded))
	}

	// The good routes keep loading their edits.
	edited := strings.Replace(objects(95, 2), "/one-19-", "/one-edited-", 1)
	cache.set(t, edited)
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kong.loaded), "/one-edited-") {
		t.Fatal("an edit of a good route was not loaded")
	}

	// With the good namespace gone, the big route fits again and comes back
	// although it did not change.
	cache.set(t, budgetBase+service("big")+route("big", "big", 95, 95))
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, msg := accepted(t, l, "big", "big"); !ok || !strings.Contains(string(kong.loaded), "/big-94-") {
		t.Fatalf("big route not back: accepted %v, %q", ok, msg)
	}
	if len(l.refusals) != 0 {
		t.Fatalf("refusals left: %v", l.refusals.describe())
	}
}

func TestClearlyFitsOnlyWhenNoRouteCanBeOver(t *testing.T) {
	b := Budget{Total: 10_000, PerObject: 1_600}
	for _, c := range []struct {
		doc   int
		sizes []int
		want  bool
	}{
		{1_500, []int{1_500}, true},     // the whole document is within PerObject
		{5_000, []int{100, 100}, true},  // 16 services of 100 cannot pass 1,600
		{5_000, []int{101, 100}, false}, // 16 of 101 could: sum per route
		{10_001, []int{1}, false},       // over Total
	} {
		if got := b.clearlyFits(c.doc, c.sizes, 0); got != c.want {
			t.Errorf("clearlyFits(%d, %v) = %v", c.doc, c.sizes, got)
		}
	}
}

// caBundle is n self-signed CA certificates in PEM.
func caBundle(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: fmt.Sprint("ca-", i)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	return b.String()
}

// TestCACertificatesCountInTheRoutesShare: the CA certificates a
// BackendTLSPolicy brings are part of the share of the routes whose
// backends use them. A tenant's small route to a backend with a large CA
// bundle is left out, the bundle with it, and the others keep loading (the
// bundle counted as nobody's put the document over budget for good).
func TestCACertificatesCountInTheRoutesShare(t *testing.T) {
	bundle := caBundle(t, 40)
	objects := budgetBase + service("good") + route("good", "one", 1, 20) + service("evil") + route("evil", "small", 1, 1) + fmt.Sprintf(`---
apiVersion: v1
kind: ConfigMap
metadata: {name: bundle, namespace: evil}
data: {ca.crt: %q}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: tls, namespace: evil, generation: 1}
spec:
  targetRefs: [{group: "", kind: Service, name: a}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: bundle}], hostname: a.example.com}
`, bundle)
	for _, b := range []Budget{{Total: 15_000}, {Total: 1 << 20, PerObject: 10_000}} {
		cache, kong := &fakeCache{}, &fakeKong{}
		l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()),
			Options{Budget: b})
		cache.set(t, objects)
		if err := l.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ok, msg := accepted(t, l, "evil", "small"); ok || !strings.Contains(msg, "left out of Kong's configuration") {
			t.Errorf("budget %+v: the route with the large CA bundle: accepted %v, %q", b, ok, msg)
		}
		if ok, _ := accepted(t, l, "good", "one"); !ok || !strings.Contains(string(kong.loaded), "/one-19-") {
			t.Errorf("budget %+v: the good route accepted %v, loaded %d bytes", b, ok, len(kong.loaded))
		}
		if strings.Contains(string(kong.loaded), "ca_certificates") {
			t.Errorf("budget %+v: the CA bundle was loaded", b)
		}
	}
}
