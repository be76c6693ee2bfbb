package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// countingModel fails every call and counts them: an invalid job must
// never reach it.
type countingModel struct{ calls atomic.Int32 }

func (m *countingModel) Complete(context.Context, model.Request) (model.Response, error) {
	m.calls.Add(1)
	return model.Response{}, errors.New("the model must not be called")
}

// TestHandleInvalidJobKeyedOnMsgID: a malformed job's dead letter carries
// the message id it is stored under on DLQ as its job_id, whatever its own
// "id" says (found by the faults suite: "bad 3 with spaces" vs "bad-3").
func TestHandleInvalidJobKeyedOnMsgID(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	model := &countingModel{}
	loop, err := heal.New(model, heal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Schemas: reg, Loop: loop, Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, data, msgID string
	}{
		{"id not a valid id", `{"id":"bad id\u001b[2J with an escape","schema":"invoice","input":"x"}`, "bad-1"},
		{"missing input", `{"id":"bad-2","schema":"invoice"}`, "bad-2"},
		{"missing id", `{"schema":"invoice","input":"x"}`, "JOBS-7"},
		{"not json", `not json`, "JOBS-8"},
		{"schema not a schema id", `{"id":"bad-5","schema":"in\tvoice","input":"x"}`, "bad-5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &queue.Delivery{Data: []byte(tc.data), SchemaToken: "invoice", MsgID: tc.msgID, NumDelivered: 1, MaxDeliver: 5}
			d.Job, d.JobErr = job.Parse(d.Data)
			if d.JobErr == nil {
				t.Fatalf("test case is a valid job")
			}
			out := h.Handle(t.Context(), d)
			if out.Action != queue.ActionDeadLetter {
				t.Fatalf("action %d, want dead letter", out.Action)
			}
			var o struct {
				JobID  string    `json:"job_id"`
				Schema string    `json:"schema"`
				Class  job.Class `json:"class"`
			}
			if err := json.Unmarshal(out.Payload, &o); err != nil {
				t.Fatal(err)
			}
			if o.JobID != tc.msgID || o.Schema != "invoice" || o.Class != job.ClassInvalidJob {
				t.Errorf("dead letter job_id %q schema %q class %q, want %q, invoice, invalid_job", o.JobID, o.Schema, o.Class, tc.msgID)
			}
		})
	}
	if n := model.calls.Load(); n != 0 {
		t.Errorf("the model was called %d times for invalid jobs", n)
	}
}

// TestDuplicateMembersEndAsResult: JSON with a member given twice is JSON
// (RFC 8259 only says names SHOULD be unique), and both the job parser and
// the validator read it, the last one counting. A job or an answer that
// spells a member twice must end as a result that keeps what arrived, not
// fail to encode and be retried with a model call each time.
func TestDuplicateMembersEndAsResult(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := reg.Get("invoice")
	answer := validInvoices(t, sc, 1)[0]
	// The answer's first member again, with its value, at the front.
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(answer.Content), &members); err != nil {
		t.Fatal(err)
	}
	cur, ok := members["currency"]
	if !ok {
		t.Fatalf("the simulated invoice has no currency: %s", answer.Content)
	}
	dupAnswer := answer
	dupAnswer.Content = `{"currency":` + string(cur) + `,` + answer.Content[1:]
	for _, tc := range []struct{ name, job, answer string }{
		{"job", `{"id":"dup-1","schema":"invoice","input":"ignored","input":"Invoice 7, 12 EUR"}`, answer.Content},
		{"answer", `{"id":"dup-2","schema":"invoice","input":"Invoice 7, 12 EUR"}`, dupAnswer.Content},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := answer
			resp.Content = tc.answer
			model := &cannedModel{answers: []model.Response{resp}}
			loop, err := heal.New(model, heal.Config{MaxAttempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			h, err := New(Config{Schemas: reg, Loop: loop, Model: "canned"})
			if err != nil {
				t.Fatal(err)
			}
			d := &queue.Delivery{Data: []byte(tc.job), SchemaToken: "invoice", MsgID: "dup", NumDelivered: 1, MaxDeliver: 5}
			d.Job, d.JobErr = job.Parse(d.Data)
			if d.JobErr != nil {
				t.Fatalf("ParseJob: %v", d.JobErr)
			}
			out := h.Handle(t.Context(), d)
			if out.Action != queue.ActionResult {
				t.Fatalf("action %d (%s), want a result", out.Action, out.Reason)
			}
			var o struct {
				Job  json.RawMessage `json:"job"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(out.Payload, &o); err != nil {
				t.Fatal(err)
			}
			var compactJob, compactAnswer bytes.Buffer
			if err := json.Compact(&compactJob, []byte(tc.job)); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&compactAnswer, []byte(tc.answer)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(o.Job, compactJob.Bytes()) || !bytes.Equal(o.Data, compactAnswer.Bytes()) {
				t.Errorf("stored job %s and data %s, want them as they arrived (compact):\n%s\n%s", o.Job, o.Data, compactJob.Bytes(), compactAnswer.Bytes())
			}
		})
	}
}
