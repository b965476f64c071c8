package graph

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Synthetic describes a generated graph for what the real graphs lack: power-law
// follower counts, plus a few hub authors with a given number of followers each (100,000 to
// 1,000,000 for celebrity tests). The same spec and seed give the same graph.
type Synthetic struct {
	Nodes        int     // users
	MeanFollows  int     // average number of users each one follows (power-law distributed targets)
	Skew         float64 // the Zipf exponent of who is followed (> 1; 1.2 is social-network-like)
	Hubs         int     // hub authors (nodes 0..Hubs-1)
	HubFollowers int     // followers of each hub
	Seed         uint64
}

// ParseSynthetic reads a spec "synthetic:nodes=N,follows=F,skew=S,hubs=H,hub-followers=K,seed=X"
// (every key optional; defaults 10000 nodes, 20 follows, skew 1.2, no hubs, seed 1).
func ParseSynthetic(spec string) (Synthetic, error) {
	s := Synthetic{Nodes: 10_000, MeanFollows: 20, Skew: 1.2, Seed: 1}
	body, ok := strings.CutPrefix(spec, "synthetic:")
	if !ok {
		return s, fmt.Errorf("%q is not a synthetic graph spec", spec)
	}
	for _, kv := range strings.Split(body, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "nodes":
			s.Nodes, err = strconv.Atoi(v)
		case "follows":
			s.MeanFollows, err = strconv.Atoi(v)
		case "skew":
			s.Skew, err = strconv.ParseFloat(v, 64)
		case "hubs":
			s.Hubs, err = strconv.Atoi(v)
		case "hub-followers":
			s.HubFollowers, err = strconv.Atoi(v)
		case "seed":
			s.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return s, fmt.Errorf("synthetic graph spec %q: %s: %v", spec, k, err)
		}
	}
	if s.Nodes < 2 || s.MeanFollows < 0 || s.Skew <= 1 || s.Hubs < 0 || s.Hubs > s.Nodes || s.HubFollowers >= s.Nodes {
		return s, fmt.Errorf("synthetic graph spec %q: want nodes >= 2, skew > 1, hubs <= nodes, hub-followers < nodes", spec)
	}
	return s, nil
}

// Generate builds the graph.
func (s Synthetic) Generate() Graph {
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	zipf := rand.NewZipf(rng, s.Skew, 1, uint64(s.Nodes-1))
	// Followees are drawn by Zipf rank through a random permutation, so the popular users are
	// spread over the ids (the hubs come on top of that).
	perm := rng.Perm(s.Nodes)
	g := Graph{Nodes: s.Nodes}
	for u := range s.Nodes {
		n := int(rng.ExpFloat64() * float64(s.MeanFollows))
		for range n {
			g.Edges = append(g.Edges, [2]int32{int32(u), int32(perm[zipf.Uint64()])})
		}
	}
	for h := range s.Hubs {
		for _, f := range rng.Perm(s.Nodes)[:s.HubFollowers+1] {
			if f != h {
				g.Edges = append(g.Edges, [2]int32{int32(f), int32(h)})
			}
		}
	}
	g.Edges = normalize(g.Edges)
	return g
}
