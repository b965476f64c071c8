// Package graph reads follow graphs for imports, benchmarks and replay tests: SNAP edge
// lists and DeathStarBench's .nodes/.edges pairs (../shared/data/graphs/SOURCE.md).
package graph

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Graph is a directed follow graph on dense ids 0..Nodes-1: Edges[i] = {follower, followee}.
type Graph struct {
	Nodes int
	Edges [][2]int32
}

// Read reads the graph in path: a generated one when path is a synthetic spec (ParseSynthetic), a
// DeathStarBench graph when path ends in .edges or .nodes (the
// other file beside it; its pairs are undirected, so symmetric should be true to follow both ways
// as DeathStarBench loads it), else a SNAP edge list, gzipped if it ends in .gz (sparse ids are
// remapped to dense ones in ascending order). With symmetric, every edge is also added reversed.
// Self-loops and repeated edges are dropped.
func Read(path string, symmetric bool) (Graph, error) {
	var g Graph
	var err error
	switch {
	case strings.HasPrefix(path, "synthetic:"):
		var s Synthetic
		if s, err = ParseSynthetic(path); err == nil {
			g = s.Generate()
		}
	case strings.HasSuffix(path, ".edges"), strings.HasSuffix(path, ".nodes"):
		g, err = readDSB(path, strings.TrimSuffix(strings.TrimSuffix(path, ".edges"), ".nodes"))
	default:
		g, err = readSNAP(path)
	}
	if err != nil {
		return Graph{}, err
	}
	if symmetric {
		n := len(g.Edges)
		for _, e := range g.Edges[:n] {
			g.Edges = append(g.Edges, [2]int32{e[1], e[0]})
		}
	}
	g.Edges = normalize(g.Edges)
	return g, nil
}

// normalize sorts edges and drops self-loops and repeats.
func normalize(es [][2]int32) [][2]int32 {
	es = slices.DeleteFunc(es, func(e [2]int32) bool { return e[0] == e[1] })
	slices.SortFunc(es, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	return slices.Compact(es)
}

func open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// pairs calls fn with the two integers of every line of r that is not blank or a # comment.
func pairs(path string, r io.Reader, fn func(a, b int64)) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; s.Scan(); line++ {
		t := strings.TrimSpace(s.Text())
		if t == "" || t[0] == '#' || t[0] == '%' {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 2 {
			return fmt.Errorf("%s:%d: want two node ids, got %q", path, line, t)
		}
		a, err1 := strconv.ParseInt(f[0], 10, 64)
		b, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || a < 0 || b < 0 {
			return fmt.Errorf("%s:%d: node ids must be non-negative integers, got %q", path, line, t)
		}
		fn(a, b)
	}
	return s.Err()
}

func readSNAP(path string) (Graph, error) {
	r, err := open(path)
	if err != nil {
		return Graph{}, err
	}
	defer r.Close()
	var raw [][2]int64
	if err := pairs(path, r, func(a, b int64) { raw = append(raw, [2]int64{a, b}) }); err != nil {
		return Graph{}, err
	}
	var ids []int64
	for _, e := range raw {
		ids = append(ids, e[0], e[1])
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	dense := make(map[int64]int32, len(ids))
	for i, id := range ids {
		dense[id] = int32(i)
	}
	g := Graph{Nodes: len(ids), Edges: make([][2]int32, len(raw))}
	for i, e := range raw {
		g.Edges[i] = [2]int32{dense[e[0]], dense[e[1]]}
	}
	return g, nil
}

// readDSB reads base.edges and the node count in base.nodes; the file the caller named is looked
// for first, so a wrong path is reported as the caller wrote it.
func readDSB(path, base string) (Graph, error) {
	if _, err := os.Stat(path); err != nil {
		return Graph{}, err
	}
	b, err := os.ReadFile(base + ".nodes")
	if errors.Is(err, fs.ErrNotExist) {
		return Graph{}, fmt.Errorf("%s is a DeathStarBench edge list, which needs its node count in %s.nodes beside it: %w", path, base, err)
	} else if err != nil {
		return Graph{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return Graph{}, fmt.Errorf("%s.nodes: want one node count, got %q", base, strings.TrimSpace(string(b)))
	}
	r, err := open(base + ".edges")
	if err != nil {
		return Graph{}, err
	}
	defer r.Close()
	g := Graph{Nodes: n}
	err = pairs(base+".edges", r, func(a, b int64) { g.Edges = append(g.Edges, [2]int32{int32(a), int32(b)}) })
	if err != nil {
		return Graph{}, err
	}
	for _, e := range g.Edges {
		if int(e[0]) >= n || int(e[1]) >= n {
			return Graph{}, fmt.Errorf("%s.edges: node %d or %d is not below the %d of %s.nodes", base, e[0], e[1], n, base)
		}
	}
	return g, nil
}

// Followers returns each node's number of followers.
func (g Graph) Followers() []int {
	out := make([]int, g.Nodes)
	for _, e := range g.Edges {
		out[e[1]]++
	}
	return out
}
