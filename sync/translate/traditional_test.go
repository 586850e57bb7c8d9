package translate

import (
	"cmp"
	"slices"
	"strconv"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
)

// kongPriority is kong/router/transform.lua get_priority for a konglet HTTP
// route (one regex path) as LuaJIT computes it, written from the Lua apart
// from rankTraditional: weight<<61, headers<<52 and regex_priority<<19 are
// bit.lshift of Lua numbers, 32-bit with the count taken mod 32, and bor
// sign-extends them next to the uint64 plain-hosts and regex bits.
func kongPriority(r *declarative.Route) uint64 {
	lshift := func(v int64, n uint) uint64 { return uint64(int64(int32(uint32(v) << (n % 32)))) }
	weight := int64(1) // the path
	plain := len(r.Hosts) > 0
	for _, h := range r.Hosts {
		if h[0] == '*' {
			plain = false
		}
	}
	for _, n := range []int{len(r.Methods), len(r.Hosts), len(r.Headers)} {
		if n > 0 {
			weight++
		}
	}
	p := uint64(1)<<51 | lshift(weight, 61) | lshift(int64(len(r.Headers)), 52) | lshift(r.RegexPrio, 19)
	if plain {
		p |= 1 << 60
	}
	return p
}

// TestRankTraditional checks that Kong's priorities follow Gateway API
// precedence between every two routes that may match one request, among
// the first 800 of 1800 that mix every field konglet sets (up to three
// header matches): 600 on four plain hostnames, ranked first as Gateway API
// does, each hostname's from the top, then 1200 with a wildcard or no
// hostname, below the deepest hostname's routes, where Kong's fixed bits
// leave room for some 200.
func TestRankTraditional(t *testing.T) {
	const n, exact = 1800, 800
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	routes := make([]*kongRoute, n)
	for i := range routes {
		r := &declarative.Route{Name: strconv.Itoa(i), Paths: []string{"~/"}}
		if i%2 == 1 {
			r.Methods = []string{"GET"}
		}
		switch i % 3 {
		case 1:
			r.Hosts = []string{"h" + strconv.Itoa(i/3%4) + ".example.com"}
		case 2:
			r.Hosts = []string{"*.example.com"}
		}
		if h := i / 6 % 4; h > 0 {
			r.Headers = map[string][]string{}
			for j := range h {
				r.Headers["h"+strconv.Itoa(j)] = []string{"1"}
			}
		}
		class := uint64(n - i)
		if i%3 == 1 {
			class += n // a plain hostname ranks first
		}
		routes[i] = &kongRoute{route: r, class: class, path: prefix}
	}
	slices.Reverse(routes) // the ranking must sort them
	rankTraditional(routes)
	slices.SortFunc(routes, func(a, b *kongRoute) int { return cmp.Compare(b.class, a.class) })
	plainHost := func(r *declarative.Route) string {
		if len(r.Hosts) == 0 || r.Hosts[0][0] == '*' {
			return ""
		}
		return r.Hosts[0]
	}
	for i := range exact {
		a := routes[i].route
		for j := i + 1; j < exact; j++ {
			b := routes[j].route
			if ha, hb := plainHost(a), plainHost(b); ha != "" && hb != "" && ha != hb {
				continue // never the same request
			}
			if pa, pb := kongPriority(a), kongPriority(b); pa <= pb {
				t.Fatalf("route %d (methods %v, hosts %v, %d headers, regex_priority %d) has Kong priority %#x, not above route %d's %#x (methods %v, hosts %v, %d headers)",
					i, a.Methods, a.Hosts, len(a.Headers), a.RegexPrio, pa, j, pb, b.Methods, b.Hosts, len(b.Headers))
			}
		}
	}
	for _, kr := range routes {
		if rp := kr.route.RegexPrio; rp < 0 || rp >= 1<<13 {
			t.Errorf("route %s: regex_priority %d is more than Kong's 13 bits", kr.route.Name, rp)
		}
	}
}

// A route with a plain hostname that Gateway API ranks after one without
// (not that precedenceClass makes any) still ranks below it in Kong.
func TestRankTraditionalHostAfterShared(t *testing.T) {
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	first := &declarative.Route{Name: "first", Paths: []string{"~/"}}
	second := &declarative.Route{Name: "second", Paths: []string{"~/"}, Hosts: []string{"a.example.com"}}
	rankTraditional([]*kongRoute{{route: second, class: 1, path: prefix}, {route: first, class: 2, path: prefix}})
	if p1, p2 := kongPriority(first), kongPriority(second); p1 <= p2 {
		t.Errorf("Kong priorities %#x (no hostname, preferred) and %#x (plain hostname)", p1, p2)
	}
}

// Kong makes a route with four fields negative, above every other: only
// the routes that must outrank it take regex_priority's sign bit (which
// that route's own regex_priority repeats).
func TestRankTraditionalSignBit(t *testing.T) {
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	host := []string{"a.example.com"}
	routes := []*declarative.Route{
		{Name: "a", Paths: []string{"~/"}, Hosts: host},
		{Name: "b", Paths: []string{"~/"}, Hosts: host, Methods: []string{"GET"}, Headers: map[string][]string{"h": {"1"}}},
		{Name: "c", Paths: []string{"~/"}, Hosts: host, Methods: []string{"GET"}},
		{Name: "d", Paths: []string{"~/"}},
	}
	var krs []*kongRoute
	for i, r := range routes {
		krs = append(krs, &kongRoute{route: r, class: uint64(len(routes) - i), path: prefix})
	}
	rankTraditional(krs)
	for i, r := range routes {
		if negative := r.RegexPrio >= 1<<12; negative != (i <= 1) {
			t.Errorf("route %s: regex_priority %d", r.Name, r.RegexPrio)
		}
		if i > 0 && kongPriority(routes[i-1]) <= kongPriority(r) {
			t.Errorf("route %s: Kong priority %#x, not below %s's %#x", r.Name, kongPriority(r), routes[i-1].Name, kongPriority(routes[i-1]))
		}
	}
}

func TestHighestSuperset(t *testing.T) {
	cases := []struct{ bits, limit, want int }{
		{0x400, 0xC00, 0x7FF}, // 0xBFF lacks bit 10: down to 0x7FF
		{0x402, 0x7FE, 0x7FB}, // 0x7FD and 0x7FC lack bit 1
		{0xC00, 0xC00, -1},    // only 0xC00 and up have both bits
		{0x6, 0x7, 0x6},
		{0x6, 0x6, -1},
		{0, 1, 0},
		{0, 0, -1},
	}
	for _, c := range cases {
		if got := highestSuperset(c.bits, c.limit); got != c.want {
			t.Errorf("highestSuperset(%#x, %#x) = %#x, want %#x", c.bits, c.limit, got, c.want)
		}
	}
}

// TestRankTraditionalCapacity measures what docs/features.md says of one
// plain hostname's ranks: how many routes, ranked in Gateway API order,
// take a rank before the first that has none left, for mixes of the fields
// that take Kong's fixed bits.
func TestRankTraditionalCapacity(t *testing.T) {
	for _, mix := range []struct {
		name       string
		methods    bool
		maxHeaders int
		documented int // at least this many, and about as many
	}{
		{"the same fields", false, 0, 2048},
		{"with and without a method", true, 0, 1000},
		{"up to three header matches", true, 3, 500},
		{"up to seven header matches", true, 7, 250},
	} {
		const n = 4000
		routes := make([]*kongRoute, n)
		for i := range routes {
			r := &declarative.Route{Name: strconv.Itoa(i), Paths: []string{"~/"}, Hosts: []string{"a.example.com"}}
			if mix.methods && i%2 == 1 {
				r.Methods = []string{"GET"}
			}
			if h := i % (mix.maxHeaders + 1); h > 0 {
				r.Headers = map[string][]string{}
				for j := range h {
					r.Headers["h"+strconv.Itoa(j)] = []string{"1"}
				}
			}
			routes[i] = &kongRoute{route: r, class: uint64(n - i), path: gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}}
		}
		unranked := rankTraditional(routes)
		ranked := slices.IndexFunc(routes, func(kr *kongRoute) bool { return slices.Contains(unranked, kr.route) })
		if ranked < mix.documented || ranked > mix.documented+mix.documented/10 {
			t.Errorf("%s: the first %d routes take a rank, documented: about %d", mix.name, ranked, mix.documented)
		}
	}
}
