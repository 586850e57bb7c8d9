package declarative

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestIDIsDeterministicAndDistinct(t *testing.T) {
	if ID("target", "u", "a") != ID("target", "u", "a") {
		t.Fatal("ID is not deterministic")
	}
	if ID("target", "u", "a") == ID("plugin", "u", "a") || ID("target", "u", "ab") == ID("target", "ua", "b") ||
		ID("target", "u", "a") == ID("target", "", "ua") {
		t.Fatal("distinct inputs share an id")
	}
	long := strings.Repeat("x", 300) // beyond the stack buffer
	if ID("target", long, "a") == ID("target", long, "b") {
		t.Fatal("long names share an id")
	}
	if id := ID("target", "u", "a"); len(id) != IDLen || uuid.MustParse(id).String() != id || id[14] != '8' {
		t.Fatalf("%s is not a version 8 UUID's text", id)
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	b, err := Marshal(&Config{FormatVersion: FormatVersion, Services: []*Service{{Name: "s", Host: "h",
		Routes: []*Route{{Name: "r", Expression: `(a == "<b>") && (c == "&")`}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `(a == \"<b>\") && (c == \"&\")`) || strings.HasSuffix(string(b), "\n") {
		t.Fatalf("unexpected encoding: %s", b)
	}
	if Hash(b) != Hash(append([]byte(nil), b...)) || len(Hash(b)) != 32 {
		t.Fatal("Hash is not a stable md5 hex digest")
	}
}

// TestMarshalMatchesEncodingJSON holds the hand-written encoder to
// encoding/json (without HTML escaping) on every field, empty and nil
// values, map ordering and the strings that need escaping.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	prio, regex, retries := uint64(1<<45+3), int64(-7), 0
	yes, no := true, false
	odd := "q\"b\\s\x00\x1f\n\r\t\b\f<>&\u2028\u2029é\xff💡"
	configs := []*Config{
		{FormatVersion: FormatVersion},
		{FormatVersion: odd, Services: []*Service{}, Upstreams: []*Upstream{}},
		{FormatVersion: FormatVersion,
			Services: []*Service{
				{Name: "s", Host: "h"},
				{Name: "tls", Protocol: "https", Host: "h", TLSVerify: &yes, TLSVerifyDepth: 8, CACertificates: []string{"a", odd}, ClientCertificate: &EntityID{ID: odd}},
				{Name: "tls-off", Protocol: "https", Host: "h", TLSVerify: &no, CACertificates: []string{}},
				{Name: odd, Protocol: "grpc", Host: odd, Port: 8080, Path: "/p", ConnectTimeout: 1, ReadTimeout: 2,
					WriteTimeout: 3, Retries: &retries, Tags: []string{"a", odd}, Routes: []*Route{
						{Name: "r"},
						{Name: "e", Protocols: []string{"http", "https"}, Expression: odd, Priority: prio,
							StripPath: &no, PreserveHost: &yes},
						{Name: "t", Protocols: []string{}, Methods: []string{"GET"}, Hosts: []string{"a", "b"},
							Paths: []string{"~/x$"}, Headers: map[string][]string{"z": {"1"}, "a": {"2", odd}, "m": nil},
							SNIs: []string{"x"}, Destinations: []Endpoint{{Port: 1}, {Port: 2}}, RegexPrio: regex,
							Plugins: []*Plugin{{ID: "p", Name: "request-transformer", Tags: []string{"t"},
								Config: map[string]any{"b": []string{"<&>", odd}, "a": map[string]any{"n": 1.5, "z": nil, "t": true}}},
								{ID: "q", Name: "cors"}}},
					}},
			},
			Upstreams: []*Upstream{{Name: "u"}, {Name: "v", Tags: []string{"k"},
				Targets: []*Target{{ID: "i", Target: "10.0.0.1:80", Weight: 0}, {ID: odd, Target: "[::1]:1", Weight: 65535}}}},
			Certificates: []*Certificate{{ID: "c", Cert: "-----BEGIN\nX\n", Key: odd, CertAlt: "alt", KeyAlt: odd},
				{ID: "d", Cert: "c", Key: "k", Tags: []string{"t"}, SNIs: []*SNI{{ID: "n", Name: "a.example"}, {ID: "o", Name: "b", Tags: []string{"u"}}}}},
			Plugins:        []*Plugin{{ID: "g", Name: "pre-function", Config: map[string]any{"rewrite": []string{odd}}}},
			CACertificates: []*CACertificate{{ID: "ca", Cert: odd}, {ID: odd, Cert: "c", Tags: []string{"t", odd}}},
		},
	}
	for i, c := range configs {
		w := encodingJSON(t, c)
		got, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Errorf("config %d:\n got %s\nwant %s", i, got, w)
		}
	}
}

func TestServiceSizesAddUpToTheDocument(t *testing.T) {
	c := &Config{FormatVersion: FormatVersion, Services: []*Service{
		{Name: "a", Host: "h", Tags: []string{"k8s-name:a"}, Routes: []*Route{{Name: "r", Expression: `http.path == "/"`,
			Plugins: []*Plugin{{ID: "p", Name: "cors", Config: map[string]any{"origins": []string{"*"}}}}}}},
		{Name: "b", Host: "h", Routes: []*Route{{Name: "r2", Paths: []string{"/x", "/y"}}}},
	}}
	whole, sizes, err := MarshalSizes(c)
	if err != nil {
		t.Fatal(err)
	}
	without := &Config{FormatVersion: FormatVersion}
	empty, _ := Marshal(without)
	// The services list adds `,"services":[` and `]` once, and one comma
	// fewer than services.
	framing := len(`,"services":[]`) - 1
	if sum := sizes[0] + sizes[1]; len(whole) != len(empty)+framing+sum {
		t.Fatalf("sizes %v (sum %d) do not add up: %d bytes with, %d without", sizes, sum, len(whole), len(empty))
	}
	one, _ := Marshal(&Config{FormatVersion: FormatVersion, Services: c.Services[1:]})
	if len(whole)-len(one) != sizes[0] {
		t.Fatalf("leaving out service a saves %d bytes, ServiceSizes says %d", len(whole)-len(one), sizes[0])
	}
}

// TestLongListsEncodedInPartsMatchEncodingJSON: services and upstreams
// encoded in parallel parts (as many as cores, and more: two cores take
// four parts in turn) join into encoding/json's document, their sizes
// still add up, and an encoding error in a later part is not lost.
func TestLongListsEncodedInPartsMatchEncodingJSON(t *testing.T) {
	for _, cores := range []int{2, 4} {
		t.Run(fmt.Sprintf("cores=%d", cores), func(t *testing.T) { longListsMatchEncodingJSON(t, cores) })
	}
}

func longListsMatchEncodingJSON(t *testing.T, cores int) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cores))
	odd := "q\"b\\s\x00\n<>&\u2028é\xff"
	c := &Config{FormatVersion: FormatVersion}
	for i := range 4*minPerPart + 3 {
		name := fmt.Sprintf("svc-%d-%s", i, odd[:i%len(odd)])
		c.Services = append(c.Services, &Service{Name: name, Host: "h", Tags: []string{odd},
			Routes: []*Route{{Name: name + ".r", Expression: `http.path == "/"`}}})
		c.Upstreams = append(c.Upstreams, &Upstream{Name: name, Targets: []*Target{{ID: name, Target: "10.0.0.1:80", Weight: 100}}})
	}
	w := encodingJSON(t, c)
	got, sizes, err := MarshalSizes(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, w) {
		t.Fatalf("the document differs from encoding/json's (%d and %d bytes)", len(got), len(w))
	}
	withoutServices, err := Marshal(&Config{FormatVersion: FormatVersion, Upstreams: c.Upstreams})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, s := range sizes {
		sum += s
	}
	if framing := len(`,"services":[]`) - 1; len(got) != len(withoutServices)+framing+sum {
		t.Fatalf("service sizes add up to %d, the services take %d bytes", sum, len(got)-len(withoutServices)-framing)
	}
	last := c.Services[len(c.Services)-1]
	last.Routes[0].Plugins = []*Plugin{{ID: "p", Name: "x", Config: map[string]any{"n": math.NaN()}}}
	if _, err := Marshal(c); err == nil {
		t.Fatal("a value JSON cannot hold, in the last part, encoded without an error")
	}
}

// TestEncoderMatchesMarshal: an Encoder given configurations that share
// entities with the previous one, in parts (four workers), writes what
// Marshal writes: new, gone, moved and re-ranked entities included.
func TestEncoderMatchesMarshal(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	c := &Config{FormatVersion: FormatVersion}
	for i := range 4*minPerPart + 3 {
		name := fmt.Sprintf("svc-%04d", i)
		c.Services = append(c.Services, &Service{Name: name, Host: name, Routes: []*Route{
			{Name: name + ".a", Expression: `http.path == "/"`, Priority: uint64(i)},
			{Name: name + ".b", Paths: []string{"~/b"}, RegexPrio: int64(i)}}})
		c.Upstreams = append(c.Upstreams, &Upstream{Name: name, Targets: []*Target{{ID: name, Target: "10.0.0.1:80", Weight: 100}}})
	}
	var enc Encoder
	check := func(step string) {
		t.Helper()
		got, gotSizes, err := enc.MarshalSizes(c)
		if err != nil {
			t.Fatal(err)
		}
		want, wantSizes, err := MarshalSizes(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the Encoder's document differs from Marshal's:\n got %s\nwant %s", step, got, want)
		}
		if !slices.Equal(gotSizes, wantSizes) {
			t.Fatalf("%s: the Encoder's service sizes differ from Marshal's", step)
		}
		// It keeps the document until the next one: no guessed slack.
		if cap(got) > len(got)+len(got)/keptSlack {
			t.Fatalf("%s: the Encoder keeps a %d-byte buffer for a %d-byte document", step, cap(got), len(got))
		}
	}
	check("first")
	check("the same")
	c.Services[3].Routes[0].Priority = 1 << 40
	check("a route's priority changes")
	c.Services[2*minPerPart].Routes[1].RegexPrio = -1
	check("a route's regex_priority changes")
	c.Services = slices.Delete(c.Services, 1, 2)
	c.Upstreams = slices.Delete(c.Upstreams, 5, 6)
	check("a service and an upstream are gone (the rest move)")
	s := *c.Services[minPerPart]
	s.Host = "elsewhere"
	c.Services[minPerPart] = &s
	u := *c.Upstreams[len(c.Upstreams)-1]
	u.Targets = nil
	c.Upstreams[len(c.Upstreams)-1] = &u
	check("a service and an upstream are new objects")
	c.Services = append(c.Services, &Service{Name: "zz", Host: "h", Routes: []*Route{{Name: "zz.r"}}})
	check("a service is added")
	for i := 0; i < len(c.Services); i += 2 {
		s := *c.Services[i]
		s.Port = 8080
		c.Services[i] = &s
	}
	check("every other service is a new object (parts mix copies and encodings)")
	// What is unchanged is copied, not encoded again (hence the contract:
	// an encoded entity does not change but for its routes' ranks).
	c.Services[0].Host = "changed in place"
	if doc, _, _ := enc.MarshalSizes(c); bytes.Contains(doc, []byte("changed in place")) {
		t.Fatal("the Encoder encoded an unchanged service again")
	}
	c.Services[0].Routes[0].Plugins = []*Plugin{{ID: "p", Name: "x", Config: map[string]any{"n": math.NaN()}}}
	c.Services[0].Routes[0].Priority++
	if _, _, err := enc.MarshalSizes(c); err == nil {
		t.Fatal("a value JSON cannot hold encoded without an error")
	}
	c.Services[0].Routes[0].Plugins = nil
	check("after an error")
}

// TestStringsMatchEncodingJSON puts each byte that a JSON string may not
// hold as it is (and multi-byte runes, valid and not) at every position of
// strings long enough for the eight-byte skip, and holds the encoder to
// encoding/json on each.
func TestStringsMatchEncodingJSON(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\x7f", "\"", "\\", "\n", "é", "\u2028", "\xff", "💡", "\xe2\x80"}
	for _, sp := range specials {
		for n := range 20 {
			for at := 0; at <= n; at++ {
				checkString(t, strings.Repeat("a", at)+sp+strings.Repeat("b", n-at))
			}
		}
	}
}

func FuzzStringsMatchEncodingJSON(f *testing.F) {
	f.Add("(lower(http.host) == \"app-1.example.com\") && (http.path ^= \"/api/v1/\")")
	f.Add("0123456789abcdef\x80\x00")
	f.Fuzz(func(t *testing.T, s string) { checkString(t, s) })
}

// encodingJSON is v as encoding/json writes it without HTML escaping, as
// konglet's encoder does, without the trailing newline.
func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(want.Bytes(), []byte("\n"))
}

func checkString(t *testing.T, s string) {
	t.Helper()
	w := encodingJSON(t, s)
	var e encoder
	e.str(s)
	if !bytes.Equal(e.buf, w) {
		t.Errorf("%q: got %s, want %s", s, e.buf, w)
	}
}

// TestPartsThatOutgrowTheirPlaceStillMatch: a first sync's parts are
// encoded in their places of one buffer, sized by hints; a part larger
// than its place (an entity of control characters, six bytes each in
// JSON, in the first, a middle or the last part, of either list) must not
// overwrite the parts after it. Two cores take eight parts in turn.
func TestPartsThatOutgrowTheirPlaceStillMatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const n = 2*partsPerCore*minPerPart + 3
	// outgrows tells whether a part of the list outgrows its place.
	outgrows := func(items any) bool {
		spans := make([]span, n)
		var plan *partPlan
		switch items := items.(type) {
		case []*Service:
			plan = partsOf(items, serviceHint, spans)
			inOneBuffer(0, plan, 0, nil, 0)
			encodeParts(items, (*encoder).service, nil, spans, plan)
		case []*Upstream:
			plan = partsOf(items, upstreamHint, spans)
			inOneBuffer(0, plan, 0, nil, 0)
			encodeParts(items, (*encoder).upstream, nil, spans, plan)
		}
		if len(plan.parts) <= runtime.GOMAXPROCS(0) {
			t.Fatalf("%d parts on %d cores: the test takes no parts in turn", len(plan.parts), runtime.GOMAXPROCS(0))
		}
		return slices.ContainsFunc(plan.parts, func(p encoder) bool { return !p.placed })
	}
	// From more than a place to more than the whole buffer.
	for _, size := range []int{20 << 10, 60 << 10, 200 << 10} {
		odd := strings.Repeat("\x01", size)
		for _, at := range []int{0, n / 2, n - 1} {
			for _, list := range []string{"services", "upstreams", "both"} {
				c := &Config{FormatVersion: FormatVersion}
				for i := range n {
					name := fmt.Sprintf("svc-%04d", i)
					c.Services = append(c.Services, &Service{Name: name, Host: "h", Routes: []*Route{{Name: name + ".r", Expression: `http.path == "/"`}}})
					c.Upstreams = append(c.Upstreams, &Upstream{Name: name, Targets: []*Target{{ID: name, Target: "10.0.0.1:80", Weight: 100}}})
				}
				if list != "upstreams" {
					c.Services[at].Host = odd
					if !outgrows(c.Services) {
						t.Fatalf("a service of %d control characters fits its part's place: the test tests nothing", size)
					}
				}
				if list != "services" {
					c.Upstreams[at].Tags = []string{odd}
					if !outgrows(c.Upstreams) {
						t.Fatalf("an upstream of %d control characters fits its part's place: the test tests nothing", size)
					}
				}
				w := encodingJSON(t, c)
				var e Encoder
				got, _, err := e.MarshalSizes(c)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, w) {
					t.Fatalf("an entity of %d control characters at %d of the %s: the document differs from encoding/json's (%d and %d bytes)", size, at, list, len(got), len(w))
				}
				if cap(got) > len(got)+len(got)/keptSlack {
					t.Fatalf("an entity of %d control characters at %d of the %s: the Encoder keeps a %d-byte buffer for a %d-byte document", size, at, list, cap(got), len(got))
				}
			}
		}
	}
}

// TestManyCoresLeaveNoEmptyPart: with more cores than items fill parts
// (300 cores, 257 items a part), the parts are as many as the items fill:
// an empty last one would leave a stray comma.
func TestManyCoresLeaveNoEmptyPart(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(300))
	c := &Config{FormatVersion: FormatVersion}
	for i := range 300*minPerPart + 1 {
		c.Upstreams = append(c.Upstreams, &Upstream{Name: strconv.Itoa(i)})
	}
	doc, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(doc) {
		t.Fatalf("not JSON: ...%s", doc[len(doc)-40:])
	}
}
