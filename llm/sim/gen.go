package sim

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// gen generates schema-valid values from compiled nodes.
type gen struct {
	r     *rand.Rand
	nodes int // values generated so far, bounded by maxNodes
}

// maxNodes bounds the size of one generated value.
const maxNodes = 4096

// maxDepth bounds recursion: below it optional members are left out and
// arrays hold their minimum.
const maxDepth = 5

// hardDepth stops schemas whose required members nest forever.
const hardDepth = 24

// value returns a valid instance of n; name is the property (or the
// nearest property above an array item) it is for, used to pick realistic
// values.
func (g *gen) value(n *snode, name string, depth int) *val {
	if n == nil || n.isFalse {
		return &val{k: vNull, n: n}
	}
	if n.constVal != nil {
		v := n.constVal.clone()
		v.n = n
		return v
	}
	if len(n.enum) > 0 {
		v := n.enum[g.r.IntN(len(n.enum))].clone()
		v.n = n
		return v
	}
	g.nodes++
	if len(n.types) == 0 || depth > hardDepth || g.nodes > maxNodes {
		// Nothing but null allowed, or a schema that requires infinite
		// nesting: stop here (invalid, but finite).
		return &val{k: vNull, n: n}
	}
	if n.nullable && depth > 0 && g.r.IntN(20) == 0 {
		return &val{k: vNull, n: n}
	}
	t := n.types[0]
	if len(n.types) > 1 {
		t = n.types[g.r.IntN(len(n.types))]
	}
	var v *val
	switch t {
	case "object":
		v = g.object(n, depth)
	case "array":
		v = g.array(n, name, depth)
	case "integer":
		v = &val{k: vNum, s: g.number(n, name, true)}
	case "number":
		v = &val{k: vNum, s: g.number(n, name, false)}
	case "boolean":
		v = &val{k: vBool, s: strconv.FormatBool(g.r.IntN(2) == 0)}
	case "null":
		v = &val{k: vNull}
	default:
		v = &val{k: vStr, s: g.str(n, name)}
	}
	v.n = n
	return v
}

func (g *gen) object(n *snode, depth int) *val {
	v := &val{k: vObj, keys: make([]string, 0, len(n.props)), vals: make([]*val, 0, len(n.props))}
	for _, p := range n.props {
		if g.nodes > maxNodes {
			break
		}
		if !n.reqSet[p.name] && (depth >= maxDepth || g.r.IntN(5) == 0) {
			continue
		}
		v.keys = append(v.keys, p.name)
		v.vals = append(v.vals, g.value(p.n, p.name, depth+1))
	}
	for _, r := range n.required { // required but not described
		if n.prop(r) == nil {
			v.keys = append(v.keys, r)
			v.vals = append(v.vals, &val{k: vStr, s: g.str(&snode{maxLen: -1}, r)})
		}
	}
	return v
}

func (g *gen) array(n *snode, name string, depth int) *val {
	count := 1 + g.r.IntN(3)
	if depth >= maxDepth {
		count = 0
	}
	count = max(count, n.minItems, len(n.prefix))
	if n.maxItems >= 0 {
		count = min(count, n.maxItems)
	}
	if n.items == nil && len(n.prefix) > 0 {
		count = min(max(n.minItems, len(n.prefix)), len(n.prefix))
	}
	v := &val{k: vArr, vals: make([]*val, 0, count)}
	for i := range count {
		if g.nodes > maxNodes {
			break
		}
		item := n.items
		if i < len(n.prefix) {
			item = n.prefix[i]
		}
		var e *val
		for try := 0; try < 8; try++ {
			e = g.value(item, name, depth+1)
			if !n.unique || !containsVal(v.vals, e) {
				break
			}
		}
		if n.unique && containsVal(v.vals, e) {
			break // cannot find another distinct value: stop at what we have
		}
		v.vals = append(v.vals, e)
	}
	return v
}

func containsVal(vs []*val, x *val) bool {
	for _, v := range vs {
		if v.equal(x) {
			return true
		}
	}
	return false
}

// numeric ranges by field name, for plausible values.
var numberHints = []struct {
	words   []string
	lo, hi  float64
	decimal bool
}{
	{[]string{"percent", "pct", "rate", "discount", "ratio"}, 0, 30, true},
	{[]string{"price", "amount", "total", "subtotal", "tax", "cost", "fee", "balance", "salary", "revenue", "value"}, 5, 2000, true},
	{[]string{"quantity", "qty", "count", "units", "items", "number_of", "num"}, 1, 10, false},
	{[]string{"year"}, 2018, 2025, false},
	{[]string{"month"}, 1, 12, false},
	{[]string{"day"}, 1, 28, false},
	{[]string{"age"}, 18, 80, false},
	{[]string{"score", "rating", "stars"}, 1, 5, false},
	{[]string{"lat"}, -60, 60, true},
	{[]string{"lon", "lng"}, -120, 120, true},
}

// number returns a number (as JSON text) within n's bounds.
func (g *gen) number(n *snode, name string, integer bool) string {
	lo, hi, decimal := 1.0, 1000.0, !integer
	ln := strings.ToLower(name)
	for _, h := range numberHints {
		if containsAny(ln, h.words) {
			lo, hi, decimal = h.lo, h.hi, h.decimal && !integer
			break
		}
	}
	step := 0.01
	if !decimal {
		step = 1
	}
	// The schema's bounds, made inclusive.
	slo, shi := math.Inf(-1), math.Inf(1)
	if n.hasMin {
		slo = n.min
		if n.exclMin {
			slo = nextAbove(n.min, step, integer)
		}
	}
	if n.hasMax {
		shi = n.max
		if n.exclMax {
			shi = nextBelow(n.max, step, integer)
		}
	}
	if integer {
		slo, shi = math.Ceil(slo), math.Floor(shi)
	}
	lo, hi = max(lo, slo), min(hi, shi)
	if lo > hi { // the hint's range is outside the schema's: use the schema's
		lo, hi = slo, shi
		if math.IsInf(lo, -1) {
			lo = hi - 100
		}
		if math.IsInf(hi, 1) {
			hi = lo + 100
		}
	}
	if m := n.multipleOf; m > 0 {
		klo, khi := math.Ceil(lo/m-1e-9), math.Floor(hi/m+1e-9)
		if klo > khi {
			klo, khi = math.Ceil(slo/m-1e-9), math.Floor(shi/m+1e-9)
		}
		k := klo
		if span := khi - klo; span > 0 && span < 1e15 {
			k += float64(g.r.Int64N(int64(span) + 1))
		}
		return strconv.FormatFloat(k*m, 'f', decimals(m), 64)
	}
	if integer || !decimal {
		span := hi - lo
		x := lo
		if span > 0 && span < 1e15 {
			x += float64(g.r.Int64N(int64(span) + 1))
		}
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	x := lo + g.r.Float64()*(hi-lo)
	x = math.Round(x*100) / 100
	if x < lo || (n.exclMin && x <= n.min) {
		x = lo
	}
	if x > hi || (n.exclMax && x >= n.max) {
		x = hi
	}
	s := strconv.FormatFloat(x, 'f', 2, 64)
	if f, _ := strconv.ParseFloat(s, 64); f < lo || f > hi {
		s = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return s
}

func nextAbove(x, step float64, integer bool) float64 {
	if integer {
		return math.Floor(x) + 1
	}
	return x + min(step, math.Max(math.Abs(x)*1e-9, 1e-9)*1e6)
}

func nextBelow(x, step float64, integer bool) float64 {
	if integer {
		return math.Ceil(x) - 1
	}
	return x - min(step, math.Max(math.Abs(x)*1e-9, 1e-9)*1e6)
}

// decimals is how many fraction digits m needs.
func decimals(m float64) int {
	s := strconv.FormatFloat(m, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// str returns a string for n. A pattern is never satisfied: like a model
// that ignores regular expressions, the simulator writes a plain word.
func (g *gen) str(n *snode, name string) string {
	var s string
	switch {
	case n.pattern != "":
		return g.patternMiss(n)
	case n.format != "" && g.formatted(n.format) != "":
		s = g.formatted(n.format)
	default:
		s = g.named(strings.ToLower(name))
	}
	return fitLength(s, n.minLen, n.maxLen)
}

// patternMiss returns a plain word of acceptable length that the pattern
// does not match (when the pattern accepts everything, so be it).
func (g *gen) patternMiss(n *snode) string {
	start := g.r.IntN(len(plainWords))
	var s string
	for i := range len(plainWords) {
		s = fitLength(plainWords[(start+i)%len(plainWords)], n.minLen, n.maxLen)
		if n.patRe == nil || !n.patRe.MatchString(s) {
			return s
		}
	}
	for _, alt := range []string{"N/A", "unknown", "see attached", "?", ""} {
		if a := fitLength(alt, n.minLen, n.maxLen); n.patRe == nil || !n.patRe.MatchString(a) {
			return a
		}
	}
	return s
}

// fitLength pads or cuts s to [minLen, maxLen] characters (maxLen < 0: none).
func fitLength(s string, minLen, maxLen int) string {
	if maxLen >= 0 && minLen > maxLen {
		minLen = maxLen
	}
	if n := len([]rune(s)); n < minLen {
		pad := " " + s
		if s == "" {
			pad = "x"
		}
		var b strings.Builder
		b.WriteString(s)
		for have, step := n, len([]rune(pad)); have < minLen; have += step {
			b.WriteString(pad)
		}
		s = b.String()
	}
	if maxLen >= 0 {
		if r := []rune(s); len(r) > maxLen {
			s = strings.TrimRight(string(r[:maxLen]), " ")
			if len([]rune(s)) < minLen {
				s = string(r[:maxLen])
			}
		}
	}
	return s
}

func (g *gen) formatted(format string) string {
	switch format {
	case "date":
		return g.date()
	case "date-time":
		return g.date() + "T" + g.clock() + "Z"
	case "time":
		return g.clock() + "Z"
	case "email", "idn-email":
		return g.email()
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		return "https://www." + g.pick(domains) + "/" + g.pick(plainWords)
	case "hostname", "idn-hostname":
		return "api." + g.pick(domains)
	case "uuid":
		return g.uuid()
	case "ipv4":
		return "192.0.2." + strconv.Itoa(1+g.r.IntN(254))
	case "ipv6":
		return "2001:db8::" + strconv.FormatInt(int64(1+g.r.IntN(0xfffe)), 16)
	case "duration":
		return "P" + strconv.Itoa(1+g.r.IntN(30)) + "D"
	}
	return ""
}

func (g *gen) date() string {
	return strconv.Itoa(2022+g.r.IntN(4)) + "-" + pad2(1+g.r.IntN(12)) + "-" + pad2(1+g.r.IntN(28))
}

func (g *gen) clock() string {
	return pad2(8+g.r.IntN(10)) + ":" + pad2(g.r.IntN(60)) + ":" + pad2(g.r.IntN(60))
}

func pad2(i int) string {
	if i < 10 {
		return "0" + strconv.Itoa(i)
	}
	return strconv.Itoa(i)
}

func (g *gen) email() string {
	return strings.ToLower(g.pick(firstNames)+"."+g.pick(lastNames)) + "@" + g.pick(domains)
}

func (g *gen) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hx = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hx[c>>4], hx[c&0xf])
	}
	return string(out)
}

// named returns a realistic string for a field name (lower case).
func (g *gen) named(name string) string {
	switch {
	case strings.Contains(name, "email"):
		return g.email()
	case containsAny(name, []string{"url", "uri", "website", "link", "homepage"}):
		return "https://www." + g.pick(domains)
	case containsAny(name, []string{"date", "_at", "time"}):
		return g.date()
	case strings.Contains(name, "currency"):
		return g.pick([]string{"EUR", "USD", "GBP", "CHF", "JPY"})
	case strings.Contains(name, "country"):
		return g.pick(countries)
	case strings.Contains(name, "city"):
		return g.pick(cities)
	case containsAny(name, []string{"phone", "tel", "mobile"}):
		return "+1 555 01" + pad2(g.r.IntN(100))
	case containsAny(name, []string{"company", "vendor", "supplier", "merchant", "seller", "buyer", "customer", "organization", "organisation", "employer", "issuer", "payee", "payer"}):
		return g.pick(companies)
	case containsAny(name, []string{"address", "street"}):
		return strconv.Itoa(1+g.r.IntN(250)) + " " + g.pick(streets)
	case containsAny(name, []string{"zip", "postal", "postcode"}):
		return strconv.Itoa(10000 + g.r.IntN(89999))
	case containsAny(name, []string{"first_name", "firstname", "given"}):
		return g.pick(firstNames)
	case containsAny(name, []string{"last_name", "lastname", "surname", "family"}):
		return g.pick(lastNames)
	case strings.Contains(name, "name") || containsAny(name, []string{"author", "contact", "person", "manager", "owner"}):
		return g.pick(firstNames) + " " + g.pick(lastNames)
	case containsAny(name, []string{"description", "product", "item", "title", "summary", "subject", "service"}):
		return g.pick(adjectives) + " " + g.pick(products)
	case containsAny(name, []string{"note", "comment", "remark", "message", "text", "body", "content"}):
		return g.pick(sentences)
	case containsAny(name, []string{"id", "number", "code", "sku", "reference", "ref", "no"}):
		return strings.ToUpper(prefix(name)) + "-" + strconv.Itoa(2022+g.r.IntN(4)) + "-" + strconv.Itoa(1000+g.r.IntN(9000))
	case containsAny(name, []string{"status", "state"}):
		return g.pick([]string{"active", "pending", "paid", "open", "closed"})
	case containsAny(name, []string{"language", "lang", "locale"}):
		return g.pick([]string{"en", "de", "fr", "es"})
	case containsAny(name, []string{"category", "type", "kind", "tag", "label"}):
		return g.pick(plainWords)
	}
	return g.pick(plainWords)
}

// prefix makes a code prefix from a field name: "invoice_number" -> "INV".
func prefix(name string) string {
	letters := make([]byte, 0, 3)
	for i := 0; i < len(name) && len(letters) < 3; i++ {
		if c := name[i]; c >= 'a' && c <= 'z' {
			letters = append(letters, c)
		}
	}
	if len(letters) == 0 {
		return "REF"
	}
	return string(letters)
}

var (
	firstNames = []string{"Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Keiko", "Liam", "Maya", "Noah", "Olivia", "Pedro", "Quinn", "Rosa", "Sven", "Tara"}
	lastNames  = []string{"Schmidt", "Garcia", "Nguyen", "Okafor", "Rossi", "Dubois", "Kowalski", "Tanaka", "Silva", "Hansen", "Meyer", "Patel", "Novak", "Larsen", "Moreau"}
	companies  = []string{"Acme GmbH", "Northwind Traders", "Blue Harbor Ltd", "Contoso SA", "Globex Corporation", "Initech Inc", "Umbrella Logistics", "Vandelay Industries", "Helios Energy AG", "Pinecrest Foods"}
	cities     = []string{"Berlin", "Lisbon", "Toronto", "Osaka", "Lyon", "Krakow", "Austin", "Melbourne", "Oslo", "Nairobi"}
	countries  = []string{"Germany", "Portugal", "Canada", "Japan", "France", "Poland", "United States", "Australia", "Norway", "Kenya"}
	streets    = []string{"Main Street", "Harbour Road", "Lindenallee", "Rue de la Paix", "Oak Avenue", "Station Road", "Kingsway"}
	domains    = []string{"example.com", "example.org", "example.net", "mail.example.com"}
	adjectives = []string{"Ergonomic", "Standard", "Premium", "Annual", "Wireless", "Stainless", "Recycled", "Compact"}
	products   = []string{"office chair", "support plan", "laptop stand", "consulting hours", "cable set", "desk lamp", "software licence", "shipping", "printer paper", "monitor arm"}
	sentences  = []string{"Payment due within 30 days.", "Delivered to the front desk.", "Please quote the reference on payment.", "Thank you for your business.", "Partial shipment, rest to follow."}
	plainWords = []string{"standard", "general", "misc", "other", "regular", "default", "primary", "basic", "sample", "typical", "ordinary", "common"}
)
