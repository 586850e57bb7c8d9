package translate

import (
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
// precedence for the first 500 of 1200 routes that mix every field konglet sets
// (with up to three header matches, Kong's fixed bits leave about 500 ranks).
func TestRankTraditional(t *testing.T) {
	const n, exact = 1200, 500
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	routes := make([]*kongRoute, n)
	for i := range routes {
		r := &declarative.Route{Name: strconv.Itoa(i), Paths: []string{"~/"}}
		if i%2 == 1 {
			r.Methods = []string{"GET"}
		}
		switch i % 3 {
		case 1:
			r.Hosts = []string{"a.example.com"}
		case 2:
			r.Hosts = []string{"*.example.com"}
		}
		if h := i / 6 % 4; h > 0 {
			r.Headers = map[string][]string{}
			for j := range h {
				r.Headers["h"+strconv.Itoa(j)] = []string{"1"}
			}
		}
		// Listed least preferred first: the ranking must sort them.
		routes[n-1-i] = &kongRoute{route: r, class: uint64(n - i), path: prefix}
	}
	rankTraditional(routes)
	prev := ^uint64(0)
	for i := range exact {
		r := routes[n-1-i].route
		if p := kongPriority(r); p >= prev {
			t.Fatalf("route %d (methods %v, hosts %v, %d headers, regex_priority %d) has Kong priority %#x, not below the previous %#x",
				i, r.Methods, r.Hosts, len(r.Headers), r.RegexPrio, p, prev)
		} else {
			prev = p
		}
	}
	for _, kr := range routes {
		if rp := kr.route.RegexPrio; rp < 0 || rp >= 1<<13 {
			t.Errorf("route %s: regex_priority %d is more than Kong's 13 bits", kr.route.Name, rp)
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
