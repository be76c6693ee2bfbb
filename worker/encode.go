package worker

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/internal/jsontext"
)

// encodeOutcome encodes o as json.Marshal would, field for field and byte
// for byte, except that Data and Job come last and are appended as they
// are: Data was validated and Job was decoded (or quoted) already, and
// json.Marshal would scan and compact both again. It writes into one
// buffer sized for the outcome, without reflection.
func encodeOutcome(o dlq.Outcome) []byte {
	b, _, _ := encodeOutcomeSpans(o)
	return b
}

// record encodes o and returns the message with o as the sink indexes it
// (dlq.Encoded: the payload is cut from the message, nothing is decoded).
func record(o dlq.Outcome) ([]byte, *dlq.Outcome) {
	b, data, job := encodeOutcomeSpans(o)
	r := dlq.Encoded(o, b, data, job)
	return b, &r
}

// encodeOutcomeSpans is encodeOutcome that also says where the "data"
// member (with its comma) and the job's value are in the message.
func encodeOutcomeSpans(o dlq.Outcome) (b []byte, data, job [2]int) {
	data, job = [2]int{-1, -1}, [2]int{-1, -1}
	b = make([]byte, 0, outcomeSize(&o))
	b = append(b, `{"job_id":`...)
	b = jsontext.AppendString(b, o.JobID, true)
	b = append(b, `,"schema":`...)
	b = jsontext.AppendString(b, o.Schema, true)
	if o.SchemaVersion != "" {
		b = append(b, `,"schema_version":`...)
		b = jsontext.AppendString(b, o.SchemaVersion, true)
	}
	if o.Run != 0 {
		b = append(b, `,"run":`...)
		b = strconv.AppendInt(b, int64(o.Run), 10)
	}
	b = append(b, `,"status":`...)
	b = jsontext.AppendString(b, o.Status, true)
	b = appendOptString(b, `,"class":`, o.Class)
	b = appendOptString(b, `,"reason":`, o.Reason)
	b = appendOptString(b, `,"hint":`, o.Hint)
	b = appendOptString(b, `,"model":`, o.Model)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(o.Attempts), 10)
	if len(o.Trace) > 0 {
		b = append(b, `,"trace":[`...)
		for i := range o.Trace {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAttempt(b, &o.Trace[i])
		}
		b = append(b, ']')
	}
	if o.Deliveries != 0 {
		b = append(b, `,"deliveries":`...)
		b = strconv.AppendInt(b, int64(o.Deliveries), 10)
	}
	b = append(b, `,"started_at":`...)
	b = appendTime(b, o.StartedAt)
	b = append(b, `,"finished_at":`...)
	b = appendTime(b, o.FinishedAt)
	if len(o.Data) > 0 {
		data[0] = len(b)
		b = append(b, `,"data":`...)
		b = append(b, o.Data...)
		data[1] = len(b)
	}
	if len(o.Job) > 0 {
		b = append(b, `,"job":`...)
		job[0] = len(b)
		b = append(b, o.Job...)
		job[1] = len(b)
	}
	return append(b, '}'), data, job
}

func appendAttempt(b []byte, a *dlq.Attempt) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, int64(a.N), 10)
	b = append(b, `,"temperature":`...)
	if math.IsInf(a.Temperature, 0) || math.IsNaN(a.Temperature) {
		// json.Marshal refuses them too; temperatures are finite.
		panic(fmt.Sprintf("worker: encoding outcome: unsupported temperature %v", a.Temperature))
	}
	b = jsontext.AppendFloat(b, a.Temperature)
	b = append(b, `,"raw":`...)
	b = jsontext.AppendString(b, a.Raw, true)
	if len(a.Repairs) > 0 {
		b = append(b, `,"repairs":[`...)
		for i, r := range a.Repairs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, r, true)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, `,"class":`, a.Class)
	b = appendOptString(b, `,"finish_reason":`, a.FinishReason)
	if len(a.Diagnostics) > 0 {
		b = append(b, `,"diagnostics":[`...)
		for i := range a.Diagnostics {
			if i > 0 {
				b = append(b, ',')
			}
			d := &a.Diagnostics[i]
			b = append(b, `{"path":`...)
			b = jsontext.AppendString(b, d.Path, true)
			b = append(b, `,"keyword":`...)
			b = jsontext.AppendString(b, d.Keyword, true)
			b = appendOptString(b, `,"message":`, d.Message)
			b = appendOptString(b, `,"expected":`, d.Expected)
			b = appendOptString(b, `,"received":`, d.Received)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendOptInt(b, `,"diagnostics_omitted":`, int64(a.DiagnosticsOmitted))
	b = appendOptInt(b, `,"prompt_tokens":`, int64(a.PromptTokens))
	b = appendOptInt(b, `,"completion_tokens":`, int64(a.CompletionTokens))
	b = appendOptInt(b, `,"cached_tokens":`, int64(a.CachedTokens))
	b = appendOptInt(b, `,"reasoning_tokens":`, int64(a.ReasoningTokens))
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, a.LatencyMS, 10)
	b = appendOptInt(b, `,"transport_retries":`, int64(a.TransportRetries))
	return append(b, '}')
}

// outcomeSize is the encoded size of o, give or take the strings' escapes:
// the buffer is allocated once in the common case.
func outcomeSize(o *dlq.Outcome) int {
	n := 320 + len(o.JobID) + len(o.Schema) + len(o.SchemaVersion) + len(o.Reason) + len(o.Hint) + len(o.Model) +
		len(o.Data) + len(o.Job)
	for i := range o.Trace {
		a := &o.Trace[i]
		// Model output is JSON: its quotes and newlines are escaped, about
		// one byte in six.
		n += 240 + len(a.Raw) + len(a.Raw)/6 + len(a.FinishReason)
		for _, r := range a.Repairs {
			n += len(r) + 3
		}
		for j := range a.Diagnostics {
			d := &a.Diagnostics[j]
			n += 80 + len(d.Path) + len(d.Keyword) + len(d.Message) + len(d.Expected) + len(d.Received)
		}
	}
	return n
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, key...)
	return jsontext.AppendString(b, s, true)
}

func appendOptInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, n, 10)
}

// appendTime is time.Time's MarshalJSON: RFC 3339 with nanoseconds, quoted.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		// json.Marshal refuses the same times (year outside 0-9999); the
		// handler's clock never gives one.
		panic(fmt.Sprintf("worker: encoding outcome: %v", err))
	}
	return append(b, '"')
}
