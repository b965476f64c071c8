package live_test

import (
	"testing"

	"github.com/rookery/rookery/live"
)

// Every open stream of a user gets the user's messages in order; a stream whose buffer is full is
// dropped without holding up the others; Watch hears of a user's first and last stream.
func TestHub(t *testing.T) {
	var watched []string
	drops := 0
	h := &live.Hub{
		Watch:  func(user string, on bool) { watched = append(watched, map[bool]string{true: "+", false: "-"}[on]+user) },
		OnDrop: func() { drops++ },
	}
	fast := h.Subscribe("u", 10)
	slow := h.Subscribe("u", 2)
	other := h.Subscribe("v", 10)
	for i := uint64(1); i <= 5; i++ {
		h.Deliver("u", live.Message{Seq: i})
	}
	for i := uint64(1); i <= 5; i++ {
		if m := <-fast.C; m.Seq != i {
			t.Fatalf("fast stream got %d, want %d", m.Seq, i)
		}
	}
	select {
	case <-slow.Dropped:
	default:
		t.Fatal("a stream 3 messages behind with a buffer of 2 was not dropped")
	}
	if len(slow.C) != 2 || drops != 1 {
		t.Fatalf("the dropped stream holds %d messages, %d drops; want its 2, 1 drop", len(slow.C), drops)
	}
	if len(other.C) != 0 {
		t.Fatal("another user's stream got u's messages")
	}
	if h.Open() != 2 {
		t.Fatalf("%d users open; want 2", h.Open())
	}
	fast.Close()
	fast.Close() // twice is harmless
	other.Close()
	if h.Open() != 0 {
		t.Fatalf("%d users open after every stream closed", h.Open())
	}
	want := []string{"+u", "+v", "-u", "-v"}
	if len(watched) != len(want) {
		t.Fatalf("watched %v; want %v", watched, want)
	}
	for i := range want {
		if watched[i] != want[i] {
			t.Fatalf("watched %v; want %v", watched, want)
		}
	}
	// Delivering to a user with no stream is a no-op.
	h.Deliver("nobody", live.Message{Seq: 1})
}
