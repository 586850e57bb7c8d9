package translate_test

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestHeaderModifiersKongCannotTakeAreSaid: a header filter that Kong's
// transformer plugins would refuse (names the Gateway API allows but Kong
// does not, control characters) or change (a value's leading colons) drops
// its rule with the reason on the route; the configuration of the other
// routes still loads.
func TestHeaderModifiersKongCannotTakeAreSaid(t *testing.T) {
	filter := func(typ, field, spec string) string {
		return "  - filters: [{type: " + typ + ", " + field + ": " + spec + "}]\n" + backend
	}
	request := func(spec string) string { return filter("RequestHeaderModifier", "requestHeaderModifier", spec) }
	response := func(spec string) string { return filter("ResponseHeaderModifier", "responseHeaderModifier", spec) }
	for _, c := range []struct {
		name, rules, refused string // refused: what the route's Accepted message says ("" if served)
	}{
		{"set-dot", request(`{set: [{name: x.trace, value: a}]}`), `header name "x.trace"`},
		{"remove-dot", request(`{remove: [x.trace]}`), `header name "x.trace"`},
		{"add-bang", response(`{add: [{name: "x!", value: a}]}`), `header name "x!"`},
		{"control", request(`{set: [{name: x-a, value: "a\u0001b"}]}`), "control characters"},
		{"colon", response(`{set: [{name: x-a, value: ":a"}]}`), "starts with a colon"},
		{"template", request(`{add: [{name: x-a, value: "$(uri)"}]}`), "template"},
		{"response-remove-dot", response(`{remove: [x.trace]}`), ""},
		{"plain", request(`{set: [{name: X_A-b, value: "a:b c"}], remove: [x-old]}`), ""},
	} {
		for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
			objects := precedenceBase + route("ns", "other", "", "[]", "  - matches: [{path: {value: /other}}]\n"+backend) +
				route("ns", "r", "", "[]", c.rules)
			res := translate.Translate(buildSnapshot(t, objects, types.NamespacedName{}, snapshot.DefaultKong(flavor)), nil)
			ref := translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: "r"}
			accepted := ""
			for _, p := range res.Status.Routes[ref] {
				for _, cond := range p.Conditions {
					if cond.Type == string(gwv1.RouteConditionAccepted) {
						accepted = string(cond.Status) + " " + cond.Message
					}
				}
			}
			switch {
			case c.refused == "" && !strings.HasPrefix(accepted, "True"):
				t.Errorf("%s (%s): not served: %q", c.name, flavor, accepted)
			case c.refused != "" && (!strings.HasPrefix(accepted, "False") || !strings.Contains(accepted, c.refused)):
				t.Errorf("%s (%s): Accepted %q, want False naming %s", c.name, flavor, accepted, c.refused)
			}
			doc, err := declarativeJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			if status, body := load(double(flavor), doc); status != http.StatusCreated {
				t.Errorf("%s (%s): Kong refused the configuration: %d %s", c.name, flavor, status, body)
			}
			if !strings.Contains(string(doc), "httproute.ns.other.") {
				t.Errorf("%s (%s): the other route is not in the configuration", c.name, flavor)
			}
		}
	}
}
