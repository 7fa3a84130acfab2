// Command tbcount reads what `make tbcount-vm` recorded (hwtest/vm/tbcount-vm.sh
// and the tbcount qemu plugin): how often each translated block of the guest
// ran during a window of C perftest's pair and of ibgo's, and prints, per
// round trip, the instructions each executed in user space (by object for
// the C tools, by function for ibgo) and in the kernel, and the kernel
// functions whose counts differ most.
//
// Usage: go run ./hwtest/vm/tbcount [-lines] [-spin N] [-top N] DIR
//
// With -lines, ibgo's instructions are told apart by source line as well
// (the line of each block's first instruction, from the binary's line
// table): which statements of a function the count comes from.
//
// A round trip is two POST_SEND doorbells (the entries of the kernel's
// ib_uverbs_post_send in the window), right for send_lat and write_lat.
// Blocks that ran more than -spin times per round trip are the waits (a
// poll or a memory spin) and are counted apart: their number follows the
// latency, not the work.
package main

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type sym struct {
	addr uint64
	name string
}

type symtab []sym

func (t symtab) find(a uint64) string {
	i := sort.Search(len(t), func(i int) bool { return t[i].addr > a }) - 1
	if i < 0 {
		return "?"
	}
	return t[i].name
}

func (t symtab) start(name string) (uint64, bool) {
	for _, s := range t {
		if s.name == name {
			return s.addr, true
		}
	}
	return 0, false
}

const kernelBase = 0xffff800000000000

func kallsyms(path string) (symtab, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var t symtab
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || (fs[1] != "t" && fs[1] != "T") {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err == nil && a != 0 {
			t = append(t, sym{a, fs[2]})
		}
	}
	sort.Slice(t, func(i, j int) bool { return t[i].addr < t[j].addr })
	return t, sc.Err()
}

func elfFuncs(path string) (symtab, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ss, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var t symtab
	for _, s := range ss {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			t = append(t, sym{s.Value, s.Name})
		}
	}
	sort.Slice(t, func(i, j int) bool { return t[i].addr < t[j].addr })
	return t, nil
}

// goLines maps a pc of the Go binary at path to "file.go:line" through its
// line table (.gopclntab).
func goLines(path string) (func(uint64) string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, fmt.Errorf("%s: no .gopclntab or .text section", path)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, fmt.Errorf("%s: line table: %w", path, err)
	}
	return func(pc uint64) string {
		file, line, fn := tab.PCToLine(pc)
		if fn == nil {
			return "?"
		}
		return filepath.Base(file) + ":" + strconv.Itoa(line)
	}, nil
}

type mapping struct {
	lo, hi uint64
	file   string
}

func readMaps(path string) ([]mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ms []mapping
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 6 || !strings.Contains(fs[1], "x") {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil {
			ms = append(ms, mapping{a, z, filepath.Base(fs[5])})
		}
	}
	return ms, nil
}

type block struct {
	vaddr, insns, execs uint64
}

func readBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A block translated again has one record per translation: add them
	// up, so that a wait split in two is still a wait.
	idx := map[[2]uint64]int{}
	var bs []block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s:%d: want 3 fields, have %d", path, n, len(fs))
		}
		var b block
		var errs [3]error
		b.vaddr, errs[0] = strconv.ParseUint(fs[0], 16, 64)
		b.insns, errs[1] = strconv.ParseUint(fs[1], 10, 64)
		b.execs, errs[2] = strconv.ParseUint(fs[2], 10, 64)
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, e)
			}
		}
		k := [2]uint64{b.vaddr, b.insns}
		if i, ok := idx[k]; ok {
			bs[i].execs += b.execs
			continue
		}
		idx[k] = len(bs)
		bs = append(bs, b)
	}
	return bs, sc.Err()
}

// counts is one window, per round trip.
type counts struct {
	trips      float64
	user, kern side
}

// side is user space or the kernel: instructions by object or function,
// their total and block count, and the instructions of the waits.
type side struct {
	by              map[string]float64
	ins, tbs, waits float64
}

func (s *side) add(name func() string, ins, tbs float64, wait bool) {
	if wait {
		s.waits += ins
		return
	}
	s.by[name()] += ins
	s.ins += ins
	s.tbs += tbs
}

func main() {
	spin := flag.Float64("spin", 20, "executions per round trip above which a block counts as a wait")
	top := flag.Int("top", 15, "rows per table")
	lines := flag.Bool("lines", false, "tell ibgo's instructions apart by source line too")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tbcount [-lines] [-spin N] [-top N] DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *spin, *top, *lines); err != nil {
		fmt.Fprintln(os.Stderr, "tbcount:", err)
		os.Exit(1)
	}
}

func run(dir string, spin float64, top int, lines bool) error {
	ks, err := kallsyms(filepath.Join(dir, "kallsyms"))
	if err != nil {
		return err
	}
	post, ok := ks.start("ib_uverbs_post_send")
	if !ok {
		return fmt.Errorf("no ib_uverbs_post_send in %s/kallsyms", dir)
	}
	gofns, err := elfFuncs(filepath.Join(dir, "ibgo"))
	if err != nil {
		return err
	}
	var lineOf func(uint64) string
	if lines {
		if lineOf, err = goLines(filepath.Join(dir, "ibgo")); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, de := range ents {
		if strings.HasSuffix(de.Name(), ".tbc") {
			names = append(names, filepath.Join(dir, de.Name()))
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fmt.Errorf("no .tbc files in %s", dir)
	}
	// Read every window first: a block is a wait in all of them if it is
	// one in any (a block run about -spin times per round trip would
	// otherwise be work in one window and a wait in the next, and show as a
	// difference between the two).
	type window struct {
		name, impl string
		maps       []mapping
		bs         []block
		trips      float64
	}
	var wins []window
	for _, n := range names {
		name := strings.TrimSuffix(filepath.Base(n), ".tbc")
		maps, err := readMaps(filepath.Join(dir, name+".maps"))
		if err != nil {
			return err
		}
		bs, err := readBlocks(n)
		if err != nil {
			return err
		}
		trips := roundTrips(bs, post)
		if trips < 100 {
			return fmt.Errorf("%s: %.0f round trips in the window, too few to count per trip", name, trips)
		}
		wins = append(wins, window{name, strings.TrimRight(name, "0123456789"), maps, bs, trips})
	}
	bss, trips := make([][]block, len(wins)), make([]float64, len(wins))
	for i, w := range wins {
		bss[i], trips[i] = w.bs, w.trips
	}
	waits := waitBlocks(bss, trips, spin)
	byImpl := map[string][]*counts{}
	fmt.Printf("per round trip (2 doorbells), both processes; waits are blocks run over %.0f times per round trip\n", spin)
	fmt.Printf("%-6s %8s %12s %10s %12s %10s %12s %12s\n", "window", "trips", "user insns", "user TBs", "kernel insns", "kernel TBs", "user waits", "kernel waits")
	for _, w := range wins {
		c := &counts{trips: w.trips, user: side{by: map[string]float64{}}, kern: side{by: map[string]float64{}}}
		for _, b := range w.bs {
			ins := float64(b.insns*b.execs) / c.trips
			tbs := float64(b.execs) / c.trips
			if b.vaddr >= kernelBase {
				c.kern.add(func() string { return ks.find(b.vaddr) }, ins, tbs, waits[b.vaddr])
			} else {
				c.user.add(func() string { return userName(b.vaddr, w.maps, gofns, lineOf) }, ins, tbs, waits[b.vaddr])
			}
		}
		byImpl[w.impl] = append(byImpl[w.impl], c)
		fmt.Printf("%-6s %8.0f %12.0f %10.0f %12.0f %10.0f %12.0f %12.0f\n", w.name, c.trips, c.user.ins, c.user.tbs, c.kern.ins, c.kern.tbs, c.user.waits, c.kern.waits)
	}
	impls := make([]string, 0, len(byImpl))
	for k := range byImpl {
		impls = append(impls, k)
	}
	sort.Strings(impls)
	for _, impl := range impls {
		fmt.Printf("\n%s, user space, instructions per round trip (mean of %d windows):\n", impl, len(byImpl[impl]))
		printTop(mean(byImpl[impl], func(c *counts) map[string]float64 { return c.user.by }), nil, top)
	}
	if a, b := byImpl["c"], byImpl["go"]; a != nil && b != nil {
		fmt.Printf("\nkernel functions that differ most, instructions per round trip (go - c):\n")
		printTop(mean(b, func(c *counts) map[string]float64 { return c.kern.by }), mean(a, func(c *counts) map[string]float64 { return c.kern.by }), top)
	}
	return nil
}

// roundTrips is the window's round trips: two entries of the kernel's
// POST_SEND handler (at post) each.
func roundTrips(bs []block, post uint64) float64 {
	var n float64
	for _, b := range bs {
		if b.vaddr == post {
			n += float64(b.execs) / 2
		}
	}
	return n
}

// waitBlocks is the blocks that ran more than spin times per round trip
// in any of the windows (bss[i] over trips[i] round trips).
func waitBlocks(bss [][]block, trips []float64, spin float64) map[uint64]bool {
	w := map[uint64]bool{}
	for i, bs := range bss {
		for _, b := range bs {
			if float64(b.execs)/trips[i] > spin {
				w[b.vaddr] = true
			}
		}
	}
	return w
}

func userName(a uint64, maps []mapping, gofns symtab, lineOf func(uint64) string) string {
	for _, m := range maps {
		if a >= m.lo && a < m.hi {
			if m.file == "ibgo" {
				if lineOf != nil {
					return gofns.find(a) + " " + lineOf(a)
				}
				return gofns.find(a)
			}
			return m.file
		}
	}
	return "(unmapped)"
}

func mean(cs []*counts, f func(*counts) map[string]float64) map[string]float64 {
	m := map[string]float64{}
	for _, c := range cs {
		for k, v := range f(c) {
			m[k] += v / float64(len(cs))
		}
	}
	return m
}

// printTop prints the largest entries of a, or with base the largest
// differences a-base (both signs).
func printTop(a, base map[string]float64, n int) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range base {
		keys[k] = true
	}
	type row struct {
		k       string
		v, b, d float64
	}
	var rows []row
	for k := range keys {
		r := row{k: k, v: a[k], b: base[k]}
		r.d = r.v - r.b
		if base == nil {
			r.d = r.v
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		di, dj := rows[i].d, rows[j].d
		if di < 0 {
			di = -di
		}
		if dj < 0 {
			dj = -dj
		}
		return di > dj
	})
	for i, r := range rows {
		if i == n {
			break
		}
		if base == nil {
			fmt.Printf("  %9.1f  %s\n", r.v, r.k)
		} else {
			fmt.Printf("  %9.1f  (c %8.1f, go %8.1f)  %s\n", r.d, r.b, r.v, r.k)
		}
	}
}
