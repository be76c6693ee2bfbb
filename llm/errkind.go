package llm

import (
	"encoding/json"
	"net/http"

	"github.com/llmpipeline/pipeline/heal"
)

// kindOf classifies a non-2xx answer by its status and, where the status
// alone does not say, its error body: a 429 is a rate limit (transport)
// unless the body says the account has no credit.
func kindOf(status int, body []byte) model.ErrorKind {
	if noCredit(status, body) {
		return model.KindNoCredit
	}
	return classify(status)
}

// noCredit reports whether an error answer says the provider account has
// no credit left, whatever the job: a 402 (Anthropic's billing_error,
// OpenRouter and gateways' "insufficient credits"), or an error whose type
// or code is OpenAI's insufficient_quota (sent with a 429:
// {"error":{"message":...,"type":"insufficient_quota","param":null,"code":"insufficient_quota"}})
// or Anthropic's billing_error ({"type":"error","error":{"type":"billing_error","message":...}}).
func noCredit(status int, body []byte) bool {
	if status == http.StatusPaymentRequired {
		return true
	}
	if status < 400 || len(body) == 0 {
		return false
	}
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"` // a string, a number or null
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	code, _ := e.Error.Code.(string)
	for _, s := range []string{e.Error.Type, code} {
		switch s {
		case "insufficient_quota", "billing_error":
			return true
		}
	}
	return false
}
