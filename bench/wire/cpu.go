// CPU per operation: what each run cost the engine's server and this client, read just
// before the start signal and just after the last worker's end (the timed part only, not
// the setup, the connections or the prepares).
//
//   - Server: utime + stime from /proc/PID/stat of each of the engine's processes (e.pids():
//     extentdb's one process with all its threads; PostgreSQL's postmaster and its children,
//     the backends and the background processes), plus the root's cutime + cstime, which
//     hold the children it has reaped. A child that exits during a run is so counted, as a
//     zombie until the postmaster reaps it (at once, on SIGCHLD) and in cutime after; a
//     sample that a reap overlaps is taken again. The unit is the kernel's USER_HZ
//     (AT_CLKTCK of the auxiliary vector, as sysconf(_SC_CLK_TCK) reads it), 10 ms at 100 Hz.
//   - Client: this process's getrusage(RUSAGE_SELF) user + system time, less the time its
//     memory samplers spent reading /proc (they run all along, for both engines, and are not
//     the driver's work). Only one engine is driven at a time, so the rest is that engine's
//     client: its driver, database/sql and the harness's loop.
//
// Invariants: (1) a meter's readings are taken only around runOnce's timed part, server
// first at the start and last at the end, so the /proc scans fall outside the client's
// interval; (2) every figure is a delta of counters that only grow, so never negative
// (asserted, allowing a sampler-correction rounding of 1 ms on the client).
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// atClkTck is the auxiliary vector's entry for USER_HZ (<linux/auxvec.h>).
const atClkTck = 17

// rusageThread is getrusage's RUSAGE_THREAD (<linux/resource.h>), missing from package syscall.
const rusageThread = 1

// samplerCPUNs is the CPU time the memory samplers' threads spent reading /proc, all engines.
var samplerCPUNs atomic.Int64

// clockTicks reads USER_HZ, the unit of /proc/PID/stat's times, from this process's
// auxiliary vector (pairs of native words, ending at AT_NULL).
func clockTicks() (float64, error) {
	if strconv.IntSize != 64 {
		return 0, errors.New("clockTicks reads a 64-bit auxiliary vector")
	}
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0, err
	}
	for i := 0; i+16 <= len(b); i += 16 {
		k, v := binary.NativeEndian.Uint64(b[i:]), binary.NativeEndian.Uint64(b[i+8:])
		if k == 0 {
			break
		}
		if k == atClkTck && v > 0 {
			return float64(v), nil
		}
	}
	return 0, errors.New("no AT_CLKTCK in /proc/self/auxv")
}

// statFields returns the fields of /proc/PID/stat after "pid (comm)": index 0 is the state,
// 1 the parent's pid, 11 and 12 utime and stime, 13 and 14 cutime and cstime. comm may hold
// spaces and parentheses, so the split starts after the last ')'.
func statFields(text string) ([]string, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return nil, errors.New("no ')' in a /proc stat line")
	}
	f := strings.Fields(text[i+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("%d fields after comm in a /proc stat line", len(f))
	}
	return f, nil
}

func readStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	return statFields(string(b))
}

// cpuTicks sums fields of a stat line (clock ticks).
func cpuTicks(f []string, idx ...int) int64 {
	var sum int64
	for _, i := range idx {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		sum += v
	}
	return sum
}

// serverTicks is the CPU the engine's processes have used so far, in clock ticks: utime +
// stime of each live process, plus the root's cutime + cstime (its reaped children). A
// child reaped while the live ones are read would be counted twice or not at all, so the
// reading is taken again until the root's reaped total stays the same across it.
func (e *engine) serverTicks() int64 {
	for try := 1; ; try++ {
		before := e.reapedTicks()
		live := e.liveTicks()
		after := e.reapedTicks()
		if before == after || try == serverTicksTries {
			return live + after
		}
	}
}

// serverTicksTries bounds the readings of serverTicks while children keep being reaped.
const serverTicksTries = 10

// liveTicks sums utime + stime over the engine's processes (a zombie child still counts).
func (e *engine) liveTicks() int64 {
	var sum int64
	for _, p := range e.pids() {
		if f, err := readStat(p); err == nil {
			sum += cpuTicks(f, 11, 12)
		} // else reaped since listed: the root's cutime + cstime hold it
	}
	return sum
}

// reapedTicks is the root's cutime + cstime: the CPU of the children it has waited for.
func (e *engine) reapedTicks() int64 {
	f, err := readStat(e.pid)
	if err != nil {
		return 0
	}
	return cpuTicks(f, 13, 14)
}

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	must(syscall.Getrusage(who, &ru), "getrusage")
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clientCPU is this process's CPU time less its memory samplers'.
func clientCPU() time.Duration {
	return rusageCPU(syscall.RUSAGE_SELF) - time.Duration(samplerCPUNs.Load())
}

// timedSample runs f on the calling goroutine's own OS thread and adds the thread's CPU time
// over it to samplerCPUNs; the caller has locked the goroutine to its thread.
func timedSample(f func()) {
	t := rusageCPU(rusageThread)
	f()
	samplerCPUNs.Add(int64(rusageCPU(rusageThread) - t))
}

// cpuMeter measures one run of one engine; nil when the engine's pid is unknown.
type cpuMeter struct {
	e        *engine
	hz       float64
	server0  int64
	client0  time.Duration
	sampler0 int64
	// The run's figures (seconds), set by stop: the server's, the client's, and the memory
	// samplers' (left out of the client's).
	serverSecs, clientSecs, samplerSecs float64
}

func newCPUMeter(e *engine, hz float64) *cpuMeter {
	if e.pid == 0 {
		return nil
	}
	if hz <= 0 {
		panic("cpuMeter without USER_HZ")
	}
	return &cpuMeter{e: e, hz: hz}
}

func (m *cpuMeter) start() {
	if m == nil {
		return
	}
	m.server0 = m.e.serverTicks()
	m.sampler0 = samplerCPUNs.Load()
	m.client0 = clientCPU()
}

func (m *cpuMeter) stop() {
	if m == nil {
		return
	}
	client := clientCPU() - m.client0
	sampler := time.Duration(samplerCPUNs.Load() - m.sampler0)
	server := m.e.serverTicks() - m.server0
	if server < 0 || client < -time.Millisecond {
		panic(fmt.Sprintf("CPU went backwards over a run: server %d ticks, client %v", server, client))
	}
	m.serverSecs, m.clientSecs = float64(server)/m.hz, max(client, 0).Seconds()
	m.samplerSecs = sampler.Seconds()
}

// record adds the meter's figures to a run of ops operations.
func (m *cpuMeter) record(r *run) {
	if m == nil {
		return
	}
	s, c, sm := m.serverSecs, m.clientSecs, m.samplerSecs
	r.ServerCPUSecs, r.ClientCPUSecs, r.SamplerCPUSecs = &s, &c, &sm
	if r.Ops > 0 {
		sp, cp := 1e6*s/float64(r.Ops), 1e6*c/float64(r.Ops)
		r.ServerCPUPerOp, r.ClientCPUPerOp = &sp, &cp
	}
}

// cpuMedians sets an engine's medians of its runs' per-operation CPU, if they were measured.
func cpuMedians(r *engineResult) {
	var s, c []float64
	for _, x := range r.Runs {
		if x.ServerCPUPerOp != nil {
			s, c = append(s, *x.ServerCPUPerOp), append(c, *x.ClientCPUPerOp)
		}
	}
	if len(s) > 0 {
		ms, mc := median(s), median(c)
		r.ServerCPUPerOpMedian, r.ClientCPUPerOpMedian = &ms, &mc
	}
}

// cpuNote is a run's CPU per operation for the progress line, if measured.
func cpuNote(x run) string {
	if x.ServerCPUPerOp == nil {
		return ""
	}
	return fmt.Sprintf(", CPU per op: server %.1f us, client %.1f us", *x.ServerCPUPerOp, *x.ClientCPUPerOp)
}
