package declarative

import (
	"bytes"
	"encoding/json"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Marshal encodes the config as encoding/json would (field order,
// omitempty, sorted map keys), without HTML escaping: that would turn every
// && of an expression into \u0026\u0026. It is written by hand because a
// sync encodes megabytes, and reflection plus a growing buffer were a fifth
// of a translation's time; TestMarshalMatchesEncodingJSON holds it to
// encoding/json's output. The output is deterministic because the
// translation emits everything in sorted order.
func Marshal(c *Config) ([]byte, error) {
	doc, _, err := marshal(c, nil)
	return doc, err
}

// MarshalSizes is Marshal that also tells what each service (with its
// routes and their plugins) adds to the document, its separating comma
// included: the share of the object behind it, which a document over
// budget is cut by. Measuring while encoding costs one int per service.
func MarshalSizes(c *Config) (doc []byte, serviceSizes []int, err error) {
	return marshal(c, nil)
}

// Encoder is MarshalSizes for a sequence of configurations that share most
// of their entities, as a translation Memo's do: a service or upstream
// that is the very object of the previous configuration is copied from the
// previous document instead of being encoded again (a sync after one edit
// of 3,000 routes encoded 2 MiB to change a few hundred bytes). So an
// entity must not change once encoded, except its routes' priority and
// regex_priority (ranks depend on the other routes), which are compared.
// The Encoder keeps the previous document; it is not safe for concurrent
// use.
type Encoder struct {
	doc []byte
	// The previous document's services and upstreams, in order, and where
	// each is in it; serviceRanks are those of each service's routes.
	services      []*Service
	serviceSpans  []span
	serviceRanks  [][]routeRank
	upstreams     []*Upstream
	upstreamSpans []span
}

// span is where an item is in a document.
type span struct{ start, end int }

type routeRank struct {
	priority uint64
	regex    int64
}

// MarshalSizes is the package's MarshalSizes, reusing the previous
// document's bytes where it can.
func (enc *Encoder) MarshalSizes(c *Config) (doc []byte, serviceSizes []int, err error) {
	return marshal(c, enc)
}

// marshal encodes c, copying from enc's previous document (nil: none)
// what it can, and leaves enc holding this one.
func marshal(c *Config, enc *Encoder) (doc []byte, serviceSizes []int, err error) {
	// Each span starts as where the item was in the previous document
	// (none: {0, 0}, the document never starts with an item), then is
	// where it is in this one.
	serviceSpans, upstreamSpans := make([]span, len(c.Services)), make([]span, len(c.Upstreams))
	var previous []byte
	if enc != nil {
		previous = enc.doc
		inPrevious(c.Services, enc.services, func(s *Service) string { return s.Name }, func(i, j int) {
			if sameRanks(c.Services[i].Routes, enc.serviceRanks[j]) {
				serviceSpans[i] = enc.serviceSpans[j]
			}
		})
		inPrevious(c.Upstreams, enc.upstreams, func(u *Upstream) string { return u.Name }, func(i, j int) {
			upstreamSpans[i] = enc.upstreamSpans[j]
		})
	}
	// The long lists are encoded first where they are mostly new (a
	// first sync's), in parts, into the document's own buffer when the
	// services are: each part at a place of its hinted size, moved
	// together after. Otherwise the document is allocated at the size of
	// the parts and the hints of the rest.
	servicePlan := partsOf(c.Services, serviceHint, serviceSpans)
	upstreamPlan := partsOf(c.Upstreams, upstreamHint, upstreamSpans)
	var head encoder
	head.raw(`{"_format_version":`)
	head.str(c.FormatVersion)
	var e encoder
	if servicePlan != nil {
		after := tailHint(c)
		if upstreamPlan == nil {
			after += listHint(c.Upstreams, upstreamHint, upstreamSpans, nil)
		}
		e.buf = inOneBuffer(len(head.buf)+len(`,"services":[`), servicePlan, len(`],"upstreams":[`), upstreamPlan, after)
	}
	encodeParts(c.Services, (*encoder).service, previous, serviceSpans, servicePlan)
	encodeParts(c.Upstreams, (*encoder).upstream, previous, upstreamSpans, upstreamPlan)
	if hint := sizeHint(c, serviceSpans, upstreamSpans, servicePlan, upstreamPlan); e.buf == nil {
		e.buf = make([]byte, 0, hint)
	} else {
		e.sharedCap = hint
	}
	e.buf = append(e.buf, head.buf...)
	longList(&e, "services", c.Services, (*encoder).service, previous, serviceSpans, servicePlan)
	longList(&e, "upstreams", c.Upstreams, (*encoder).upstream, previous, upstreamSpans, upstreamPlan)
	list(&e, "certificates", c.Certificates, e.certificate)
	list(&e, "ca_certificates", c.CACertificates, e.caCertificate)
	list(&e, "plugins", c.Plugins, e.plugin)
	e.raw("}")
	serviceSizes = make([]int, len(c.Services))
	for i, sp := range serviceSpans {
		serviceSizes[i] = sp.end - sp.start + 1
	}
	if enc != nil {
		// The buffer was sized by a guess, high when many items are new:
		// the document kept until the next sync takes little more than its
		// own size.
		if cap(e.buf)-len(e.buf) > len(e.buf)/keptSlack {
			e.buf = slices.Clone(e.buf)
		}
		enc.remember(c, e.buf, serviceSpans, upstreamSpans, e.err)
	}
	return e.buf, serviceSizes, e.err
}

// CACertificateSize is what a ca_certificate adds to the document, its
// separating comma included: the share of it a route that uses it takes.
func CACertificateSize(ca *CACertificate) int {
	var e encoder
	e.caCertificate(ca)
	return len(e.buf) + 1
}

func (e *encoder) caCertificate(ca *CACertificate) {
	e.raw(`{"id":`)
	e.str(ca.ID)
	e.strField("cert", ca.Cert, false)
	e.strings("tags", ca.Tags, true)
	e.raw("}")
}

// inPrevious calls found(i, j) for each of items that is previous[j]. The
// translation lists services and upstreams by name (as Kong's export
// does), so one walk along both lists finds them, without a map to build
// for every document; a list in another order only finds fewer.
func inPrevious[T any](items, previous []*T, name func(*T) string, found func(i, j int)) {
	j := 0
	for i, item := range items {
		for j < len(previous) && previous[j] != item && name(previous[j]) < name(item) {
			j++
		}
		if j < len(previous) && previous[j] == item {
			found(i, j)
			j++
		}
	}
}

// remember makes doc the document the next one copies from.
func (enc *Encoder) remember(c *Config, doc []byte, serviceSpans, upstreamSpans []span, err error) {
	if err != nil {
		*enc = Encoder{}
		return
	}
	enc.doc = doc
	n := 0
	for _, s := range c.Services {
		n += len(s.Routes)
	}
	// One array holds every service's ranks.
	ranks := make([]routeRank, 0, n)
	enc.serviceRanks = make([][]routeRank, len(c.Services))
	for i, s := range c.Services {
		start := len(ranks)
		for _, r := range s.Routes {
			ranks = append(ranks, routeRank{r.Priority, r.RegexPrio})
		}
		enc.serviceRanks[i] = ranks[start:len(ranks):len(ranks)]
	}
	// The lists are the caller's, the spans this call's own.
	enc.services, enc.serviceSpans = slices.Clone(c.Services), serviceSpans
	enc.upstreams, enc.upstreamSpans = slices.Clone(c.Upstreams), upstreamSpans
}

func sameRanks(routes []*Route, ranks []routeRank) bool {
	if len(routes) != len(ranks) {
		return false
	}
	for i, r := range routes {
		if r.Priority != ranks[i].priority || r.RegexPrio != ranks[i].regex {
			return false
		}
	}
	return true
}

// sizeHint guesses the document size a little high, so that the buffer
// rarely grows (a copy of megabytes): the lists encoded in parts take
// their size, the items of the others their hints.
func sizeHint(c *Config, serviceSpans, upstreamSpans []span, servicePlan, upstreamPlan *partPlan) int {
	n := 64 + listHint(c.Services, serviceHint, serviceSpans, servicePlan) + listHint(c.Upstreams, upstreamHint, upstreamSpans, upstreamPlan)
	return n + n/32 + tailHint(c)
}

// tailHint guesses what the certificates and global plugins take; the
// global plugins' code and what escaping adds are guessed by the slack.
func tailHint(c *Config) int {
	n := 0
	for _, cert := range c.Certificates {
		n += len(cert.Cert) + len(cert.Key) + 200
	}
	for _, ca := range c.CACertificates {
		n += len(ca.Cert) + 100
	}
	return n + 16<<10
}

func listHint[T any](items []T, hint func(T, span) int, spans []span, plan *partPlan) int {
	n := 0
	if plan != nil {
		for _, p := range plan.parts {
			n += len(p.buf) + 1
		}
		return n
	}
	for i, item := range items {
		n += hint(item, spans[i])
	}
	return n
}

// keptSlack: a document whose buffer is more than an eighth larger than
// it is copied to its size before the Encoder keeps it. A first sync on
// one core sizes its buffer by the hints alone, about 8% high (10k
// routes: 10.9 MB for 10.1), and a sixteenth made it allocate the
// document twice; the slack kept goes with the next sync's document.
const keptSlack = 8

// serviceHint and upstreamHint guess an item's share of the document: as
// large as it was in the previous one (its span), else from the lengths
// of its strings and the framing of its fields. A first sync's parts are
// placed by these guesses, and the document is cut to its size when they
// were too high (keptSlack): they should be a little high, and no more.
func serviceHint(s *Service, sp span) int {
	if sp.end > 0 {
		return sp.end - sp.start + 1
	}
	// The name, host and routes' framing, then the optional fields.
	n := 40 + len(s.Name) + len(s.Host) + stringsHint(s.Tags) + stringsHint(s.CACertificates)
	if s.Protocol != "" {
		n += 16 + len(s.Protocol)
	}
	if s.Path != "" {
		n += 12 + len(s.Path)
	}
	if s.ClientCertificate != nil {
		n += 32 + len(s.ClientCertificate.ID)
	}
	// The numbers and booleans: port, timeouts, retries, TLS.
	n += 16 * countNonZero(s.Port, s.ConnectTimeout, s.ReadTimeout, s.WriteTimeout, s.TLSVerifyDepth)
	if s.Retries != nil {
		n += 16
	}
	if s.TLSVerify != nil {
		n += 20
	}
	for _, r := range s.Routes {
		n += routeHint(r)
	}
	return n
}

func countNonZero(values ...int) int {
	n := 0
	for _, v := range values {
		if v != 0 {
			n++
		}
	}
	return n
}

func routeHint(r *Route) int {
	// The name, expression, priority, strip_path and preserve_host with
	// their framing; expressions quote their literals (regexes escape too),
	// and each quote and backslash is escaped.
	n := 100 + len(r.Name) + len(r.Expression) + strings.Count(r.Expression, `"`) + strings.Count(r.Expression, `\`) + 16*len(r.Destinations)
	for _, list := range [][]string{r.Protocols, r.Methods, r.Hosts, r.Paths, r.SNIs} {
		n += stringsHint(list)
	}
	for name, values := range r.Headers {
		n += len(name) + 4 + stringsHint(values)
	}
	for _, p := range r.Plugins {
		n += 256 + stringsHint(p.Tags) // and a guess of its config
	}
	return n
}

func upstreamHint(u *Upstream, sp span) int {
	if sp.end > 0 {
		return sp.end - sp.start + 1
	}
	n := 30 + len(u.Name) + stringsHint(u.Tags)
	for _, t := range u.Targets {
		n += 36 + len(t.ID) + len(t.Target)
	}
	return n
}

// stringsHint is a list of strings with its key (none when empty: the
// lists are omitempty, but for protocols, which routes always have).
func stringsHint(list []string) int {
	if len(list) == 0 {
		return 0
	}
	n := 16
	for _, s := range list {
		n += len(s) + 3
	}
	return n
}

type encoder struct {
	buf []byte
	err error
	// placed tells that a part was encoded in its place of the
	// document's buffer.
	placed bool
	// sharedCap is, while the document's buffer may hold parts ahead of
	// what is written, the size of a buffer of its own should one of them
	// have outgrown its place (0: the buffer is the document's alone).
	sharedCap int
}

func (e *encoder) raw(s string) { e.buf = append(e.buf, s...) }

func (e *encoder) sep(i int) {
	if i > 0 {
		e.buf = append(e.buf, ',')
	}
}

// list writes ,"key":[...] with one(item) for each item, and nothing for
// none (every list of the model is omitempty).
func list[T any](e *encoder, key string, items []T, one func(T)) {
	if len(items) == 0 {
		return
	}
	e.field(key, false)
	e.buf = append(e.buf, '[')
	for i, item := range items {
		e.sep(i)
		one(item)
	}
	e.buf = append(e.buf, ']')
}

// minPerPart is the fewest new items to encode worth a goroutine of
// encodeParts.
const minPerPart = 256

// partsPerCore: a long list is cut in more parts than there are cores,
// handed out as goroutines get free. With one part per core, a part whose
// goroutine waited (the collector's mark worker held a core for
// milliseconds) held the whole document back.
const partsPerCore = 4

// partPlan is how a long list with many new items (a first sync encodes
// megabytes) is encoded: in contiguous parts of per items, each in turn
// on one of the cores, into a place of its hinted size (or a buffer of its
// own).
type partPlan struct {
	per    int
	sizes  []int
	places [][]byte // nil: each part allocates its buffer
	parts  []encoder
}

// partsOf plans the parts of a list, nil when too few items are new for
// two cores (a later sync's: longList writes them in place). Each part's
// items are hinted on the cores too.
func partsOf[T any](items []T, hint func(T, span) int, spans []span) *partPlan {
	fresh := 0
	for _, sp := range spans {
		if sp.end == 0 {
			fresh++
		}
	}
	cores := runtime.GOMAXPROCS(0)
	if min(cores, fresh/minPerPart) < 2 {
		return nil
	}
	parts := min(cores*partsPerCore, fresh/minPerPart)
	per := (len(items) + parts - 1) / parts
	// As many parts as per items fill (an empty part would leave a stray
	// comma).
	p := &partPlan{per: per, sizes: make([]int, (len(items)+per-1)/per)}
	inParallel(len(p.sizes), func(w int) {
		size := 0 // summed apart: neighbouring sizes share a cache line
		for i := w * per; i < min((w+1)*per, len(items)); i++ {
			size += hint(items[i], spans[i])
		}
		p.sizes[w] = size
	})
	return p
}

// inParallel runs do(0..n-1) on up to GOMAXPROCS goroutines, the caller's
// among them, each taking the next i as it gets free.
func inParallel(n int, do func(i int)) {
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			do(i)
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// inOneBuffer allocates a document's buffer with room for before bytes,
// the services' parts, between bytes, the upstreams' parts (when planned)
// and after bytes, in that order, and gives each part its place in it.
// Each place is followed by a byte for the comma that joins the parts:
// moved in order, no part can overwrite one not moved yet unless a part
// before it outgrew its place.
func inOneBuffer(before int, services *partPlan, between int, upstreams *partPlan, after int) []byte {
	size := before + between + after
	for _, p := range []*partPlan{services, upstreams} {
		if p != nil {
			for _, n := range p.sizes {
				size += n + 1
			}
		}
	}
	buf := make([]byte, 0, size)
	place := func(p *partPlan, at int) int {
		p.places = make([][]byte, len(p.sizes))
		for w, n := range p.sizes {
			p.places[w] = buf[at : at : at+n]
			at += n + 1
		}
		return at
	}
	end := place(services, before)
	if upstreams != nil {
		place(upstreams, end+between)
	}
	return buf
}

// encodeParts encodes the parts of a list as planned (nil: none); each
// span is then where its item is in its part.
func encodeParts[T any](items []T, one func(*encoder, T), previous []byte, spans []span, plan *partPlan) {
	if plan == nil {
		return
	}
	out := make([]encoder, len(plan.sizes))
	encode := func(w int) {
		if plan.places != nil {
			out[w].buf = plan.places[w]
		} else {
			out[w].buf = make([]byte, 0, plan.sizes[w])
		}
		encodeRange(&out[w], items, w*plan.per, min((w+1)*plan.per, len(items)), one, previous, spans)
		// A part that outgrew its place was moved by append, and a
		// place never grows: its capacity tells.
		out[w].placed = plan.places != nil && cap(out[w].buf) == cap(plan.places[w])
	}
	inParallel(len(out), encode)
	plan.parts = out
}

// encodeRange writes items[from:to], separated by commas, to e: an item
// whose span is set is copied from previous instead of encoded. Each span
// is then where its item is in e's buffer.
func encodeRange[T any](e *encoder, items []T, from, to int, one func(*encoder, T), previous []byte, spans []span) {
	for i := from; i < to; i++ {
		e.sep(i - from)
		start := len(e.buf)
		if sp := spans[i]; sp.end > 0 {
			e.buf = append(e.buf, previous[sp.start:sp.end]...)
		} else {
			one(e, items[i])
		}
		spans[i] = span{start, len(e.buf)}
	}
}

// longList is list for the document's long lists: their parts if
// encodeParts made them, else the items encoded in place. Each span is
// then where its item is in the document.
func longList[T any](e *encoder, key string, items []T, one func(*encoder, T), previous []byte, spans []span, plan *partPlan) {
	if len(items) == 0 {
		return
	}
	e.field(key, false)
	e.buf = append(e.buf, '[')
	if plan == nil {
		encodeRange(e, items, 0, len(items), one, previous, spans)
		e.buf = append(e.buf, ']')
		return
	}
	per := plan.per
	for w, p := range plan.parts {
		e.sep(w)
		if !p.placed && e.sharedCap > 0 {
			// Writing it here could overwrite parts not moved yet: the
			// document goes on in a buffer of its own.
			e.buf = append(make([]byte, 0, e.sharedCap), e.buf...)
			e.sharedCap = 0
		}
		// The part's spans were relative to its own buffer.
		for i := w * per; i < min((w+1)*per, len(items)); i++ {
			spans[i].start += len(e.buf)
			spans[i].end += len(e.buf)
		}
		// A placed part is ahead in the same buffer: copy handles the
		// overlap.
		n := len(e.buf)
		if cap(e.buf)-n >= len(p.buf) {
			e.buf = e.buf[:n+len(p.buf)]
			copy(e.buf[n:], p.buf)
		} else {
			e.buf = append(e.buf, p.buf...)
		}
		if e.err == nil {
			e.err = p.err
		}
	}
	e.buf = append(e.buf, ']')
}

// field writes ,"key": (or "key": first in an object).
func (e *encoder) field(key string, first bool) {
	if !first {
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, key...)
	e.buf = append(e.buf, '"', ':')
}

func (e *encoder) strField(key, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	e.field(key, false)
	e.str(v)
}

func (e *encoder) intField(key string, v int64, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	e.field(key, false)
	e.buf = strconv.AppendInt(e.buf, v, 10)
}

func (e *encoder) strings(key string, list []string, omitEmpty bool) {
	if omitEmpty && len(list) == 0 {
		return
	}
	e.field(key, false)
	e.stringArray(list)
}

// stringArray writes a JSON array of strings, or null for a nil slice.
func (e *encoder) stringArray(list []string) {
	if list == nil {
		e.raw("null")
		return
	}
	e.buf = append(e.buf, '[')
	for i, s := range list {
		e.sep(i)
		e.str(s)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) service(s *Service) {
	e.raw(`{"name":`)
	e.str(s.Name)
	e.strField("protocol", s.Protocol, true)
	e.strField("host", s.Host, false)
	e.intField("port", int64(s.Port), true)
	e.strField("path", s.Path, true)
	e.intField("connect_timeout", int64(s.ConnectTimeout), true)
	e.intField("read_timeout", int64(s.ReadTimeout), true)
	e.intField("write_timeout", int64(s.WriteTimeout), true)
	if s.Retries != nil {
		e.intField("retries", int64(*s.Retries), false)
	}
	e.boolField("tls_verify", s.TLSVerify)
	e.intField("tls_verify_depth", int64(s.TLSVerifyDepth), true)
	e.strings("ca_certificates", s.CACertificates, true)
	if s.ClientCertificate != nil {
		e.field("client_certificate", false)
		e.raw(`{"id":`)
		e.str(s.ClientCertificate.ID)
		e.raw("}")
	}
	e.strings("tags", s.Tags, true)
	list(e, "routes", s.Routes, e.route)
	e.raw("}")
}

func (e *encoder) route(r *Route) {
	e.raw(`{"name":`)
	e.str(r.Name)
	e.strings("protocols", r.Protocols, false)
	e.strField("expression", r.Expression, true)
	if r.Priority != 0 {
		e.field("priority", false)
		e.buf = strconv.AppendUint(e.buf, r.Priority, 10)
	}
	e.strings("methods", r.Methods, true)
	e.strings("hosts", r.Hosts, true)
	e.strings("paths", r.Paths, true)
	if len(r.Headers) > 0 {
		e.field("headers", false)
		e.buf = append(e.buf, '{')
		for i, name := range slices.Sorted(maps.Keys(r.Headers)) {
			e.sep(i)
			e.str(name)
			e.buf = append(e.buf, ':')
			e.stringArray(r.Headers[name])
		}
		e.buf = append(e.buf, '}')
	}
	e.strings("snis", r.SNIs, true)
	list(e, "destinations", r.Destinations, func(d Endpoint) {
		e.raw(`{"port":`)
		e.buf = strconv.AppendInt(e.buf, int64(d.Port), 10)
		e.raw("}")
	})
	e.intField("regex_priority", r.RegexPrio, true)
	e.boolField("strip_path", r.StripPath)
	e.boolField("preserve_host", r.PreserveHost)
	list(e, "plugins", r.Plugins, e.plugin)
	e.raw("}")
}

func (e *encoder) boolField(key string, v *bool) {
	if v == nil {
		return
	}
	e.field(key, false)
	e.buf = strconv.AppendBool(e.buf, *v)
}

// plugin encodes its free-form config with encoding/json: plugins are few.
func (e *encoder) plugin(p *Plugin) {
	e.raw(`{"id":`)
	e.str(p.ID)
	e.strField("name", p.Name, false)
	if len(p.Config) > 0 {
		e.field("config", false)
		e.any(p.Config)
	}
	e.strings("tags", p.Tags, true)
	e.raw("}")
}

func (e *encoder) any(v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		e.err = err
		return
	}
	e.buf = append(e.buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

func (e *encoder) upstream(u *Upstream) {
	e.raw(`{"name":`)
	e.str(u.Name)
	e.strings("tags", u.Tags, true)
	list(e, "targets", u.Targets, func(t *Target) {
		e.raw(`{"id":`)
		e.str(t.ID)
		e.raw(`,"target":`)
		e.str(t.Target)
		e.raw(`,"weight":`)
		e.buf = strconv.AppendInt(e.buf, int64(t.Weight), 10)
		e.raw("}")
	})
	e.raw("}")
}

func (e *encoder) certificate(c *Certificate) {
	e.raw(`{"id":`)
	e.str(c.ID)
	e.strField("cert", c.Cert, false)
	e.strField("key", c.Key, false)
	e.strField("cert_alt", c.CertAlt, true)
	e.strField("key_alt", c.KeyAlt, true)
	e.strings("tags", c.Tags, true)
	list(e, "snis", c.SNIs, func(sni *SNI) {
		e.raw(`{"id":`)
		e.str(sni.ID)
		e.strField("name", sni.Name, false)
		e.strings("tags", sni.Tags, true)
		e.raw("}")
	})
	e.raw("}")
}

const hexDigits = "0123456789abcdef"

// plain marks the ASCII bytes a JSON string holds as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str writes a JSON string the way encoding/json does without HTML
// escaping: control characters, quotes and backslashes escaped, invalid
// UTF-8 as U+FFFD, and U+2028/U+2029 escaped for JavaScript's sake.
func (e *encoder) str(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			e.buf = append(e.buf, s[start:i]...)
			switch b {
			case '"', '\\':
				e.buf = append(e.buf, '\\', b)
			case '\b':
				e.buf = append(e.buf, '\\', 'b')
			case '\f':
				e.buf = append(e.buf, '\\', 'f')
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}
