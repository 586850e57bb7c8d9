package translate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/konglet/konglet/proxy/declarative"
)

// TestPrioritiesIgnoreInputOrder: Kong routes that tie (one match served on
// several hostnames) get the same priorities in whatever order they come,
// so that a change elsewhere, which moves them in the input, does not
// rewrite them.
func TestPrioritiesIgnoreInputOrder(t *testing.T) {
	var routes []*kongRoute
	for r := range 20 {
		for h := range 5 {
			routes = append(routes, &kongRoute{route: &declarative.Route{Name: fmt.Sprintf("route-%d.host-%d", r, h)}, class: 7, order: routeOrder{route: r}})
		}
	}
	first := map[string]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		rng.Shuffle(len(routes), func(a, b int) { routes[a], routes[b] = routes[b], routes[a] })
		assignPriorities(routes)
		for _, kr := range routes {
			if i == 0 {
				first[kr.route.Name] = kr.route.Priority
			} else if kr.route.Priority != first[kr.route.Name] {
				t.Fatalf("shuffle %d: %s has priority %d, %d before", i, kr.route.Name, kr.route.Priority, first[kr.route.Name])
			}
		}
	}
}
