package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientAddr: the peer is the client unless it is a trusted proxy; then the rightmost
// X-Forwarded-For entry that is not a trusted proxy, whatever the client wrote to its left.
func TestClientAddr(t *testing.T) {
	lb := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, c := range []struct {
		name, peer string
		xff        []string
		trusted    []netip.Prefix
		want       string
	}{
		{"no trusted proxies: the header is ignored", "127.0.0.1:5000", []string{"203.0.113.1"}, nil, "127.0.0.1"},
		{"an untrusted peer: the header is ignored", "198.51.100.7:5000", []string{"203.0.113.1"}, lb, "198.51.100.7"},
		{"a trusted peer names the client", "127.0.0.1:5000", []string{"203.0.113.1"}, lb, "203.0.113.1"},
		{"what the client wrote to the left proves nothing", "127.0.0.1:5000", []string{"6.6.6.6, 203.0.113.1"}, lb, "203.0.113.1"},
		{"through two trusted proxies", "127.0.0.1:5000", []string{"203.0.113.1, 10.1.2.3"}, lb, "203.0.113.1"},
		{"header lines are one list", "127.0.0.1:5000", []string{"6.6.6.6", "203.0.113.1"}, lb, "203.0.113.1"},
		{"every hop trusted: the leftmost", "127.0.0.1:5000", []string{"10.0.0.5"}, lb, "10.0.0.5"},
		{"no header: the proxy", "127.0.0.1:5000", nil, lb, "127.0.0.1"},
		{"an entry that is no address ends the walk", "127.0.0.1:5000", []string{"203.0.113.1, unknown"}, lb, "127.0.0.1"},
		{"an address with a port", "[::1]:5000", []string{"[2001:db8::1]:443"}, lb, "2001:db8::1"},
		{"an IPv4-mapped address", "127.0.0.1:5000", []string{"::ffff:203.0.113.1"}, lb, "203.0.113.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/feed", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, c.trusted); got != c.want {
				t.Fatalf("clientAddr = %s; want %s", got, c.want)
			}
		})
	}
}

func TestParseTrustedProxy(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3/8": "10.0.0.0/8", "127.0.0.1": "127.0.0.1/32", "::1": "::1/128", "::ffff:10.0.0.1": "10.0.0.1/32"} {
		if p, err := ParseTrustedProxy(in); err != nil || p.String() != want {
			t.Errorf("ParseTrustedProxy(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "lb.internal"} {
		if _, err := ParseTrustedProxy(bad); err == nil {
			t.Errorf("ParseTrustedProxy(%q): no error", bad)
		}
	}
}
