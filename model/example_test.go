package model_test

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/model"
)

// A Func is a Model; its errors say their kind, which the caller branches on.
func ExampleFunc() {
	var m model.Model = model.Func(func(_ context.Context, req model.Request) (model.Response, error) {
		if req.Attempt > 1 {
			return model.Response{}, &model.Error{Kind: model.KindNoCredit, Provider: "openai", StatusCode: 429,
				Message: "insufficient_quota", KeyEnv: "OPENAI_API_KEY"}
		}
		return model.Response{Content: `{"total": 12.5}`, FinishReason: model.FinishStop,
			Usage: model.Usage{PromptTokens: 31, CompletionTokens: 7}}, nil
	})
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "Extract the total."}}, Attempt: 1}
	resp, err := m.Complete(context.Background(), req)
	fmt.Println(resp.Content, resp.FinishReason, resp.Usage.Total(), err)
	req.Attempt = 2
	_, err = m.Complete(context.Background(), req)
	fmt.Println(model.KindOf(err))
	fmt.Println(err)
	// Output:
	// {"total": 12.5} stop 38 <nil>
	// no_credit
	// openai: no_credit (HTTP 429): insufficient_quota (check the billing and credit of the provider account of the key in OPENAI_API_KEY)
}
