package sim

import (
	"strconv"
	"strings"
)

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
func (s *Model) format(g *gen, v *val) string {
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
func (s *Model) schemaFaults(g *gen, v *val) {
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
