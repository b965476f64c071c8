package graph_test

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rookery/rookery/graph"
)

// The reference inputs of ../shared/data/graphs, with the figures SOURCE.md gives for them.
func TestReferenceGraphs(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "data", "graphs")
	g, err := graph.Read(filepath.Join(dir, "socfb-Reed98.edges"), true)
	if err != nil {
		t.Fatal(err)
	}
	if g.Nodes != 962 || len(g.Edges) != 37_624 || slices.Max(g.Followers()) != 313 {
		t.Fatalf("Reed98 symmetric: %d nodes, %d edges, max followers %d; want 962, 37624, 313", g.Nodes, len(g.Edges), slices.Max(g.Followers()))
	}
	g, err = graph.Read(filepath.Join(dir, "soc-Epinions1.txt.gz"), false)
	if err != nil {
		t.Fatal(err)
	}
	if g.Nodes != 75_879 || len(g.Edges) != 508_837 || slices.Max(g.Followers()) != 3_035 {
		t.Fatalf("Epinions: %d nodes, %d edges, max followers %d; want 75879, 508837, 3035", g.Nodes, len(g.Edges), slices.Max(g.Followers()))
	}
}

func TestSNAPRemapsAndCleans(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.txt.gz")
	f, _ := os.Create(path)
	z := gzip.NewWriter(f)
	z.Write([]byte("# comment\n100\t7\n7 100\n\n100\t100\n100\t7\n5\t7\n"))
	z.Close()
	f.Close()
	g, err := graph.Read(path, false)
	if err != nil {
		t.Fatal(err)
	}
	// ids 5, 7, 100 -> 0, 1, 2; the self-loop and the repeat are dropped.
	want := [][2]int32{{0, 1}, {1, 2}, {2, 1}}
	if g.Nodes != 3 || !slices.Equal(g.Edges, want) {
		t.Fatalf("graph = %+v; want 3 nodes, %v", g, want)
	}
	for name, body := range map[string]string{"bad.txt": "1 x\n", "short.txt": "1\n", "neg.txt": "-1 2\n"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := graph.Read(p, false); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := graph.Read(filepath.Join(dir, "missing.txt"), false); err == nil {
		t.Error("a missing file: no error")
	}
}

func TestDeathStarBenchFormat(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "s.nodes"), []byte("3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "s.edges"), []byte("0 1\n1 2\n"), 0o644)
	g, err := graph.Read(filepath.Join(dir, "s.edges"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int32{{0, 1}, {1, 0}, {1, 2}, {2, 1}}; g.Nodes != 3 || !slices.Equal(g.Edges, want) {
		t.Fatalf("graph = %+v", g)
	}
	os.WriteFile(filepath.Join(dir, "s.edges"), []byte("0 3\n"), 0o644)
	if _, err := graph.Read(filepath.Join(dir, "s.nodes"), false); err == nil {
		t.Fatal("a node past the count: no error")
	}
	// A path that does not exist is reported as given, not as the .nodes file beside it.
	missing := filepath.Join(dir, "nope.edges")
	if _, err := graph.Read(missing, false); err == nil || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "nope.nodes") {
		t.Fatalf("reading %s: %v", missing, err)
	}
	// An edge list without its .nodes says what is missing.
	os.WriteFile(filepath.Join(dir, "lone.edges"), []byte("0 1\n"), 0o644)
	if _, err := graph.Read(filepath.Join(dir, "lone.edges"), false); err == nil || !strings.Contains(err.Error(), "node count in") {
		t.Fatalf("an edge list without .nodes: %v", err)
	}
}

func TestSyntheticGraphs(t *testing.T) {
	g1, err := graph.Read("synthetic:nodes=20000,follows=10,hubs=2,hub-followers=15000,seed=5", false)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := graph.Read("synthetic:nodes=20000,follows=10,hubs=2,hub-followers=15000,seed=5", false)
	if !slices.Equal(g1.Edges, g2.Edges) {
		t.Fatal("the same spec and seed gave two graphs")
	}
	f := g1.Followers()
	if f[0] < 15000 || f[1] < 15000 {
		t.Fatalf("hubs have %d and %d followers; want at least 15000", f[0], f[1])
	}
	// Power law: the non-hub followers are very unequal (the top 1% hold far more than 1%).
	rest := slices.Clone(f[2:])
	slices.Sort(rest)
	top, total := 0, 0
	for i, n := range rest {
		total += n
		if i >= len(rest)*99/100 {
			top += n
		}
	}
	if mean := float64(total) / float64(g1.Nodes); mean < 7 || mean > 13 {
		t.Fatalf("mean follows %.1f; want about 10", mean)
	}
	if share := float64(top) / float64(total); share < 0.2 {
		t.Fatalf("the top 1%% hold %.0f%% of follows; want a power law", 100*share)
	}
	for _, bad := range []string{"synthetic:nodes=1", "synthetic:skew=0.5", "synthetic:colour=red", "synthetic:hubs=3,hub-followers=20000,nodes=100"} {
		if _, err := graph.Read(bad, false); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
