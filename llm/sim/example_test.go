package sim_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm/sim"
)

// The simulator writes a valid instance of the request's schema; with the
// fault rates at zero its answer is clean JSON, the same for the same seed,
// job id and attempt.
func ExampleModel() {
	m, err := sim.New(sim.Config{Seed: 42})
	if err != nil {
		panic(err)
	}
	schema := `{"type":"object","required":["name","currency","amount"],"properties":{
		"name":{"type":"string"},"currency":{"enum":["EUR","USD"]},"amount":{"type":"number","minimum":0}}}`
	resp, err := m.Complete(context.Background(), model.Request{
		Messages: []model.Message{{Role: "user", Content: "Extract the payment."}},
		Schema:   json.RawMessage(schema),
		JobID:    "pay-1",
		Attempt:  1,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(json.Valid([]byte(resp.Content)), resp.FinishReason)
	// Output: true stop
}

// A heal turn: the simulator rereads its previous answer and fixes the
// paths named in the feedback.
func ExampleModel_healTurn() {
	m, _ := sim.New(sim.Config{Seed: 1, FixRate: 1})
	schema := json.RawMessage(`{"type":"object","required":["total"],"properties":{"total":{"type":"number","minimum":1,"maximum":9}}}`)
	resp, _ := m.Complete(context.Background(), model.Request{
		Messages: []model.Message{
			{Role: "user", Content: "Extract the total."},
			{Role: "assistant", Content: `{"total": "12,50"}`},
			{Role: "user", Content: "Fix only these fields:\n- /total: expected number, got \"12,50\""},
		},
		Schema: schema, JobID: "inv-7", Attempt: 2,
	})
	var out struct{ Total float64 }
	err := json.Unmarshal([]byte(resp.Content), &out)
	fmt.Println(err == nil && out.Total >= 1 && out.Total <= 9)
	// Output: true
}
