package sim

import (
	"fmt"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/schemas"
)

// The simulator against the shipped schemas and the real validator and
// repair-line format: first answers are valid but for `pattern`, and a heal
// turn fed schemas.Lines fixes everything it can.
func TestSimOnBuiltinSchemas(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.IDs()) == 0 {
		t.Fatal("no built-in schemas")
	}
	onlyPatterns := func(ds []schemas.Diagnostic) bool {
		for _, d := range ds {
			if d.Keyword != "pattern" {
				return false
			}
		}
		return true
	}
	for _, id := range reg.IDs() {
		s, _ := reg.Get(id)
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			clean := newTestSim(t, Config{Seed: 11})
			faulty := newTestSim(t, Config{Seed: 11, WrongTypeRate: 1, MissingRequiredRate: 1, EnumNearMissRate: 1, FixRate: 1})
			for i := range 100 {
				req := model.Request{
					Messages: []model.Message{{Role: "system", Content: "schema"}, {Role: "user", Content: "text"}},
					Schema:   s.Raw, SchemaID: id, JobID: fmt.Sprintf("%s-%d", id, i), Attempt: 1,
				}
				out := complete(t, clean, req).Content
				ds, _, err := s.Validate([]byte(out), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !onlyPatterns(ds) {
					t.Fatalf("%s: invalid beyond pattern: %v\n%s", req.JobID, ds, out)
				}

				out = complete(t, faulty, req).Content
				ds, omitted, err := s.Validate([]byte(out), 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) == 0 {
					t.Fatalf("%s: faulty answer validated:\n%s", req.JobID, out)
				}
				next := healTurn(req, out, "Your previous answer does not validate. Fix only these fields:\n"+schemas.Lines(ds, omitted))
				healed := complete(t, faulty, next).Content
				after, _, err := s.Validate([]byte(healed), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !onlyPatterns(after) {
					t.Fatalf("%s: not healed: %v (was %v)\nbefore:\n%s\nafter:\n%s", req.JobID, after, ds, out, healed)
				}
			}
		})
	}
}
