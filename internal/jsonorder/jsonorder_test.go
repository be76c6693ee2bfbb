package jsonorder_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/jsonorder"
)

// TestRoundTripKeepsOrder: members come back in the order written, a
// repeated key keeps its first place and its last value, numbers as
// written, strings without HTML escaping.
func TestRoundTripKeepsOrder(t *testing.T) {
	v, err := jsonorder.Decode([]byte(`{"z": 1.50, "a": {"y": [true, null, "<b>"], "b": 2}, "z": 3}`), 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"z":3,"a":{"y":[true,null,"\u003cb\u003e"],"b":2}}`; got != want {
		t.Errorf("json.Marshal: %s, want %s", got, want)
	}
	o := v.(*jsonorder.Object)
	c := o.Clone()
	c.Del("z")
	c.Set("m", json.Number("1.50"))
	out, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"a":{"y":[true,null,"<b>"],"b":2},"m":1.50}`; got != want {
		t.Errorf("edited clone: %s, want %s", got, want)
	}
	if len(o.Keys) != 2 || o.Keys[0] != "z" {
		t.Errorf("the clone's edits reached the original: %v", o.Keys)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1} {}`, "data after the JSON value"},
		{`[[[[1]]]]`, "nested too deep"},
		{`{"a":`, "EOF"},
	} {
		if _, err := jsonorder.Decode([]byte(tc.in), 2); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%s) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}
