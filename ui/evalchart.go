package ui

import (
	"fmt"
	"strings"

	"github.com/llmpipeline/pipeline/report"
)

// f1Chart is the schema page's plot of f1 over schema versions: one point
// per version with an eval, in the order the versions were first
// evaluated, on a 0..1 scale.
type f1Chart struct {
	W, H   int
	Line   string // the polyline's points
	Points []f1Point
}

type f1Point struct {
	X, Y  float64
	F1    float64
	Label string // version, f1, records
}

const (
	f1ChartW, f1ChartH = 480, 160
	f1ChartPad         = 24
)

// newF1Chart plots evals; nil when there is none.
func newF1Chart(evals []*report.EvalFigures) *f1Chart {
	if len(evals) == 0 {
		return nil
	}
	c := &f1Chart{W: f1ChartW, H: f1ChartH}
	step := 0.0
	if len(evals) > 1 {
		step = float64(f1ChartW-2*f1ChartPad) / float64(len(evals)-1)
	}
	var pts []string
	for i, e := range evals {
		x := float64(f1ChartPad) + step*float64(i)
		if len(evals) == 1 {
			x = float64(f1ChartW) / 2
		}
		y := float64(f1ChartH-f1ChartPad) - e.F1*float64(f1ChartH-2*f1ChartPad)
		version := e.Version
		if len(version) > 12 {
			version = version[:12]
		}
		c.Points = append(c.Points, f1Point{X: x, Y: y, F1: e.F1,
			Label: fmt.Sprintf("%s: f1 %.2f over %d labelled records (%s)", version, e.F1, e.Records, e.At.UTC().Format("2006-01-02 15:04"))})
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	c.Line = strings.Join(pts, " ")
	return c
}
