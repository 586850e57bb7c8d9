package translate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestFieldsNotServedAreSaid: a field konglet does not serve, or serves
// only approximately, is said on the route, never dropped in silence.
func TestFieldsNotServedAreSaid(t *testing.T) {
	objects := precedenceBase +
		route("ns", "sticky", "", "[]", "  - matches: [{path: {value: /a}}]\n    sessionPersistence: {sessionName: s}\n"+backend+
			"  - matches: [{path: {value: /b}}]\n"+backend) +
		route("ns", "timeout", "", "[]", "  - timeouts: {request: 5s}\n"+backend)
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(objects), "dropped"); err != nil {
		t.Fatal(err)
	}
	res := translate.Translate(objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
	conditionOf := func(name, typ string) string {
		ref := translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: name}
		for _, p := range res.Status.Routes[ref] {
			for _, c := range p.Conditions {
				if c.Type == typ {
					return string(c.Status) + " " + c.Reason + ": " + c.Message
				}
			}
		}
		return ""
	}
	if got := conditionOf("sticky", string(gwv1.RouteConditionPartiallyInvalid)); !strings.Contains(got, "sessionPersistence is not supported") {
		t.Errorf("sticky: PartiallyInvalid %q", got)
	}
	if got := conditionOf("timeout", string(gwv1.RouteConditionAccepted)); !strings.HasPrefix(got, "True Accepted: rule 0: timeouts.request is served as Kong's read and write timeouts") {
		t.Errorf("timeout: Accepted %q", got)
	}
}
