package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxy reads one entry of --trusted-proxies: a CIDR prefix (10.0.0.0/8) or an address.
func ParseTrustedProxy(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// clientAddr is the address of the client that sent r: the connection's peer, unless the peer is
// one of the trusted proxies (a load balancer in front of the API), which append the address they
// got the request from to X-Forwarded-For. Then it is the rightmost address there that is not a
// trusted proxy: entries to its left were written by the client itself and prove nothing.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if len(trusted) == 0 || err != nil || !within(addr, trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := parseHop(strings.TrimSpace(hops[i]))
		if err != nil {
			break // not written by a proxy we trust: the last trusted hop is all that is known
		}
		addr = hop
		if !within(hop, trusted) {
			break
		}
	}
	return addr.String()
}

func within(a netip.Addr, prefixes []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads an X-Forwarded-For entry: an address, with a port as some proxies write it.
func parseHop(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err
}
