package llm

import (
	"github.com/llmpipeline/pipeline/llm/strict"
	"github.com/llmpipeline/pipeline/model"
)

// StrictAnswers returns m with its answers mapped back from the strict
// form of the request's schema in provider's dialect (the nulls of
// optional properties dropped), for answers that reach the heal loop
// other than through the provider's own Complete: a batch's recorded
// answers, replayed (see strict.Answers). For a provider whose strict form
// keeps optional properties optional (Anthropic), m itself.
func StrictAnswers(m model.Model, provider string) model.Model {
	if provider != ProviderOpenAI {
		return m
	}
	return strict.Answers(m, strict.OpenAI)
}
