import Foundation
import NIOCore
import NIOPosix
import RegistryClient
import RegistryCore
import LoadGeneration
import RegistryWire

/// One run from connecting to the report: connects the lanes, starts every shard, prints
/// progress, gathers the measurements, verifies, and asks each endpoint for its stats.
struct LoadRun {
    let plan: LoadPlan

    func run() async throws(RegistryClientError) -> LoadReport {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: plan.threads)
        let startedAt = ISO8601DateFormatter().string(from: Date())
        let shards: [LoadShard]
        do {
            shards = try await connectShards(group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        var watchers: FeedWatchers?
        if plan.watchers > 0 {
            watchers = await FeedWatchers(
                count: plan.watchers, endpoints: plan.endpoints, token: plan.token, tls: try plan.tlsCA.map { path throws(RegistryClientError) in try ClientTLS(caFile: path) })
        }
        var report = await measure(shards, startedAt: startedAt, watchers: watchers)
        if let watchers { report.feed = await watchers.finish() }
        for shard in shards {
            try? await shard.loop.submit { shard.stopWatchingAnswers() }.get()
            for lane in shard.lanes { await lane.client.close() }
        }
        try? await group.shutdownGracefully()
        return report
    }

    private func measure(_ shards: [LoadShard], startedAt: String, watchers: FeedWatchers?) async -> LoadReport {
        let startTime = monotonicNanos()
        let finished = shards.map { shard in shard.loop.flatSubmit { shard.start(at: startTime) } }
        // CPU counters over the measured window: from the end of the warm-up to the last answer.
        let warmup = plan.warmup.nanoseconds
        let cpuAtMeasureStart = Task { () -> CPUSample? in
            try? await Task.sleep(nanoseconds: warmup)
            watchers?.startCounting()
            return CPUSample.now()
        }
        let commitsAtMeasureStart = Task { () -> [Int: LatencyBuckets] in
            try? await Task.sleep(nanoseconds: warmup)
            return await commitLatencies(shards)
        }
        let progress = ProgressPrinter(intendedRate: plan.rate, warmup: plan.warmup.nanoseconds, start: startTime)
        let progressTask = Task { () -> [PerSecondLatency.Second] in
            var seconds = [PerSecondLatency.Second]()
            var intervalStart: UInt64 = 0
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                guard !Task.isCancelled else { break }
                var interval = ShardTotals()
                for shard in shards {
                    if let part = try? await shard.loop.submit({ shard.takeInterval() }).get() { interval.add(part) }
                }
                progress.print(interval)
                let elapsed = monotonicNanos() - startTime
                // Only intervals that began after the warm-up: one that holds part of it would
                // report the warm-up's tail as a second of the run.
                defer { intervalStart = elapsed }
                if intervalStart >= warmup, interval.latency.count > 0 {
                    seconds.append(
                        PerSecondLatency.Second(
                            elapsedSeconds: Double(elapsed) / 1e9, acknowledged: interval.acknowledged,
                            p99: interval.latency.value(atPercentile: 99)))
                }
            }
            return seconds
        }
        for future in finished { try? await future.get() }
        let cpuAtEnd = CPUSample.now()
        let commitsAtEnd = await commitLatencies(shards)
        let commitsAtStart = await commitsAtMeasureStart.value
        cpuAtMeasureStart.cancel()
        let cpu = await cpuAtMeasureStart.value.flatMap { start in cpuAtEnd?.shares(since: start) }
        progressTask.cancel()
        let perSecond = PerSecondLatency(seconds: await progressTask.value)
        progress.end()

        var totals = ShardTotals()
        var measureEnd: UInt64 = 0
        var generated = [String: UInt64]()
        var pairs: UInt64 = 0
        var divergent: UInt64 = 0
        var unexpected: UInt64 = 0
        var lost = LostConnections(connections: plan.connections)
        for shard in shards {
            // The workload value is copied, not its device model (arrays are shared until written).
            let part = try? await shard.loop.submit {
                (total: shard.total, end: shard.measureEnd, workload: shard.workload, lost: shard.lostLanes)
            }.get()
            guard let part else { continue }
            for (lane, reason) in part.lost.sorted(by: { $0.key < $1.key }) {
                lost.reasons.append("\(plan.endpoints[shard.lanes[lane].endpoint]): \(reason)")
            }
            totals.add(part.total)
            measureEnd = max(measureEnd, part.end)
            for (kind, count) in part.workload.generated { generated[kind.rawValue, default: 0] += count }
            pairs += part.workload.pairs
            divergent += part.workload.divergentPairs
            unexpected += part.workload.unexpectedAnswers
        }
        let measureStart = startTime + plan.warmup.nanoseconds
        let seconds = measureEnd > measureStart ? Double(measureEnd - measureStart) / 1e9 : 0
        let achieved = seconds > 0 ? Double(totals.acknowledged) / seconds : 0

        let verification = plan.verify ? await verifyAll(shards) : nil
        let servers = await serverStats(shards, commitsFrom: commitsAtStart, to: commitsAtEnd)
        let latency = totals.latency
        let judgement = RunJudgement(
            intendedRate: plan.rate, achievedRate: achieved, schedulerLag: totals.schedulerLag.summary,
            latency: latency.summary, acknowledged: totals.acknowledged, errors: totals.errors, objectives: plan.objectives, cpu: cpu,
            lostConnections: lost, failedLookups: verification?.failedLookups ?? 0, percentile: { latency.value(atPercentile: $0) })
        return LoadReport(
            startedAt: startedAt, gitRevision: GitRevision.current(), parameters: plan.parameters,
            throughput: LoadReport.Throughput(
                intendedPerSecond: plan.rate, achievedPerSecond: achieved, measuredSeconds: seconds,
                acknowledged: totals.acknowledged, failed: totals.failed),
            latency: latency.summary, serviceTime: totals.service.summary, schedulerLag: totals.schedulerLag.summary,
            errors: totals.errors,
            workload: LoadReport.Workload(
                generated: generated, concurrentPairs: pairs, concurrentPairsWithDifferentIDs: divergent,
                unexpectedAnswers: unexpected),
            judgement: judgement, verification: verification, servers: servers, cpu: cpu, perSecond: perSecond)
    }

    /// Opens every connection, each on its shard's event loop: shard `s` owns connections
    /// s, s + threads, ..., and its k-th connection goes to endpoint k mod endpoints.
    private func connectShards(group: MultiThreadedEventLoopGroup) async throws(RegistryClientError) -> [LoadShard] {
        let loops = Array(group.makeIterator())
        let tls = try plan.tlsCA.map { path throws(RegistryClientError) in try ClientTLS(caFile: path) }
        var shards = [LoadShard]()
        for shardIndex in 0..<plan.threads {
            let loop = loops[shardIndex % loops.count]
            let laneCount = (plan.connections - shardIndex + plan.threads - 1) / plan.threads
            var lanes = [Lane]()
            for k in 0..<laneCount {
                let endpoint = k % plan.endpoints.count
                let client = try await RegistryClient.connect(
                    to: plan.endpoints[endpoint], clientName: "registryload", token: plan.token, tls: tls, group: loop,
                    handshakeTimeout: plan.answerTimeout.nanoseconds > 0 ? .nanoseconds(Int64(plan.answerTimeout.nanoseconds)) : nil,
                    maxCoalesced: plan.coalesce,
                    ackReplicas: plan.ackReplicas, session: nil)
                let limits = client.server.limits
                if plan.batch > Int(limits.maxBatchSize) || plan.inFlight > Int(limits.maxInFlight) {
                    await client.close()
                    throw .unexpectedResponse(
                        "\(plan.endpoints[endpoint]) accepts batches of at most \(limits.maxBatchSize) and \(limits.maxInFlight) requests in flight; lower --batch or --in-flight")
                }
                lanes.append(Lane(client: client, endpoint: endpoint))
            }
            let rate = plan.rate.map { $0 / Double(plan.threads) }
            // Split exactly: the first `requests % threads` shards send one more.
            let requestLimit = plan.requests.map { $0 / UInt64(plan.threads) + (UInt64(shardIndex) < $0 % UInt64(plan.threads) ? 1 : 0) }
            // Shard 0 uses the seed as given, so a one-thread run is reproducible from it alone.
            // The others start from a mixed seed: SplitMix64 seeds that differ by its increment
            // would give the same stream shifted by one draw, and so the same identifiers.
            var mixer = SplitMix64(seed: plan.seed ^ UInt64(shardIndex) &* 0xD1B5_4A32_D192_ED03)
            let seed = shardIndex == 0 ? plan.seed : mixer.next()
            shards.append(LoadShard(loop: loop, lanes: lanes, plan: plan, seed: seed, rate: rate, requestLimit: requestLimit))
        }
        return shards
    }

    /// Checks every acknowledged device and bound account; re-checks failures until they pass or
    /// `--verify-wait` ends.
    private func verifyAll(_ shards: [LoadShard]) async -> LoadReport.Verification {
        let deadline = monotonicNanos() + plan.verifyWait.nanoseconds
        var result = LoadReport.Verification()
        var remaining = [[Int]]()
        var remainingAccounts = [[Int]]()
        for shard in shards {
            let count = (try? await shard.loop.submit { shard.workload.devices.count }.get()) ?? 0
            remaining.append(Array(0..<count))
            result.devices += UInt64(count)
            // Accounts whose last bind or move was acknowledged (the others' place is unknown).
            let bound = (try? await shard.loop.submit { shard.workload.accounts.indices.filter { shard.workload.accounts[$0].device != nil } }.get()) ?? []
            remainingAccounts.append(bound)
            result.accounts += UInt64(bound.count)
        }
        while true {
            var round = VerificationOutcome()
            for (index, shard) in shards.enumerated() where !remaining[index].isEmpty || !remainingAccounts[index].isEmpty {
                let (devices, accounts) = (remaining[index], remainingAccounts[index])
                let outcome = try? await shard.loop.flatSubmit {
                    shard.verify(devices: devices, accounts: accounts, endpoints: plan.endpoints.count)
                }.get()
                guard let outcome else { continue }
                round.lookups += outcome.lookups
                round.lost += outcome.lost
                round.mismatched += outcome.mismatched
                round.failedLookups += outcome.failedLookups
                remaining[index] = outcome.failingDevices
                remainingAccounts[index] = outcome.failingAccounts
            }
            result.lookups += round.lookups
            result.lost = round.lost
            result.mismatched = round.mismatched
            result.failedLookups = round.failedLookups
            let passed = round.lost == 0 && round.mismatched == 0 && round.failedLookups == 0
            if passed || monotonicNanos() >= deadline { return result }
            try? await Task.sleep(nanoseconds: 250_000_000)
        }
    }

    /// Each endpoint's stats after the run, with how long its commits took between two readings
    /// of their latency (by endpoint index).
    private func serverStats(
        _ shards: [LoadShard], commitsFrom start: [Int: LatencyBuckets], to end: [Int: LatencyBuckets]
    ) async -> [LoadReport.ServerStats] {
        var result = [LoadReport.ServerStats]()
        for (index, endpoint) in plan.endpoints.enumerated() {
            guard let stats = await stats(ofEndpoint: index, shards) else { continue }
            let window = end[index].flatMap { end in start[index].flatMap { end.since($0) } }
            result.append(
                LoadReport.ServerStats(
                    endpoint: endpoint.description, nodeID: stats.nodeID, serverVersion: stats.serverVersion,
                    devices: stats.deviceCount, aliases: stats.aliasCount, claims: stats.claimCount,
                    requestsServed: stats.requestsServed,
                    errors: stats.errorsByName,
                    logOperations: stats.logOperations, logCommits: stats.logCommits, uptimeMillis: stats.uptimeMillis,
                    journalBytes: stats.journalBytes, journalFiles: stats.journalFiles,
                    snapshotOperations: stats.snapshotOperations,
                    windowCommitLatency: window?.summary.map(LoadReport.BucketedLatency.init)))
        }
        return result
    }

    /// Each endpoint's commit latency so far, by endpoint index (those that answered).
    private func commitLatencies(_ shards: [LoadShard]) async -> [Int: LatencyBuckets] {
        var result = [Int: LatencyBuckets]()
        for index in plan.endpoints.indices {
            result[index] = await stats(ofEndpoint: index, shards)?.commitLatency
        }
        return result
    }

    /// Asks endpoint `index` for its stats over the first connection to it, through its shard,
    /// so that a node that stopped answering is given up as the load's requests are.
    private func stats(ofEndpoint index: Int, _ shards: [LoadShard]) async -> StatsMessage? {
        guard let (shard, lane) = shards.lazy.compactMap({ shard in shard.lanes(to: index).first.map { (shard, $0) } }).first else { return nil }
        let answer = try? await shard.loop.flatSubmit { () -> EventLoopFuture<ServerReply> in
            let promise = shard.loop.makePromise(of: ServerReply.self)
            shard.send(.stats, on: lane) { promise.completeWith($0.mapError { $0 as any Error }) }
            return promise.futureResult
        }.get()
        guard case .stats(let stats)? = answer?.body else { return nil }
        return stats
    }
}
