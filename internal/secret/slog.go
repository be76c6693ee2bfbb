package secret

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that every record's message and attribute values
// (errors and other values by their text, groups included) pass through r
// before h sees them.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (x *handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x *handler) Handle(ctx context.Context, rec slog.Record) error {
	if x.r.Empty() {
		return x.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, x.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = x.attr(a)
	}
	return &handler{r: x.r, h: x.h.WithAttrs(red)}
}

func (x *handler) WithGroup(name string) slog.Handler {
	return &handler{r: x.r, h: x.h.WithGroup(name)}
}

func (x *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, m := range g {
			red[i] = x.attr(m)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		if b, ok := v.Any().([]byte); ok {
			s = string(b) // a handler would print it as text or base64
		} else {
			s = fmt.Sprint(v.Any())
		}
		if r := x.r.String(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
