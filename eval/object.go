package eval

import (
	"bytes"
	"encoding/json"
)

// object is a decoded JSON object: its members in document order, a later
// duplicate name replacing the earlier value (as encoding/json reads
// them). A slice, not a map: the objects of extracted data are small, and
// a slice costs a fraction of a map to build and to look up in.
type object []member

type member struct {
	key string
	val any
}

// bigObject is the size from which set and index use a map.
const bigObject = 32

// index is the position of key in o, -1 when absent; pos, when set, is o's
// index by key (for big objects).
func (o object) index(key string, pos map[string]int) int {
	if pos != nil {
		if i, ok := pos[key]; ok {
			return i
		}
		return -1
	}
	for i := range o {
		if o[i].key == key {
			return i
		}
	}
	return -1
}

// positions is o's index by key when o is big, else nil.
func (o object) positions() map[string]int {
	if len(o) < bigObject {
		return nil
	}
	pos := make(map[string]int, len(o))
	for i := range o {
		pos[o[i].key] = i
	}
	return pos
}

// MarshalJSON writes o as a JSON object, in its order (--show-errors and
// --json print values of mismatches).
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
