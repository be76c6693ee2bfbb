package llm

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// Force modes of the simulator.
const (
	ForceTruncated  = "truncated"     // output cut short, finish reason length
	ForceGrammar    = "grammar"       // prose without any JSON, different every attempt
	ForceTransport  = "transport"     // a *heal.Error of kind transport (HTTP 503)
	ForceAuth       = "auth"          // a *heal.Error of kind auth (HTTP 401)
	ForceRequest    = "request_error" // a *heal.Error of kind request_error (HTTP 400)
	ForceNoProgress = "no_progress"   // one schema fault, then the same output on every heal turn
)

// SimConfig configures the simulated model. Rates are probabilities in
// [0, 1], applied independently per call.
type SimConfig struct {
	// Seed makes outputs reproducible: the same Seed, job id and attempt
	// give the same output.
	Seed int64
	// Latency is slept (interruptibly) on every call: the simulated
	// model's response time.
	Latency time.Duration
	// Formatting faults, which the sanitizer repairs: a Markdown code fence,
	// prose before and after, a trailing comma. Applied on every turn.
	FenceRate, ProseRate, TrailingCommaRate float64
	// Schema faults, which need a heal turn: a number written as a string
	// ("12,50"), a required field left out, an enum value in the wrong case
	// ("eur" for "EUR"). Applied on first attempts only.
	WrongTypeRate, MissingRequiredRate, EnumNearMissRate float64
	// FixRate is the probability that each path named in the heal feedback
	// gets fixed on the next turn.
	FixRate float64
	// Force, when set, produces one failure class on every call: truncated,
	// grammar, transport, auth, request_error or no_progress.
	Force string
}

// DefaultSimConfig is the demo's simulator: about a third of first answers
// need a heal turn, nine in ten heal turns fix what they were told, and
// 5ms of latency.
func DefaultSimConfig() SimConfig {
	return SimConfig{
		Seed:                1,
		Latency:             5 * time.Millisecond,
		FenceRate:           0.3,
		ProseRate:           0.15,
		TrailingCommaRate:   0.1,
		WrongTypeRate:       0.12,
		MissingRequiredRate: 0.08,
		EnumNearMissRate:    0.1,
		FixRate:             0.9,
	}
}

// Sim is the built-in simulated model, for demos, rehearsal and load tests:
// no network, no key. It reads the request's JSON Schema and writes a valid
// instance with realistic-looking values (names, dates, amounts, codes),
// then injects the faults real models make at the configured rates. On a
// heal turn it reads the conversation as a model would: it takes its
// previous answer (the last assistant turn) and fixes each path named in the
// feedback (lines "- /path: expected ..., got ...") with probability
// FixRate.
//
// Supported keywords: type (and type arrays with null), properties,
// required, items, prefixItems, minItems, maxItems, uniqueItems, enum,
// const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
// minLength, maxLength, format (date, date-time, time, email, uri, uuid,
// hostname, ipv4, ipv6, duration), $ref into the same document (#/$defs,
// #/definitions, any pointer), allOf (merged), anyOf and oneOf (first
// branch, skipping a leading null). The simulator never satisfies
// `pattern`: it writes a plain word there, like a model that ignores
// regular expressions, so a schema with a strict pattern shows up in the
// dead letters; the demo relies on it.
//
// Safe for concurrent use; compiled schemas are cached by their text.
type Sim struct {
	cfg SimConfig

	mu    sync.RWMutex
	cache map[string]*simSchema
}

type simSchema struct {
	root *snode
	err  error
}

// maxCachedSchemas bounds the compiled-schema cache.
const maxCachedSchemas = 512

var _ heal.Model = (*Sim)(nil)

// NewSim returns a simulator. Rates must be within [0, 1] and Force one of
// the documented modes.
func NewSim(cfg SimConfig) (*Sim, error) {
	rates := map[string]float64{
		"fence": cfg.FenceRate, "prose": cfg.ProseRate, "trailing comma": cfg.TrailingCommaRate,
		"wrong type": cfg.WrongTypeRate, "missing required": cfg.MissingRequiredRate,
		"enum near-miss": cfg.EnumNearMissRate, "fix": cfg.FixRate,
	}
	for name, r := range rates {
		if !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("%w: sim %s rate %v: want a probability in [0, 1]", ErrConfig, name, r)
		}
	}
	switch cfg.Force {
	case "", ForceTruncated, ForceGrammar, ForceTransport, ForceAuth, ForceRequest, ForceNoProgress:
	default:
		return nil, fmt.Errorf("%w: sim force %q: want truncated, grammar, transport, auth, request_error or no_progress", ErrConfig, cfg.Force)
	}
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("%w: sim latency %s is negative", ErrConfig, cfg.Latency)
	}
	return &Sim{cfg: cfg, cache: map[string]*simSchema{}}, nil
}

// Provider returns "sim".
func (s *Sim) Provider() string { return ProviderSim }

// schema returns the compiled schema for raw, from the cache when it can.
func (s *Sim) schema(raw []byte) (*snode, error) {
	s.mu.RLock()
	c, ok := s.cache[string(raw)]
	s.mu.RUnlock()
	if ok {
		return c.root, c.err
	}
	root, err := compileSchema(raw)
	s.mu.Lock()
	if len(s.cache) >= maxCachedSchemas {
		clear(s.cache)
	}
	s.cache[string(raw)] = &simSchema{root: root, err: err}
	s.mu.Unlock()
	return root, err
}

// Complete answers one request. See Sim for what it does.
func (s *Sim) Complete(ctx context.Context, req heal.Request) (heal.Response, error) {
	start := time.Now()
	if err := sleep(ctx, s.cfg.Latency); err != nil {
		return heal.Response{}, fmt.Errorf("sim: waiting for the simulated latency: %w", err)
	}
	switch s.cfg.Force {
	case ForceTransport:
		return heal.Response{}, &heal.Error{Kind: heal.KindTransport, Provider: ProviderSim, StatusCode: 503, Message: "simulated overload (forced transport failure)"}
	case ForceAuth:
		return heal.Response{}, &heal.Error{Kind: heal.KindAuth, Provider: ProviderSim, StatusCode: 401, Message: "simulated invalid API key (forced auth failure)", KeyEnv: "SIM_API_KEY"}
	case ForceRequest:
		return heal.Response{}, &heal.Error{Kind: heal.KindRequest, Provider: ProviderSim, StatusCode: 400, Message: "simulated: the model does not exist (forced request error)"}
	}
	if len(bytes.TrimSpace(req.Schema)) == 0 {
		return heal.Response{}, &heal.Error{Kind: heal.KindRequest, Provider: ProviderSim, Message: "the simulator needs the job's JSON Schema in the request"}
	}
	root, err := s.schema(req.Schema)
	if err != nil {
		return heal.Response{}, &heal.Error{Kind: heal.KindRequest, Provider: ProviderSim, Message: err.Error()}
	}
	r := s.rng(req)
	g := &gen{r: r}
	content := s.answer(g, root, req)

	resp := heal.Response{Content: content, FinishReason: heal.FinishStop, RawFinishReason: "stop"}
	if s.cfg.Force == ForceTruncated {
		resp.Content = content[:len(content)*3/5]
		resp.FinishReason, resp.RawFinishReason = heal.FinishLength, "length"
	}
	if req.MaxTokens > 0 && tokens(len(resp.Content)) > req.MaxTokens {
		resp.Content = resp.Content[:min(len(resp.Content), req.MaxTokens*4)]
		resp.FinishReason, resp.RawFinishReason = heal.FinishLength, "length"
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content) + 16
	}
	resp.Usage = heal.Usage{PromptTokens: tokens(prompt), CompletionTokens: tokens(len(resp.Content))}
	resp.Latency = time.Since(start)
	return resp, nil
}

// tokens is the usual rough estimate: four bytes a token.
func tokens(n int) int { return (n + 3) / 4 }

// rng is seeded from Seed, the job id (or the conversation when there is
// none) and the attempt.
func (s *Sim) rng(req heal.Request) *rand.Rand {
	h := fnv.New64a()
	if req.JobID != "" {
		h.Write([]byte(req.JobID))
	} else {
		for _, m := range req.Messages {
			if m.Role == "user" {
				h.Write([]byte(m.Content))
				break
			}
		}
	}
	k := h.Sum64()
	return rand.New(rand.NewPCG(uint64(s.cfg.Seed)^k, k*0x9E3779B97F4A7C15+uint64(req.Attempt)))
}

// answer writes the content of one turn.
func (s *Sim) answer(g *gen, root *snode, req heal.Request) string {
	prev, feedback, isHeal := lastExchange(req.Messages)
	if s.cfg.Force == ForceGrammar {
		return grammarText(req.Attempt, g)
	}
	if !isHeal {
		v := g.value(root, "", 0)
		if s.cfg.Force == ForceNoProgress {
			forceFault(g, v)
		} else {
			s.schemaFaults(g, v)
		}
		return s.format(g, v)
	}
	if s.cfg.Force == ForceNoProgress {
		return prev
	}
	v, ok := lenientParse(prev)
	if !ok {
		// Not JSON last time: a model told so mostly starts over.
		if g.r.Float64() < s.cfg.FixRate {
			return s.format(g, g.value(root, "", 0))
		}
		return prev
	}
	paths := feedbackPaths(feedback)
	if len(paths) == 0 {
		// Feedback names no field: try again from scratch, or repeat.
		if g.r.Float64() < s.cfg.FixRate {
			return s.format(g, g.value(root, "", 0))
		}
		return s.format(g, v)
	}
	for _, p := range paths {
		if g.r.Float64() < s.cfg.FixRate {
			v = fixPath(g, root, v, p)
		}
	}
	return s.format(g, v)
}

// lastExchange finds the previous answer (the last assistant turn) and the
// feedback after it (the user turns that follow). heal is false on a first
// turn.
func lastExchange(msgs []heal.Message) (prev, feedback string, isHeal bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			var fb strings.Builder
			for _, m := range msgs[i+1:] {
				if m.Role == "user" {
					fb.WriteString(m.Content)
					fb.WriteByte('\n')
				}
			}
			return msgs[i].Content, fb.String(), true
		}
	}
	return "", "", false
}

var grammarLines = []string{
	"I'm sorry, but I can't extract structured data from this text.",
	"The document does not seem to contain the requested information.",
	"Unfortunately the input is ambiguous; could you clarify what you need?",
	"Here is a summary instead: the text describes a transaction between two parties.",
}

func grammarText(attempt int, g *gen) string {
	return grammarLines[(max(attempt, 1)-1)%len(grammarLines)] + " (" + g.pick(plainWords) + ")"
}

// format renders v with the formatting faults, each at its rate.
func (s *Sim) format(g *gen, v *val) string {
	w := writer{buf: make([]byte, 0, 512)}
	if g.r.Float64() < s.cfg.TrailingCommaRate {
		if c := containers(v); c > 0 {
			w.comma = 1 + g.r.IntN(c)
		}
	}
	fence := g.r.Float64() < s.cfg.FenceRate
	prose := g.r.Float64() < s.cfg.ProseRate
	var out []byte
	if prose {
		out = append(out, g.pick(proseBefore)...)
		out = append(out, "\n\n"...)
	}
	if fence {
		out = append(out, "```json\n"...)
	}
	w.buf = out
	w.value(v, 0)
	out = w.buf
	if fence {
		out = append(out, "\n```"...)
	}
	if prose {
		out = append(out, "\n\n"...)
		out = append(out, g.pick(proseAfter)...)
	}
	return string(out)
}

var (
	proseBefore = []string{"Here is the extracted data:", "Sure! Here's the JSON you asked for:", "Based on the text, the structured result is:"}
	proseAfter  = []string{"Let me know if you need anything else.", "I hope this helps!", "Some values were inferred from context."}
)

// fault targets, collected from a generated value.
type targets struct {
	numbers, scalars []faultLeaf
	required         []faultMember
	enums            []faultLeaf
}

type faultLeaf struct{ v *val }

type faultMember struct {
	obj *val
	key string
}

func collect(v *val, t *targets) {
	switch v.k {
	case vObj:
		for i, k := range v.keys {
			if v.n != nil && v.n.reqSet[k] {
				t.required = append(t.required, faultMember{v, k})
			}
			collect(v.vals[i], t)
		}
	case vArr:
		for _, e := range v.vals {
			collect(e, t)
		}
	case vNum:
		t.numbers = append(t.numbers, faultLeaf{v})
		t.scalars = append(t.scalars, faultLeaf{v})
	case vStr, vBool:
		if v.n != nil && len(v.n.enum) > 0 && v.k == vStr {
			if nearMiss(v) != "" {
				t.enums = append(t.enums, faultLeaf{v})
			}
		}
		t.scalars = append(t.scalars, faultLeaf{v})
	}
}

// schemaFaults injects the structural faults, each at its rate.
func (s *Sim) schemaFaults(g *gen, v *val) {
	doType := g.r.Float64() < s.cfg.WrongTypeRate
	doMissing := g.r.Float64() < s.cfg.MissingRequiredRate
	doEnum := g.r.Float64() < s.cfg.EnumNearMissRate
	if !doType && !doMissing && !doEnum {
		return
	}
	var t targets
	collect(v, &t)
	if doEnum && len(t.enums) > 0 {
		l := t.enums[g.r.IntN(len(t.enums))]
		l.v.s = nearMiss(l.v)
	}
	if doType {
		wrongType(g, &t)
	}
	if doMissing && len(t.required) > 0 {
		m := t.required[g.r.IntN(len(t.required))]
		m.obj.del(m.key)
	}
}

// forceFault injects one fault that a heal turn must fix: a wrong type, or
// else a missing required field, or else an enum near-miss.
func forceFault(g *gen, v *val) {
	var t targets
	collect(v, &t)
	switch {
	case wrongType(g, &t):
	case len(t.required) > 0:
		m := t.required[g.r.IntN(len(t.required))]
		m.obj.del(m.key)
	case len(t.enums) > 0:
		l := t.enums[g.r.IntN(len(t.enums))]
		l.v.s = nearMiss(l.v)
	}
}

// wrongType turns a number into a European-style string ("12,50"), or when
// there is none another scalar into the wrong type.
func wrongType(g *gen, t *targets) bool {
	if len(t.numbers) > 0 {
		l := t.numbers[g.r.IntN(len(t.numbers))]
		f, err := strconv.ParseFloat(l.v.s, 64)
		s := l.v.s
		if err == nil && l.v.n != nil && len(l.v.n.types) > 0 && l.v.n.types[0] == "number" {
			s = strconv.FormatFloat(f, 'f', 2, 64)
		}
		l.v.k, l.v.s = vStr, strings.Replace(s, ".", ",", 1)
		return true
	}
	for _, l := range t.scalars {
		if l.v.n == nil || len(l.v.n.enum) > 0 || l.v.n.constVal != nil {
			continue
		}
		switch l.v.k {
		case vBool:
			l.v.k, l.v.s = vStr, map[string]string{"true": "yes", "false": "no"}[l.v.s]
		case vStr:
			if len(l.v.n.types) != 1 {
				continue
			}
			l.v.k, l.v.s = vNum, strconv.Itoa(len(l.v.s))
		default:
			continue
		}
		return true
	}
	return false
}

// nearMiss returns an enum value in the wrong case, "" when none is
// outside the enum.
func nearMiss(v *val) string {
	for _, c := range []string{strings.ToLower(v.s), strings.ToUpper(v.s), v.s + " "} {
		if c == v.s {
			continue
		}
		in := false
		for _, e := range v.n.enum {
			if e.k == vStr && e.s == c {
				in = true
				break
			}
		}
		if !in {
			return c
		}
	}
	return ""
}

// lenientParse reads a previous answer as a model rereading its own output:
// the JSON between the first opening and last closing bracket, trailing
// commas ignored.
func lenientParse(s string) (*val, bool) {
	i := strings.IndexAny(s, "{[")
	j := strings.LastIndexAny(s, "}]")
	if i < 0 || j < i {
		return nil, false
	}
	doc, err := decodeOrdered(dropTrailingCommas([]byte(s[i : j+1])))
	if err != nil {
		return nil, false
	}
	return fromAny(doc), true
}

// dropTrailingCommas removes commas followed only by space and a closing
// bracket, outside strings.
func dropTrailingCommas(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			out = append(out, c)
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			k := i + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t') {
				k++
			}
			if k < len(b) && (b[k] == '}' || b[k] == ']') {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// feedbackPaths reads the JSON Pointers named by diagnostic lines:
// "- /items/2/price: expected number > 0, got \"12,50\"". The root is
// written "- /:", "- (root):" or "- root:". Duplicates are dropped.
func feedbackPaths(feedback string) []string {
	var paths []string
	seen := map[string]bool{}
	for line := range strings.Lines(feedback) {
		p, ok := diagnosticPath(line)
		if ok && !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	return paths
}

func diagnosticPath(line string) (string, bool) {
	line = strings.TrimSpace(line)
	rest, ok := strings.CutPrefix(line, "- ")
	if !ok {
		rest, ok = strings.CutPrefix(line, "* ")
	}
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	p, _, ok := strings.Cut(rest, ": ")
	if !ok {
		p, ok = strings.CutSuffix(rest, ":")
		if !ok {
			return "", false
		}
	}
	p = strings.Trim(p, "`'\"")
	switch p {
	case "/", "(root)", "root", "":
		return "", true
	}
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	return p, true
}

// fixPath replaces the value at the JSON Pointer p with a fresh valid one
// (or removes it when the schema has no place for it) and returns the root.
func fixPath(g *gen, root *snode, v *val, p string) *val {
	if p == "" {
		return g.value(root, "", 0)
	}
	segs := strings.Split(p[1:], "/")
	for i := range segs {
		segs[i] = unescapePointer(segs[i])
	}
	cur, sch, name := v, root, ""
	for depth, seg := range segs {
		if sch != nil && !kindMatches(sch, cur) {
			// The container itself is wrong: regenerate it.
			if depth == 0 {
				return g.value(root, "", 0)
			}
			return fixPath(g, root, v, "/"+strings.Join(escapeSegs(segs[:depth]), "/"))
		}
		last := depth == len(segs)-1
		var childSch *snode
		switch {
		case sch == nil:
		case len(sch.types) > 0 && sch.types[0] == "array" || cur.k == vArr:
			if idx, err := strconv.Atoi(seg); err == nil && idx >= 0 && idx < len(sch.prefix) {
				childSch = sch.prefix[idx]
			} else {
				childSch = sch.items
			}
		default:
			childSch = sch.prop(seg)
			name = seg
		}
		switch cur.k {
		case vObj:
			child, _ := cur.get(seg)
			if childSch == nil {
				if last {
					cur.del(seg) // no place for it in the schema
				}
				return v
			}
			if last || child == nil {
				cur.set(seg, g.value(childSch, name, depth+1))
				return v
			}
			cur, sch = child, childSch
		case vArr:
			idx, err := strconv.Atoi(seg)
			if err != nil || idx < 0 {
				return v
			}
			if childSch == nil {
				if last && idx < len(cur.vals) {
					cur.vals = append(cur.vals[:idx], cur.vals[idx+1:]...)
				}
				return v
			}
			if idx >= len(cur.vals) || last {
				others := slices.Clone(cur.vals)
				if idx < len(cur.vals) {
					others = slices.Delete(others, idx, idx+1)
				}
				var e *val
				for range 8 { // uniqueItems: find a value not there yet
					if e = g.value(childSch, name, depth+1); !sch.unique || !containsVal(others, e) {
						break
					}
				}
				if idx >= len(cur.vals) {
					cur.vals = append(cur.vals, e)
				} else {
					cur.vals[idx] = e
				}
				return v
			}
			cur, sch = cur.vals[idx], childSch
		default:
			// A scalar where the path goes deeper.
			return v
		}
	}
	return v
}

// kindMatches reports whether a container value has a type its schema allows.
func kindMatches(n *snode, v *val) bool {
	if len(n.types) == 0 {
		return true
	}
	want := "object"
	switch v.k {
	case vArr:
		want = "array"
	case vObj:
	default:
		return false
	}
	for _, t := range n.types {
		if t == want {
			return true
		}
	}
	return false
}

func escapeSegs(segs []string) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
	}
	return out
}
