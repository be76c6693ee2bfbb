// Package ratelimit keeps a model's calls within its provider's rate
// limits: requests and tokens per window, shared by every process of a
// fleet. A Limiter is two token buckets (golang.org/x/time/rate), one of
// requests and one of tokens; Wrap makes a model.Model whose calls wait for
// both before they are sent.
//
// # Where the limit comes from
//
// Config.RPM and Config.TPM (the --rpm and --tpm flags) are a ceiling for
// the whole fleet. Without them the provider's headers decide; with them,
// headers can only lower the rate. Observe, set as llm.Config.OnResponse,
// reads OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// (resets as durations: "6m0s", "1.5s", "20ms") and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
// (resets as RFC 3339 times). Until the provider's first answer the
// limiter knows nothing of its buckets, so one call goes out at a time
// (from each process of a fleet); the answer's headers set the pace.
// Remember gives it a Memory (broker.ProviderLimits, a NATS KV bucket)
// of what an earlier run's answers said (Learned: whether they carry
// headers, each family's limit): a limiter that finds its provider there
// starts paced at each family's refill rate instead of probing, and what
// its own answers say is written back when it differs.
//
// A family that reports its limit is taken as OpenAI and Anthropic
// document theirs: a bucket refilling continuously at limit per minute,
// whose reset is when it is full again. Its capacity is then remaining +
// refill*reset, and the pace is 2*refill*remaining/capacity (between a
// tenth and twice the refill rate): the refill rate with the bucket half
// full, faster above, slower below, so the fleet settles at the provider's
// rate with half a bucket in reserve for the calls in flight. When such a
// bucket is empty the limiter holds only until this process's next
// request has refilled (members/refill), not until the bucket is full,
// and likewise for tokens. A family without a limit is paced at
// remaining/reset (the rate that spends what is left exactly at the
// reset, right for a fixed window) and, at zero, held until the reset.
// Anthropic's input- and output-token families only hold; the pace of
// tokens comes from the combined tokens family.
//
// Calls wait their turn: only the head of the line reserves from the
// buckets, and it reserves again whenever the rates change, so a
// reservation made while the pace was low is not kept once it rises.
//
// # Spreading
//
// Requests go out evenly: a burst of a few requests (a second's worth,
// between 1 and 4), never a window's quota at once. A bucket of rate r and
// burst b sends at most b-1 + r*W in any window W, so the rate is
// (share - (b-1)) / W, and the window is taken 50 ms longer than it is so
// that network jitter cannot squeeze two window-apart requests into one:
// no window, sliding or fixed, holds more than the limit. --rpm 120 on one
// process is a burst of 2 and 1.98 requests a second.
//
// # Tokens
//
// A request counts, before it is sent, its messages' bytes over four
// (the usual size of a token of English text; other scripts run higher,
// and the correction below settles it) plus its max tokens (Config.MaxTokens
// when the request sets none), the way providers count a request against
// the token limit. The answer's reported usage corrects the bucket: tokens
// reserved beyond it go back (the next requests reserve fewer), tokens
// used beyond the estimate are taken (the bucket goes into debt).
//
// # The fleet
//
// ShareWith hands the Limiter a Fleet (broker.Fleet: members registered in
// a NATS KV bucket under Key, a hash of provider, base URL, model and API
// key); each process takes 1/Size of the ceiling and of the headers' pace.
// A process that dies returns its share when its key expires, within
// seconds.
//
// # What it does not do
//
// A 429 that still happens is the provider client's transport retry, as
// without a limiter; Observe charges the request bucket one request for
// it. When a 429 or a 5xx asks for a wait (Retry-After, retry-after-ms) of
// at most Config.MaxPause, Observe pauses every call until it is over
// (Pause), before any other call of this process goes out; with a fleet
// that is a Pauser (broker.Fleet) every member pauses too. The wait happens before the call, so it never counts against the
// request timeout, and it ends with ctx's error (or, when the wait would
// outlast ctx's deadline, at once with a transport error).
//
//	lim, err := ratelimit.New(ratelimit.Config{Provider: "openai", RPM: 500, TPM: 200000})
//	client, err := llm.NewOpenAI(llm.Config{Model: "gpt-4o-mini", APIKey: key, OnResponse: lim.Observe})
//	fleet, err := conn.JoinFleet(ctx, ratelimit.Key("openai", url, "gpt-4o-mini", key))
//	lim.ShareWith(fleet)
//	model := lim.Wrap(client)
package ratelimit
