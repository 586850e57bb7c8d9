package kongdouble

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// A parser, checker and evaluator for the ATC expression language of
// Kong's expressions router (Kong/atc-router: atc_grammar.pest, parser.rs,
// semantics.rs, interpreter.rs). Rust regexes are approximated with Go's
// regexp, whose syntax is close to the Rust regex crate's.

type valueKind int

const (
	vString valueKind = iota
	vInt
	vIP
	vCIDR
	vRegex
)

type atcValue struct {
	kind valueKind
	str  string
	num  int64
	ip   netip.Addr
	cidr netip.Prefix
	re   *regexp.Regexp
}

type exprNode interface{ isNode() }

type logicalNode struct {
	op   string // "&&", "||" or "!"
	l, r exprNode
}

type predicateNode struct {
	field      string
	lower, any bool
	op         string
	rhs        atcValue
}

func (logicalNode) isNode()   {}
func (predicateNode) isNode() {}

// atcError renders a parse error the way pest does.
type atcError struct {
	src string
	pos int
	msg string
}

func (e *atcError) Error() string {
	line, col, start := 1, 1, 0
	for i := 0; i < e.pos && i < len(e.src); i++ {
		if e.src[i] == '\n' {
			line, col, start = line+1, 1, i+1
		} else {
			col++
		}
	}
	end := strings.IndexByte(e.src[start:], '\n')
	text := e.src[start:]
	if end >= 0 {
		text = e.src[start : start+end]
	}
	num := strconv.Itoa(line)
	pad := strings.Repeat(" ", len(num))
	return fmt.Sprintf("%s--> %d:%d\n%s |\n%s | %s\n%s | %s^---\n%s |\n%s = %s",
		pad, line, col, pad, num, text, pad, strings.Repeat(" ", col-1), pad, pad, e.msg)
}

type atcParser struct {
	src string
	pos int
}

// parseATC parses a matcher: SOI ~ expression ~ EOI.
func parseATC(src string) (exprNode, error) {
	p := &atcParser{src: src}
	n, err := p.expression(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos < len(p.src) {
		return nil, p.fail("expected EOI, and_op, or or_op")
	}
	return n, nil
}

func (p *atcParser) fail(msg string) error { return &atcError{src: p.src, pos: p.pos, msg: msg} }

func (p *atcParser) ws() {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *atcParser) lit(s string) bool {
	if strings.HasPrefix(p.src[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

// precedence follows the reference parser's Pratt table, where `||` was
// registered after `&&` and therefore binds tighter.
var precedence = map[string]int{"&&": 1, "||": 2}

func (p *atcParser) expression(minPrec int) (exprNode, error) {
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		save := p.pos
		p.ws()
		op := ""
		switch {
		case strings.HasPrefix(p.src[p.pos:], "&&"):
			op = "&&"
		case strings.HasPrefix(p.src[p.pos:], "||"):
			op = "||"
		}
		if op == "" || precedence[op] < minPrec {
			p.pos = save
			return left, nil
		}
		p.pos += 2
		right, err := p.expression(precedence[op] + 1)
		if err != nil {
			return nil, err
		}
		left = logicalNode{op: op, l: left, r: right}
	}
}

func (p *atcParser) term() (exprNode, error) {
	p.ws()
	start := p.pos
	if p.lit("!") {
		p.ws()
		if !p.lit("(") {
			p.pos = start
			return nil, p.fail("expected term")
		}
		n, err := p.parenthesised()
		if err != nil {
			return nil, err
		}
		return logicalNode{op: "!", l: n}, nil
	}
	if p.lit("(") {
		return p.parenthesised()
	}
	if p.pos < len(p.src) && isAlpha(p.src[p.pos]) {
		return p.predicate()
	}
	return nil, p.fail("expected term")
}

func (p *atcParser) parenthesised() (exprNode, error) {
	n, err := p.expression(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if !p.lit(")") {
		return nil, p.fail("expected and_op, or or_op")
	}
	return n, nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *atcParser) ident() string {
	start := p.pos
	if p.pos >= len(p.src) || !isAlpha(p.src[p.pos]) {
		return ""
	}
	p.pos++
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if !(isAlpha(c) || isDigit(c) || c == '_' || c == '.') {
			break
		}
		p.pos++
	}
	return p.src[start:p.pos]
}

// lhs = transform_func | ident, transform_func = ident "(" lhs ")".
func (p *atcParser) lhs() (predicateNode, error) {
	start := p.pos
	name := p.ident()
	afterIdent := p.pos
	p.ws()
	if p.lit("(") {
		p.ws()
		inner, err := p.lhs()
		if err == nil {
			p.ws()
			if p.lit(")") {
				switch name {
				case "lower":
					inner.lower = true
				case "any":
					inner.any = true
				default:
					p.pos = start
					return inner, &atcError{src: p.src, pos: start, msg: "unknown transformation function: " + name}
				}
				return inner, nil
			}
		}
	}
	p.pos = afterIdent
	if name == "" {
		return predicateNode{}, p.fail("expected lhs")
	}
	return predicateNode{field: name}, nil
}

var binaryOps = []string{"==", "!=", "~", "^=", "=^", ">=", ">", "<=", "<", "in", "not", "contains"}

func (p *atcParser) predicate() (exprNode, error) {
	pred, err := p.lhs()
	if err != nil {
		return nil, err
	}
	p.ws()
	op := ""
	for _, o := range binaryOps {
		save := p.pos
		if !p.lit(o) {
			continue
		}
		if o == "not" {
			p.ws()
			if !p.lit("in") {
				p.pos = save
				continue
			}
			o = "not in"
		}
		op = o
		break
	}
	if op == "" {
		return nil, p.fail("expected binary_operator")
	}
	pred.op = op
	p.ws()
	rhsPos := p.pos
	v, err := p.rhs()
	if err != nil {
		return nil, err
	}
	if op == "~" {
		if v.kind != vString {
			return nil, &atcError{src: p.src, pos: rhsPos, msg: "regex operator can only be used with String operands"}
		}
		re, err := regexp.Compile(v.str)
		if err != nil {
			return nil, &atcError{src: p.src, pos: rhsPos, msg: "regex parse error: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ")}
		}
		v = atcValue{kind: vRegex, str: v.str, re: re}
	}
	pred.rhs = v
	return pred, nil
}

// rhs = str_literal | rawstr_literal | ip_literal | int_literal
func (p *atcParser) rhs() (atcValue, error) {
	start := p.pos
	if p.lit(`"`) {
		var b strings.Builder
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			switch c {
			case '"':
				p.pos++
				return atcValue{kind: vString, str: b.String()}, nil
			case '\\':
				if p.pos+1 >= len(p.src) {
					p.pos = start
					return atcValue{}, p.fail("expected rhs")
				}
				esc := map[byte]byte{'"': '"', '\\': '\\', 'n': '\n', 'r': '\r', 't': '\t'}[p.src[p.pos+1]]
				if esc == 0 {
					p.pos = start
					return atcValue{}, p.fail("expected rhs")
				}
				b.WriteByte(esc)
				p.pos += 2
			default:
				b.WriteByte(c)
				p.pos++
			}
		}
		p.pos = start
		return atcValue{}, p.fail("expected rhs")
	}
	if p.lit(`r#"`) {
		end := strings.Index(p.src[p.pos:], `"#`)
		if end < 0 {
			p.pos = start
			return atcValue{}, p.fail("expected rhs")
		}
		s := p.src[p.pos : p.pos+end]
		p.pos += end + 2
		return atcValue{kind: vString, str: s}, nil
	}
	if v, ok, err := p.ipLiteral(); ok || err != nil {
		return v, err
	}
	return p.intLiteral()
}

func (p *atcParser) digits(min, max int) int {
	n := 0
	for n < max && p.pos+n < len(p.src) && isDigit(p.src[p.pos+n]) {
		n++
	}
	if n < min {
		return -1
	}
	p.pos += n
	return n
}

func (p *atcParser) scanIPv4() bool {
	start := p.pos
	if p.digits(1, 3) < 0 {
		return false
	}
	for i := 0; i < 3; i++ {
		if !p.lit(".") || p.digits(1, 3) < 0 {
			p.pos = start
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (p *atcParser) hexGroup() bool {
	n := 0
	for n < 4 && p.pos+n < len(p.src) && isHexDigit(p.src[p.pos+n]) {
		n++
	}
	p.pos += n
	return n > 0
}

// scanIPv6 is `( ":" | HEX{1,4} ) ~ ":" ~ ( HEX{1,4} | ":" )*`.
func (p *atcParser) scanIPv6() bool {
	start := p.pos
	if !p.lit(":") && !p.hexGroup() {
		return false
	}
	if !p.lit(":") {
		p.pos = start
		return false
	}
	for p.hexGroup() || p.lit(":") {
	}
	return true
}

func (p *atcParser) cidrSuffix(maxDigits int) bool {
	start := p.pos
	if p.lit("/") && p.digits(1, maxDigits) > 0 {
		return true
	}
	p.pos = start
	return false
}

// ipLiteral tries ipv4_cidr | ipv6_cidr | ipv4 | ipv6 in that order.
func (p *atcParser) ipLiteral() (atcValue, bool, error) {
	start := p.pos
	type try struct {
		scan  func() bool
		digit int
	}
	for _, t := range []try{{p.scanIPv4, 2}, {p.scanIPv6, 3}, {p.scanIPv4, 0}, {p.scanIPv6, 0}} {
		p.pos = start
		if !t.scan() {
			continue
		}
		if t.digit > 0 && !p.cidrSuffix(t.digit) {
			continue
		}
		text := p.src[start:p.pos]
		if t.digit > 0 {
			pfx, err := netip.ParsePrefix(text)
			if err != nil || pfx.Masked() != pfx {
				return atcValue{}, false, &atcError{src: p.src, pos: start, msg: "invalid IP address syntax"}
			}
			return atcValue{kind: vCIDR, cidr: pfx}, true, nil
		}
		addr, err := netip.ParseAddr(text)
		if err != nil {
			return atcValue{}, false, &atcError{src: p.src, pos: start, msg: "invalid IP address syntax"}
		}
		return atcValue{kind: vIP, ip: addr}, true, nil
	}
	p.pos = start
	return atcValue{}, false, nil
}

// int_literal = "-"? ~ (oct_digits | "0x" hex_digits | dec_digits)
func (p *atcParser) intLiteral() (atcValue, error) {
	start := p.pos
	neg := p.lit("-")
	digitsStart := p.pos
	radix := 10
	switch {
	case p.pos+1 < len(p.src) && p.src[p.pos] == '0' && p.src[p.pos+1] >= '0' && p.src[p.pos+1] <= '7':
		radix = 8
		p.pos++
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '7' {
			p.pos++
		}
	case strings.HasPrefix(p.src[p.pos:], "0x") && p.pos+2 < len(p.src) && isHexDigit(p.src[p.pos+2]):
		radix = 16
		p.pos += 2
		digitsStart = p.pos
		for p.pos < len(p.src) && isHexDigit(p.src[p.pos]) {
			p.pos++
		}
	default:
		if p.digits(1, len(p.src)) < 0 {
			p.pos = start
			return atcValue{}, p.fail("expected rhs")
		}
	}
	text := p.src[digitsStart:p.pos]
	if radix == 8 {
		text = text[1:]
	}
	n, err := strconv.ParseInt(text, radix, 64)
	if err != nil {
		return atcValue{}, &atcError{src: p.src, pos: digitsStart, msg: "number too large to fit in target type"}
	}
	if neg {
		n = -n
	}
	return atcValue{kind: vInt, num: n}, nil
}

// ---- schema and semantic checks ----

type atcSchema map[string]valueKind

var httpATCSchema = atcSchema{
	"net.protocol": vString, "tls.sni": vString, "http.method": vString, "http.host": vString,
	"http.path": vString, "http.path.segments.*": vString, "http.headers.*": vString, "http.queries.*": vString,
	"net.src.port": vInt, "net.dst.port": vInt, "http.path.segments.len": vInt,
	"net.src.ip": vIP, "net.dst.ip": vIP,
}

var streamATCSchema = atcSchema{
	"net.protocol": vString, "tls.sni": vString,
	"net.src.port": vInt, "net.dst.port": vInt,
	"net.src.ip": vIP, "net.dst.ip": vIP,
}

// typeOf is Schema::type_of: exact field, else "<prefix>.*".
func (s atcSchema) typeOf(field string) (valueKind, bool) {
	if t, ok := s[field]; ok {
		return t, true
	}
	if i := strings.LastIndex(field, "."); i >= 0 {
		t, ok := s[field[:i]+".*"]
		return t, ok
	}
	return 0, false
}

// validateATC parses and type-checks an expression, returning the fields
// it uses (like router.validate in resty.router).
func validateATC(schema atcSchema, src string) ([]string, string) {
	n, err := parseATC(src)
	if err != nil {
		return nil, err.Error()
	}
	var fields []string
	seen := map[string]bool{}
	var check func(n exprNode) string
	check = func(n exprNode) string {
		switch x := n.(type) {
		case logicalNode:
			if msg := check(x.l); msg != "" {
				return msg
			}
			if x.r != nil {
				return check(x.r)
			}
			return ""
		case predicateNode:
			if !seen[x.field] {
				seen[x.field] = true
				fields = append(fields, x.field)
			}
			return checkPredicate(schema, x)
		}
		return ""
	}
	if msg := check(n); msg != "" {
		return nil, msg
	}
	return fields, ""
}

func checkPredicate(schema atcSchema, p predicateNode) string {
	lt, ok := schema.typeOf(p.field)
	if !ok {
		return "Unknown LHS field"
	}
	if p.op != "~" && p.op != "in" && p.op != "not in" && lt != p.rhs.kind {
		return "Type mismatch between the LHS and RHS values of predicate"
	}
	if p.lower && lt != vString {
		return "lower-case transformation function only supported with String type fields"
	}
	switch p.op {
	case "~":
		if lt != vString {
			return "Regex operators only supports string operands"
		}
	case "^=", "=^":
		if p.rhs.kind != vString {
			return "Regex/Prefix/Postfix operators only supports string operands"
		}
	case ">", ">=", "<", "<=":
		if p.rhs.kind != vInt {
			return "Greater/GreaterOrEqual/Lesser/LesserOrEqual operators only supports integer operands"
		}
	case "in", "not in":
		if lt != vIP || p.rhs.kind != vCIDR {
			return "In/NotIn operators only supports IP in CIDR"
		}
	case "contains":
		if p.rhs.kind != vString {
			return "Contains operator only supports string operands"
		}
	}
	return ""
}

// ---- evaluation ----

// atcContext maps a field to its values; a missing field has no entry.
type atcContext map[string][]atcValue

func evalATC(n exprNode, ctx atcContext) bool {
	switch x := n.(type) {
	case logicalNode:
		switch x.op {
		case "&&":
			return evalATC(x.l, ctx) && evalATC(x.r, ctx)
		case "||":
			return evalATC(x.l, ctx) || evalATC(x.r, ctx)
		}
		return !evalATC(x.l, ctx)
	case predicateNode:
		return evalPredicate(x, ctx)
	}
	return false
}

// evalPredicate: a missing field is false whatever the operator; every
// value must pass unless the field is wrapped in any().
func evalPredicate(p predicateNode, ctx atcContext) bool {
	values, ok := ctx[p.field]
	if !ok || len(values) == 0 {
		return false
	}
	for _, v := range values {
		if p.lower && v.kind == vString {
			v.str = strings.ToLower(v.str)
		}
		matched := matchValue(p, v)
		if p.any && matched {
			return true
		}
		if !p.any && !matched {
			return false
		}
	}
	return !p.any
}

func matchValue(p predicateNode, v atcValue) bool {
	r := p.rhs
	switch p.op {
	case "==":
		return valueEqual(v, r)
	case "!=":
		return !valueEqual(v, r)
	case "~":
		return r.re.MatchString(v.str)
	case "^=":
		return strings.HasPrefix(v.str, r.str)
	case "=^":
		return strings.HasSuffix(v.str, r.str)
	case "contains":
		return strings.Contains(v.str, r.str)
	case ">":
		return v.num > r.num
	case ">=":
		return v.num >= r.num
	case "<":
		return v.num < r.num
	case "<=":
		return v.num <= r.num
	case "in":
		return r.cidr.Contains(v.ip)
	case "not in":
		return !r.cidr.Contains(v.ip)
	}
	return false
}

func valueEqual(a, b atcValue) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case vString:
		return a.str == b.str
	case vInt:
		return a.num == b.num
	case vIP:
		return a.ip == b.ip
	}
	return false
}
