package dlq

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/llmpipeline/pipeline/internal/jsontext"
)

// DecodeOutcome decodes one RESULTS or DLQ message and checks that it can be
// indexed. Its errors wrap ErrInvalidOutcome. Data and Job are sub-slices of
// data (not copies): data must not be modified while the Outcome is used.
//
// The message is validated once (gjson's validator), then read in one pass
// that knows the Outcome's shape: the result's data and the job, most of
// the bytes, are skipped over, neither decoded nor copied, and every
// string is copied once (unescaped when it has escapes).
//
// The Outcome remembers the message: Write stores the message's own bytes
// (less its data) as the transcript instead of encoding the Outcome again,
// as long as the Outcome's fields are still the ones decoded (a changed
// field, or a replaced Trace or Job, makes Write encode it; the elements of
// Trace must not be changed in place).
func DecodeOutcome(data []byte) (Outcome, error) {
	if !gjson.ValidBytes(data) {
		return Outcome{}, fmt.Errorf("%w: decoding: not valid JSON", ErrInvalidOutcome)
	}
	d := decoding{data: data, cut: span{-1, -1}, job: span{-1, -1}}
	sc := scanner{b: data}
	sc.ws()
	if sc.i >= len(data) || data[sc.i] != '{' {
		return Outcome{}, fmt.Errorf("%w: decoding: not a JSON object", ErrInvalidOutcome)
	}
	var o Outcome
	err := sc.object(func(key string, klo int) error {
		vlo := sc.i
		if err := o.decodeField(key, &sc, &d); err != nil {
			return err
		}
		d.member(key, klo, vlo, sc.i)
		return nil
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: decoding: %v", ErrInvalidOutcome, err)
	}
	if err := check(&o); err != nil {
		return Outcome{}, err
	}
	if !d.unknown {
		src := &source{msg: data, cut: d.cut, job: d.job, was: o}
		o.src = src
	}
	return o, nil
}

// Encoded returns o as if DecodeOutcome had read it from msg, its encoding
// by the caller: Write then stores the payload from msg as it does for a
// decoded message, without decoding msg or encoding o again. data is where
// msg's "data" member is, with the comma before it ([-1, -1] if it has
// none), and job where the job's value is ([-1, -1] if none). The caller
// must not change o's fields afterwards (a changed one makes Write encode
// o after all).
func Encoded(o Outcome, msg []byte, data, job [2]int) Outcome {
	o.src = &source{msg: msg, cut: span{data[0], data[1]}, job: span{job[0], job[1]}, was: o}
	return o
}

// decoding is what DecodeOutcome learns about a message besides its fields:
// whether the message can be stored as it is (no member the Outcome does
// not have, none twice), and where its data and its job are.
type decoding struct {
	data    []byte
	seen    uint32 // top-level members seen, by keyBit
	unknown bool   // a member of no field, or one seen twice: encode the Outcome
	cut     span   // the "data" member, with one of its commas
	job     span   // the job's value
}

// span is a range of bytes of a message; lo < 0 when there is none.
type span struct{ lo, hi int }

// keyBit is the bit of decoding.seen of an outcome message's member, -1
// for a name the Outcome has no field of.
func keyBit(key string) int {
	switch key {
	case "job_id":
		return 0
	case "schema":
		return 1
	case "schema_version":
		return 2
	case "status":
		return 3
	case "class":
		return 4
	case "reason":
		return 5
	case "hint":
		return 6
	case "model":
		return 7
	case "run":
		return 8
	case "attempts":
		return 9
	case "deliveries":
		return 10
	case "data":
		return 11
	case "job":
		return 12
	case "trace":
		return 13
	case "started_at":
		return 14
	case "finished_at":
		return 15
	}
	return -1
}

// member notes the top-level member key, whose name starts at klo and whose
// value is vlo:vhi of the message.
func (d *decoding) member(key string, klo, vlo, vhi int) {
	bit := keyBit(key)
	if bit < 0 || d.seen&(1<<bit) != 0 {
		d.unknown = true
		return
	}
	d.seen |= 1 << bit
	switch key {
	case "job":
		d.job = span{vlo, vhi}
	case "data":
		// the member and the comma before it, or the one after it if first
		lo, hi := klo, vhi
		p := lo - 1
		for p > 0 && isSpace(d.data[p]) {
			p--
		}
		if d.data[p] == ',' {
			lo = p
		} else {
			n := hi
			for n < len(d.data) && isSpace(d.data[n]) {
				n++
			}
			if n < len(d.data) && d.data[n] == ',' {
				hi = n + 1
			}
		}
		d.cut = span{lo, hi}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scanner reads a message that gjson validated: it checks the types the
// Outcome needs but not the JSON grammar.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// object calls member for each member of the object at s.i with its name
// and where the name starts, s.i at its value; member must consume the value.
func (s *scanner) object(member func(key string, klo int) error) error {
	s.i++ // {
	s.ws()
	if s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		klo := s.i
		key := s.string(true)
		s.ws()
		s.i++ // :
		s.ws()
		if err := member(key, klo); err != nil {
			return err
		}
		s.ws()
		c := s.b[s.i]
		s.i++
		if c == '}' {
			return nil
		}
	}
}

// array calls elem for each element of the array at s.i, s.i at it; elem
// must consume it.
func (s *scanner) array(elem func() error) error {
	s.i++ // [
	s.ws()
	if s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := elem(); err != nil {
			return err
		}
		s.ws()
		c := s.b[s.i]
		s.i++
		if c == ']' {
			return nil
		}
	}
}

// kind names the type of the value at s.i for errors, as gjson does.
func (s *scanner) kind() string {
	switch s.b[s.i] {
	case '"':
		return "String"
	case 'n':
		return "Null"
	case 't':
		return "True"
	case 'f':
		return "False"
	case '{', '[':
		return "JSON"
	}
	return "Number"
}

// skip moves past the value at s.i and returns where it was.
func (s *scanner) skip() span {
	lo := s.i
	switch s.b[s.i] {
	case '"':
		s.i, _ = stringEnd(s.b, s.i)
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.i, _ = stringEnd(s.b, s.i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return span{lo, s.i}
			}
			s.i++
		}
	}
	return span{lo, s.i}
}

// stringEnd returns the index after the string starting at i (a quote) and
// whether it has escapes.
func stringEnd(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return len(b), esc
}

// string reads the string at s.i into a string of its own (borrowed: a
// view of the message, for member names only).
func (s *scanner) string(borrowed bool) string {
	lo := s.i
	end, esc := stringEnd(s.b, lo)
	s.i = end
	raw := s.b[lo+1 : end-1]
	if esc {
		return unescape(raw)
	}
	if borrowed {
		return unsafeString(raw)
	}
	return string(raw)
}

// unescape decodes a JSON string's escapes as encoding/json does: a lone
// surrogate is U+FFFD. The message was validated before.
func unescape(b []byte) string {
	out, _, _ := jsontext.AppendUnescaped(make([]byte, 0, len(b)), b)
	return string(out)
}

// str reads a string or null field.
func (s *scanner) str(key string, dst *string) error {
	switch s.b[s.i] {
	case '"':
		*dst = s.string(false)
	case 'n':
		s.skip()
	default:
		return fmt.Errorf("field %q: want a string, have %s", key, s.kind())
	}
	return nil
}

// integer reads an integer or null field.
func (s *scanner) integer(key string, dst *int) error {
	c := s.b[s.i]
	switch {
	case c == '-' || (c >= '0' && c <= '9'):
		v := s.skip()
		n, err := strconv.Atoi(unsafeString(s.b[v.lo:v.hi]))
		if err != nil {
			return fmt.Errorf("field %q: want an integer, have %s", key, s.b[v.lo:v.hi])
		}
		*dst = n
	case c == 'n':
		s.skip()
	default:
		return fmt.Errorf("field %q: want a number, have %s", key, s.kind())
	}
	return nil
}

// raw reads any value as a sub-slice of the message.
func (s *scanner) raw() json.RawMessage {
	v := s.skip()
	return json.RawMessage(s.b[v.lo:v.hi:v.hi])
}

// decodeField sets the field of o named key from the value at sc.i.
func (o *Outcome) decodeField(key string, sc *scanner, d *decoding) error {
	switch key {
	case "job_id":
		return sc.str(key, &o.JobID)
	case "schema":
		return sc.str(key, &o.Schema)
	case "schema_version":
		return sc.str(key, &o.SchemaVersion)
	case "status":
		return sc.str(key, &o.Status)
	case "class":
		return sc.str(key, &o.Class)
	case "reason":
		return sc.str(key, &o.Reason)
	case "hint":
		return sc.str(key, &o.Hint)
	case "model":
		return sc.str(key, &o.Model)
	case "run":
		return sc.integer(key, &o.Run)
	case "attempts":
		return sc.integer(key, &o.Attempts)
	case "deliveries":
		return sc.integer(key, &o.Deliveries)
	case "data":
		o.Data = sc.raw()
	case "job":
		o.Job = sc.raw()
	case "trace":
		switch sc.b[sc.i] {
		case 'n':
			sc.skip()
			o.Trace = nil
			return nil
		case '[':
		default:
			return fmt.Errorf("field %q: want an array, have %s", key, sc.kind())
		}
		o.Trace = make([]Attempt, 0, 4)
		return sc.array(func() error {
			if sc.b[sc.i] != '{' {
				return fmt.Errorf("field \"trace\": want objects, have %s", sc.kind())
			}
			o.Trace = append(o.Trace, Attempt{})
			a := &o.Trace[len(o.Trace)-1]
			return sc.object(func(k string, _ int) error { return a.decodeField(k, sc, d) })
		})
	case "started_at", "finished_at":
		t := &o.StartedAt
		if key == "finished_at" {
			t = &o.FinishedAt
		}
		if sc.b[sc.i] == 'n' {
			sc.skip()
			return nil
		}
		if err := t.UnmarshalJSON(sc.raw()); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	default:
		sc.skip()
	}
	return nil
}

func (a *Attempt) decodeField(key string, sc *scanner, dec *decoding) error {
	switch key {
	case "n":
		return sc.integer(key, &a.N)
	case "temperature":
		switch c := sc.b[sc.i]; {
		case c == '-' || (c >= '0' && c <= '9'):
			v := sc.skip()
			f, err := strconv.ParseFloat(unsafeString(sc.b[v.lo:v.hi]), 64)
			if err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
			a.Temperature = f
		case c == 'n':
			sc.skip()
		default:
			return fmt.Errorf("field %q: want a number, have %s", key, sc.kind())
		}
	case "raw":
		return sc.str(key, &a.Raw)
	case "repairs":
		switch sc.b[sc.i] {
		case 'n':
			sc.skip()
			a.Repairs = nil
			return nil
		case '[':
		default:
			return fmt.Errorf("field %q: want an array, have %s", key, sc.kind())
		}
		a.Repairs = make([]string, 0, 2)
		return sc.array(func() error {
			if sc.b[sc.i] != '"' {
				return fmt.Errorf("field %q: want strings, have %s", key, sc.kind())
			}
			a.Repairs = append(a.Repairs, sc.string(false))
			return nil
		})
	case "class":
		return sc.str(key, &a.Class)
	case "finish_reason":
		return sc.str(key, &a.FinishReason)
	case "diagnostics":
		switch sc.b[sc.i] {
		case 'n':
			sc.skip()
			a.Diagnostics = nil
			return nil
		case '[':
		default:
			return fmt.Errorf("field %q: want an array, have %s", key, sc.kind())
		}
		a.Diagnostics = make([]Diagnostic, 0, 4)
		return sc.array(func() error {
			if sc.b[sc.i] != '{' {
				return fmt.Errorf("field %q: want objects, have %s", key, sc.kind())
			}
			a.Diagnostics = append(a.Diagnostics, Diagnostic{})
			d := &a.Diagnostics[len(a.Diagnostics)-1]
			return sc.object(func(k string, _ int) error {
				switch k {
				case "path":
					return sc.str(k, &d.Path)
				case "keyword":
					return sc.str(k, &d.Keyword)
				case "message":
					return sc.str(k, &d.Message)
				case "expected":
					return sc.str(k, &d.Expected)
				case "received":
					return sc.str(k, &d.Received)
				}
				dec.unknown = true
				sc.skip()
				return nil
			})
		})
	case "diagnostics_omitted":
		return sc.integer(key, &a.DiagnosticsOmitted)
	case "prompt_tokens":
		return sc.integer(key, &a.PromptTokens)
	case "completion_tokens":
		return sc.integer(key, &a.CompletionTokens)
	case "cached_tokens":
		return sc.integer(key, &a.CachedTokens)
	case "reasoning_tokens":
		return sc.integer(key, &a.ReasoningTokens)
	case "latency_ms":
		var n int
		if err := sc.integer(key, &n); err != nil {
			return err
		}
		a.LatencyMS = int64(n)
	case "transport_retries":
		return sc.integer(key, &a.TransportRetries)
	default:
		dec.unknown = true
		sc.skip()
	}
	return nil
}

// unsafeString is a view of b as a string: b must not change while it is used.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
