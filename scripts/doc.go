// Package scripts holds the project's helper scripts, not code that tests
// need:
//
//   - scripts/test: the README's test command (go vet, then go test -race), run by CI.
//   - scripts/bench: the performance bench, writes bench/RESULTS.md.
//   - scripts/cluster: a three-node NATS cluster on loopback, for trying
//     `pipeline` against a cluster (`--nats-url`, `--replicas 3`).
//   - scripts/check-report-html: renders `pipeline report --format html` in
//     headless Chromium and checks it is self-contained.
//   - scripts/check-ui: drives the operators' console (`pipeline ui`) in
//     headless Chromium through the Go browser test, keeps its screenshots
//     (`--update` rewrites docs/ui/*.png).
package scripts
