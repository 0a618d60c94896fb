/// Whether a run's numbers can be trusted, and whether it met its objectives. Pure: the
/// driver measures, this decides.
public struct RunJudgement: Codable, Equatable, Sendable {
    /// Open-loop runs whose achieved rate is below this share of the intended rate are invalid.
    public static let minimumAchievedShare = 0.9
    /// Open-loop runs are invalid when the scheduler lag p99 exceeds both this and
    /// ``maximumLagShareOfLatency`` of the latency p99: latency counts from the intended send
    /// time, so the generator's own delay would be a large part of what is charged to the server.
    public static let maximumSchedulerLagP99: UInt64 = 1_000_000
    public static let maximumLagShareOfLatency = 0.25
    /// Runs in which more than this share of the answers failed (an error from the node, a
    /// transport failure, a step never sent) are invalid: latency counts only the answers served,
    /// so a run of mostly failures would otherwise meet its objectives on the few that were not.
    public static let maximumFailedShare = 0.01
    /// Refusals that the node gives by the vendor's binding rules when the run's model of its
    /// accounts was wrong (a run again with the same seed finds its accounts bound already). They
    /// are counted with the errors, and are served answers: they count in latency, and not
    /// against ``maximumFailedShare``.
    public static let ruleAnswers: Set<String> = ["BIND_REJECTED", "NOT_BOUND"]

    public struct ObjectiveResult: Codable, Equatable, Sendable {
        public let objective: String
        public let measuredNanoseconds: UInt64
        public let met: Bool
    }

    public let valid: Bool
    /// Why the run is invalid; empty when valid.
    public let invalidReasons: [String]
    /// What makes the numbers less telling without making them wrong, such as CPU time the
    /// hypervisor took during the run. Absent from reports written before it existed.
    public let warnings: [String]
    public let objectives: [ObjectiveResult]
    public var objectivesMet: Bool { objectives.allSatisfy(\.met) }

    enum CodingKeys: String, CodingKey {
        case valid
        case invalidReasons = "invalid_reasons"
        case objectives, warnings
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        valid = try container.decode(Bool.self, forKey: .valid)
        invalidReasons = try container.decode([String].self, forKey: .invalidReasons)
        objectives = try container.decode([ObjectiveResult].self, forKey: .objectives)
        warnings = try container.decodeIfPresent([String].self, forKey: .warnings) ?? []
    }

    public init(
        intendedRate: Double?, achievedRate: Double, schedulerLag: LatencySummary, latency: LatencySummary,
        acknowledged: UInt64, errors: [String: UInt64] = [:], objectives: [ServiceLevelObjective], cpu: CPUShares? = nil,
        lostConnections: LostConnections = LostConnections(), failedLookups: UInt64 = 0, percentile: (Double) -> UInt64
    ) {
        var reasons = [String]()
        if acknowledged == 0 { reasons.append("no registration was acknowledged") }
        let failures = errors.filter { !Self.ruleAnswers.contains($0.key) && $0.value > 0 }
        let failed = failures.values.reduce(0, +)
        let answers = acknowledged + errors.values.reduce(0, +)
        if answers > 0, Double(failed) > Double(answers) * Self.maximumFailedShare {
            let most = failures.max { ($0.value, $1.key) < ($1.value, $0.key) }!
            let share = (Double(failed) / Double(answers) * 1_000).rounded() / 10
            reasons.append(
                "\(failed) of \(answers) answers failed (\(share)%, above \(Int(Self.maximumFailedShare * 100))%; most often \(most.key), \(most.value) times): the latency describes only the answers served"
            )
        }
        if let first = lostConnections.reasons.first {
            let ending = lostConnections.reasons.count == lostConnections.connections ? "; the run stopped there" : ""
            reasons.append(
                "lost \(lostConnections.reasons.count) of \(lostConnections.connections) connections (first: \(first))\(ending)")
        }
        if failedLookups > 0 {
            reasons.append("\(failedLookups) --verify lookups got no answer: what they would have checked is unknown")
        }
        if let intendedRate {
            if achievedRate < intendedRate * Self.minimumAchievedShare {
                reasons.append(
                    "achieved \(Int(achievedRate))/s is below \(Int(Self.minimumAchievedShare * 100))% of the intended \(Int(intendedRate))/s")
            }
            let lagShare = Double(schedulerLag.p99) / Double(max(latency.p99, 1))
            if schedulerLag.p99 > Self.maximumSchedulerLagP99, lagShare > Self.maximumLagShareOfLatency {
                reasons.append(
                    "the generator's scheduler lag p99 was \(DurationText.format(nanoseconds: schedulerLag.p99)), \(Int(lagShare * 100))% of the latency p99: it could not send on time")
            }
        }
        self.invalidReasons = reasons
        self.valid = reasons.isEmpty
        if let cpu, cpu.steal >= CPUShares.noticeableSteal {
            warnings = [
                "the hypervisor took \(Int((cpu.steal * 100).rounded()))% of the machine's CPU time (steal): latency tails include the host's scheduling, which no server change removes"
            ]
        } else {
            warnings = []
        }
        self.objectives = objectives.map { objective in
            let measured = percentile(objective.percentile)
            return ObjectiveResult(objective: objective.description, measuredNanoseconds: measured, met: objective.isMet(by: measured))
        }
    }
}
