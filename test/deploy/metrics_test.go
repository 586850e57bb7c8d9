package deploy

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// documentedMetric is one row of the catalogue in docs/metrics.md.
type documentedMetric struct {
	names  []string            // metric names, or prefixes ending in "*"
	typ    string              // counter, gauge, histogram, or "various"
	labels map[string][]string // label name -> documented values (may be empty)
	// buckets is the documented histogram range, in seconds (0 when not said).
	minBucket, maxBucket float64
}

// catalogue parses the table under "## Catalogue" in docs/metrics.md.
func catalogue(t *testing.T) []documentedMetric {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Catalogue\n")
	if !ok {
		t.Fatal(`docs/metrics.md has no "## Catalogue" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	code := regexp.MustCompile("`([^`]+)`")
	bucketRange := regexp.MustCompile(`\(([\d.]+) (ms|s) to ([\d.]+) (ms|s) buckets\)`)
	seconds := func(v, unit string) float64 {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("bucket bound %q: %v", v, err)
		}
		if unit == "ms" {
			f /= 1000
		}
		return f
	}
	var header []string
	var out []documentedMetric
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if strings.Trim(cells[0], "-: ") == "" {
			continue // the |---| line
		}
		col := func(name string) string {
			i := slices.Index(header, name)
			if i < 0 || i >= len(cells) {
				t.Fatalf("catalogue: no %q column in %v", name, header)
			}
			return cells[i]
		}
		m := documentedMetric{labels: map[string][]string{}}
		for _, c := range code.FindAllStringSubmatch(col("metric"), -1) {
			m.names = append(m.names, c[1])
		}
		typ := col("type")
		m.typ, _, _ = strings.Cut(typ, " ")
		if r := bucketRange.FindStringSubmatch(typ); r != nil {
			m.minBucket, m.maxBucket = seconds(r[1], r[2]), seconds(r[3], r[4])
		}
		for _, part := range strings.Split(col("labels"), ";") {
			words := code.FindAllStringSubmatch(part, -1)
			if len(words) == 0 {
				continue
			}
			var values []string
			for _, w := range words[1:] {
				values = append(values, w[1])
			}
			m.labels[words[0][1]] = values
		}
		if len(m.names) == 0 {
			t.Fatalf("catalogue row without a metric name: %s", line)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatal("the catalogue table is empty")
	}
	return out
}

var typeNames = map[dto.MetricType]string{
	dto.MetricType_COUNTER:   "counter",
	dto.MetricType_GAUGE:     "gauge",
	dto.MetricType_HISTOGRAM: "histogram",
	dto.MetricType_SUMMARY:   "summary",
	dto.MetricType_UNTYPED:   "untyped",
}

// TestMetricCatalogue runs konglet with one route loaded into the Kong
// double, scrapes /metrics and compares it with the catalogue of
// docs/metrics.md: every documented metric is exported with its documented
// type (and labels, and histogram range), and every konglet_* metric that is
// exported is documented.
func TestMetricCatalogue(t *testing.T) {
	documented := catalogue(t)
	families := scrapeWithOneRoute(t)

	exact := map[string]bool{}
	for _, d := range documented {
		for _, name := range d.names {
			if prefix, ok := strings.CutSuffix(name, "*"); ok {
				if !slices.ContainsFunc(slices.Collect(maps.Keys(families)), func(n string) bool { return strings.HasPrefix(n, prefix) }) {
					t.Errorf("documented %s: no such metric exported", name)
				}
				continue
			}
			exact[name] = true
			mf, ok := families[name]
			if !ok {
				t.Errorf("documented %s is not exported", name)
				continue
			}
			if got := typeNames[mf.GetType()]; got != d.typ {
				t.Errorf("%s is a %s, documented as a %s", name, got, d.typ)
			}
			checkLabels(t, mf, d.labels)
			if d.typ == "histogram" && d.maxBucket > 0 {
				checkBuckets(t, mf, d.minBucket, d.maxBucket)
			}
		}
	}
	var undocumented []string
	for name := range families {
		if strings.HasPrefix(name, "konglet_") && !exact[name] {
			t.Errorf("%s is exported but not in docs/metrics.md's catalogue", name)
		}
		covered := exact[name] || slices.ContainsFunc(documented, func(d documentedMetric) bool {
			return slices.ContainsFunc(d.names, func(n string) bool {
				p, ok := strings.CutSuffix(n, "*")
				return ok && strings.HasPrefix(name, p)
			})
		})
		if !covered {
			undocumented = append(undocumented, name)
		}
	}
	if len(undocumented) > 0 {
		slices.Sort(undocumented)
		t.Logf("exported, neither konglet_* nor in the catalogue: %v", undocumented)
	}
}

// checkLabels: the exported label names are the documented ones, and their
// values are among the documented values (when the catalogue lists some).
func checkLabels(t *testing.T, mf *dto.MetricFamily, want map[string][]string) {
	t.Helper()
	for _, m := range mf.GetMetric() {
		var names []string
		for _, lp := range m.GetLabel() {
			names = append(names, lp.GetName())
			if values, ok := want[lp.GetName()]; ok && len(values) > 0 && !slices.Contains(values, lp.GetValue()) {
				t.Errorf("%s{%s=%q}: value not in the documented %v", mf.GetName(), lp.GetName(), lp.GetValue(), values)
			}
		}
		wantNames := slices.Sorted(maps.Keys(want))
		slices.Sort(names)
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s has labels %v, documented %v", mf.GetName(), names, wantNames)
		}
	}
}

// checkBuckets: the histogram's finite buckets go from min to max.
func checkBuckets(t *testing.T, mf *dto.MetricFamily, min, max float64) {
	t.Helper()
	for _, m := range mf.GetMetric() {
		var bounds []float64
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
		if len(bounds) == 0 || bounds[0] != min || bounds[len(bounds)-1] != max {
			t.Errorf("%s buckets %v, documented from %gs to %gs", mf.GetName(), bounds, min, max)
		}
	}
}

// metricRounds counts the rounds of TestMetricCatalogue in this process.
var metricRounds int

// scrapeWithOneRoute runs konglet (as the test's admin) against the double
// with one HTTPRoute, waits for it to be served, and parses /metrics.
func scrapeWithOneRoute(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	ctx := context.Background()
	metricRounds++
	ns := fmt.Sprintf("metrics-%d", metricRounds) // -count=N reuses the cluster
	controller := "konglet.dev/" + ns
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(env.GW.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(controller)}}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_ = env.GW.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "kong-proxy", Namespace: ns}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "kong"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "app"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
	} {
		must(env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}))
	}
	must(env.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "app-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.30"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{}))
	must(env.GW.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "kong", Namespace: ns},
		Spec:       gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}},
	}, metav1.CreateOptions{}))
	must(env.GW.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "kong"}}},
			Hostnames:       []gwv1.Hostname{"app.example.com"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "app", Port: ptr(gwv1.PortNumber(80))}}}}}},
		},
	}, metav1.CreateOptions{}))

	kong := kongdouble.New(kongdouble.Options{})
	t.Cleanup(kong.Close)
	p := startKonglet(t, env.Kubeconfig, kong.URL(), "--gateway", ns+"/kong", "--publish-service", ns+"/kong-proxy",
		"--controller-name", controller)
	eventually(t, 20*time.Second, "the route is served and konglet is ready", func() error {
		d, ok := kong.Route(kongdouble.Request{ListenPort: 8000, Host: "app.example.com", Path: "/"})
		if !ok || len(d.Targets) != 1 || d.Targets[0].Target != "198.18.0.30:8080" {
			return fmt.Errorf("app.example.com is not routed to 198.18.0.30:8080 (%v)", d.Targets)
		}
		resp, err := http.Get(p.Metrics() + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	resp, err := http.Get(p.Metrics() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return families
}
