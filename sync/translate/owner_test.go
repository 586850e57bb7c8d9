package translate_test

import (
	"path/filepath"
	"testing"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestOwner: every entity Kong may refuse leads back to its object, also the
// untagged ones (routes through their service, targets through their
// upstream), so that a refusal lands on the right route.
func TestOwner(t *testing.T) {
	examples, err := filepath.Glob("../../deploy/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := translate.Translate(loadSnapshot(t, snapshot.RouterExpressions, examples...), nil)
	checked := 0
	for _, svc := range res.Config.Services {
		want, ok := translate.RefFromTags(svc.Tags)
		if !ok {
			t.Fatalf("service %s has no object tags", svc.Name)
		}
		for _, r := range svc.Routes {
			if got, ok := res.Owner("", r.Name, nil); !ok || got != want {
				t.Errorf("route %s: owner %v %v, want %v", r.Name, got, ok, want)
			}
			checked++
		}
	}
	for _, u := range res.Config.Upstreams {
		want, _ := translate.RefFromTags(u.Tags)
		for _, target := range u.Targets {
			if got, ok := res.Owner(target.ID, "", nil); !ok || got != want {
				t.Errorf("target %s: owner %v %v, want %v", target.Target, got, ok, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("the examples produced no routes or targets")
	}
	if _, ok := res.Owner("no-such-id", "no-such-route", nil); ok {
		t.Error("an unknown entity has an owner")
	}
}

// TestRefusedOwnerIsLeftOut: a refusal keyed by the owner Kong's entity
// leads to leaves that object out of the next translation, for every route
// kind. A key that does not match the translation's own would have the
// refused entity sent again on every round, and the whole load fail.
func TestRefusedOwnerIsLeftOut(t *testing.T) {
	inputs := []string{"testdata/golden/http-basics/input.yaml", "testdata/golden/grpc/input.yaml", "testdata/golden/l4/input.yaml"}
	kinds := map[string]bool{}
	for _, in := range inputs {
		snap := loadSnapshot(t, snapshot.RouterExpressions, in)
		res := translate.Translate(snap, nil)
		for _, svc := range res.Config.Services {
			owner, ok := res.Owner("", svc.Routes[0].Name, nil)
			if !ok {
				t.Fatalf("%s: route %s has no owner", in, svc.Routes[0].Name)
			}
			kinds[owner.Kind] = true
			again := translate.Translate(snap, translate.Refusals{owner: "refused by Kong"})
			for _, s := range again.Config.Services {
				if got, _ := translate.RefFromTags(s.Tags); got == owner {
					t.Errorf("%s: %v refused, but its service %s is still sent", in, owner, s.Name)
				}
			}
		}
	}
	for _, kind := range []string{"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"} {
		if !kinds[kind] {
			t.Errorf("no %s among the inputs' services: the test does not cover it", kind)
		}
	}
}
