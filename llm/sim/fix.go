package sim

import (
	"slices"
	"strconv"
	"strings"

	"github.com/llmpipeline/pipeline/heal"
)

// lastExchange finds the previous answer (the last assistant turn) and the
// feedback after it (the user turns that follow). heal is false on a first
// turn.
func lastExchange(msgs []model.Message) (prev, feedback string, isHeal bool) {
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
