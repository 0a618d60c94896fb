import LoadGeneration
import Testing

@Suite("Open-loop schedule and run judgement")
struct ScheduleAndJudgementTests {
    @Test func intendedTimesFollowTheRateWhateverTheAnswersDo() {
        var schedule = OpenLoopSchedule(rate: 1_000, start: 5_000)
        #expect(schedule.take(items: 1) == 5_000)
        #expect(schedule.take(items: 1) == 5_000 + 1_000_000)
        // A batch of 10 moves the next intended time by 10 registrations' worth.
        #expect(schedule.take(items: 10) == 5_000 + 2_000_000)
        #expect(schedule.nextIntended == 5_000 + 12_000_000)
        #expect(schedule.scheduledItems == 12)
    }

    private func summary(p99: UInt64) -> LatencySummary {
        var recorder = LatencyRecorder()
        recorder.record(p99, count: 100)
        return recorder.summary
    }

    @Test func aRunThatKeptUpIsValid() {
        let judgement = RunJudgement(
            intendedRate: 1_000, achievedRate: 995, schedulerLag: summary(p99: 50_000), latency: summary(p99: 1_000_000),
            acknowledged: 10_000, objectives: [], percentile: { _ in 0 })
        #expect(judgement.valid)
        #expect(judgement.invalidReasons.isEmpty)
    }

    @Test func lowAchievedRateOrSchedulerLagMakesARunInvalid() {
        let slow = RunJudgement(
            intendedRate: 1_000, achievedRate: 800, schedulerLag: summary(p99: 50_000), latency: summary(p99: 1_000_000),
            acknowledged: 8_000, objectives: [], percentile: { _ in 0 })
        #expect(!slow.valid)
        #expect(slow.invalidReasons.count == 1 && slow.invalidReasons[0].contains("below 90%"))
        let lagging = RunJudgement(
            intendedRate: 1_000, achievedRate: 1_000, schedulerLag: summary(p99: 5_000_000), latency: summary(p99: 10_000_000),
            acknowledged: 10_000, objectives: [], percentile: { _ in 0 })
        #expect(!lagging.valid)
        #expect(lagging.invalidReasons[0].contains("scheduler lag"))
        // The same lag beside a latency twenty times larger is noise, not the measurement.
        let smallShare = RunJudgement(
            intendedRate: 1_000, achievedRate: 1_000, schedulerLag: summary(p99: 5_000_000), latency: summary(p99: 100_000_000),
            acknowledged: 10_000, objectives: [], percentile: { _ in 0 })
        #expect(smallShare.valid)
        let nothing = RunJudgement(
            intendedRate: nil, achievedRate: 0, schedulerLag: summary(p99: 0), latency: summary(p99: 0), acknowledged: 0,
            objectives: [], percentile: { _ in 0 })
        #expect(!nothing.valid)
    }

    @Test func lostConnectionsMakeARunInvalidAndSayWhetherItStopped() {
        func judged(_ lost: LostConnections) -> RunJudgement {
            RunJudgement(
                intendedRate: nil, achievedRate: 1_000, schedulerLag: summary(p99: 50_000), latency: summary(p99: 1_000_000),
                acknowledged: 1_000, objectives: [], lostConnections: lost, percentile: { _ in 0 })
        }
        #expect(judged(LostConnections(reasons: [], connections: 4)).valid)
        let some = judged(LostConnections(reasons: ["127.0.0.2:7400: reset"], connections: 4))
        #expect(!some.valid)
        #expect(some.invalidReasons == ["lost 1 of 4 connections (first: 127.0.0.2:7400: reset)"])
        let all = judged(LostConnections(reasons: ["a:1: closed", "a:1: closed"], connections: 2))
        #expect(all.invalidReasons == ["lost 2 of 2 connections (first: a:1: closed); the run stopped there"])
    }

    /// A run whose answers mostly failed could meet its objectives on the few it was served;
    /// past 1% failed it is invalid, with the most frequent code. Refusals by the vendor's
    /// binding rules are answers served, and do not count against it.
    @Test func aRunWithMoreThanOnePercentFailedIsInvalidAndRuleRefusalsDoNotCount() {
        func judged(acknowledged: UInt64, errors: [String: UInt64]) -> RunJudgement {
            RunJudgement(
                intendedRate: nil, achievedRate: 1_000, schedulerLag: summary(p99: 50_000), latency: summary(p99: 1_000_000),
                acknowledged: acknowledged, errors: errors, objectives: [], percentile: { _ in 0 })
        }
        #expect(judged(acknowledged: 9_900, errors: ["unavailable": 100]).valid)
        let mostlyDenied = judged(acknowledged: 10, errors: ["permission_denied": 980, "unavailable": 10])
        #expect(!mostlyDenied.valid)
        #expect(
            mostlyDenied.invalidReasons == [
                "990 of 1000 answers failed (99.0%, above 1%; most often permission_denied, 980 times): the latency describes only the answers served"
            ])
        let justOver = judged(acknowledged: 9_899, errors: ["NOT_SENT": 101])
        #expect(justOver.invalidReasons.count == 1 && justOver.invalidReasons[0].hasPrefix("101 of 10000 answers failed (1.0%"))
        // Refused binds are what the node's rules answer a run whose model of its accounts was
        // wrong: the node served them.
        #expect(judged(acknowledged: 500, errors: ["BIND_REJECTED": 400, "NOT_BOUND": 100]).valid)
        #expect(!judged(acknowledged: 500, errors: ["BIND_REJECTED": 400, "internal": 10]).valid)
    }

    @Test func closedLoopRunsAreNotJudgedByRate() {
        let judgement = RunJudgement(
            intendedRate: nil, achievedRate: 10, schedulerLag: summary(p99: 50_000_000), latency: summary(p99: 1_000_000),
            acknowledged: 100, objectives: [], percentile: { _ in 0 })
        #expect(judgement.valid)
    }

    @Test func objectivesAreCheckedAgainstTheMeasuredPercentile() throws {
        var recorder = LatencyRecorder()
        for micros in 1...1_000 { recorder.record(UInt64(micros) * 1_000) }
        let judgement = RunJudgement(
            intendedRate: nil, achievedRate: 1_000, schedulerLag: summary(p99: 0), latency: recorder.summary, acknowledged: 1_000,
            objectives: [try ServiceLevelObjective(parsing: "p50=600us"), try ServiceLevelObjective(parsing: "p99=900us")],
            percentile: { recorder.value(atPercentile: $0) })
        #expect(judgement.objectives.map(\.met) == [true, false])
        #expect(!judgement.objectivesMet)
        #expect(judgement.objectives[1].measuredNanoseconds >= 989_000)
    }

    @Test func recorderPercentilesAndMerging() {
        var a = LatencyRecorder()
        var b = LatencyRecorder()
        a.record(1_000_000, count: 99)
        b.record(50_000_000)
        a.add(b)
        #expect(a.count == 100)
        let summary = a.summary
        #expect(summary.p50 >= 999_000 && summary.p50 <= 1_001_000)
        #expect(summary.max >= 49_900_000)
        #expect(LatencyRecorder().summary.p99 == 0)
    }
}
