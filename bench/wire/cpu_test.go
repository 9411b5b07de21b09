package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// burn spins on the calling thread for d of CPU time as the thread's own rusage counts it.
func burn(d time.Duration) {
	t := rusageCPU(rusageThread)
	x := 0
	for rusageCPU(rusageThread)-t < d {
		for i := 0; i < 100000; i++ {
			x += i
		}
	}
	if x == -1 {
		panic("unreachable")
	}
}

// USER_HZ from the auxiliary vector is the value sysconf(_SC_CLK_TCK) gives (getconf).
func TestClockTicksMatchesGetconf(t *testing.T) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Skipf("getconf: %v", err)
	}
	want, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := clockTicks()
	if err != nil || got != want {
		t.Fatalf("clockTicks() = %v, %v; getconf CLK_TCK = %v", got, err, want)
	}
}

// A comm with spaces and parentheses does not shift the fields; a short line is refused.
func TestStatFieldsSplitsAfterTheLastParen(t *testing.T) {
	line := "42 (post (gres) x) S 7 42 42 0 -1 4194560 100 0 0 0 11 12 13 14 20 0 1 0"
	f, err := statFields(line)
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "S" || f[1] != "7" || cpuTicks(f, 11, 12) != 23 || cpuTicks(f, 13, 14) != 27 {
		t.Fatalf("fields %q", f)
	}
	if _, err := statFields("42 (x) S 7 42"); err == nil {
		t.Fatal("a short stat line was accepted")
	}
}

// serverTicks counts a process's own CPU (utime + stime) and, as cutime + cstime, a child
// that ran and exited between two readings: measured on this test process and a shell
// child that spins for a while.
func TestServerTicksCountsOwnAndReapedChildren(t *testing.T) {
	hz, err := clockTicks()
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{Name: "self", pid: os.Getpid(), multi: true}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := e.serverTicks()
	burn(300 * time.Millisecond)
	own := float64(e.serverTicks()-t0) / hz
	if own < 0.2 || own > 2 {
		t.Fatalf("300 ms of this process's CPU read as %.2f s", own)
	}
	t1 := e.serverTicks()
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	got := float64(e.serverTicks()-t1) / hz
	if child < 0.1 || got < child-0.05 {
		t.Fatalf("a reaped child's %.2f s of CPU read as %.2f s", child, got)
	}
}

// The memory sampler's CPU is taken out of the client's: time spent inside timedSample
// moves samplerCPUNs by as much and leaves clientCPU nearly still.
func TestTimedSampleLeavesClientCPUOut(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s0, c0 := samplerCPUNs.Load(), clientCPU()
	timedSample(func() { burn(200 * time.Millisecond) })
	sampled := time.Duration(samplerCPUNs.Load() - s0)
	client := clientCPU() - c0
	if sampled < 200*time.Millisecond || client > 50*time.Millisecond {
		t.Fatalf("sampler %v, client %v over a 200 ms sample", sampled, client)
	}
}

// A meter records seconds and microseconds per operation; without a pid there is none.
func TestMeterRecordsPerOperation(t *testing.T) {
	if newCPUMeter(&engine{}, 100) != nil {
		t.Fatal("a meter for an engine without a pid")
	}
	m := &cpuMeter{serverSecs: 0.5, clientSecs: 0.25}
	x := run{Ops: 1000}
	m.record(&x)
	if x.SamplerCPUSecs == nil || *x.ServerCPUSecs != 0.5 || *x.ServerCPUPerOp != 500 || *x.ClientCPUPerOp != 250 {
		t.Fatalf("recorded %v s, %v us, %v us", *x.ServerCPUSecs, *x.ServerCPUPerOp, *x.ClientCPUPerOp)
	}
	r := &engineResult{Runs: []run{x, {Ops: 1, ServerCPUPerOp: ptr(100.0), ClientCPUPerOp: ptr(50.0)},
		{Ops: 1, ServerCPUPerOp: ptr(700.0), ClientCPUPerOp: ptr(10.0)}}}
	cpuMedians(r)
	if *r.ServerCPUPerOpMedian != 500 || *r.ClientCPUPerOpMedian != 50 {
		t.Fatalf("medians %v, %v", *r.ServerCPUPerOpMedian, *r.ClientCPUPerOpMedian)
	}
}

func ptr(v float64) *float64 { return &v }
