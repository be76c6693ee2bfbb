// Package model is the model contract: what a provider implements and what
// the heal loop calls. It holds the Model interface (one chat completion),
// its Request and Response, the conversation's Message and roles, token
// Usage, the normalised finish reasons, and the model's Error with the
// ErrorKind the caller branches on.
//
//	var m model.Model = provider // *llm.OpenAI, *llm.Anthropic, *sim.Model, a wrapper of one
//	resp, err := m.Complete(ctx, model.Request{
//		Messages:    []model.Message{{Role: model.RoleUser, Content: text}},
//		Temperature: 0.7,
//	})
//	switch model.KindOf(err) {
//	case model.KindTransport: // retry later; never a heal attempt
//	case model.KindAuth, model.KindNoCredit: // stop taking jobs
//	}
//
// Providers (package llm, llm/sim), wrappers (llm/ratelimit, llm/price, the
// breaker) and batch mode depend on this package alone; the loop (package
// heal) decides what an answer is worth and maps an ErrorKind to a failure
// class. The package knows nothing of schemas, prompts or classes.
package model
