// Package payload keeps the bodies of messages larger than the server's max
// payload (1 MiB by default) in the JetStream Object Store. A job, result or
// dead letter over InlineLimit (the connection's max payload minus 16 KiB
// for headers) is put in the object store PIPELINE_PAYLOADS (Bucket) under
// kind/<msg id>/<sha-256> and published with the headers Pipeline-Payload,
// -Size and -Digest and an empty body. Get resolves such a message: every
// reader (the workers, the sink, the stream readers) calls it. A job's
// object is deleted once the job left the work queue; an outcome's lives as
// long as its message.
//
//	store := payload.New(js, obs, nc, log)
//	object, err := store.Offload(ctx, msg, payload.KindJobs) // before publishing msg
//	body, err := store.Get(ctx, msg.Header, msg.Data)       // after reading it
//
// The package knows nothing of jobs or streams beyond the message id
// header: the broker creates the bucket (BucketConfig), the queue, the
// sink and the ledger call the Store.
package payload
