// Package eval scores the stored results of the pipeline against labelled
// data, per field path: is the extracted data right, per schema version and
// per model.
//
// A labelled file is JSON Lines, {"id": JOB_ID, "expected": OBJECT} per
// line. Run checks every line first (a line that is not such an object is
// a *LineError naming FILE:LINE, and nothing is scored), then joins each id
// with its job's latest run in the index (index.Store.LatestRuns, a batch
// of ids at a time) and compares expected with produced:
//
//   - Objects key by key; arrays of objects (any array with a non-scalar
//     element) by position, the index written * in the field path; arrays
//     of scalars as multisets at .../*: correct the size of the
//     intersection, missing the expected ones not matched, extra the
//     produced ones not matched.
//   - A scalar is correct when both sides are present (not null) and equal
//     after normalisation: strings NFKC, case-folded, runs of white space
//     as one space, trimmed; numbers by value (30 equals 30.0); booleans as
//     they are. Wrong: both present, not equal (values of different kinds
//     are never equal). Missing: expected present, produced absent or null.
//     Extra: produced present, expected absent or null.
//   - Where an object or an array is expected and a value of another kind
//     was produced, every value expected below it is wrong.
//   - A dead letter or an id with no run counts every expected value as
//     missing, and the record as no result.
//
// Per field path precision = correct / (correct + wrong + extra), recall =
// correct / (correct + wrong + missing), f1 their harmonic mean (each 0
// when its denominator is); overall the same over the sums. Exact counts
// the records with a result in which every value is correct and none extra.
//
//	res, err := eval.Run(ctx, st, "labels.jsonl", eval.Options{By: eval.ByModel})
//	...
//	_, err = st.SaveEval(ctx, res.Stored())
//	err = eval.WriteTable(os.Stdout, res)
package eval
