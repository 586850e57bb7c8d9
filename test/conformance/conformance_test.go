package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/konglet/konglet/test/cluster"
)

const (
	gatewayClass   = "konglet"
	controllerName = "konglet.dev/gateway-controller"
	// harnessNamespace holds a Gateway of the class that exists before the
	// suite starts, as in a real install: konglet accepts a GatewayClass
	// (and reports its supportedFeatures) from a Gateway it is bound to,
	// and the suite waits for an Accepted class before it creates any.
	harnessNamespace = "konglet-conformance"
)

// TestConformance runs the upstream Gateway API conformance suite against
// konglet processes, Kong doubles with a real data plane, a real
// kube-apiserver and kube-controller-manager, and simulated Pods.
//
// KONGLET_CONFORMANCE_PROFILES (default GATEWAY-HTTP, GATEWAY-GRPC,
// GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP) picks the profiles; only the
// features konglet claims that belong to them are tested. TLS, TCP and UDP
// go through the double's stream data plane to the echo image's TCP, TLS
// and UDP modes (and CoreDNS) that podSim plays.
// KONGLET_CONFORMANCE_RUN_TEST runs one test by its short name.
// KONGLET_CONFORMANCE_ROUTER (default expressions) is the Kong router
// flavor of every Kong double: expressions or traditional_compatible.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes minutes")
	}
	flavor := os.Getenv("KONGLET_CONFORMANCE_ROUTER")
	if flavor == "" {
		flavor = "expressions"
	}
	if flavor != "expressions" && flavor != "traditional_compatible" {
		t.Fatalf("KONGLET_CONFORMANCE_ROUTER=%q: want expressions or traditional_compatible", flavor)
	}
	reports := filepath.Join(repoRoot(), "test", "conformance", "reports")
	logDir := filepath.Join(reports, "logs", flavor)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	env, err := cluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	stopKCM, err := startControllerManager(env.Kubeconfig, filepath.Join(logDir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopKCM)

	konglet := filepath.Join(t.TempDir(), "konglet")
	build := exec.Command("go", "build", "-o", konglet, "github.com/konglet/konglet/cmd/konglet")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building konglet: %v\n%s", err, out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	harnessLog, err := os.Create(filepath.Join(logDir, "harness.log"))
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(harnessLog, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
	t.Cleanup(func() { harnessLog.Close() })

	// The harness plays kubelets and a provisioner: its own clients, not
	// throttled like the suite's.
	harnessCfg := rest.CopyConfig(env.Config)
	harnessCfg.QPS, harnessCfg.Burst = 200, 400
	harnessKube, err := kubernetes.NewForConfig(harnessCfg)
	if err != nil {
		t.Fatal(err)
	}
	harnessGW, err := gwclient.NewForConfig(harnessCfg)
	if err != nil {
		t.Fatal(err)
	}
	harnessEnv := &cluster.Cluster{Config: harnessCfg, Kube: harnessKube, GW: harnessGW, Kubeconfig: env.Kubeconfig}

	pods := newPodSim(harnessKube, logf)
	podsErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); podsErr <- pods.run(ctx) }()

	prov := newProvisioner(harnessEnv, gatewayClass, flavor, konglet, logDir, pods.resolve, logf)
	wg.Add(1)
	go func() { defer wg.Done(); prov.run(ctx) }()

	// The GatewayClass and a Gateway of the harness, so that konglet
	// accepts the class before the suite starts.
	if _, err := env.GW.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayClass},
		Spec:       gwv1.GatewayClassSpec{ControllerName: controllerName},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harnessNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := env.GW.GatewayV1().Gateways(harnessNamespace).Create(ctx, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "class-holder"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gatewayClass, Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimed := waitForClassFeatures(t, env, 2*time.Minute)
	t.Logf("konglet claims: %v", sets.List(claimed))

	profiles := []suite.ConformanceProfileName{
		suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName,
		suite.GatewayTLSConformanceProfileName, suite.GatewayTCPConformanceProfileName, suite.GatewayUDPConformanceProfileName,
	}
	if v := os.Getenv("KONGLET_CONFORMANCE_PROFILES"); v != "" {
		profiles = suite.ParseConformanceProfilesSlice(v)
	}
	inProfiles := sets.New[features.FeatureName]()
	for _, name := range profiles {
		p, ok := profileByName(name)
		if !ok {
			t.Fatalf("unknown conformance profile %q", name)
		}
		inProfiles = inProfiles.Union(p.CoreFeatures).Union(p.ExtendedFeatures)
	}
	supported := claimed.Intersection(inProfiles)
	// KONGLET_CONFORMANCE_UNCLAIMED names features konglet builds but does
	// not claim (a test of theirs cannot pass on Kong; docs/features.md):
	// they are tested too, and the reports go to files of their own
	// (-unclaimed), so that the claimed run stays what konglet claims.
	var unclaimed []features.FeatureName
	for _, f := range strings.Split(os.Getenv("KONGLET_CONFORMANCE_UNCLAIMED"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			unclaimed = append(unclaimed, features.FeatureName(f))
		}
	}
	if len(unclaimed) > 0 {
		supported.Insert(unclaimed...)
		reports = filepath.Join(reports, "unclaimed")
		if err := os.MkdirAll(reports, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The suite's clients, with controller-runtime's defaults (its
	// config.GetConfig sets QPS 20 and burst 30), as the upstream suite runs.
	suiteCfg := rest.CopyConfig(env.Config)
	suiteCfg.QPS, suiteCfg.Burst = 20, 30
	suiteKube, err := kubernetes.NewForConfig(suiteCfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(suiteCfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtimeScheme) error{v1alpha3.Install, v1alpha2.Install, xv1alpha1.Install, gwv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}

	results := &testResults{byName: map[string]testOutcome{}}
	timeouts := config.DefaultTimeoutConfig()
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     gatewayClass,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			SupportedFeatures:    sets.List(supported),
			TimeoutConfig:        timeouts,
			SkipTests:            harnessSkips(),
			RunTest:              os.Getenv("KONGLET_CONFORMANCE_RUN_TEST"),
			Mode:                 flavor,
			Implementation: confv1.Implementation{
				Organization: "konglet",
				Project:      "konglet",
				URL:          "https://github.com/konglet/konglet",
				Version:      "dev",
				Contact:      []string{"@konglet/maintainers"},
			},
			ConformanceProfiles: profiles,
		},
		Client:     c,
		Clientset:  suiteKube,
		RestConfig: suiteCfg,
		ManifestFS: []fs.FS{&gwconformance.Manifests},
		Hook:       results.record,
	}
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The suite reports only once its run is over, which its own cleanup
	// of t marks: this cleanup, registered first, runs after it.
	t.Cleanup(func() {
		writeReports(t, cSuite, results, reports, flavor, claimed, supported, profiles, opts.RunTest != "")
	})
	cSuite.Setup(t, tests.ConformanceTests)
	if err := cSuite.Run(t, tests.ConformanceTests); err != nil {
		t.Error(err)
	}
	select {
	case err := <-podsErr:
		if err != nil {
			t.Errorf("pod simulator: %v", err)
		}
	default:
	}
}

type runtimeScheme = runtime.Scheme

func writeReports(t *testing.T, cSuite *suite.ConformanceTestSuite, results *testResults, dir, flavor string,
	claimed, supported sets.Set[features.FeatureName], profiles []suite.ConformanceProfileName, oneTest bool) {
	report, err := cSuite.Report()
	if err != nil {
		t.Error(err)
		return
	}
	file := filepath.Join(dir, "konglet-"+flavor+"-report.yaml")
	// The suite lists profiles in map order and dates its report: sorted,
	// and dated as the report on file where nothing else differs, the
	// reports change only when results do (make test writes them).
	slices.SortFunc(report.ProfileReports, func(a, b confv1.ProfileReport) int { return strings.Compare(a.Name, b.Name) })
	keepDateIfUnchanged(report, file)
	reasons, err := featureReasons(filepath.Join("..", "..", "docs", "features.md"))
	if err != nil {
		t.Error(err)
	}
	summary := results.summary(report, flavor, claimed, supported, profiles)
	unclaimed, undocumented := unclaimedSection(report, claimed, reasons)
	summary += unclaimed
	if len(undocumented) > 0 {
		t.Errorf("features not claimed without a row in docs/features.md saying why: %v", undocumented)
	}
	if oneTest {
		t.Logf("summary (not written: a one-test run)\n%s", summary)
		return
	}
	raw, err := yaml.Marshal(report)
	if err != nil {
		t.Error(err)
		return
	}
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SUMMARY-"+flavor+".md"), []byte(summary), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("report: %s\n%s", file, summary)
}

// keepDateIfUnchanged gives report the date of the report in file when
// they differ in nothing else.
func keepDateIfUnchanged(report *confv1.ConformanceReport, file string) {
	old, err := os.ReadFile(file)
	if err != nil {
		return
	}
	var previous confv1.ConformanceReport
	if yaml.Unmarshal(old, &previous) != nil {
		return
	}
	date := report.Date
	report.Date = previous.Date
	if raw, err := yaml.Marshal(report); err != nil || !bytes.Equal(raw, old) {
		report.Date = date
	}
}

func profileByName(name suite.ConformanceProfileName) (suite.ConformanceProfile, bool) {
	for _, p := range []suite.ConformanceProfile{
		suite.GatewayHTTPConformanceProfile, suite.GatewayTLSConformanceProfile, suite.GatewayTCPConformanceProfile,
		suite.GatewayUDPConformanceProfile, suite.GatewayGRPCConformanceProfile,
	} {
		if p.Name == name {
			return p, true
		}
	}
	return suite.ConformanceProfile{}, false
}

// waitForClassFeatures waits for konglet to accept the GatewayClass and
// returns the features it lists in status.supportedFeatures.
func waitForClassFeatures(t *testing.T, env *cluster.Cluster, timeout time.Duration) sets.Set[features.FeatureName] {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		gwc, err := env.GW.GatewayV1().GatewayClasses().Get(context.Background(), gatewayClass, metav1.GetOptions{})
		if err == nil && len(gwc.Status.SupportedFeatures) > 0 {
			for _, c := range gwc.Status.Conditions {
				if c.Type == string(gwv1.GatewayClassConditionStatusAccepted) && c.Status == metav1.ConditionTrue {
					out := sets.New[features.FeatureName]()
					for _, f := range gwc.Status.SupportedFeatures {
						out.Insert(features.FeatureName(f.Name))
					}
					return out
				}
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("GatewayClass %s not Accepted with supportedFeatures after %v (last: %v, %v)", gatewayClass, timeout, err, gwc)
		case <-poll.C:
		}
	}
}

// testOutcome is one test's result as the suite's hook saw it.
type testOutcome struct {
	test   suite.ConformanceTest
	result string // passed, failed, skipped
	why    string
}

type testResults struct {
	mu     sync.Mutex
	byName map[string]testOutcome
}

func (r *testResults) record(t *testing.T, test suite.ConformanceTest, s *suite.ConformanceTestSuite) {
	o := testOutcome{test: test, result: "passed"}
	switch {
	case t.Failed():
		o.result = "failed"
	case t.Skipped():
		o.result = "skipped"
		switch {
		case s.SkipTests.Has(test.ShortName):
			o.why = "skipped by the harness: " + harnessSkipReasons[test.ShortName]
		case !s.SupportedFeatures.HasAll(test.Features...):
			var missing []string
			for _, f := range test.Features {
				if !s.SupportedFeatures.Has(f) {
					missing = append(missing, string(f))
				}
			}
			o.why = "not supported: " + strings.Join(missing, ", ")
		case test.Provisional:
			o.why = "provisional"
		default:
			o.why = "skipped by the test"
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byName[test.ShortName] = o
}

// harnessSkipReasons are tests this harness cannot run honestly, with why.
var harnessSkipReasons = map[string]string{}

func harnessSkips() []string {
	out := make([]string, 0, len(harnessSkipReasons))
	for name := range harnessSkipReasons {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// failureCauses explains known failures (read from the test logs): a
// konglet bug, or a limit of the double or the harness.
var failureCauses = map[string]string{
	"GatewayWithAttachedRoutes": "konglet bug: a listener whose certificateRefs do not resolve (ResolvedRefs=False) is not usable " +
		"(sync/translate/gateway.go listener.usable), so routes never attach to it and its attachedRoutes stays 0; " +
		"the spec counts the routes attached to a listener whatever its own conditions",
	"HTTPRouteHostnameIntersection": "konglet bug (real Kong too, per kong/router/fields.lua as the double models it): listener " +
		"isolation matches net.dst.port, which Kong takes from the Host header's port when there is one; a request with " +
		"Host very.specific.com:1234 on port 80 has net.dst.port 1234 and matches no route (404), where Gateway API " +
		"matches hostnames without the port",
}

// passedWithoutChecking are tests that pass without checking anything
// for what konglet claims, with why.
var unclaimedFailureCauses = map[string]string{
	"BackendTLSPolicyConflictResolution": "impossible in Kong 3.9: the test expects the client's Host (abc.example.com) at the " +
		"backend together with the policy's hostname (other.example.com) as SNI; Kong sends one value, $upstream_host, as both " +
		"the Host header and the TLS server name (nginx_kong.lua: proxy_ssl_name $upstream_host), and konglet sets it to the " +
		"policy's hostname so that SNI and verification are the spec's. The conflict statuses themselves pass",
}

var passedWithoutChecking = map[string]string{
	"TLSRouteListenerMixedTerminationNotSupported": "checks nothing: it returns at once because konglet claims TLSRouteModeMixed " +
		"(TLSRouteMixedTerminationSameNamespace is the test of that claim)",
}

func (r *testResults) summary(report *confv1.ConformanceReport, flavor string, claimed, tested sets.Set[features.FeatureName], profiles []suite.ConformanceProfileName) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# Gateway API conformance: konglet (Kong router flavor %s)\n\n", flavor)
	fmt.Fprintf(&b, "Suite: sigs.k8s.io/gateway-api/conformance v1.6.3, Gateway API %s (%s channel). Date: %s.\n\n", report.GatewayAPIVersion, report.GatewayAPIChannel, report.Date)
	fmt.Fprintf(&b, "Run with `make conformance` (test/conformance). konglet runs as a process per Gateway against a Kong admin API double "+
		"with a data plane (test/kongdouble/dataplane.go, streamproxy.go for TLS, TCP and UDP), a real kube-apiserver and kube-controller-manager, and Pods played by the harness "+
		"(Pod IPs in 198.18.0.0/15, echo servers on loopback). Gateway addresses are loopback IPs 127.0.1.N.\n\n")
	fmt.Fprintf(&b, "Profiles: %v. Features konglet claims (GatewayClass status): %s.\n\nFeatures tested in this run: %s.\n\n",
		profiles, joinFeatures(claimed), joinFeatures(tested))
	b.WriteString("| profile | core | extended |\n|---|---|---|\n")
	for _, p := range report.ProfileReports { // sorted by writeReports
		ext := ""
		if p.Extended != nil {
			ext = statusLine(p.Extended.Status)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Name, statusLine(p.Core), ext)
	}
	counts := map[string]int{}
	names := make([]string, 0, len(r.byName))
	for n, o := range r.byName {
		names = append(names, n)
		counts[o.result]++
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "\nAll tests run by the suite: %d passed, %d failed, %d skipped.\n", counts["passed"], counts["failed"], counts["skipped"])
	for _, section := range []string{"failed", "passed", "skipped"} {
		fmt.Fprintf(&b, "\n## %s\n\n", section)
		for _, n := range names {
			o := r.byName[n]
			if o.result != section {
				continue
			}
			line := "- " + n
			switch {
			case section == "failed" && failureCauses[n] != "":
				line += ": " + failureCauses[n]
			case section == "failed" && unclaimedFailureCauses[n] != "":
				line += ": " + unclaimedFailureCauses[n]
			case section == "failed":
				line += ": cause not analysed yet (see the test log)"
			case section == "passed" && passedWithoutChecking[n] != "":
				line += ": " + passedWithoutChecking[n]
			case o.why != "":
				line += ": " + o.why
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// unclaimedSection lists the extended features of the run's profiles that
// konglet does not claim, each with why: the last column of its row in
// docs/features.md. undocumented are those without a row.
func unclaimedSection(report *confv1.ConformanceReport, claimed sets.Set[features.FeatureName], reasons map[string]string) (section string, undocumented []string) {
	unsupported := sets.New[string]()
	for _, p := range report.ProfileReports {
		if p.Extended != nil {
			unsupported.Insert(p.Extended.UnsupportedFeatures...)
		}
	}
	var b strings.Builder
	b.WriteString("\n## extended features not claimed, and why (from docs/features.md)\n\n")
	for _, f := range sets.List(unsupported) {
		if claimed.Has(features.FeatureName(f)) {
			continue
		}
		why, ok := reasons[f]
		if !ok {
			undocumented = append(undocumented, f)
			why = "no row in docs/features.md"
		}
		fmt.Fprintf(&b, "- %s: %s\n", f, why)
	}
	return b.String(), undocumented
}

// featureReasons reads docs/features.md's table: for each feature a row's
// first cell names, the row's last cell (how it is done, or why not).
func featureReasons(path string) (map[string]string, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := tableCells(line)
		if len(cells) < 4 || cells[1] == "expressions" { // not a row, or the header
			continue
		}
		for _, f := range featureName.FindAllString(cells[0], -1) {
			if _, seen := out[f]; !seen {
				out[f] = cells[len(cells)-1]
			}
		}
	}
	return out, nil
}

var featureName = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]+\b`)

// tableCells splits a Markdown table row on the pipes that are not escaped
// (\|), trimmed; nil for a line that is not a row.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	var cells []string
	start := 1
	for i := 1; i < len(line); i++ {
		if line[i] == '|' && line[i-1] != '\\' {
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return cells
}

func statusLine(s confv1.Status) string {
	return fmt.Sprintf("%s: %d passed, %d failed, %d skipped", s.Result, s.Passed, s.Failed, s.Skipped)
}

func joinFeatures(s sets.Set[features.FeatureName]) string {
	l := sets.List(s)
	out := make([]string, len(l))
	for i, f := range l {
		out[i] = string(f)
	}
	return strings.Join(out, ", ")
}
