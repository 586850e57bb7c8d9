package translate

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRuleNamesSpellEachName: the names cut from one string are those
// spelt one by one, for any count of matches and placements (two-digit
// indexes included), and a rule without routes still names its service.
func TestRuleNamesSpellEachName(t *testing.T) {
	r := route{kind: kindHTTPRoute, meta: &metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	for _, rule := range []int{0, 12} {
		service := entityKinds[r.kind] + ".ns.web." + strconv.Itoa(rule)
		for matches := range 4 {
			for places := range 13 {
				names := newRuleNames(r, rule, matches, places)
				if got := names.serviceName(); got != service {
					t.Fatalf("service %q, want %q", got, service)
				}
				for mi := range matches {
					for pi := range places {
						if got, want := names.route(mi, pi), service+"."+strconv.Itoa(mi)+"."+strconv.Itoa(pi); got != want {
							t.Fatalf("route %q, want %q", got, want)
						}
					}
				}
			}
		}
	}
}
