import Foundation
import LoadGeneration

/// The human summary printed after a run.
enum ReportText {
    static func summary(_ report: LoadReport) -> String {
        let p = report.parameters
        var lines = [String]()
        lines.append("registryload \(p.mode), workload \(p.workload), seed \(p.seed)")
        let coalescing = p.coalesce.flatMap { $0 > 1 ? ", coalescing up to \($0)" : nil } ?? ""
        lines.append(
            "  \(p.endpoints.joined(separator: " ")): \(p.connections) connections × \(p.inFlight) in flight, batch \(p.batch)\(coalescing), \(p.threads) thread(s)")
        let throughput = report.throughput
        var rateLine = "throughput    \(Int(throughput.achievedPerSecond.rounded())) registrations/s"
        if let intended = throughput.intendedPerSecond { rateLine += " (intended \(Int(intended)))" }
        rateLine += " over \((throughput.measuredSeconds * 100).rounded() / 100)s: \(throughput.acknowledged) acknowledged, \(throughput.failed) failed"
        lines.append(rateLine)
        lines.append(row("latency", report.latency))
        if p.mode == "open-loop" {
            lines.append(row("service time", report.serviceTime))
            lines.append(row("sched. lag", report.schedulerLag))
        }
        if let perSecond = report.perSecond, let median = perSecond.medianP99, let worst = perSecond.worstP99 {
            var line = "per second    p99 median \(DurationText.format(nanoseconds: median)), worst \(DurationText.format(nanoseconds: worst)) over \(perSecond.seconds.count) seconds"
            if let objective = report.judgement.objectives.first(where: { $0.objective.hasPrefix("p99=") }),
                let limit = try? ServiceLevelObjective(parsing: objective.objective)
            {
                line += "; \(perSecond.secondsOver(limit.limit.nanoseconds)) over \(limit.limit)"
            }
            lines.append(line)
        }
        if !report.errors.isEmpty {
            lines.append("errors        " + pairs(report.errors))
        }
        let workload = report.workload
        lines.append(
            "generated     " + pairs(workload.generated))
        if workload.concurrentPairs > 0 {
            lines.append(
                "concurrent siblings: \(workload.concurrentPairs) pairs, \(workload.concurrentPairsWithDifferentIDs) told different IDs")
        }
        if workload.unexpectedAnswers > 0 {
            lines.append("UNEXPECTED: \(workload.unexpectedAnswers) known-device registrations answered with another device's ID")
        }
        for objective in report.judgement.objectives {
            lines.append(
                "objective     \(objective.objective): \(DurationText.format(nanoseconds: objective.measuredNanoseconds)) \(objective.met ? "met" : "MISSED")")
        }
        if let verification = report.verification {
            lines.append(
                "verify        \(verification.devices) devices, \(verification.accounts) accounts, \(verification.lookups) lookups: \(verification.lost) lost, \(verification.mismatched) mismatched, \(verification.failedLookups) failed lookups")
        }
        for server in report.servers {
            lines.append(
                "server        \(server.endpoint) \(server.nodeID): \(server.devices) devices, \(server.logOperations) log operations in \(server.logCommits) commits")
            if let commits = server.windowCommitLatency {
                let percentiles = [("p50", commits.p50), ("p90", commits.p90), ("p99", commits.p99), ("p99.9", commits.p999), ("max", commits.max)]
                    .map { "\($0.0) <=\(DurationText.format(nanoseconds: $0.1))" }.joined(separator: "  ")
                lines.append("commit time   \(percentiles) over \(commits.count) commits (node's journal write + fdatasync, measured window)")
            }
        }
        if let feed = report.feed {
            var line = "feed lag      p50 \(DurationText.format(nanoseconds: feed.lag.p50)), p99 \(DurationText.format(nanoseconds: feed.lag.p99)), max \(DurationText.format(nanoseconds: feed.lag.max))"
            line += " over \(feed.events) events to \(feed.watchers) watchers (operation clock to delivery, ms resolution)"
            lines.append(line)
            for failure in feed.failures.prefix(3) { lines.append("              watch failed: \(failure)") }
        }
        if let cpu = report.cpu {
            lines.append(
                "machine CPU   busy \(percent(cpu.busy)), iowait \(percent(cpu.iowait)), steal \(percent(cpu.steal)) (whole machine, measured window)")
        }
        for warning in report.judgement.warnings {
            lines.append("warning       " + warning)
        }
        if report.judgement.valid {
            lines.append("run           valid")
        } else {
            lines.append("run           INVALID: " + report.judgement.invalidReasons.joined(separator: "; "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func percent(_ share: Double) -> String {
        "\(Int((share * 100).rounded()))%"
    }

    /// `key=value` pairs sorted by key.
    private static func pairs(_ counts: [String: UInt64]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    private static func row(_ name: String, _ summary: LatencySummary) -> String {
        let padded = name.padding(toLength: 14, withPad: " ", startingAt: 0)
        let values = [("p50", summary.p50), ("p90", summary.p90), ("p99", summary.p99), ("p99.9", summary.p999),
                      ("p99.99", summary.p9999), ("max", summary.max)]
        return padded + values.map { "\($0.0) \(DurationText.format(nanoseconds: $0.1))" }.joined(separator: "  ")
    }
}
