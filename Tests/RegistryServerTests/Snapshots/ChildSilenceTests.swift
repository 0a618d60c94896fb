import Platform
import Testing

@testable import RegistryServer

#if canImport(Glibc)
import Glibc
#endif

/// Telling a forked snapshot's child that is slow from one that is stuck.
@Suite struct ChildSilenceTests {
    /// A window of 1 s at 100 ticks a second: 100 ticks.
    func silence() -> ChildSilence { ChildSilence(windowMillis: 1_000, ticksPerSecond: 100) }

    /// The verdict at the end of a silent window, the child then runnable or not, with `ticks`.
    func stuck(_ silence: inout ChildSilence, runnable: Bool, ticks: UInt64) -> Bool {
        silence.isStuck(now: ProcessState(isRunnable: runnable, cpuTicks: ticks))
    }

    @Test func aChildWaitingForACPUIsWaitedForWindowAfterWindow() {
        var silence = silence()
        let verdicts = (0..<5).map { _ in stuck(&silence, runnable: true, ticks: 0) }
        #expect(verdicts == [false, false, false, false, false])
    }

    @Test func aBlockedChildIsStuckAfterAWindowWithoutCPU() {
        var silence = silence()
        #expect(stuck(&silence, runnable: false, ticks: 0))
        // Blocked after working: the window it worked in is not held against it; the next is.
        var working = self.silence()
        working.sent(ProcessState(isRunnable: true, cpuTicks: 10))
        let verdicts = [stuck(&working, runnable: false, ticks: 40), stuck(&working, runnable: false, ticks: 40)]
        #expect(verdicts == [false, true])
    }

    @Test func aSlowChildThatGetsSomeCPUIsWaitedFor() {
        var silence = silence()
        // 30 ticks a window, asleep between them at each look: working, on a busy machine.
        let verdicts = (1...3).map { stuck(&silence, runnable: false, ticks: UInt64(30 * $0)) }
        #expect(verdicts == [false, false, false])
    }

    @Test func aChildRunningAWindowsWorthWithoutWritingIsStuck() {
        var silence = silence()
        silence.sent(ProcessState(isRunnable: true, cpuTicks: 500))
        let verdicts = [stuck(&silence, runnable: true, ticks: 560), stuck(&silence, runnable: true, ticks: 600)]
        #expect(verdicts == [false, true])
        // Bytes start the count again.
        silence.sent(ProcessState(isRunnable: true, cpuTicks: 650))
        #expect(!stuck(&silence, runnable: true, ticks: 700))
    }

    @Test func readsProcStatLines() {
        let line = "4242 (snap (x) y) R 1 4242 4242 0 -1 4194560 8127 0 0 0 173 27 0 0 39 19 1 0 5550 1000 100"
        #expect(ProcessState(procStat: line) == ProcessState(isRunnable: true, cpuTicks: 200))
        let sleeping = "7 (registryd) S 1 7 7 0 -1 4194560 10 0 0 0 5 6 0 0 20 0 3 0 100 2000 300"
        #expect(ProcessState(procStat: sleeping) == ProcessState(isRunnable: false, cpuTicks: 11))
        #expect(ProcessState(procStat: "") == nil)
        #expect(ProcessState(procStat: "7 (registryd) S 1 7") == nil)
        #expect(ProcessState(procStat: "7 (registryd) S 1 7 7 0 -1 4194560 10 0 0 0 x 6 0 0") == nil)
        #expect(ProcessState.of(-1) == nil)
    }

    /// A child spinning is runnable, and its CPU time grows; a child asleep is not.
    @Test func readsAChildsState() throws {
        let spinning = try ForkedWriter.start { _ in
            let end = SystemClock.monotonicNanos() + 2_000_000_000
            while SystemClock.monotonicNanos() < end {}
            return true
        }.get()
        defer { spinning.stop() }
        let sleeping = try ForkedWriter.start { _ in
            sleep(5)
            return true
        }.get()
        defer { sleeping.stop() }
        usleep(300_000)
        #expect(ProcessState.of(spinning.pid)?.isRunnable == true)
        #expect(ProcessState.of(spinning.pid)?.cpuTicks ?? 0 > 0)
        #expect(ProcessState.of(sleeping.pid)?.isRunnable == false)
    }
}
