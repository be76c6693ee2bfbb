package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/report/cluster"
	"github.com/llmpipeline/pipeline/schemas"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots to docs/ui/ (for the README)")

// chromium finds Debian's chromium, installing it with apt-get when it is
// missing and the test runs as root (as scripts/check-report-html does).
// It skips the test, loudly, only when chromium cannot be had.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Geteuid() == 0 {
		t.Log("chromium is missing: installing Debian's package with apt-get")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "chromium"}} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Logf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
				break
			}
		}
		if p, err := exec.LookPath("chromium"); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: THE CONSOLE'S BROWSER TEST DID NOT RUN: chromium is not installed and could not be installed (apt-get install chromium, as root)")
	return ""
}

// artifacts is where the run's screenshots go: $PIPELINE_UI_ARTIFACTS, or
// a new directory under the system's temp dir, kept after the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PIPELINE_UI_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "pipeline-ui-artifacts-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of the console: %s", dir)
	return dir
}

// TestConsoleInBrowser is the operator's loop in headless Chromium: the
// overview, a cluster the model cannot satisfy, a dead letter's transcript,
// a replay after the schema is fixed, and the job succeeding. Each page is
// screenshotted into the artifacts dir (and docs/ui/ with
// -update-screenshots).
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	shots := artifacts(t)

	// The data: the shipped example jobs over the built-in schemas, plus two
	// jobs of a schema whose pattern the simulator never satisfies.
	schemaDir := t.TempDir()
	for _, name := range []string{"invoice", "ticket", "shipment"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "schemas", "builtin", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(schemaDir, name+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	partSchema(t, schemaDir, false)
	dir := t.TempDir()
	common := []string{"--data-dir", dir, "--schemas", schemaDir}
	mustCLI(t, "", append([]string{"submit"}, append(common, filepath.Join("..", "..", "examples", "jobs.jsonl"))...)...)
	mustCLI(t, partJobs, append(append([]string{"submit"}, common...), "-")...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0"}, common...)...)

	reg, err := schemas.Load(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := reg.Get("part")
	cluster := cluster.ID(cluster.Fingerprint{Schema: "part", Version: part.Version, Path: "/code", Keyword: "pattern"})
	srv, _, _ := console(t, dir, schemaDir)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// tryText reads a node's text; while a page refreshes itself the node
	// may be between two versions (gone for an instant), so a poll reads
	// with it and tries again.
	tryText := func(sel string) (string, error) {
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		return strings.Join(strings.Fields(s), " "), err
	}
	text := func(sel string) string {
		t.Helper()
		s, err := tryText(sel)
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if *updateScreenshots {
			// the README's copy: the first screenful, to keep the files small
			view, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatalf("screenshot %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join("..", "..", "docs", "ui", name+".png"), view, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	do("opening the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#funnel-table")))
	if got := text("#tiles"); !strings.Contains(got, "JOBS 302") && !strings.Contains(got, "jobs 302") {
		t.Errorf("the overview's tiles say %q, want 302 jobs", got)
	}
	if got := text("#funnel-table"); !strings.Contains(got, "part") {
		t.Errorf("the funnel has no row for part: %q", got)
	}
	shot("overview")

	do("following Clusters", chromedp.Click(chromedp.CSS(`header nav a[href="/clusters"]`)), chromedp.WaitVisible(chromedp.CSS("#cluster-table")))
	if got := text("#clusters-shown"); !strings.Contains(got, " of ") {
		t.Errorf("the clusters page says %q, want N of M clusters", got)
	}
	shot("clusters")

	do("following the part /code cluster", chromedp.Click(chromedp.CSS(`#cluster-table a[href="/clusters/`+cluster+`"]`)), chromedp.WaitVisible(chromedp.CSS("#cluster-facts")))
	if got := text("#cluster-dead"); got != "2 of 2 jobs" {
		t.Errorf("the cluster's dead letters: %q, want 2 of 2 jobs", got)
	}
	do("following dead letter p1", chromedp.Click(chromedp.CSS(`#dead-letters a[href="/dead-letters/p1"]`)), chromedp.WaitVisible(chromedp.CSS("#attempt-1")))
	if got := text("#job-status"); !strings.HasPrefix(got, "dead_lettered") {
		t.Errorf("p1's status is %q, want dead_lettered", got)
	}
	if got := text("#attempt-1"); !strings.Contains(got, "/code") || !strings.Contains(got, "pattern") || !strings.Contains(got, "temperature 0.70") {
		t.Errorf("p1's first attempt does not show the /code pattern failure: %q", got)
	}
	shot("dead-letter")

	do("opening the dead letters", chromedp.Navigate(srv.URL+"/dead-letters"), chromedp.WaitVisible(chromedp.CSS("#dead-letters")))
	shot("dead-letters")
	do("opening the schemas", chromedp.Navigate(srv.URL+"/schemas"), chromedp.WaitVisible(chromedp.CSS("#schemas-table")))
	shot("schemas")

	// The schema author fixes the schema; the operator replays p1.
	partSchema(t, schemaDir, true)
	do("back to p1", chromedp.Navigate(srv.URL+"/dead-letters/p1"), chromedp.WaitVisible(chromedp.CSS("#replay-one")))
	do("replaying p1", chromedp.Click(chromedp.CSS("#replay-one")), chromedp.WaitVisible(chromedp.CSS("#action-count")))
	if got := text("#action-count"); got != "would replay 1 jobs" {
		t.Errorf("the dry run says %q, want would replay 1 jobs", got)
	}
	shot("replay-confirm")
	do("confirming", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#action-result")))
	if got := text("#action-result"); got != "replayed 1 jobs, 0 failed" {
		t.Fatalf("the replay says %q", got)
	}

	if got := text("#replay-next"); !strings.Contains(got, "pipeline run") {
		t.Errorf("the replay's result does not say a run must pick the job up: %q", got)
	}

	// The overview, left open while the workers run the replay: every
	// figure refreshes by itself (the cards, the class table, the funnel).
	do("opening the overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#funnel-table")))
	tiles, funnelRows := text("#tiles"), text("#funnel-table")
	if !strings.Contains(tiles, "302") || !strings.Contains(strings.ToLower(tiles), "replayed, awaiting a run 1") {
		t.Errorf("the overview after the replay: %q, want 302 jobs, 1 awaiting its run", tiles)
	}
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)...)
	if err := poll.Wait(t, 30*time.Second, func() error {
		nowTiles, err := tryText("#tiles")
		if err != nil {
			return err
		}
		nowFunnel, err := tryText("#funnel-table")
		if err != nil {
			return err
		}
		if nowTiles == tiles || nowFunnel == funnelRows {
			return errors.New("not refreshed yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("the open overview never refreshed: tiles %q, funnel %q", text("#tiles"), text("#funnel-table"))
	}
	if got := strings.ToLower(text("#tiles")); strings.Contains(got, "awaiting") || !strings.Contains(got, "302") {
		t.Errorf("the refreshed overview: %q, want 302 jobs and none awaiting", got)
	}
	do("p1 after the replay", chromedp.Navigate(srv.URL+"/dead-letters/p1"), chromedp.WaitVisible(chromedp.CSS("#job-status")))
	if got := text("#job-status"); got != "succeeded" {
		t.Errorf("p1 after the fix and the replay: %q, want succeeded", got)
	}
	if got := text("#job-facts"); !strings.Contains(got, "1 (a replay)") {
		t.Errorf("p1's page does not say it is the replay's run: %q", got)
	}
	shot("replayed")
}
