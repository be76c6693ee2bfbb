package job

import (
	"encoding/json"
	"testing"
)

// TestClassEncodesAsItsString: a typed class changes nothing on the wire.
func TestClassEncodesAsItsString(t *testing.T) {
	t.Parallel()
	b, err := EncodeOutcome(&Outcome{JobID: "j", Status: StatusDeadLettered, Class: ClassExhausted,
		Trace: []Attempt{{N: 1, Class: ClassSchema}}})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Class string `json:"class"`
		Trace []struct {
			Class string `json:"class"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Class != "exhausted" || len(v.Trace) != 1 || v.Trace[0].Class != "schema" {
		t.Errorf("encoded %s", b)
	}
}
