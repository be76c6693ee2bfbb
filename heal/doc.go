// Package heal is the loop that turns a model's unreliable output into
// validated data: attempt, sanitize, validate, and on a healable failure
// ask again with the model's own output and the field-path diagnostics.
//
//	loop, err := heal.New(model, heal.Config{
//		MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1,
//	})
//	res := loop.Run(ctx, heal.Task{JobID: id, Schema: s, Input: text})
//	if res.OK() { use(res.Data) } else { deadLetter(res.Class, res.Reason, res.Attempts) }
//
// Attempt n calls the model at temperature max(floor, start-(n-1)*step).
// A healable failure (grammar: no parsable JSON; schema: diagnostics) makes
// the next request: the original task (Messages, never mutated) + the
// previous output as an assistant turn + a user turn with the diagnostic
// lines and the instruction to fix only those fields and return the whole
// object. History "latest" (the default) carries only the latest failed
// attempt; "all" carries every one. When the answer came as a tool call
// (Response.ToolCallID), both heal turns carry its id (Message.ToolCallID)
// and the provider sends them as that call and its result.
//
// An answer that starts with { or [ is validated first: when it parses, it
// is judged as it is (sanitize.Clean would return the same bytes with no
// stage); only an answer that does not parse goes through the sanitizer.
// Result.Data is a slice of the attempt's own copy of the answer.
//
// Failure classes are decided by code: refused (the model declined the
// task, Response.Refusal) stops at once and is never healed or retried;
// truncated (finish reason length, any
// provider's spelling, or a sanitizer ErrTruncated) stops at once and is
// never retried; no_progress stops when an attempt repeats the previous
// output or its diagnostics (even at the last attempt: it is the more
// telling cause); exhausted when the attempts are used up; transport, auth
// and request_error come from the model's *model.Error (Result.Err keeps it, and
// the attempts so far are kept with their token usage). Transport retries
// happen inside the Model and never count as attempts. A cancelled ctx ends
// the run promptly as transport with ctx's error in Err.
//
// Fallbacks (Config.Fallbacks) form a chain after the primary model
// (Config.Model names it): when a model's attempts end in a healable
// failure (exhausted, no_progress), or the model is unavailable (a
// transport failure after its own retries, its circuit breaker open, or a
// request error such as a context window exceeded), the job moves on to
// the next model with the conversation as it stands, at that model's first
// temperature. Config.MaxAttempts counts the primary's attempts, each
// Fallback its own Attempts. Every Attempt records its Model; Result.Model
// is the model of the last attempt, Result.Skipped the models passed over.
// Credentials refused (auth) and a truncated output end the run at once.
//
// The package does no HTTP and knows nothing of NATS: it calls a
// model.Model (the contract, package model; providers in package llm),
// maps the model's ErrorKind to a failure class, and the worker maps
// Results to acks and dead letters.
package heal
