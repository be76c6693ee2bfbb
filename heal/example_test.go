package heal_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/schemas"
)

func ExampleLoop_Run() {
	s, err := schemas.Compile("receipt", []byte(`{"type":"object","required":["total"],
		"properties":{"total":{"type":"number","minimum":0}}}`))
	if err != nil {
		panic(err)
	}
	// A model that writes a decimal comma first, then fixes it when told.
	model := model.Func(func(_ context.Context, req model.Request) (model.Response, error) {
		if req.Attempt == 1 {
			return model.Response{Content: "```json\n{\"total\": \"12,50\"}\n```", FinishReason: model.FinishStop}, nil
		}
		feedback := req.Messages[len(req.Messages)-1].Content
		fmt.Println("feedback ends:", feedback[strings.LastIndex(feedback, "\n")+1:])
		return model.Response{Content: `{"total": 12.5}`, FinishReason: model.FinishStop}, nil
	})
	loop, err := heal.New(model, heal.Config{MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1})
	if err != nil {
		panic(err)
	}
	res := loop.Run(context.Background(), heal.Task{JobID: "r-1", Schema: s, Input: "Total: 12,50 EUR"})
	for _, a := range res.Attempts {
		fmt.Printf("attempt %d at %.1f: class %q, sanitized %v\n", a.N, a.Temperature, a.Class, len(a.Stages) > 0)
	}
	fmt.Println(res.OK(), string(res.Data))
	// Output:
	// feedback ends: - /total: expected number >= 0, got "12,50"
	// attempt 1 at 0.7: class "schema", sanitized true
	// attempt 2 at 0.5: class "", sanitized false
	// true {"total": 12.5}
}

func ExampleConfig_TemperatureFor() {
	cfg := heal.Config{Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1}
	for n := 1; n <= 5; n++ {
		fmt.Print(cfg.TemperatureFor(n), " ")
	}
	// Output: 0.7 0.5 0.3 0.1 0.1
}
