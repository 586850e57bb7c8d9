package kongdouble

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// show renders a parsed expression with explicit parentheses.
func show(n exprNode) string {
	switch x := n.(type) {
	case logicalNode:
		if x.op == "!" {
			return "!(" + show(x.l) + ")"
		}
		return "(" + show(x.l) + " " + x.op + " " + show(x.r) + ")"
	case predicateNode:
		lhs := x.field
		if x.lower {
			lhs = "lower(" + lhs + ")"
		}
		if x.any {
			lhs = "any(" + lhs + ")"
		}
		var rhs string
		switch x.rhs.kind {
		case vString, vRegex:
			rhs = fmt.Sprintf("%q", x.rhs.str)
		case vInt:
			rhs = fmt.Sprint(x.rhs.num)
		case vIP:
			rhs = x.rhs.ip.String()
		case vCIDR:
			rhs = x.rhs.cidr.String()
		}
		return lhs + " " + x.op + " " + rhs
	}
	return "?"
}

func TestATCParse(t *testing.T) {
	cases := []struct{ src, want string }{
		// The reference parser registers || after &&: || binds tighter.
		{`a == 1 && b == 2 || c == 3`, `(a == 1 && (b == 2 || c == 3))`},
		{`a == 1 || b == 2 && c == 3`, `((a == 1 || b == 2) && c == 3)`},
		{`a == 1 || b == 2 || c == 3`, `((a == 1 || b == 2) || c == 3)`},
		{`a == 1 && b == 2 && c == 3`, `((a == 1 && b == 2) && c == 3)`},
		{`(a == 1 && b == 2) || c == 3`, `((a == 1 && b == 2) || c == 3)`},
		{`!(a == 1) && ! ( b == 2 )`, `(!(a == 1) && !(b == 2))`},
		{`lower(http.host)=="x"`, `lower(http.host) == "x"`},
		{`any(lower(http.headers.x_a)) ~ "^v"`, `any(lower(http.headers.x_a)) ~ "^v"`},
		{"http.path == \"a\\\"b\\\\c\\n\"", `http.path == "a\"b\\c\n"`},
		{`http.path == r#"a"b\n"#`, `http.path == "a\"b\\n"`},
		{`n == 0x1F || n == 017 || n == -5 || n == 09`, `(((n == 31 || n == 15) || n == -5) || n == 9)`},
		{`net.src.ip in 10.0.0.0/8 && net.dst.ip not in fd00::/8`, `(net.src.ip in 10.0.0.0/8 && net.dst.ip not in fd00::/8)`},
		{`net.src.ip == ::1 || net.src.ip == 10.1.2.3`, `(net.src.ip == ::1 || net.src.ip == 10.1.2.3)`},
		{"http.path contains \"x\"\n&&\thttp.path =^ \".json\"", `(http.path contains "x" && http.path =^ ".json")`},
	}
	for _, c := range cases {
		n, err := parseATC(c.src)
		if err != nil {
			t.Errorf("parse %q: %v", c.src, err)
			continue
		}
		if got := show(n); got != c.want {
			t.Errorf("parse %q = %s, want %s", c.src, got, c.want)
		}
	}
}

func TestATCParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`! a == 1`, " --> 1:1\n  |\n1 | ! a == 1\n  | ^---\n  |\n  = expected term"},
		{`a == 1 || ! b == 2`, " --> 1:11\n  |\n1 | a == 1 || ! b == 2\n  |           ^---\n  |\n  = expected term"},
		{`a == 1 ||`, "= expected term"},
		{`a 1`, "= expected binary_operator"},
		{`a ==`, "= expected rhs"},
		{`a == 1 b`, "= expected EOI, and_op, or or_op"},
		{`(a == 1`, "= expected and_op, or or_op"},
		{`a == "x\q"`, "= expected rhs"},
		{`upper(a) == "x"`, "= unknown transformation function: upper"},
		{`a ~ 1`, "= regex operator can only be used with String operands"},
		{`a ~ "("`, "regex parse error"},
		{`a in 10.0.0.1/8`, "invalid IP address syntax"},
		{`a == 99999999999999999999`, "number too large"},
		{"a == 1 &&\n b", " --> 2:3\n  |\n2 |  b\n  |   ^---\n  |\n  = expected binary_operator"},
	}
	for _, c := range cases {
		_, err := parseATC(c.src)
		if err == nil {
			t.Errorf("parse %q: no error", c.src)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse %q error:\n%s\nwant it to contain %q", c.src, err, c.want)
		}
	}
}

func TestATCSemantics(t *testing.T) {
	cases := []struct{ src, want string }{
		{`http.path == "/" && http.headers.x_a == "b" && http.queries.q == "1"`, ""},
		{`http.path.segments.0 == "a" && http.path.segments.1_2 == "b/c" && http.path.segments.len > 2`, ""},
		{`http.pathx == "/"`, "Unknown LHS field"},
		{`http.headers == "x"`, "Unknown LHS field"},
		{`http.headers.a.b == "x"`, "Unknown LHS field"},
		{`http.path == 1`, "Type mismatch between the LHS and RHS values of predicate"},
		{`net.dst.port == "80"`, "Type mismatch between the LHS and RHS values of predicate"},
		{`net.src.ip == 10.0.0.0/8`, "Type mismatch between the LHS and RHS values of predicate"},
		{`lower(net.dst.port) == 1`, "lower-case transformation function only supported with String type fields"},
		{`net.dst.port ~ "8"`, "Regex operators only supports string operands"},
		{`net.dst.port ^= 8`, "Regex/Prefix/Postfix operators only supports string operands"},
		{`http.path > "a"`, "Greater/GreaterOrEqual/Lesser/LesserOrEqual operators only supports integer operands"},
		{`net.src.ip in 10.0.0.1`, "In/NotIn operators only supports IP in CIDR"},
		{`net.dst.port contains 8`, "Contains operator only supports string operands"},
	}
	for _, c := range cases {
		_, msg := validateATC(httpATCSchema, c.src)
		if msg != c.want {
			t.Errorf("validate %q = %q, want %q", c.src, msg, c.want)
		}
	}
	if _, msg := validateATC(streamATCSchema, `http.path == "/"`); msg != "Unknown LHS field" {
		t.Errorf("http field in a stream route: %q", msg)
	}
}

func strs(vs ...string) []atcValue { return stringValues(vs) }

func TestATCEvaluation(t *testing.T) {
	ctx := atcContext{
		"net.protocol":       strs("https"),
		"http.host":          strs("Example.COM"),
		"http.path":          strs("/api/v1/items"),
		"http.headers.x_env": strs("prod", "Canary"),
		"http.queries.flag":  strs(""),
		"net.dst.port":       {{kind: vInt, num: 443}},
		"net.src.ip":         {{kind: vIP, ip: netip.MustParseAddr("10.1.2.3")}},
	}
	cases := []struct {
		src  string
		want bool
	}{
		{`http.path ^= "/api"`, true},
		{`http.path =^ "/items"`, true},
		{`http.path contains "v1"`, true},
		{`http.path ~ "v[0-9]+"`, true}, // regexes are not anchored
		{`http.path ~ "^/v1"`, false},
		{`http.host == "example.com"`, false}, // compared as received
		{`lower(http.host) == "example.com"`, true},
		// Every value of a multi-valued field must pass, unless any().
		{`http.headers.x_env == "prod"`, false},
		{`any(http.headers.x_env) == "prod"`, true},
		{`lower(http.headers.x_env) ~ "^(prod|canary)$"`, true},
		{`http.headers.x_env != "staging"`, true},
		// A missing field makes any predicate false, even !=.
		{`http.headers.x_missing != "a"`, false},
		{`!(http.headers.x_missing == "a")`, true},
		{`tls.sni == "a"`, false},
		{`http.queries.flag == ""`, true},
		{`net.dst.port >= 443 && net.dst.port < 444`, true},
		{`net.dst.port == 0x1bb`, true},
		{`net.src.ip in 10.0.0.0/8`, true},
		{`net.src.ip not in 10.0.0.0/8`, false},
		{`net.src.ip == 10.1.2.3`, true},
		// `a && b || c` means a && (b || c).
		{`http.path == "/nope" && http.path == "/nope" || net.protocol == "https"`, false},
		{`net.protocol == "https" || http.path == "/nope" && http.path == "/nope"`, false},
		{`(http.path == "/nope" && http.path == "/nope") || net.protocol == "https"`, true},
	}
	for _, c := range cases {
		n, err := parseATC(c.src)
		if err != nil {
			t.Fatalf("parse %q: %v", c.src, err)
		}
		if got := evalATC(n, ctx); got != c.want {
			t.Errorf("eval %q = %v, want %v", c.src, got, c.want)
		}
	}
}

func TestCompatExpressionAndPriority(t *testing.T) {
	route := map[string]any{
		"protocols": []any{"http", "https"},
		"methods":   []any{"GET", "POST"},
		"hosts":     []any{"a.com", "*.b.com", "c.*", "d.com:8080"},
		"paths":     []any{"~/items/(?<id>\\d+)$"},
		"headers":   map[string]any{"X-Env": []any{"Prod", "~*^v[0-9]$"}},
		"snis":      []any{"a.com."},
	}
	want := `(net.protocol != r#"https"# || (tls.sni == r#"a.com"#))` +
		` && (http.method == r#"GET"# || http.method == r#"POST"#)` +
		` && (http.host == r#"a.com"# || http.host =^ r#".b.com"# || http.host ^= r#"c."# || (http.host == r#"d.com"# && net.dst.port == 8080))` +
		` && (http.path ~ r#"^/items/(?P<id>\d+)$"#)` +
		` && (any(lower(http.headers.x_env)) == r#"prod"# || any(lower(http.headers.x_env)) ~ r#"^v[0-9]$"#)`
	if got := compatExpression(route); got != want {
		t.Errorf("compat expression\n got %s\nwant %s", got, want)
	}
	if _, msg := validateATC(httpATCSchema, want); msg != "" {
		t.Errorf("generated expression does not validate: %s", msg)
	}
	if got := escapeStr(`a"#b\c`); got != `"a\"#b\\c"` {
		t.Errorf("escapeStr = %s", got)
	}

	// Each want is transform.lua's get_priority worked by hand under LuaJIT:
	// weight<<61, headers<<52 and regex_priority<<19 are 32-bit shifts of Lua
	// numbers (counts 29, 20 and 19), sign-extended by bor; bit 60 (plain
	// hosts) and bit 51 (regex path) are uint64 cdata.
	cases := []struct {
		route map[string]any
		want  uint64
	}{
		// weight 1<<29, length 4
		{map[string]any{"paths": []any{"/foo"}}, 0x20000004},
		// regex bit, weight 1<<29, 7<<19
		{map[string]any{"paths": []any{"~/foo"}, "regex_priority": 7.0}, 0x0008_0000_2038_0000},
		// regex_priority counts for regex paths only
		{map[string]any{"paths": []any{"/foo"}, "regex_priority": 7.0}, 0x20000004},
		// plain host bit, weight 2<<29, length 1
		{map[string]any{"hosts": []any{"a.com"}, "paths": []any{"/"}}, 0x1000_0000_4000_0001},
		{map[string]any{"hosts": []any{"*.a.com"}, "methods": []any{"GET"}}, 0x40000000},
		// an empty hosts table is a table: plain; header count 2<<20, not <<52
		{map[string]any{"hosts": []any{}, "headers": map[string]any{"a": []any{"1"}, "b": []any{"2"}}}, 0x1000_0000_2020_0000},
		// regex_priority 4095 sets bits 19-30, over weight (1<<29) and header
		// count: it outranks the weight-3 route below
		{map[string]any{"paths": []any{"~/a"}, "regex_priority": 4095.0}, 0x0008_0000_7FF8_0000},
		{map[string]any{"paths": []any{"~/a"}, "hosts": []any{"*.a.com"}, "methods": []any{"GET"}}, 0x0008_0000_6000_0000},
		// one header (1<<20) and regex_priority 2 (2<<19) share bit 20
		{map[string]any{"paths": []any{"~/a"}, "headers": map[string]any{"a": []any{"1"}}, "regex_priority": 2.0}, 0x0008_0000_4010_0000},
		// weight 4: 4<<29 is int32 bit 31, negative, sign-extended over the
		// plain host and regex bits
		{map[string]any{"paths": []any{"~/a"}, "hosts": []any{"a.com"}, "methods": []any{"GET"}, "headers": map[string]any{"a": []any{"1"}}}, 0xFFFF_FFFF_8010_0000},
		// regex_priority 4096: bit 12 lands on bit 31, negative too
		{map[string]any{"paths": []any{"~/a"}, "regex_priority": 4096.0}, 0xFFFF_FFFF_A000_0000},
		// a negative regex_priority keeps its low 13 bits (-1: 0x1FFF<<19)
		{map[string]any{"paths": []any{"~/a"}, "regex_priority": -1.0}, 0xFFFF_FFFF_FFF8_0000},
	}
	for _, c := range cases {
		if got := compatPriority(c.route); got != c.want {
			t.Errorf("priority(%v) = %#x, want %#x", c.route, got, c.want)
		}
	}
	if got := groupPaths([]string{"/a", "~/r1", "/bb", "/c", "~/r2"}); fmt.Sprint(got) != "[[/a /c] [~/r1 ~/r2] [/bb]]" {
		t.Errorf("groupPaths = %v", got)
	}
}

func TestNormalizePath(t *testing.T) {
	cases := map[string]string{
		"/":              "/",
		"/a/b":           "/a/b",
		"/a//b":          "/a/b",
		"/a/./b/../c":    "/a/c",
		"/a/..":          "/",
		"/../a":          "/a",
		"/a/b/":          "/a/b/",
		"/%7Ea%2fb":      "/~a%2Fb",
		"/a/%2e%2e/b":    "/b",
		"/a.json":        "/a.json",
		"/x/y/./":        "/x/y/",
		"/%41%42%20":     "/AB ", // a space is an "other" character: decoded
		"/already%2Fenc": "/already%2Fenc",
	}
	for in, want := range cases {
		if got := normalizePath(in); got != want {
			t.Errorf("normalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}
