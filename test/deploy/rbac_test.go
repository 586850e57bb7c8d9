package deploy

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestRBACIsExactlyEnough applies deploy/rbac/*.yaml to a real API server,
// runs konglet as its ServiceAccount (a Pod-bound token from the TokenRequest
// API, the credentials a Pod gets) through a recording proxy, and runs a
// scenario that needs every permission, as named checks (scenario_test.go).
// All must pass, with no request refused. Then, for each rule of each
// (Cluster)Role, the scenario runs again without that rule, in fresh
// namespaces with a fresh ClusterRole: at least one named check must fail,
// or the rule is superfluous.
func TestRBACIsExactlyEnough(t *testing.T) {
	manifests, err := loadRBAC()
	if err != nil {
		t.Fatal(err)
	}
	lay, err := layoutOf(manifests)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("from deploy/rbac: ServiceAccount %s, Pods in %s, Gateway %s, Lease %s",
		lay.ServiceAccount, lay.PodNamespace, lay.Gateway, lay.Lease)

	// Each run lives in its own namespaces: the manifests' namespaces are
	// renamed <id>-<namespace>, the cluster-scoped names suffixed -<id>.
	// (-count=N runs again in the same cluster: later rounds prefix the ids.)
	rbacRounds++
	prefix := ""
	if rbacRounds > 1 {
		prefix = fmt.Sprintf("x%d-", rbacRounds)
	}
	relocation := func(id string) map[string]string {
		ns := map[string]string{}
		for _, n := range manifests.namespaces() {
			ns[n] = id + "-" + n
		}
		return ns
	}

	// The manifests exactly as they are (the first round): every check passes.
	baseSpec := scenarioSpec{id: prefix + "base", rbac: manifests, layout: lay, deadline: 45 * time.Second}
	if prefix != "" {
		ns := relocation(baseSpec.id)
		baseSpec.rbac, baseSpec.layout = manifests.relocated(ns, "-"+baseSpec.id), lay.relocated(ns)
	}
	base, err := runScenario(baseSpec)
	if err != nil {
		t.Fatal(err)
	}
	if base.raced {
		t.Errorf("the race detector reported a data race in konglet:\n%s", base.logs)
	}
	if base.crashed {
		t.Errorf("konglet exited during the run:\n%s", tail(base.logs, 40))
	}
	if failing := base.failing(); len(failing) > 0 {
		t.Fatalf("with deploy/rbac as it is, checks fail (a missing permission?)%s\nrequests refused: %v\nkonglet logs:\n%s",
			base.describeFailures(), forbidden(base.requests), base.logs)
	}
	t.Logf("every check passed after %v", base.elapsed.Round(time.Millisecond))
	if f := forbidden(base.requests); len(f) > 0 {
		t.Errorf("with deploy/rbac as it is, the API server refused konglet (a missing rule): %v", f)
	}
	checkSecretReads(t, base.requests, baseSpec.layout.Gateway.Namespace)
	logUnusedGrants(t, manifests, base.requests)

	// One run per rule, without it. Runs are independent (own namespaces,
	// ClusterRole, GatewayClass and controllerName), so a few go at once.
	type outcome struct {
		ref ruleRef
		res *scenarioResult
		err error
	}
	refs := manifests.rules()
	outcomes := make([]outcome, len(refs))
	run := func(i int, deadline time.Duration, round string) outcome {
		id := fmt.Sprintf("%sr%02d%s", prefix, i, round)
		ns := relocation(id)
		res, err := runScenario(scenarioSpec{
			id:       id,
			rbac:     manifests.without(refs[i]).relocated(ns, "-"+id),
			layout:   lay.relocated(ns),
			deadline: deadline,
		})
		return outcome{refs[i], res, err}
	}
	const parallel = 4
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			outcomes[i] = run(i, 8*time.Second, "")
		}()
	}
	wg.Wait()
	// A run in which checks fail although the API server refused nothing
	// was only slow (a missing permission always shows as a 403): once more,
	// alone and with more time.
	for i, o := range outcomes {
		if o.err == nil && len(o.res.failing()) > 0 && len(forbidden(o.res.requests)) == 0 {
			t.Logf("%s: checks failed with no request refused; running it again with more time", manifests.describe(o.ref))
			outcomes[i] = run(i, 25*time.Second, "-again")
		}
	}

	for _, o := range outcomes {
		role := o.ref.Kind + "-" + o.ref.Name
		if o.ref.Namespace != "" {
			role = o.ref.Kind + "-" + o.ref.Namespace + "-" + o.ref.Name
		}
		t.Run(fmt.Sprintf("without/%s/rule-%d", role, o.ref.Index), func(t *testing.T) {
			rule := manifests.describe(o.ref)
			if o.err != nil {
				t.Fatalf("%s: %v", rule, o.err)
			}
			if o.res.raced {
				t.Errorf("the race detector reported a data race in konglet:\n%s", o.res.logs)
			}
			if o.res.crashed {
				t.Errorf("konglet exited during the run without %s (it must keep retrying):\n%s", rule, tail(o.res.logs, 40))
			}
			failing := o.res.failing()
			refused := forbidden(o.res.requests)
			if len(failing) == 0 {
				t.Errorf("superfluous RBAC rule: every named check passed without %s (requests refused: %v)", rule, refused)
				return
			}
			// Extra evidence, not the verdict: what the API server refused
			// and how often konglet logged it.
			t.Logf("without %s: refused %v; konglet logged %q %d times; failing:%s",
				rule, refused, "forbidden", strings.Count(o.res.logs, "forbidden"), o.res.describeFailures())
			if len(refused) == 0 {
				t.Errorf("without %s checks failed but the API server refused nothing: the failure is not explained by RBAC%s\nkonglet's last logs:\n%s",
					rule, o.res.describeFailures(), tail(o.res.logs, 40))
			}
		})
	}
}

// tail is the last n lines of konglet's logs, without debug lines.
func tail(logs string, n int) string {
	var lines []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"level":"DEBUG`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// rbacRounds counts the rounds of TestRBACIsExactlyEnough in this process.
var rbacRounds int

// checkSecretReads: konglet reads only the Secret its listener names, by
// name and type, in the Gateway's namespace; never a Secret by "get", never
// across the cluster, never another selector. So no other Secret reaches it,
// even where its Role would allow (list and watch on the namespace's
// Secrets: RBAC cannot grant by type).
func checkSecretReads(t *testing.T, reqs []apiRequest, gatewayNamespace string) {
	t.Helper()
	seen := 0
	for _, r := range reqs {
		a, ok := r.attributes()
		if !ok || a.Group != "" || a.Resource != "secrets" {
			continue
		}
		seen++
		fs := r.Query.Get("fieldSelector")
		if (a.Verb != "list" && a.Verb != "watch") || a.Name != "" || a.Namespace != gatewayNamespace ||
			fs != "metadata.name=secure-cert,type=kubernetes.io/tls" {
			t.Errorf("konglet read Secrets beyond its listener's: %s (fieldSelector %q)", a, fs)
		}
	}
	if seen == 0 {
		t.Errorf("konglet never listed Secrets, yet the HTTPS listener was served: the recording proxy missed requests")
	}
}

// logUnusedGrants lists what the RBAC grants and konglet never asked for in
// the scenario. Information only: a verb like "get" is used on update
// conflicts, which the scenario does not provoke.
func logUnusedGrants(t *testing.T, s *rbacSet, reqs []apiRequest) {
	t.Helper()
	used := map[string]bool{}
	for _, r := range reqs {
		if a, ok := r.attributes(); ok {
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			used[grant(a.Verb, a.Group, res)] = true
		}
	}
	var unused []string
	note := func(rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if k := grant(v, g, res); !used[k] && !slices.Contains(unused, k) {
							unused = append(unused, k)
						}
					}
				}
			}
		}
	}
	for _, r := range s.ClusterRoles {
		note(r.Rules)
	}
	for _, r := range s.Roles {
		note(r.Rules)
	}
	// client-go's informers list through a watch (WatchListClient: a watch
	// with sendInitialEvents, authorized as "watch"), so "list" shows here
	// while the API server supports that; a client falls back to list
	// otherwise.
	t.Logf("granted but not requested in the scenario: %s", strings.Join(unused, "; "))
}

func grant(verb, group, resource string) string {
	if group == "" {
		return verb + " " + resource
	}
	return verb + " " + group + "/" + resource
}
