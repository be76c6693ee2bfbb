package worker

import (
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
)

// publish is the runtime's verdict for an outcome that ends the job: its
// message on the stream of action (RESULTS or DLQ), encoded by
// job.EncodeOutcome (one compact line), and the Outcome itself as the
// record the sink of this process indexes without decoding the message.
//
// Encoding fails only on what JSON cannot hold, which the handler never
// builds (temperatures are finite, times come from the clock, the data was
// validated, the job is JSON or quoted). Should it fail all the same, the
// delivery is retried and, at its last, dead-lettered as abandoned with
// nothing but the job: the job still ends once.
func (h *Handler) publish(d *queue.Delivery, action queue.Action, o job.Outcome, reason string) queue.Outcome {
	msg, err := job.EncodeOutcome(&o)
	if err != nil {
		h.cfg.Logger.Error("encoding an outcome", "job", o.JobID, "err", err)
		return queue.Outcome{Action: queue.ActionRetry, Delay: h.cfg.RetryDelay, Reason: err.Error()}
	}
	var files []string
	for _, f := range o.Files {
		if f.SHA256 != "" {
			files = append(files, f.SHA256)
		}
	}
	return queue.Outcome{Action: action, Schema: d.SchemaToken, Payload: msg, Record: &o, Reason: reason, Files: files}
}
