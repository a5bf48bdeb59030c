package main

import (
	"context"
	"io"
	"strconv"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/rwlock"
)

// rwShow is "latchkey lock show --rw KEY": KEY's read-write lock, as
// "latchkey run --shared/--exclusive" takes it.
func rwShow(ctx context.Context, key string, f *lockFlagSet, name string, stdout, stderr io.Writer) int {
	l, err := lockurl.OpenRW(ctx, f.backend)
	if err != nil {
		return usageOrUnavailable(name, err, stderr, lock.ErrInvalid)
	}
	defer l.Close()
	info, err := l.Inspect(ctx, key)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	printRW(info, f.json, stdout)
	if !info.Held() {
		return exitNotFound
	}
	return exitOK
}

func printRW(in rwlock.Info, asJSON bool, w io.Writer) {
	if asJSON {
		writeJSON(w, toRWJSON(in))
		return
	}
	var f fields
	f.add("key", strconv.Quote(in.Name))
	switch {
	case in.Writer != nil:
		f.add("held", "exclusive")
		f.add("writer", holderText(in.Writer.Label)+", token "+tokenText(in.Writer.Token)+", "+timeLeftText(in.Writer.TimeLeft)+" left")
	case len(in.Readers) > 0:
		f.add("held", "shared by "+strconv.Itoa(len(in.Readers)))
		for _, r := range in.Readers {
			f.add("reader", holderText(r.Label)+", token "+tokenText(r.Token)+", "+timeLeftText(r.TimeLeft)+" left")
		}
	default:
		f.add("held", "no")
	}
	f.add("writers waiting", strconv.Itoa(in.WritersWaiting))
	f.add("last token", tokenText(in.Token))
	f.print(w)
}

// rwJSON is a read-write lock as --json prints it.
type rwJSON struct {
	Key            string         `json:"key"`
	Mode           string         `json:"mode"` // "exclusive", "shared" or "free"
	Writer         *rwHolderJSON  `json:"writer,omitempty"`
	Readers        []rwHolderJSON `json:"readers,omitempty"`
	WritersWaiting int            `json:"writers_waiting"`
	Token          uint64         `json:"last_token,omitempty"`
}

type rwHolderJSON struct {
	Holder     string `json:"holder,omitempty"`
	Token      uint64 `json:"token"`
	TimeLeftMS *int64 `json:"time_left_ms,omitempty"`
}

func toRWJSON(in rwlock.Info) rwJSON {
	holder := func(h rwlock.Holder) rwHolderJSON {
		j := rwHolderJSON{Holder: h.Label, Token: h.Token}
		if h.TimeLeft != lock.Unknown {
			ms := h.TimeLeft.Milliseconds()
			j.TimeLeftMS = &ms
		}
		return j
	}
	j := rwJSON{Key: in.Name, Mode: "free", WritersWaiting: in.WritersWaiting, Token: in.Token}
	switch {
	case in.Writer != nil:
		j.Mode = "exclusive"
		w := holder(*in.Writer)
		j.Writer = &w
	case len(in.Readers) > 0:
		j.Mode = "shared"
	}
	for _, r := range in.Readers {
		j.Readers = append(j.Readers, holder(r))
	}
	return j
}
