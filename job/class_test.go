package job

import (
	"encoding/json"
	"testing"
)

func TestClassKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c               Class
		healable, stops bool
		deadLetter      bool
	}{
		{ClassNone, false, false, false},
		{ClassGrammar, true, false, true},
		{ClassSchema, true, false, true},
		{ClassTruncated, false, false, true},
		{ClassRefused, false, false, true},
		{ClassNoProgress, false, false, true},
		{ClassExhausted, false, false, true},
		{ClassTransport, false, false, true},
		{ClassRequest, false, false, true},
		{ClassInvalidJob, false, false, true},
		{ClassUnknownSchema, false, false, true},
		{ClassAbandoned, false, false, true},
		{ClassAuth, false, true, false},
		{ClassNoCredit, false, true, false},
		{ClassNotFound, false, true, false},
	} {
		t.Run(string(tc.c), func(t *testing.T) {
			t.Parallel()
			if got := tc.c.Healable(); got != tc.healable {
				t.Errorf("Healable = %v, want %v", got, tc.healable)
			}
			if got := tc.c.StopsWorker(); got != tc.stops {
				t.Errorf("StopsWorker = %v, want %v", got, tc.stops)
			}
			in := false
			for _, d := range DeadLetterClasses() {
				in = in || d == tc.c
			}
			if in != tc.deadLetter {
				t.Errorf("in DeadLetterClasses = %v, want %v", in, tc.deadLetter)
			}
		})
	}
}

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
